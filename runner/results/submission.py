"""Submissions built from sample_submission.csv (same ids, order, columns, dtypes), checked against MLE-bench's
rules, and replaced atomically: a reader, or a hard kill, only ever sees the last valid file."""
from __future__ import annotations

import math
import os
import re
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runner.common.atomic import replacing
from runner.common.csvfiles import LITERAL, compression, find_sample, read_csv_file
from runner.common.errors import InputError, InvalidSubmissionError
from runner.common.untrusted import inside
from runner.common.binary_metrics import decide
from runner.common.direction_metrics import angles
from runner.common.label_metrics import LABEL_THRESHOLD, decided, top_k
from runner.common import mask_metrics, rle
from runner.common import box_rows, point_rows
from runner.common.correlation_metrics import CORRELATIONS, varied
from runner.common.metrics import grades
from runner.competition.id_parts import items_in_order, melted, melted_rows
from runner.competition.spec import DECISION_CUT, STRING_FORMATS, CompetitionSpec
from runner.data import canvas, slice_rows
from runner.data.mask_targets import mask_pixels

SUM_TOLERANCE = 1e-6
MEDIAN_METRICS = ("mae", "mae_integer", "laplace_log_likelihood")  # absolute errors: the median is the best constant
UNNAMED = re.compile(r"Unnamed: \d+")  # how pandas names a column whose header is empty
SAMPLE_HEAD_ROWS = 100  # rows of the sample read to tell it is a table before it is copied as the first submission
EPS = 1e-7  # keeps log loss finite without moving row sums


@dataclass(frozen=True)
class Predictions:
    """Engine output for the test rows in the sample's order: class probabilities (n, k) in `classes` order, or
    regression values (n, t). `source` says where they came from (baseline, which folds)."""

    values: np.ndarray
    classes: tuple | None
    source: str
    # tuned on out-of-fold predictions: kappa's grade cuts, a set's threshold from which a label is in it, the cut
    # from which a yes-or-no row is a yes (runner.results.decisions), or the spread a value is stated with
    thresholds: tuple[float, ...] | None = None
    # text normalisation: each row's string for each class (its candidates, runner.data.textnorm.candidates) where one class is not
    # one label for every row
    choices: np.ndarray | None = None
    labels: tuple[str, ...] | None = None  # a `labels` submission: the label each column of `values` stands for


def _normalise(p: np.ndarray) -> np.ndarray:
    """Clip into (0, 1] and renormalise so every row sums to 1 within floating error."""
    p = np.clip(np.nan_to_num(np.asarray(p, dtype=np.float64), nan=0.0), EPS, 1.0)
    return p / p.sum(axis=1, keepdims=True)


def _label_values(classes: tuple, index: np.ndarray, template: pd.Series) -> list:
    """Class values cast to the sample column's type (bool stays bool: spaceship-titanic wants True/False)."""
    labels = [classes[i] for i in index]
    if pd.api.types.is_bool_dtype(template):
        return [bool(v) if isinstance(v, (bool, np.bool_)) else str(v) == "True" for v in labels]
    if pd.api.types.is_integer_dtype(template):
        return [int(v) for v in labels]
    return labels


def _melted(values: np.ndarray, sample: pd.DataFrame, spec: CompetitionSpec) -> np.ndarray:
    """(items x targets) predictions as one column in the sample's rows, a row per item and target (its id names
    both: runner.competition.id_parts)."""
    items, targets = melted_rows(spec, sample, spec.sample_submission)
    order = items_in_order(items)
    if len(values) != len(order) or targets.max() >= values.shape[1]:
        raise InvalidSubmissionError(f"{values.shape} predictions for {len(order)} items x {targets.max() + 1} "
                                     f"labels of {spec.sample_submission}")
    return melted(values, items, targets, order)[:, None]


def _probabilities(values, predictions, sample, columns, spec) -> dict:
    return {c: v for c, v in zip(columns, _normalise(values).T)}


