"""Which answer rows a grader scores, and how a submission's rows meet them where they are not one row per id:
each group's last scored rows (osic's last three visits a patient), a submission that may leave answers out
(osic's grader scores the rows it has), a melted row per item and target put back as an (items x targets) matrix
(rsna-2022's `<StudyInstanceUID>_C3`); and the metrics that read a file their own way: probabilities clipped
rather than refused (probabilistic F1), 0/1 labels (MCC), a value beside the spread stated for it (the Laplace
log-likelihood). runner.competition.scoring checks and scores the rest."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from runner.common import binary_metrics, spread_metrics
from runner.common.errors import InputError, InvalidSubmissionError
from runner.competition.id_parts import items_in_order, melted_rows, unmelted
from runner.competition.spec import CompetitionSpec

GRADED = "__graded__"  # the answers' column, while they are aligned, of the rows the grader scores

Scored = tuple[np.ndarray, np.ndarray, Callable[[np.ndarray, np.ndarray], float]]  # truth, predictions, scorer


def last_rows(frame: pd.DataFrame, spec: CompetitionSpec, keep: np.ndarray) -> np.ndarray:
    """Of the rows in `keep`, each group's last `scored_last` rows by its order column (all of `keep` where the
    spec has no such rule)."""
    if not spec.scored_last:
        return keep
    last = spec.scored_last
    for column in (last.group, last.order):
        if column not in frame.columns:
            raise InputError(f"scored last rows: no column {column!r}")
    order = pd.to_numeric(frame[last.order], errors="coerce").to_numpy()
    kept = pd.DataFrame({"group": frame[last.group].to_numpy(), "order": order})[keep]
    chosen = kept.sort_values("order", kind="stable").groupby("group", sort=False).tail(last.count).index
    return np.isin(np.arange(len(frame)), chosen)


def subset(submission: pd.DataFrame, answers: pd.DataFrame, spec: CompetitionSpec):
    """Rows matched by id where the submission may leave answers out: every id it holds must be an answer's, once;
    both in the ids' order."""
    if spec.id_column not in submission.columns:
        raise InvalidSubmissionError(f"no id column {spec.id_column!r}")
    ids, known = submission[spec.id_column].astype(str), answers[spec.id_column].astype(str)
    if (unknown := ~ids.isin(known)).any():
        raise InvalidSubmissionError(f"id {ids[unknown].iloc[0]!r} of column {spec.id_column!r} is no answer's")
    if ids.duplicated().any():
        raise InvalidSubmissionError(f"id {ids[ids.duplicated()].iloc[0]!r} of column {spec.id_column!r} is given "
                                     "twice")
    sub = submission.iloc[np.argsort(ids.to_numpy(), kind="stable")].reset_index(drop=True)
    ans = answers.loc[known.isin(ids).to_numpy()]
    ans = ans.iloc[np.argsort(ans[spec.id_column].astype(str).to_numpy(), kind="stable")].reset_index(drop=True)
    return sub, ans


def numbers(frame: pd.DataFrame, column: str) -> pd.Series:
    """A value column read as numbers (empty cells as NaN); text in it makes the submission invalid."""
    if column not in frame.columns:
        raise InvalidSubmissionError(f"missing column {column!r}")
    values = pd.to_numeric(frame[column], errors="coerce")
    text = values.isna() & frame[column].notna()
    if text.any():
        raise InvalidSubmissionError(f"column {column!r}: {frame[column][text].iloc[0]!r} is no number")
    return values


def clipped_probabilities(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame,
                          ans: pd.DataFrame) -> Scored:
    """Probabilistic F1's grader clips each value into [0, 1] (a missing one poisons its sums: 0), never refuses."""
    target = spec.targets[0]
    truth = numbers(ans, target).to_numpy(dtype=np.float64)
    return truth, numbers(sub, target).to_numpy(dtype=np.float64), binary_metrics.probabilistic_f1


def decided_labels(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> Scored:
    """MCC's grader takes whole numbers (0/1 labels); probabilities between make it fail."""
    target = spec.targets[0]
    labels = numbers(sub, target).to_numpy(dtype=np.float64)
    if np.isnan(labels).any() or (labels != np.round(labels)).any():
        raise InvalidSubmissionError(f"column {target!r}: labels must be whole numbers, not probabilities or gaps")
    truth = numbers(ans, target).to_numpy(dtype=np.float64)
    binary = np.isin(labels, (0, 1)).all() and np.isin(truth, (0, 1)).all()
    return truth, labels, binary_metrics.fast_mcc if binary else binary_metrics.mcc  # the same figure for 0/1


def value_and_spread(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> Scored:
    """(truth, [value, spread] per row): both columns of numbers, checked on the whole submission as the grader
    does; an empty spread counts as 0 (the metric's), an empty value leaves the score undefined (NaN)."""
    columns = [*spec.targets, spec.spread_column]
    for column in columns:
        if column not in submission.columns:
            raise InvalidSubmissionError(f"missing column {column!r}")
        if not pd.api.types.is_numeric_dtype(submission[column]):
            raise InvalidSubmissionError(f"column {column!r} is not numeric")
    return (ans[list(spec.targets)].to_numpy(dtype=np.float64), sub[columns].to_numpy(dtype=np.float64),
            spread_metrics.laplace_log_likelihood)


def unmelted_pair(spec: CompetitionSpec, sub: pd.DataFrame, ans: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(truth, predictions) as (items x targets) matrices from aligned melted rows: the value column checked as
    probabilities (empty or outside [0, 1]: invalid), every item given each target by the answers."""
    column = (spec.scored_columns or spec.targets)[0]  # the melted value column; stacked: the spec's one target
    pred = numbers(sub, column).to_numpy(dtype=np.float64)
    if np.isnan(pred).any() or (pred < 0).any() or (pred > 1).any():
        raise InvalidSubmissionError(f"column {column!r}: probabilities must be given, within [0, 1]")
    items, targets = melted_rows(spec, ans, spec.answers_file)  # aligned: the answers' ids are the submission's
    order = items_in_order(items)
    width = len(spec.targets) if spec.melted_by_pattern else int(targets.max()) + 1
    truth = unmelted(items, targets, numbers(ans, column).to_numpy(dtype=np.float64), order, width)
    if np.isnan(truth).any():
        raise InvalidSubmissionError(f"the answers do not give every item each of the {width} targets")
    return truth, unmelted(items, targets, pred, order, width)
