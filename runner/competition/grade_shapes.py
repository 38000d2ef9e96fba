"""Grading submissions of shapes: run-length masks, labelled boxes and labelled points. Each submission is checked as
MLE-bench's grader of its competition checks it (InvalidSubmissionError naming what is wrong), read into the form
its metric scores (runner.common.mask_metrics, runner.common.box_metrics) and reduced row by row, once, to what each
row adds to the score: a bootstrap's resamples are then scored without reading a string again.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from runner.common import box_metrics, rle
from runner.common.errors import InvalidSubmissionError
from runner.common.mask_metrics import MASK_METRICS
from runner.competition.spec import CompetitionSpec, MaskFormat


@dataclass(frozen=True)
class RowScores:
    """A valid submission reduced row by row: `truth` holds one entry per scored row (its statistics, or its
    index), `total(rows)` scores the rows given (an index array, rows may repeat; None: every row, the grader's
    own figure)."""

    truth: np.ndarray
    total: Callable[[np.ndarray | None], float]

    def score(self, rows: np.ndarray | None = None, fast: bool = False) -> float:
        return float(self.total(rows))


def _weights(rows: np.ndarray | None, count: int) -> np.ndarray | None:
    return None if rows is None else np.bincount(np.asarray(rows, int), minlength=count).astype(np.float64)


def _stacked(statistics: np.ndarray, total: Callable[[np.ndarray], float]) -> RowScores:
    return RowScores(statistics, lambda rows: total(statistics if rows is None else statistics[rows]))


# --- masks ---------------------------------------------------------------------------------------------------------

def _cells(frame: pd.DataFrame, column: str, layout: MaskFormat, side: str, names: list) -> list[str]:
    """A column's run-length strings, the empty mask's token read as ""; an empty cell is an empty mask only where
    the competition writes empty masks so. `names`: each row's id, for messages."""
    if column not in frame.columns:
        raise InvalidSubmissionError(f"no column {column!r}" + ("" if side == "submission" else f" in the {side}"))
    cells = []
    for row, value in zip(names, frame[column].tolist()):
        if not isinstance(value, str):
            if pd.isna(value) and (layout.empty == "" or side != "submission"):
                value = ""
            else:
                allowed = "" if layout.empty is None else f" (an empty mask is {layout.empty!r})"
                raise InvalidSubmissionError(f"column {column!r}, id {row!r}: {value!r} is no run-length string"
                                             + allowed)
        cells.append("" if layout.empty and value == layout.empty else value)
    return cells


def _sizes(answers: pd.DataFrame, layout: MaskFormat) -> list[tuple[int, int]]:
    if layout.size_columns:
        height, width = layout.size_columns
        return [(int(h), int(w)) for h, w in zip(answers[height], answers[width])]
    if layout.shape is None:
        raise InvalidSubmissionError("the spec's mask format names neither a shape nor the answers' size columns")
    return [tuple(layout.shape)] * len(answers)


def _decoded(text: str, size: tuple[int, int], layout: MaskFormat, name) -> np.ndarray:
    try:
        return rle.decode(text, *size, layout.decoded_order)
    except rle.RleError as exc:
        raise InvalidSubmissionError(f"id {name!r}: {exc}") from None


def _series_volumes(spec: CompetitionSpec, ids: list[str], truths: list[str], predictions: list[str],
                    sizes: list[tuple[int, int]]):
    """Each series' (depth, classes, height, width) volumes of truth and prediction: its slices in the order of
    their ids, a slice's rows (its classes) in their order, as the grader stacks them."""
    layout = spec.mask
    order = sorted(range(len(ids)), key=lambda i: ids[i])
    series: dict[str, dict[str, list[int]]] = {}
    for i in order:
        series.setdefault(ids[i].split(layout.series)[0], {}).setdefault(ids[i], []).append(i)
    for slices in series.values():
        classes = max(len(rows) for rows in slices.values())
        height, width = sizes[next(iter(slices.values()))[0]]
        truth = np.zeros((len(slices), classes, height, width), bool)
        prediction = np.zeros_like(truth)
        for depth, rows in enumerate(slices.values()):
            for c, i in enumerate(rows):
                if sizes[i] != (height, width):
                    raise InvalidSubmissionError(f"id {ids[i]!r}: a slice of {sizes[i]} in a series of "
                                                 f"{(height, width)}")
                truth[depth, c] = _decoded(truths[i], sizes[i], layout, ids[i])
                prediction[depth, c] = _decoded(predictions[i], sizes[i], layout, ids[i])
        yield truth, prediction