def _probability(values, predictions, sample, columns, spec) -> dict:
    """The positive class's probability; where a cut was tuned (a metric of decisions), 1 from it on, else 0."""
    if predictions.thresholds:
        return {columns[0]: decide(_normalise(values), predictions.thresholds[0]).astype(np.float64)}
    return {columns[0]: np.clip(_normalise(values)[:, 1], 0.0, 1.0)}


def _label(values, predictions, sample, columns, spec) -> dict:
    if spec.metric == "qwk":
        chosen = grades(values, predictions.thresholds)
    elif predictions.thresholds and values.shape[1] == 2:  # a yes from the tuned cut on, not from one half
        chosen = decide(values, predictions.thresholds[0])
    else:
        chosen = values.argmax(axis=1)
    if predictions.choices is not None:  # each row's own string for its chosen class
        return {columns[0]: predictions.choices[np.arange(len(chosen)), chosen]}
    return {columns[0]: _label_values(predictions.classes, chosen, sample[columns[0]])}


def _multilabel(values, predictions, sample, columns, spec) -> dict:
    values = np.clip(np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.5), 0.0, 1.0)
    return {c: v for c, v in zip(columns, values.T)}


def _regression(values, predictions, sample, columns, spec) -> dict:
    values = np.nan_to_num(np.asarray(values, dtype=np.float64))
    values = np.clip(values, 0.0, None) if spec.metric == "rmsle" else values
    values = varied(values) if spec.metric in CORRELATIONS else values  # a constant column's correlation is NaN
    values = np.clip(values, *spec.value_range) if spec.value_range else values  # what the grader accepts
    return {c: v for c, v in zip(columns, np.atleast_2d(values.T))}


def decision_values(p: np.ndarray, cut: float) -> np.ndarray:
    """Probabilities mapped, in order, so that `cut` lands on the grader's DECISION_CUT: [0, cut) onto [0, 0.5) and
    [cut, 1] onto [0.5, 1]."""
    cut = float(np.clip(cut, EPS, 1.0 - EPS))
    below = np.minimum(DECISION_CUT * p / cut, np.nextafter(DECISION_CUT, 0.0))  # never rounded up onto the cut
    above = np.maximum(DECISION_CUT + (1.0 - DECISION_CUT) * (p - cut) / (1.0 - cut), DECISION_CUT)
    return np.clip(np.where(p >= cut, above, below), 0.0, 1.0)


def _chosen_span(values, predictions, sample, columns, spec) -> dict:
    """Each row's candidate span (runner.data.spans) with the highest predicted score."""
    if predictions.choices is None:
        raise InvalidSubmissionError("a span is chosen among candidates, and these predictions name none")
    chosen = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=-np.inf).argmax(axis=1)
    return {columns[0]: predictions.choices[np.arange(len(chosen)), chosen]}


def _decision(values, predictions, sample, columns, spec) -> dict:
    """The positive class's probability, cut where out-of-fold predictions put the threshold (DECISION_CUT until
    one is tuned) and written so that the grader's cut falls there; the rows' order stays."""
    cut = predictions.thresholds[0] if predictions.thresholds else DECISION_CUT
    return {columns[0]: decision_values(_normalise(values)[:, -1], cut)}


def _label_set(values, predictions, sample, columns, spec) -> dict:
    """Each row's labels whose probability reaches the tuned threshold (LABEL_THRESHOLD until one is tuned), the
    likeliest one at least: every row of these competitions' answers holds a label."""
    threshold = predictions.thresholds[0] if predictions.thresholds else LABEL_THRESHOLD
    values = np.nan_to_num(np.asarray(values, dtype=np.float64))
    names = np.asarray(predictions.labels, dtype=object)
    chosen = read_as_sets(decided(values, threshold), values, names)
    return {columns[0]: [spec.label_separator.join(names[row.astype(bool)]) for row in chosen]}


