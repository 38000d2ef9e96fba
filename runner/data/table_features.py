"""A table's features: the id and targets left out, dates split into parts, text columns coded, the same
columns for train and test."""
from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd

from runner.competition.spec import CompetitionSpec

log = logging.getLogger(__name__)


def _split(frame: pd.DataFrame, spec: CompetitionSpec) -> pd.DataFrame:
    for split in spec.split_columns:
        if split.column in frame.columns:
            parts = frame[split.column].astype("string").str.split(split.sep, expand=True)
            for i, name in enumerate(split.into):
                frame[name] = parts[i] if i in parts.columns else pd.NA
            frame = frame.drop(columns=split.column)
    return frame
DATE_LIKE = re.compile(r"^\s*(\d{4}-\d{1,2}-\d{1,2}|\d{1,2}/\d{1,2}/\d{2,4})")  # ISO or US dates, times optional
DATE_SHARE = 0.95  # of a column's values that must parse as dates before it is taken for one


def _dates(text: pd.Series) -> pd.Series | None:
    """The column parsed as UTC timestamps when nearly all of a sample of it looks like and parses as dates."""
    probe = text.head(200)
    if not len(probe) or probe.str.match(DATE_LIKE).mean() < DATE_SHARE:
        return None
    parsed = pd.to_datetime(probe.str.replace(r"\s*UTC$", "", regex=True), errors="coerce", utc=True, format="mixed")
    if parsed.notna().mean() < DATE_SHARE:
        return None
    return pd.to_datetime(text.str.replace(r"\s*UTC$", "", regex=True), errors="coerce", utc=True, format="mixed")


def _date_parts(frame: pd.DataFrame, column: str, when: pd.Series) -> pd.DataFrame:
    """A date column becomes what trees split on: year, month, weekday, hour and days since the epoch."""
    when = when.reindex(frame.index)
    parts = {"year": when.dt.year, "month": when.dt.month, "weekday": when.dt.day_of_week, "hour": when.dt.hour,
             "days": (when - pd.Timestamp("1970-01-01", tz="UTC")).dt.total_seconds() / 86400}
    for name, values in parts.items():
        frame[f"{column}_{name}"] = values.astype("float64")
    return frame.drop(columns=column)


def _codes(frame: pd.DataFrame, column: str, width: int) -> pd.DataFrame:
    """A fixed-width code such as 'ABBCAD' becomes one categorical feature per position (its letter's code point)
    plus its count of distinct letters; a missing code is missing in each. Vectorised: millions of rows in a
    second, where a Python call per letter took tens."""
    present = frame[column].notna().to_numpy()
    letters = frame.loc[present, column].astype(str).to_numpy().astype(f"<U{width}").view(np.uint32)
    letters = letters.reshape(-1, width).astype("float64")
    spread = np.full((len(frame), width + 1), np.nan)
    spread[present, :width] = letters
    ordered = np.sort(letters, axis=1)
    spread[present, width] = 1 + (np.diff(ordered, axis=1) != 0).sum(axis=1)
    names = [f"{column}_{i}" for i in range(width)] + [f"{column}_unique"]
    added = pd.DataFrame(spread, columns=names, index=frame.index)
    return pd.concat([frame.drop(columns=column), added], axis=1)


def tabular_features(spec: CompetitionSpec, train: pd.DataFrame, test: pd.DataFrame):
    """Model-ready features: parts of split columns, booleans as numbers, dates as their parts, strings as pandas
    categories (LightGBM's native categoricals), fixed-width codes spread per position, id-like strings dropped,
    infinities missing."""
    drop = {spec.id_column, *spec.targets, *spec.drop_columns, spec.text_column, *spec.text_columns,
            spec.groups and spec.groups.column}  # a group's name or number: no signal, never seen again
    shared = [c for c in train.columns if c in test.columns and c not in drop]
    both = pd.concat([train[shared], test[shared]], keys=["train", "test"])
    both = _split(both, spec)
    for column in list(both.columns):
        values = both[column]
        if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            continue  # numbers as they are (before any check turns millions of them into strings)
        if pd.api.types.is_bool_dtype(values) or set(values.dropna().astype(str).unique()) <= {"True", "False"}:
            both[column] = values.astype("string").map({"True": 1.0, "False": 0.0}).astype("float64")
        else:
            text = values.dropna().astype(str)
            unique = text.nunique()
            lengths = text.str.len()
            if (when := _dates(text)) is not None:
                both = _date_parts(both, column, when)
            elif unique > 0.5 * len(text) and lengths.nunique() == 1 and lengths.iloc[0] <= 20:
                both = _codes(both, column, int(lengths.iloc[0]))
            elif unique > 0.5 * len(text) or unique > 1000:
                both = both.drop(columns=column)  # id-like: no signal a tree can use
            else:
                both[column] = pd.Categorical(values.astype("string"))
    numeric = both.select_dtypes("number").columns
    both[numeric] = both[numeric].replace([np.inf, -np.inf], np.nan)  # infinities are missing values to every engine
    return both.loc["train"].reset_index(drop=True), both.loc["test"].reset_index(drop=True)
