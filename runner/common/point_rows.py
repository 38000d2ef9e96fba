"""Labelled points (kuzushiji's characters) as rows of a fixed width, so an engine can learn them, its folds' test
pages be fused and the metric score them as the grader scores the file written from them.

A row is a page: SLOT_FIELDS columns a slot, `confidence, code, x, y, width, height`, the code a Unicode code point
(`U+306B` is 0x306B: written back as it was read, with no list of codes to carry) and the box in the page's own
pixels, (x, y) its top-left corner as the answers give it.
A training row's truth holds a slot of confidence 1 per character, then empty slots (confidence 0); a prediction's
slots hold what a detector found, its point the box's centre. Slots are in no order, so rows are never averaged:
a member's folds are fused point by point (`fused`), and a blend's members alike.

Points are written from a confidence on (`cut`, tuned on out-of-fold rows for F1: a point below it costs more as a
false alarm than it finds); the metric of rows scores them at the cut they were written with."""
from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy.spatial import cKDTree

from runner.common import box_metrics

SLOT_FIELDS = 6  # confidence, code, x, y, width, height
TRUE_FROM = 0.5  # a truth row's slot holds a character from this confidence on (truths are 0/1)
POINT_CUT = 0.3  # a prediction's point counts from this confidence on where no cut was tuned (CenterNet's own)
CUTS = np.round(np.arange(0.05, 0.96, 0.05), 2)  # the confidences a cut is tuned among
TUNE_PAGES = 400  # pages a cut is tuned on (evenly spaced): bounds the seconds of a re-blend at any size
SAME_CHARACTER = 0.5  # fused points closer than this share of their box's shorter side are one character


def row_width(slots: int) -> int:
    return slots * SLOT_FIELDS


def slots(values: np.ndarray) -> np.ndarray:
    """(rows, slots, SLOT_FIELDS) view of rows of points."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] % SLOT_FIELDS:
        raise ValueError(f"{values.shape} values are no rows of points ({SLOT_FIELDS} columns a slot)")
    return values.reshape(len(values), -1, SLOT_FIELDS)


def as_rows(pages: Sequence[np.ndarray], width: int) -> np.ndarray:
    """Rows of `width` columns from each page's (points, SLOT_FIELDS) array, its likeliest first; points beyond
    the row's slots are left out (the least likely)."""
    out = np.zeros((len(pages), width))
    grid = out.reshape(len(pages), -1, SLOT_FIELDS)
    for n, page in enumerate(pages):
        page = np.asarray(page, dtype=np.float64).reshape(-1, SLOT_FIELDS)
        page = page[np.argsort(-page[:, 0], kind="stable")][:grid.shape[1]]
        grid[n, :len(page)] = page
    return out


def truth_boxes(row: np.ndarray) -> list[tuple[str, float, float, float, float]]:
    """A truth row's characters as the grader reads the answers: (code, x, y, width, height)."""
    grid = slots(np.asarray(row)[None])[0]
    return [(str(int(c)), x, y, w, h) for _, c, x, y, w, h in grid[grid[:, 0] >= TRUE_FROM].tolist()]


def points_of(row: np.ndarray, cut: float = POINT_CUT) -> list[tuple[str, float, float]]:
    """A predicted row's points from `cut` on, likeliest first: (code, x, y) at each box's centre, in whole
    pixels as they are written."""
    grid = slots(np.asarray(row)[None])[0]
    grid = grid[grid[:, 0] >= cut]
    grid = grid[np.argsort(-grid[:, 0], kind="stable")]
    return [(str(int(c)), float(round(x + w / 2)), float(round(y + h / 2))) for _, c, x, y, w, h in grid.tolist()]


def _listed(rows, truth: bool, cut: float):
    """Rows of points (an array, as the engine predicts them) as lists; lists (as graded) as they are."""
    if isinstance(rows, np.ndarray) and rows.ndim == 2:
        return [truth_boxes(r) if truth else points_of(r, cut) for r in rows]
    return rows


def point_f1_rows(truths, predictions, cut: float = POINT_CUT) -> float:
    """`point_in_box_f1` of rows of points (each prediction's from `cut` on) or of lists as graded."""
    return box_metrics.point_in_box_f1(_listed(truths, True, cut), _listed(predictions, False, cut))