def read_as_sets(chosen: np.ndarray, values: np.ndarray, names: np.ndarray) -> np.ndarray:
    """The chosen sets, made sure to read back as sets of labels: where every label is a number and no row holds
    two, a CSV reader takes the column for numbers (imet's attribute ids), which the graders refuse; the row
    whose second likeliest label is likeliest then holds it too."""
    if len(chosen) == 0 or chosen.shape[1] < 2 or (chosen.sum(axis=1) > 1).any() \
            or not all(str(n).lstrip("-").isdigit() for n in names):
        return chosen
    second = np.where(chosen.astype(bool), -np.inf, values)
    row = int(second.max(axis=1).argmax())
    chosen = chosen.copy()
    chosen[row, int(second[row].argmax())] = 1
    return chosen


def _ranked(values, predictions, sample, columns, spec) -> dict:
    """Each row's `top_k` likeliest classes, likeliest first; the spec's new label (an item none of the training
    labels names) at the score tuned for it on out-of-fold rows, where one was."""
    names = [str(c) for c in predictions.classes]
    values = np.nan_to_num(np.asarray(values, dtype=np.float64))
    if spec.new_label in names and predictions.thresholds:
        values = values.copy()
        values[:, names.index(spec.new_label)] = predictions.thresholds[0]
    ranked = top_k(values, spec.top_k)
    return {columns[0]: [spec.label_separator.join(names[j] for j in row) for row in ranked]}


def _value_and_spread(values, predictions, sample, columns, spec) -> dict:
    """The values, and beside them the spread tuned on out-of-fold rows for every row (runner.results.decisions)."""
    written = _regression(values, predictions, sample, columns, spec)
    if not predictions.thresholds:
        raise InvalidSubmissionError(f"no spread was tuned for column {spec.spread_column!r}")
    return {**written, spec.spread_column: np.full(len(values), predictions.thresholds[0])}
def _direction(values, predictions, sample, columns, spec) -> dict:
    """Learned unit vectors (x, y, z) written as their azimuth and zenith, in the sample's two columns."""
    return dict(zip(columns, angles(np.nan_to_num(np.asarray(values, dtype=np.float64))).T))


def _masks(values, predictions, sample, columns, spec) -> dict:
    """Each row's masks as run-length strings in the spec's order, one column per mask class: a pixel from the cut
    tuned on out-of-fold rows on, a mask of fewer pixels than the tuned least size left empty (MASK_CUT and no
    least size until tuned)."""
    if spec.mask.class_column:  # a row per slice and class, each at its slice's own size
        return {columns[0]: slice_rows.written_rows(values, predictions.thresholds, sample, spec)}
    if spec.mask.own_size:  # an item per row, learned on a canvas, written at the item's own size
        return {columns[0]: written_own_size(values, predictions.thresholds, sample, spec)}
    height, width = mask_pixels(spec, sample)
    cut, least = predictions.thresholds[:2] if predictions.thresholds else (mask_metrics.MASK_CUT, 0)
    values, pixels = np.nan_to_num(np.asarray(values, dtype=np.float32)), height * width
    empty = spec.mask.empty or ""
    return {column: [rle.written(mask.reshape(height, width), spec.mask.order, empty)
                     for mask in mask_metrics.decided(values[:, k * pixels:(k + 1) * pixels], cut, int(least))]
            for k, column in enumerate(columns)}


def written_own_size(values, thresholds, sample, spec) -> list[str]:
    """Each row's mask at its item's own size (runner.data.canvas): the canvas' side is the square the rows'
    pixels make, whatever spec the writer was given (the canvas is measured when the data is read)."""
    values = np.asarray(values, dtype=np.float32)
    side = math.isqrt(values.shape[1]) if values.ndim == 2 else 0
    if side * side != (values.shape[1] if values.ndim == 2 else -1):
        raise InvalidSubmissionError(f"{values.shape} predictions: a row is no square canvas of pixels")
    cut, least = thresholds[:2] if thresholds else (mask_metrics.MASK_CUT, 0)
    return canvas.written_at_own_size(values, (side, side), sample.attrs.get(canvas.ITEM_SIZES), cut, int(least),
                                      spec.mask.order, spec.mask.empty, sample.attrs.get(canvas.ITEM_REGIONS))


