"""Features each row takes from the other rows of its group (the spec's `groups`): rows in groups ordered in time
or position (a breath's 80 time steps, an RNA sequence's bases) or merely belonging together (a molecule's atom
pairs).

- every row: its step along the group's order, the group's size, and the step's share of it;
- `sequence` columns: their values `lags` steps back (positive) and ahead (negative), missing past the group's
  ends; for numbers also the difference from each of those neighbours, the running sum and mean along the order,
  and the group's mean and max (a breath's inflow so far is its lung's volume);
- `statistics` columns: the group's mean, min, max and standard deviation;
- `counts` columns: how many rows of the group hold each value the column takes (a molecule's pairs of each
  coupling type).

Train and test rows are grouped apart (a group never spans both); the group column itself is no feature (an
arbitrary name or number).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from runner.common.errors import InputError
from runner.competition.spec import RowGroups

MAX_COUNTED_VALUES = 50  # values of a `counts` column that get a column each: more is an identifier, not a category


def _check(frame: pd.DataFrame, groups: RowGroups, what: str) -> None:
    named = [groups.column, *([groups.order] if groups.order else []), *groups.sequence, *groups.statistics,
             *groups.counts]
    missing = [c for c in dict.fromkeys(named) if c not in frame.columns]
    if missing:
        raise InputError(f"{what}: no column(s) {missing} for the spec's row groups")


def _sequence(frame: pd.DataFrame, by, column: str, lags: tuple[int, ...]) -> dict[str, pd.Series]:
    """A column's neighbours along the order; for numbers also differences, running sums and group figures."""
    values = frame[column]
    number = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
    grouped = values.groupby(by, sort=False)
    out: dict[str, pd.Series] = {}
    for lag in lags:
        name = f"{column}_{'lag' if lag > 0 else 'lead'}{abs(lag)}"
        out[name] = grouped.shift(lag)
        if number:
            out[f"{column}_diff{lag}"] = values - out[name]
    if number:
        out[f"{column}_cumsum"] = grouped.cumsum()
        out[f"{column}_cummean"] = out[f"{column}_cumsum"] / (grouped.cumcount() + 1)
        out[f"{column}_group_mean"] = grouped.transform("mean")
        out[f"{column}_group_max"] = grouped.transform("max")
    return out


def _statistics(frame: pd.DataFrame, by, column: str) -> dict[str, pd.Series]:
    grouped = pd.to_numeric(frame[column], errors="coerce").groupby(by, sort=False)
    return {f"{column}_group_{how}": grouped.transform(how) for how in ("mean", "min", "max", "std")}


def _counts(frame: pd.DataFrame, by, column: str, values: list) -> dict[str, pd.Series]:
    """For each of `values`, how many rows of the row's group hold it."""
    text = frame[column].astype(str)
    return {f"{column}_count_{value}": (text == value).groupby(by, sort=False).transform("sum").astype(np.float64)
            for value in values}


def _features(frame: pd.DataFrame, groups: RowGroups, counted: dict[str, list]) -> pd.DataFrame:
    """One frame's rows with their group's features, in its own row order."""
    # pandas' grouped shifts and sums follow the rows' order within each group, wherever its rows are
    ordered = frame.sort_values(groups.order, kind="stable") if groups.order else frame
    by = pd.Series(pd.factorize(ordered[groups.column])[0], index=ordered.index)  # a missing group is one too
    step = by.groupby(by, sort=False).cumcount().astype(np.float64)
    size = by.groupby(by, sort=False).transform("size").astype(np.float64)
    added: dict[str, pd.Series] = {"group_step": step, "group_size": size, "group_step_share": step / size}
    for column in groups.sequence:
        added.update(_sequence(ordered, by, column, groups.lags))
    for column in groups.statistics:
        added.update(_statistics(ordered, by, column))
    for column in groups.counts:
        added.update(_counts(ordered, by, column, counted[column]))
    out = pd.concat([ordered, pd.DataFrame(added, index=ordered.index)], axis=1)
    return out.loc[frame.index]


def group_codes(frame: pd.DataFrame, groups: RowGroups, what: str) -> np.ndarray:
    """Each row's group as a number (rows of one group share a fold)."""
    _check(frame, groups, what)
    return pd.factorize(frame[groups.column].astype(str))[0]


def counted_values(groups: RowGroups, frame: pd.DataFrame) -> dict[str, list[str]]:
    """The values of each `counts` column that get a count column: the most frequent MAX_COUNTED_VALUES in
    `frame` (the training rows: a value only the test rows hold tells a model nothing)."""
    return {column: sorted(frame[column].astype(str).value_counts().index[:MAX_COUNTED_VALUES])
            for column in groups.counts if column in frame.columns}


def with_group_features(groups: RowGroups, frame: pd.DataFrame, counted: dict[str, list[str]],
                        what: str) -> pd.DataFrame:
    """`frame` with each row's group features added (the columns of `counted` counted for those values), rows in
    the given order; the group column stays (it is no feature: runner.data.table_features leaves it out)."""
    _check(frame, groups, what)
    frame = frame.reset_index(drop=True)
    return _features(frame, groups, {c: counted.get(c, []) for c in groups.counts})