def tune_cut(y: np.ndarray, pred: np.ndarray) -> tuple[float, float]:
    """(the confidence from which points are written, its F1) where F1 peaks on at most TUNE_PAGES of the rows:
    each page's points written from a cut are a prefix of its points from the lowest, so each page is matched once."""
    pages = np.unique(np.linspace(0, len(y) - 1, min(len(y), TUNE_PAGES)).astype(int))
    counts = np.zeros((len(CUTS), 3))
    for truth, row in zip(np.asarray(y)[pages], np.asarray(pred)[pages]):
        points = points_of(row, float(CUTS[0]))
        lengths = (slots(row[None])[0, :, 0][None, :] >= CUTS[:, None]).sum(axis=1)  # each cut's prefix
        counts += box_metrics.prefix_counts(truth_boxes(truth), points, lengths)
    scored = [(box_metrics.point_f1_total(c), -cut) for c, cut in zip(counts, CUTS)]
    best, cut = max(scored)
    return float(-cut), float(best)


def _fused_page(points: np.ndarray, folds: int) -> np.ndarray:
    """One page's points from all folds fused: each point, likeliest first, gathers the points not yet taken whose
    centres lie within SAME_CHARACTER of its box's shorter side; the character's confidence is their summed
    confidence over the folds, its box their confidence-weighted mean, its code the one of most confidence."""
    points = points[points[:, 0] > 0]
    points = points[np.argsort(-points[:, 0], kind="stable")]
    if not len(points):
        return points.reshape(0, SLOT_FIELDS)
    centres = points[:, 2:4] + points[:, 4:6] / 2
    tree, taken, out = cKDTree(centres), np.zeros(len(points), bool), []
    for k in range(len(points)):
        if taken[k]:
            continue
        near = [j for j in tree.query_ball_point(centres[k], SAME_CHARACTER * max(1.0, points[k, 4:6].min()))
                if not taken[j]]
        taken[near] = True
        group = points[near]
        weight = group[:, 0] / group[:, 0].sum()
        codes = np.unique(group[:, 1])
        code = codes[np.argmax([group[group[:, 1] == c, 0].sum() for c in codes])]
        out.append([group[:, 0].sum() / folds, code, *(weight @ group[:, 2:6])])
    return np.array(out)


def fused(fold_rows: Sequence[np.ndarray]) -> np.ndarray:
    """The folds' rows of the same pages fused into one row a page (see `_fused_page`), as wide as theirs."""
    stacked = np.stack([slots(r) for r in fold_rows])  # (folds, pages, slots, fields)
    width = stacked.shape[2] * SLOT_FIELDS
    pages = [_fused_page(stacked[:, n].reshape(-1, SLOT_FIELDS), len(fold_rows)) for n in range(stacked.shape[1])]
    return as_rows(pages, width)


def code_name(code: int) -> str:
    """A code point as the train file and the grader name it: `U+` and at least four upper-case hex digits."""
    return f"U+{int(code):04X}"


def code_point(name: str) -> int | None:
    """The code point `name` stands for where it is one written as code_name writes it (else None)."""
    if not isinstance(name, str) or not name.startswith("U+"):
        return None
    try:
        value = int(name[2:], 16)
    except ValueError:
        return None
    return value if code_name(value) == name else None


def written(values: np.ndarray, cut: float = POINT_CUT) -> list[str]:
    """Each page's `code x y` triples from `cut` on, single spaces, likeliest first; an empty string where none."""
    out = []
    for row in np.nan_to_num(np.asarray(values, dtype=np.float64)):
        out.append(" ".join(f"{code_name(int(c))} {int(x)} {int(y)}" for c, x, y in points_of(row, cut)))
    return out


def points_column(values, predictions, sample, columns, spec) -> dict:
    """The submission writer of rows of points: each page's points from the tuned cut on."""
    from runner.common.errors import InvalidSubmissionError

    cut = predictions.thresholds[0] if predictions.thresholds else POINT_CUT
    try:
        return {columns[0]: written(values, cut)}
    except ValueError as exc:
        raise InvalidSubmissionError(f"rows of points: {exc}") from None