# how each submission format's value columns are written from the predictions (the sample's other columns stay)
WRITERS = {"probabilities": _probabilities, "probability": _probability, "label": _label,
           "multilabel": _multilabel, "regression": _regression, "labels": _label_set, "ranked": _ranked,
           "decision": _decision, "span": _chosen_span,
           "distribution": _probabilities,  # each row's values shared out to sum to one
           "direction": _direction, "value_and_spread": _value_and_spread, "mask": _masks,
           "boxes": box_rows.boxes_column,  # each row's boxes in its image's pixels
           "points": point_rows.points_column}  # each page's points from the tuned confidence on


def build_submission(sample: pd.DataFrame, spec: CompetitionSpec, columns: list[str],
                     predictions: Predictions) -> pd.DataFrame:
    """The sample submission with its value columns replaced by the predictions."""
    values = predictions.values
    if spec.melted:  # a row per (item, target): each takes its item's prediction for its target
        values = _melted(values, sample, spec)
    elif spec.submission == "mask" and spec.mask.class_column:  # a row per (slice, class): its slice's class mask
        values = slice_rows.row_masks(values, sample, spec)
    if len(values) != len(sample):
        raise InvalidSubmissionError(f"{len(values)} predictions for {len(sample)} rows of {spec.sample_submission}")
    if spec.submission not in WRITERS:
        raise InvalidSubmissionError(f"no writer for a {spec.submission!r} submission from predictions")
    submission = sample.copy()
    for column, written in WRITERS[spec.submission](values, predictions, sample, columns, spec).items():
        submission[column] = written
    return submission


def validate_submission(submission: pd.DataFrame, sample: pd.DataFrame, spec: CompetitionSpec,
                        columns: list[str]) -> None:
    """Raise InvalidSubmissionError, naming the column and row, for anything MLE-bench's grader would reject."""
    if list(submission.columns) != list(sample.columns):
        raise InvalidSubmissionError(f"columns {list(submission.columns)[:5]}... differ from the sample's "
                                     f"{list(sample.columns)[:5]}...")
    if len(submission) != len(sample):
        raise InvalidSubmissionError(f"{len(submission)} rows, the sample has {len(sample)}")
    ids, sample_ids = submission[spec.id_column].astype(str), sample[spec.id_column].astype(str)
    if not ids.reset_index(drop=True).equals(sample_ids.reset_index(drop=True)):
        row = int(np.argmax(ids.to_numpy() != sample_ids.to_numpy()))
        raise InvalidSubmissionError(f"column {spec.id_column!r} row {row}: id {ids.iloc[row]!r} where the sample "
                                     f"has {sample_ids.iloc[row]!r}")
    values = submission[columns]
    if spec.submission in STRING_FORMATS:  # text: an empty cell is a string too (an empty set, an empty mask)
        _check_strings(values, sample[columns])
        return
    if values.isna().any().any():
        column = values.columns[values.isna().any()][0]
        raise InvalidSubmissionError(f"column {column!r}: empty values")
    if spec.submission == "label":
        _check_labels(values[columns[0]], sample[columns[0]])
        return
    numeric = values.apply(pd.to_numeric, errors="coerce")
    if numeric.isna().any().any():
        raise InvalidSubmissionError(f"column {numeric.columns[numeric.isna().any()][0]!r}: non-numeric values")
    array = numeric.to_numpy(dtype=np.float64)
    if not np.isfinite(array).all():
        raise InvalidSubmissionError("non-finite values")
    if spec.submission in ("probabilities", "probability", "multilabel", "distribution") and \
            ((array < 0).any() or (array > 1).any()):
        column = columns[int(np.argmax(((array < 0) | (array > 1)).any(axis=0)))]
        raise InvalidSubmissionError(f"column {column!r}: probabilities outside [0, 1]")
    if (spec.submission == "probabilities" and spec.metric == "log_loss") or spec.submission == "distribution":
        sums = array.sum(axis=1)
        bad = np.abs(sums - 1.0) > SUM_TOLERANCE
        if bad.any():
            row = int(np.argmax(bad))
            raise InvalidSubmissionError(f"row {row}: probabilities sum to {sums[row]!r}, not 1 within 1e-6")
    if spec.value_range and ((array < spec.value_range[0]) | (array > spec.value_range[1])).any():
        raise InvalidSubmissionError(f"values outside {list(spec.value_range)}, the range the grader accepts")
    if spec.metric == "rmsle" and (array < 0).any():
        raise InvalidSubmissionError(f"column {columns[int(np.argmax((array < 0).any(axis=0)))]!r}: negative "
                                     "values (RMSLE rejects them)")


