"""A submission checked against the private answers and aligned with them, row for row, then scored: how each
submission format is read (numbers, labels, sets, ranked lists, strings), how its rows meet the answers' (`grade_by`),
which rows the grader scores (`scored_rows`), and the checks MLE-bench's graders make, each raising
InvalidSubmissionError with what is wrong. runner.competition.grade reports and compares what it scores."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from runner.common import metrics
from runner.common.class_metrics import LABEL_READERS
from runner.common.errors import InputError, InvalidSubmissionError
from runner.competition import grade_rows, grade_shapes, vector_submissions
from runner.competition.metric_grades import METRIC_SCORERS
from runner.competition.vector_submissions import numbers
from runner.competition.spec import CompetitionSpec


def _answered(submission: pd.DataFrame, answers: pd.DataFrame, spec: CompetitionSpec):
    """The submission's rows of the ids the answers hold (it must hold every one; others are not scored), both in
    id order and paired row by row as far as the shorter goes (a repeated id in the submission pairs rows with
    the wrong answers rather than failing, as MLE-bench's graders zip them)."""
    if spec.id_column not in submission.columns:
        raise InvalidSubmissionError(f"no id column {spec.id_column!r}")
    ids, wanted = submission[spec.id_column].astype(str), answers[spec.id_column].astype(str)
    if not set(wanted) <= set(ids):
        missing = sorted(set(wanted) - set(ids))
        raise InvalidSubmissionError(f"column {spec.id_column!r} lacks {len(missing)} id(s) the answers hold "
                                     f"(e.g. {missing[0]!r})")
    sub = submission.loc[ids.isin(set(wanted)).to_numpy()]
    sub = sub.iloc[np.argsort(sub[spec.id_column].astype(str).to_numpy(), kind="stable")]
    ans = answers.iloc[np.argsort(wanted.to_numpy(), kind="stable")]
    rows = min(len(sub), len(ans))
    return sub.iloc[:rows].reset_index(drop=True), ans.iloc[:rows].reset_index(drop=True)


def _aligned(submission: pd.DataFrame, answers: pd.DataFrame, spec: CompetitionSpec):
    """The submission's rows beside the answers' rows they are graded against, both in the answers' id order (by
    the spec's `grade_by`); InvalidSubmissionError where they cannot meet."""
    if spec.grade_by == "scorer":  # the format's scorer matches the rows itself (answers of several rows an id)
        return submission, answers
    if spec.grade_by == "subset":  # the submission may leave answers out: they are not scored
        return grade_rows.subset(submission, answers, spec)
    if spec.grade_by == "answers":
        return _answered(submission, answers, spec)
    if spec.grade_by == "merge":
        return _merged(submission, answers, spec)
    if len(submission) != len(answers):
        raise InvalidSubmissionError(f"{len(submission)} rows, the answers have {len(answers)}")
    if spec.grade_by == "row":
        return submission.reset_index(drop=True), answers.reset_index(drop=True)
    if spec.grade_by == "group":
        return _by_group_position(submission, answers, spec)
    sub_order, ans_order = _id_order(submission, spec), _id_order(answers, spec)
    sub_keys = submission[spec.id_column].astype(str).to_numpy()
    ans_keys = answers[spec.id_column].astype(str).to_numpy()
    if sub_keys[sub_order].tolist() != ans_keys[ans_order].tolist():
        raise InvalidSubmissionError(f"the ids in column {spec.id_column!r} differ from the answers' ids")
    return submission.iloc[sub_order].reset_index(drop=True), answers.iloc[ans_order].reset_index(drop=True)


def _id_order(frame: pd.DataFrame, spec: CompetitionSpec) -> np.ndarray:
    """The positions of a frame's rows sorted by id (as strings; equal ids keep their order)."""
    if spec.id_column not in frame.columns:
        raise InvalidSubmissionError(f"no id column {spec.id_column!r}")
    return np.argsort(frame[spec.id_column].astype(str).to_numpy(), kind="stable")


def _merged(submission: pd.DataFrame, answers: pd.DataFrame, spec: CompetitionSpec):
    """Each answer row beside every submission row of its id (a repeated id repeats the answer), the sets of ids
    equal, in the answers' order."""
    for frame in (submission, answers):
        _id_order(frame, spec)  # the id column is there
    sub_ids, ans_ids = submission[spec.id_column].astype(str), answers[spec.id_column].astype(str)
    if set(sub_ids) != set(ans_ids):
        missing = set(ans_ids) - set(sub_ids)
        raise InvalidSubmissionError(f"the ids in column {spec.id_column!r} differ from the answers' ids"
                                     + (f" ({len(missing)} missing, e.g. {sorted(missing)[0]!r})" if missing else ""))
    pairs = pd.DataFrame({"key": ans_ids.to_numpy(), "answer": np.arange(len(answers))}).merge(
        pd.DataFrame({"key": sub_ids.to_numpy(), "submitted": np.arange(len(submission))}), on="key")
    return (submission.iloc[pairs["submitted"].to_numpy()].reset_index(drop=True),
            answers.iloc[pairs["answer"].to_numpy()].reset_index(drop=True))


def _by_group_position(submission: pd.DataFrame, answers: pd.DataFrame, spec: CompetitionSpec):
    """Rows of each group of `score_groups` (a trip) paired in their order in each file, the groups in the
    answers' order; each group must have as many rows in both."""
    column = spec.score_groups
    if column not in submission.columns:
        raise InvalidSubmissionError(f"no column {column!r}")
    sub_groups, ans_groups = submission[column].astype(str), answers[column].astype(str)
    sub_counts, ans_counts = sub_groups.value_counts(), ans_groups.value_counts()
    for group, count in ans_counts.items():
        if sub_counts.get(group, 0) != count:
            raise InvalidSubmissionError(f"{column} {group!r}: {sub_counts.get(group, 0)} rows, the answers have "
                                         f"{count}")
    rank = {group: k for k, group in enumerate(pd.unique(ans_groups))}
    sub_order = np.argsort(sub_groups.map(rank).to_numpy(), kind="stable")
    ans_order = np.argsort(ans_groups.map(rank).to_numpy(), kind="stable")
    return submission.iloc[sub_order].reset_index(drop=True), answers.iloc[ans_order].reset_index(drop=True)


def _class_columns(spec: CompetitionSpec, answers: pd.DataFrame) -> list[str]:
    if len(spec.targets) > 1:
        return list(spec.targets)
    return [c for c in answers.columns if c not in (spec.id_column, "Usage")]


EXACT_MATCH = "exact_match"  # labels scored as strings, equal or not (text normalisation's tokens, class names)


@dataclass(frozen=True)
class _Scored:
    """A valid submission's predictions beside the answers' truths, row for row (in the answers' id order), and
    what scores them: checked and aligned once, scored many times (a bootstrap's resamples). `scorer` takes the
    rows' truth and prediction; by default the spec's metric (runner.common.metrics) scores them."""

    truth: np.ndarray
    pred: np.ndarray
    metric: str  # runner.common.metrics' name, or EXACT_MATCH
    scorer: Callable[[np.ndarray, np.ndarray], float] | None = None
    groups: np.ndarray | None = None  # each row's group, for a metric that scores groups apart

    def score(self, rows: np.ndarray | None = None, fast: bool = False) -> float:
        """The metric on `rows` (all by default; a row may repeat); `fast`: the blend's array forms, the same
        figure without scikit-learn's checks (a resample with one class gives nan where scikit-learn raises)."""
        truth, pred = (self.truth, self.pred) if rows is None else (self.truth[rows], self.pred[rows])
        groups = self.groups if rows is None or self.groups is None else self.groups[rows]
        if self.scorer is not None:
            return float(self.scorer(truth, pred))
        if self.metric == EXACT_MATCH:
            return float((truth == pred).mean())
        if self.metric == "qwk":
            return metrics.qwk(truth, pred)
        return (metrics.fast_score if fast else metrics.score)(self.metric, truth, pred, groups)


def _multilabel(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> _Scored:
    """Mean column ROC AUC over the scored labels; answer rows marked -1 (jigsaw's unscored rows) are left out."""
    if not any(t in ans.columns for t in spec.targets):  # a column per label, named by the answers alone
        return _Scored(*vector_submissions.label_columns(spec, submission, sub, ans), spec.metric)
    columns = list(spec.scored_columns or [t for t in spec.targets if t in ans.columns])
    if not spec.scored_columns and set(sub.columns) != {spec.id_column, *columns}:  # jigsaw reads every column
        raise InvalidSubmissionError(f"columns must be exactly {[spec.id_column, *columns]}")
    pred, truth = numbers(sub, columns), numbers(ans, columns)
    if (pred < 0).any() or (pred > 1).any():
        raise InvalidSubmissionError("probabilities outside [0, 1]")
    scored = (truth != -1).all(axis=1)
    return _Scored(truth[scored], pred[scored], spec.metric)


def _probabilities(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> _Scored:
    classes = _class_columns(spec, ans)
    if spec.metric == "mean_column_roc_auc" and set(submission.columns) != {spec.id_column, *classes}:
        raise InvalidSubmissionError(f"columns must be exactly {[spec.id_column, *classes]}")
    pred = numbers(sub, classes)
    if (pred < 0).any() or (pred > 1).any():
        raise InvalidSubmissionError("probabilities outside [0, 1]")
    if spec.metric == "log_loss" and not np.allclose(pred.sum(axis=1), 1.0, atol=1e-6):
        raise InvalidSubmissionError("probability rows do not sum to 1 within 1e-6")
    return _Scored(numbers(ans, classes).argmax(axis=1), pred, spec.metric)


def _probability(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> _Scored:
    target = spec.targets[0]
    pred = numbers(sub, [target])[:, 0]
    if (pred < 0).any() or (pred > 1).any():
        raise InvalidSubmissionError(f"column {target!r}: probabilities outside [0, 1]")
    truth = ans[target].astype(str).map({"True": 1, "False": 0, "1": 1, "0": 0, "1.0": 1, "0.0": 0})
    if truth.isna().any():
        raise InvalidSubmissionError(f"answers column {target!r} is not 0/1")
    return _Scored(truth.to_numpy(dtype=int), np.column_stack([1 - pred, pred]), spec.metric)


def _label(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> _Scored:
    """One label per row: kappa's integer grades; integer labels read as the grader reads them where the metric
    scores the labels themselves (macro-F1, the top-1 error); else an exact match as strings (text normalisation's
    tokens, class names)."""
    target = _target(spec, sub)
    if spec.metric == "qwk":
        grades = pd.to_numeric(sub[target], errors="coerce")
        if grades.isna().any() or (grades != grades.round()).any():
            raise InvalidSubmissionError(f"column {target!r}: grades must be integers")
        return _Scored(ans[target].to_numpy(), grades.to_numpy(), "qwk")
    if spec.metric in LABEL_READERS:  # integer labels, read as the competition's grader reads them
        read = LABEL_READERS[spec.metric]
        return _Scored(read(ans[target]), read(sub[target]), spec.metric)
    return _Scored(ans[target].astype(str).to_numpy(), sub[target].astype(str).to_numpy(), EXACT_MATCH)


def _regression(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> _Scored:
    _target(spec, sub)
    pred = numbers(sub, list(spec.targets))
    if spec.metric == "rmsle" and (pred < 0).any():
        raise InvalidSubmissionError("negative values: RMSLE is undefined for them")
    if spec.value_range and ((pred < spec.value_range[0]) | (pred > spec.value_range[1])).any():
        raise InvalidSubmissionError(f"values outside {list(spec.value_range)}, the range the grader accepts")
    return _Scored(numbers(ans, list(spec.targets)), pred, spec.metric)


def _target(spec: CompetitionSpec, sub: pd.DataFrame) -> str:
    target = spec.targets[0]
    if target not in sub.columns:
        raise InvalidSubmissionError(f"missing column {target!r}")
    return target


def label_lists(column: pd.Series, separator: str = " ") -> list[list[str]]:
    """Each row's labels in a string column, in their order (an empty cell: none)."""
    return [str(v).split(separator) if separator != " " else str(v).split()
            for v in column.astype(object).fillna("")]


def _labels(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> _Scored:
    """A set of labels per row: both sides as 0/1 matrices over the labels the answers hold (a label only the
    submission names counts for nothing, as MLE-bench's graders binarise). A column read as numbers (every set
    one numeric label, or none) is no column of sets to MLE-bench's graders, which split it as text: invalid."""
    target = _target(spec, sub)
    if pd.api.types.is_numeric_dtype(sub[target]) and sub[target].notna().any():
        raise InvalidSubmissionError(f"column {target!r} reads as numbers ({sub[target].dropna().iloc[0]!r}), "
                                     "not as sets of labels")
    truth_sets = label_lists(ans[target], spec.label_separator)
    vocabulary = {label: j for j, label in enumerate(sorted({v for labels in truth_sets for v in labels}))}

    def matrix(rows: list[list[str]]) -> np.ndarray:
        out = np.zeros((len(rows), max(1, len(vocabulary))), dtype=np.int8)
        for i, labels in enumerate(rows):
            out[i, [vocabulary[v] for v in labels if v in vocabulary]] = 1
        return out

    return _Scored(matrix(truth_sets), matrix(label_lists(sub[target], spec.label_separator)), spec.metric)


def _ranked(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> _Scored:
    """The k likeliest labels per row, best first, against the row's true label(s): rows of strings, scored by the
    metric's ranked form (MAP@k)."""
    from runner.common import label_metrics

    target = _target(spec, sub)
    truth = np.empty(len(ans), dtype=object)
    truth[:] = [set(str(v).split(spec.label_separator)) for v in ans[target]]
    ranked = np.empty(len(sub), dtype=object)  # split as written: an empty cell is 'nan', two spaces an empty label
    ranked[:] = [str(v).split(spec.label_separator) for v in sub[target]]
    k = spec.top_k
    return _Scored(truth, ranked, spec.metric,
                   lambda t, r: label_metrics.mean_average_precision(list(t), list(r), k))


def _strings(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> _Scored:
    """One string per row that the metric itself reads (ordered label sequences, 3-D boxes), as MLE-bench's
    graders read them: an empty cell is an empty string where the metric allows one, and the metric's parsing
    refuses what it cannot read (InvalidSubmissionError)."""
    target = _target(spec, sub)
    fill = "" if spec.submission == "boxes3d" else None  # an empty box string is no box; an empty sequence is 'nan'

    def cells(frame: pd.DataFrame) -> np.ndarray:
        column = frame[target].astype(object)
        column = column.fillna(fill) if fill is not None else column
        out = np.empty(len(column), dtype=object)
        out[:] = column.astype(str).tolist()
        return out

    truth, pred = cells(ans), cells(sub)
    metrics.score(spec.metric, truth, pred)  # unreadable strings are refused here, once, not in each resample
    return _Scored(truth, pred, spec.metric)


# how each submission format is checked against the answers and scored: (spec, submission, and both aligned)
SCORERS: dict[str, Callable[..., _Scored]] = {
    "probabilities": _probabilities, "multilabel": _multilabel, "probability": _probability, "label": _label,
    "regression": _regression, "labels": _labels, "ranked": _ranked,
    "mask": grade_shapes.masks, "boxes": grade_shapes.shapes, "points": grade_shapes.shapes,
    "sequence": _strings, "boxes3d": _strings,
    "distribution": lambda spec, *frames: _Scored(*vector_submissions.distribution(spec, *frames), spec.metric),
    "direction": lambda spec, *frames: _Scored(*vector_submissions.direction(spec, *frames), spec.metric),
}


def scored(spec: CompetitionSpec, submission: pd.DataFrame, answers: pd.DataFrame) -> _Scored:
    """The submission checked against the answers (InvalidSubmissionError naming what is wrong) and aligned; only
    the rows the grader scores are kept (the spec's `scored_rows`)."""
    if spec.exact_columns and set(submission.columns) != {spec.id_column, *spec.targets}:
        raise InvalidSubmissionError(f"columns must be exactly {[spec.id_column, *spec.targets]}, not "
                                     f"{list(submission.columns)[:6]}")
    missing = [c for c in spec.required_columns if c not in submission.columns]
    if missing:
        raise InvalidSubmissionError(f"missing column(s) {missing}: the grader requires them, unscored")
    if spec.scored_last:  # each group's last scored rows, chosen among all the answers before a submission's meet them
        keep = scored_rows(answers, spec.scored_rows) if spec.scored_rows else np.ones(len(answers), dtype=bool)
        answers = answers.assign(**{grade_rows.GRADED: grade_rows.last_rows(answers, spec, keep)})
    sub, ans = _aligned(submission, answers, spec)
    if grade_rows.GRADED in ans.columns:
        last = ans.pop(grade_rows.GRADED).to_numpy(dtype=bool)
        sub, ans = sub.loc[last].reset_index(drop=True), ans.loc[last].reset_index(drop=True)
    if spec.melted:  # a row per item and target: scored as (items x targets)
        return _Scored(*grade_rows.unmelted_pair(spec, sub, ans), spec.metric)
    if spec.scored_rows:
        keep = scored_rows(ans, spec.scored_rows)
        # by position: the submission's row in the file takes the mask of the answers' row in the same place
        kept = scored_rows(answers, spec.scored_rows)[_id_order(submission, spec)] if spec.scored_rows_by_position \
            else keep
        sub, ans = sub.loc[kept].reset_index(drop=True), ans.loc[keep].reset_index(drop=True)
    if spec.metric in METRIC_SCORERS:  # the metric reads the file its own way (runner.competition.metric_grades)
        rows = METRIC_SCORERS[spec.metric](spec, submission, sub, ans)
        return _Scored(rows.truth, rows.pred, spec.metric, rows.scorer)
    if spec.submission not in SCORERS:
        raise InputError(f"spec {spec.id}: no grader for a {spec.submission!r} submission")
    scored = SCORERS[spec.submission](spec, submission, sub, ans)
    if spec.score_groups:  # a metric that scores each group apart: the answers' group of each row
        if spec.score_groups not in ans.columns:
            raise InputError(f"answers: no column {spec.score_groups!r}, the groups the metric scores apart")
        scored = dataclasses.replace(scored, groups=ans[spec.score_groups].astype(str).to_numpy())
    return scored


def scored_rows(frame: pd.DataFrame, condition: str) -> np.ndarray:
    """Which rows of `frame` meet a spec's `scored_rows` condition (pandas' query over its columns)."""
    try:
        return np.asarray(frame.eval(condition), dtype=bool)
    except Exception as exc:  # a column the condition names is missing, or it is no condition
        raise InputError(f"scored rows {condition!r}: {exc}") from exc
