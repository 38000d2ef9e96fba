"""Ids made of parts, as a competition's spec says they are built: the columns an id is made of (its `id_pattern`'s
named groups: osic's `<Patient>_<Weeks>`, nfl's `<game_play>_<step>_<player 1>_<player 2>`), and, where the
sample is melted (a row per item and target), each row's item and target: a pattern's `target` group names the
target column (rsna-2022's `<StudyInstanceUID>_C3`), stacked numbers hold both (mlsp-2013-birds' Id = item *
`stacked_ids` + label). Loading (runner.data.part_rows), writing (runner.results.submission) and grading
(runner.competition.grade) split ids here alike."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec

TARGET = "target"  # the pattern's group that names a melted row's target column
KEY_SEPARATOR = "_"  # between the parts of a row's key where the parts are joined back into one string


def id_parts(spec: CompetitionSpec, ids: pd.Series, where: str) -> pd.DataFrame:
    """The columns each id is made of (the pattern's named groups, as strings), one row per id; an id the pattern
    does not match is an InputError naming `where` and the id."""
    parts = ids.astype(str).str.extract(re.compile(f"^(?:{spec.id_pattern})$"))
    unmatched = parts.isna().all(axis=1) if parts.shape[1] else pd.Series(True, index=ids.index)
    if unmatched.any():
        raise InputError(f"{where}: id {ids[unmatched].iloc[0]!r} is not made as {spec.id_pattern!r} says "
                         f"({int(unmatched.sum())} such)")
    return parts.reset_index(drop=True)


def item_columns(spec: CompetitionSpec) -> list[str]:
    """The parts that name a row (an item) rather than its target: every named group but `target`."""
    return [name for name in re.compile(spec.id_pattern).groupindex if name != TARGET]


def keys(parts: pd.DataFrame, columns: list[str]) -> pd.Series:
    """One string per row from its parts (the row's key where a table has no id column of its own)."""
    key = parts[columns[0]].astype(str)
    for column in columns[1:]:
        key = key + KEY_SEPARATOR + parts[column].astype(str)
    return key.reset_index(drop=True)


def stacked_items(spec: CompetitionSpec, sample: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """For a sample with a row per (item, label), Id = item * spec.stacked_ids + label: each row's item and label."""
    ids = pd.to_numeric(sample[spec.id_column], errors="coerce")
    if ids.isna().any() or (ids < 0).any():
        raise InputError(f"{spec.sample_submission}: column {spec.id_column!r} must hold item * {spec.stacked_ids} "
                         f"+ label, e.g. {sample[spec.id_column].iloc[int(np.argmax(ids.isna() | (ids < 0)))]!r}")
    ids = ids.to_numpy(dtype=np.int64)
    return ids // spec.stacked_ids, ids % spec.stacked_ids


def melted_rows(spec: CompetitionSpec, frame: pd.DataFrame, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(each row's item, each row's target index) of a melted table (the sample, a submission, the answers): the
    item a number (stacked) or the key of its parts, the target an index into the spec's targets (or the label)."""
    if spec.stacked_ids:
        return stacked_items(spec, frame)
    parts = id_parts(spec, frame[spec.id_column], where)
    index = {name: j for j, name in enumerate(spec.targets)}
    targets = parts[TARGET].map(index)
    if targets.isna().any():
        unknown = parts[TARGET][targets.isna()].iloc[0]
        raise InputError(f"{where}: target {unknown!r} of id {frame[spec.id_column][targets.isna().to_numpy()].iloc[0]!r}"
                         f" is none of {list(spec.targets)}")
    return keys(parts, item_columns(spec)).to_numpy(dtype=object), targets.to_numpy(dtype=np.int64)


def items_in_order(items: np.ndarray) -> np.ndarray:
    """The distinct items of a melted table in the order they first appear (the test rows' order)."""
    return pd.unique(pd.Series(items)).astype(items.dtype) if len(items) else items


def unmelted(items: np.ndarray, targets: np.ndarray, values: np.ndarray, order: np.ndarray, width: int) -> np.ndarray:
    """(items x targets) of a melted column: row r's value at (its item's place in `order`, its target); NaN
    where no row gives one."""
    matrix = np.full((len(order), width), np.nan)
    matrix[pd.Index(order).get_indexer(items), targets] = values
    return matrix


def melted(values: np.ndarray, items: np.ndarray, targets: np.ndarray, order: np.ndarray) -> np.ndarray:
    """(items x targets) predictions as one value per melted row: its item's prediction for its target."""
    return values[pd.Index(order).get_indexer(items), targets]