def _check_strings(values: pd.DataFrame, template: pd.DataFrame) -> None:
    """String columns: no number where the sample holds text (a fallback must never write 0.0 into a mask)."""
    for column in values.columns:
        if pd.api.types.is_numeric_dtype(values[column]) and not pd.api.types.is_numeric_dtype(template[column]) \
                and values[column].notna().any():
            raise InvalidSubmissionError(f"column {column!r}: the sample has text, this has numbers "
                                         f"({values[column].dropna().iloc[0]!r})")


def _check_labels(labels: pd.Series, template: pd.Series) -> None:
    if pd.api.types.is_bool_dtype(template) and not pd.api.types.is_bool_dtype(labels):
        raise InvalidSubmissionError(f"column {labels.name!r}: the sample has True/False, this has "
                                     f"{labels.iloc[0]!r}")
    if pd.api.types.is_numeric_dtype(template) and not pd.api.types.is_numeric_dtype(labels):
        raise InvalidSubmissionError(f"column {labels.name!r}: the sample has numbers, this has {labels.iloc[0]!r}")


def write_atomic(frame: pd.DataFrame, path: Path, check=lambda written: None) -> None:
    """Write a CSV beside `path`, `check` it there (raising leaves `path` as it was), then rename it into place. A
    column pandas named for its empty header (`Unnamed: 0`, iwildcam-2019's index) is written with it empty again,
    as the sample has it."""
    with replacing(path) as tmp:
        with open(tmp, "w", newline="") as handle:
            frame.rename(columns=lambda c: "" if UNNAMED.fullmatch(str(c)) else c).to_csv(handle, index=False)
            handle.flush()
            os.fsync(handle.fileno())
        check(tmp)


def publish(submission: pd.DataFrame, sample: pd.DataFrame, spec: CompetitionSpec, columns: list[str],
            path: Path) -> None:
    """Validate, write, and validate what a reader of the file will see before it replaces the last one."""
    validate_submission(submission, sample, spec, columns)
    write_read_back(submission, sample, spec, columns, path)


def write_read_back(submission: pd.DataFrame, sample: pd.DataFrame, spec: CompetitionSpec, columns: list[str],
                    path: Path) -> None:
    """Write a validated submission; the file is read back and validated before it replaces the last one."""
    write_atomic(submission, path, lambda written: validate_submission(pd.read_csv(written, **LITERAL), sample,
                                                                       spec, columns))  # a token "None" is no gap


