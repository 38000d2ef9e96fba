"""Characters on pages as training targets: a train file of a row per page whose labels column holds `code x y width
height` groups (kuzushiji's train.csv; an empty cell: a page without characters) read into rows of points
(runner.common.point_rows): a slot per character, confidence 1, its code's code point and its box in the page's
pixels. Rows are as wide as the most crowded page needs and a margin more, so a test page that holds more
characters than any training page still has slots for them."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.common import point_rows
from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec

GROUP = 5  # tokens a character: code, x, y, width, height
SLOT_MARGIN = 1.25  # slots a row beyond the most crowded training page's characters (a test page may hold more)
LEAST_SLOTS = 8


def _page(value, path: Path, row: int) -> np.ndarray:
    """One page's (characters, SLOT_FIELDS) truth from its labels cell."""
    if not isinstance(value, str) or not value.strip():
        return np.zeros((0, point_rows.SLOT_FIELDS))
    tokens = value.split()
    if len(tokens) % GROUP:
        raise InputError(f"{path}: row {row}: {len(tokens)} tokens, not groups of {GROUP} (code x y width height)")
    codes = [point_rows.code_point(t) for t in tokens[0::GROUP]]
    if None in codes:
        bad = tokens[0::GROUP][codes.index(None)]
        raise InputError(f"{path}: row {row}: {bad!r} is no character code (U+ and hex digits)")
    try:
        boxes = np.array([tokens[i + 1:i + GROUP] for i in range(0, len(tokens), GROUP)], dtype=np.float64)
    except ValueError as exc:
        raise InputError(f"{path}: row {row}: {exc}") from None
    return np.column_stack([np.ones(len(codes)), codes, boxes])


def point_targets(spec: CompetitionSpec, train: pd.DataFrame, path: Path,
                  warnings: list[str]) -> tuple[pd.DataFrame, None, np.ndarray]:
    """(the pages, None, rows of points) from the train file's labels column (see the module's docstring). A page
    whose groups cannot be read is dropped with a warning naming the first such row; where none can, the error."""
    column = spec.targets[0]
    missing = [c for c in (spec.id_column, column) if c not in train.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {missing} (a page's `code x y width height` groups)")
    pages, kept, bad = [], [], []
    for row, value in enumerate(train[column].tolist()):
        try:
            pages.append(_page(value, path, row))
            kept.append(row)
        except InputError as exc:
            bad.append(exc)
    if bad and not pages:
        raise bad[0]
    if bad:
        warnings.append(f"dropped {len(bad)} page(s) whose groups cannot be read, e.g. {bad[0]}")
    most = max(len(p) for p in pages)
    if not most:
        raise InputError(f"{path}: column {column!r} names no character on any page")
    empty = sum(not len(p) for p in pages)
    if empty:
        warnings.append(f"{path}: {empty} page(s) without characters: learned as such")
    slots = max(LEAST_SLOTS, int(np.ceil(most * SLOT_MARGIN)))
    return train.iloc[kept].reset_index(drop=True), None, point_rows.as_rows(pages, point_rows.row_width(slots))