def masks(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> RowScores:
    """Run-length masks, row by row (or series by series) against the answers', decoded at the answers' sizes."""
    layout, column = spec.mask, spec.targets[0]
    if layout.only_columns and set(submission.columns) != {spec.id_column, column}:
        raise InvalidSubmissionError(f"columns must be exactly {[spec.id_column, column]}, not "
                                     f"{list(submission.columns)}")
    if spec.grade_by == "row" and spec.id_column in sub.columns:
        differ = sub[spec.id_column].astype(str).to_numpy() != ans[spec.id_column].astype(str).to_numpy()
        if differ.any():
            row = int(np.argmax(differ))
            raise InvalidSubmissionError(f"row {row}: id {sub[spec.id_column].iloc[row]!r} where the answers have "
                                         f"{ans[spec.id_column].iloc[row]!r} (rows are matched by position)")
    ids = ans[spec.id_column].astype(str).tolist() if spec.id_column in ans.columns else list(range(len(ans)))
    predictions = _cells(sub, column, layout, "submission", ids)
    truths = _cells(ans, layout.answer_column or column, layout, "answers", ids)
    sizes = _sizes(ans, layout)
    metric = MASK_METRICS[spec.metric]
    if layout.series:
        pairs = _series_volumes(spec, ids, truths, predictions, sizes)
    else:
        pairs = ((_decoded(t, s, layout, i), _decoded(p, s, layout, i))
                 for i, t, p, s in zip(ids, truths, predictions, sizes))
    statistics = [metric.row(truth, prediction) for truth, prediction in pairs]
    return _stacked(np.vstack(statistics) if statistics else np.zeros((0, 3)), metric.total)


# --- boxes and points ----------------------------------------------------------------------------------------------

def _tokens(value, row: int, single_spaces: bool) -> list[str]:
    if not isinstance(value, str):
        raise InvalidSubmissionError(f"row {row}: {value!r} is no prediction string (every row needs one)")
    return value.split(" ") if single_spaces else value.split()


def box_rows(column: pd.Series, single_spaces: bool = False) -> list[list[box_metrics.Box]]:
    """Each row's `label confidence x_min y_min x_max y_max` groups; `single_spaces`: tokens split on each space
    (a doubled space is an empty token, and invalid), as vinbigdata's grader splits them."""
    out = []
    for row, value in enumerate(column.tolist()):
        tokens = _tokens(value, row, single_spaces)
        if len(tokens) % 6:
            raise InvalidSubmissionError(f"row {row}: {len(tokens)} tokens, not groups of 6 (label confidence "
                                         "x_min y_min x_max y_max)")
        try:
            out.append([(tokens[i], *map(float, tokens[i + 1:i + 6])) for i in range(0, len(tokens), 6)])
        except ValueError as exc:
            raise InvalidSubmissionError(f"row {row}: {exc}") from None
    return out


def _numbered_labels(rows: list[list[box_metrics.Box]], where: str) -> list[list[box_metrics.Box]]:
    """Labels that must be class numbers (COCO's category ids): each as its integer's text."""
    try:
        return [[(str(int(float(b[0]))), *b[1:]) for b in boxes] for boxes in rows]
    except ValueError as exc:
        raise InvalidSubmissionError(f"{where}: a class that is no number: {exc}") from None


def _coco(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> RowScores:
    """Boxes per image, the answers a row per (image, class) box: COCO mAP over the images the answers hold; a
    submission may give an image in several rows, and their boxes count together."""
    column = spec.targets[0]
    for name in (spec.id_column, column):
        if name not in submission.columns:
            raise InvalidSubmissionError(f"no column {name!r}")
    images = pd.unique(ans[spec.id_column].astype(str))
    given = submission[spec.id_column].astype(str)
    if set(given) != set(images):
        raise InvalidSubmissionError(f"the ids in column {spec.id_column!r} differ from the answers' ids")
    index = {image: i for i, image in enumerate(images)}
    truths: list[list] = [[] for _ in images]
    for image, label, *box in ans[[spec.id_column, "class_id", "x_min", "y_min", "x_max", "y_max"]].itertuples(
            index=False):
        truths[index[str(image)]].append((str(int(label)), 0.0, *map(float, box)))
    predictions: list[list] = [[] for _ in images]
    for image, boxes in zip(given, _numbered_labels(box_rows(submission[column], single_spaces=True), column)):
        predictions[index[image]].extend(boxes)
    matches = box_metrics.coco_matches(truths, predictions)
    return RowScores(np.arange(len(images)), lambda rows: box_metrics.coco_total(matches, _weights(rows, len(images))))


def _class_ap(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> RowScores:
    """Label-confidence-box groups per row against the answers' own strings: the mean over classes of AP."""
    column = spec.targets[0]
    if column not in sub.columns:
        raise InvalidSubmissionError(f"no column {column!r}")
    predictions, truths = box_rows(sub[column]), box_rows(ans[column])
    pairs = box_metrics.class_ap_pairs(truths, predictions)
    if any(found.all() for found, _, _ in pairs.pairs):
        raise InvalidSubmissionError("a class whose every pair is found: its average precision is undefined")
    return RowScores(np.arange(len(ans)),
                     lambda rows: box_metrics.class_ap_total(pairs, _weights(rows, len(ans)), exact=rows is None))


def _points(column: pd.Series, width: int, where: str) -> list[list[tuple]]:
    """Each row's groups of `width` tokens (a label, then numbers) split on single spaces; an empty cell: none."""
    out = []
    for row, value in enumerate(column.tolist()):
        if not isinstance(value, str):
            if not pd.isna(value):
                raise InvalidSubmissionError(f"{where} row {row}: {value!r} is no string of points")
            out.append([])
            continue
        tokens = value.split(" ")
        if len(tokens) % width:
            raise InvalidSubmissionError(f"{where} row {row}: {len(tokens)} tokens, not groups of {width}")
        try:
            out.append([(tokens[i], *map(float, tokens[i + 1:i + width])) for i in range(0, len(tokens), width)])
        except ValueError as exc:
            raise InvalidSubmissionError(f"{where} row {row}: {exc}") from None
    return out


def _point_f1(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> RowScores:
    """`label x y` points per page against the answers' `label x y width height` boxes: F1 over every page."""
    column = spec.targets[0]
    if column not in sub.columns:
        raise InvalidSubmissionError(f"no column {column!r}")
    points, boxes = _points(sub[column], 3, "submission"), _points(ans[column], 5, "answers")
    counts = np.array([box_metrics.point_counts(b, p) for b, p in zip(boxes, points)]).reshape(-1, 3)
    return _stacked(counts, box_metrics.point_f1_total)


# a boxes or points submission's scorer, by the spec's metric: each reads the answers as its grader keeps them
SHAPE_SCORERS: dict[str, Callable[..., RowScores]] = {
    "coco_map_iou40": _coco, "class_ap_iou50": _class_ap, "point_in_box_f1": _point_f1,
}


def shapes(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> RowScores:
    """Boxes or points, scored by the spec's metric."""
    if spec.metric not in SHAPE_SCORERS:
        raise InvalidSubmissionError(f"no grader of {spec.submission!r} submissions by {spec.metric!r}")
    return SHAPE_SCORERS[spec.metric](spec, submission, sub, ans)