def sample_baseline(sample: pd.DataFrame, spec: CompetitionSpec, columns: list[str]) -> pd.DataFrame:
    """A valid submission from the sample alone: uniform class probabilities, otherwise the sample's own values
    made valid (missing filled, clipped). Used before any train file has been read. A column of text stays the
    sample's text, whatever the spec says it holds: a number is never written where the sample has words."""
    submission = sample.copy()
    numeric = [c for c in columns if _numbers(sample[c])]
    if spec.submission in ("probabilities", "distribution"):
        submission[columns] = _normalise(np.ones((len(sample), len(columns))))
    elif spec.submission in ("probability", "multilabel") and numeric:
        values = sample[numeric].apply(pd.to_numeric, errors="coerce")
        submission[numeric] = values.fillna(0.5).clip(0.0, 1.0)
    elif spec.submission in ("regression", "direction") and numeric:
        values = sample[numeric].apply(pd.to_numeric, errors="coerce").fillna(0.0)
        values = values.clip(lower=0.0) if spec.metric == "rmsle" else values
        submission[numeric] = varied(values.to_numpy()) if spec.metric in CORRELATIONS else values
    elif spec.submission == "label":
        column = sample[columns[0]]
        submission[columns[0]] = column.fillna(column.mode().iloc[0]) if column.notna().any() else column
    return submission


def _numbers(column: pd.Series) -> bool:
    """Whether a sample's column holds numbers (or nothing at all): every value it has reads as one."""
    present = column.dropna()
    return pd.api.types.is_numeric_dtype(column) or pd.to_numeric(present, errors="coerce").notna().all()


def prior_predictions(y: np.ndarray, classes: list | None, n_test: int,
                      choices: np.ndarray | None = None, labels: list[str] | None = None,
                      metric: str = "") -> Predictions:
    """Class prior (classification), each label's share (a set of labels), or the best constant of the values:
    their median under an absolute error (MEDIAN_METRICS), else their mean, for every test row."""
    if classes is None:
        centre, named = (np.nanmedian, "median") if metric in MEDIAN_METRICS and labels is None else (np.nanmean, "mean")
        source = "baseline: each label's share of the training rows" if labels is not None else \
            f"baseline: target {named}" + (", each row's candidate best on average" if choices is not None else "")
        return Predictions(np.tile(centre(y, axis=0), (n_test, 1)), None, source, choices=choices,
                           labels=tuple(labels) if labels is not None else None)
    prior = np.bincount(y.astype(int), minlength=len(classes)) / len(y)
    source = "baseline: class prior" if choices is None else \
        f"baseline: class prior, each row's {classes[int(prior.argmax())]!r} candidate"
    return Predictions(np.tile(prior, (n_test, 1)), tuple(classes), source, choices=choices)


def _first_line(path: Path) -> bytes:
    with open(path, "rb") as handle:
        return handle.readline()


def write_given_sample(data_dir: Path, out_dir: Path) -> None:
    """The sample submission as the competition gives it becomes the first submission, before any other file is
    read, so neither inferring the competition nor its train file can leave the run without one; the checked
    baseline replaces it a moment later. A sample that cannot be read is left to the checks that name it."""
    path = find_sample(data_dir)
    if (out_dir / "submission.csv").exists():  # an earlier run's: this run's checked baseline replaces it
        return
    try:
        real = inside(data_dir, path) if path else None
        # its head first: a plain comma-separated file is copied as it is (millions of rows in a second, where
        # parsing and writing them takes several); any other is parsed and written as CSV
        sample = read_csv_file(real, nrows=SAMPLE_HEAD_ROWS, literal=True) if real else None
        plain = real is not None and compression(real) is None and b"," in _first_line(real)
        if sample is not None and not plain:
            sample = read_csv_file(real, literal=True)
    except (InputError, OSError, ValueError, zipfile.BadZipFile):
        return
    if sample is not None and len(sample) and sample.shape[1] > 1:
        out_dir.mkdir(parents=True, exist_ok=True)
        if plain:
            with replacing(out_dir / "submission.csv") as tmp:
                shutil.copyfile(real, tmp)
        else:
            write_atomic(sample, out_dir / "submission.csv")
