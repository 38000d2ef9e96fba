"""Grading a submission against the private answers, with MLE-bench's report fields and medal positions."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Callable

import numpy as np
import pandas as pd
from pydantic import PlainSerializer

from runner.common import metrics
from runner.common.errors import InputError, InvalidSubmissionError
from runner.common.saved import Saved
from runner.competition import grade_rows
from runner.competition.grade_rows import scored_rows  # noqa: F401  (where it always was)
from runner.competition.spec import CompetitionSpec

BOOTSTRAP_ROUNDS = 1000  # resamples of the test rows: enough for steady 5% and 95% quantiles
EDGE_QUANTILES = (0.05, 0.95)  # a 90% interval


@dataclass(frozen=True)
class GradeReport(Saved):
    """MLE-bench's CompetitionReport fields, plus the metric and why a submission was invalid."""

    competition_id: str
    score: float | None
    gold_threshold: float | None
    silver_threshold: float | None
    bronze_threshold: float | None
    median_threshold: float | None
    any_medal: bool
    gold_medal: bool
    silver_medal: bool
    bronze_medal: bool
    above_median: bool
    submission_exists: bool
    valid_submission: bool
    is_lower_better: bool
    created_at: str
    submission_path: str
    metric: str = ""
    error: str | None = None



@dataclass(frozen=True)
class Thresholds:
    gold: float
    silver: float
    bronze: float
    median: float
    lower_is_better: bool


def medal_positions(teams: int) -> tuple[int, int, int]:
    """1-based leaderboard positions of the gold, silver and bronze thresholds (MLE-bench's rank_score)."""
    if teams < 1:
        raise InputError("leaderboard: no teams")
    if teams < 100:
        return max(1, int(0.1 * teams)), max(1, int(0.2 * teams)), max(1, int(0.4 * teams))
    if teams < 250:
        return 10, max(1, int(0.2 * teams)), max(1, int(0.4 * teams))
    if teams < 1000:
        return 10 + int(0.002 * teams), 50, 100
    return 10 + int(0.002 * teams), max(1, int(0.05 * teams)), max(1, int(0.1 * teams))


def thresholds(scores: pd.Series) -> Thresholds:
    """Thresholds from a final leaderboard's scores, best first; lower is better when the first is lowest."""
    scores = scores.reset_index(drop=True)
    gold, silver, bronze = medal_positions(len(scores))
    return Thresholds(float(scores[gold - 1]), float(scores[silver - 1]), float(scores[bronze - 1]),
                      float(scores.median()), bool(scores.iloc[0] < scores.iloc[-1]))


def spec_thresholds(spec: CompetitionSpec) -> Thresholds | None:
    """The medal lines a spec carries, or None."""
    medals = spec.medals
    return medals and Thresholds(medals.gold, medals.silver, medals.bronze, medals.median, spec.lower_is_better)


def read_leaderboard(path: Path) -> Thresholds:
    try:
        board = pd.read_csv(path)
    except Exception as exc:
        raise InputError(f"{path}: cannot read leaderboard: {exc}") from exc
    if "score" not in board.columns:
        raise InputError(f"{path}: leaderboard has no 'score' column")
    return thresholds(board["score"].dropna())


def _aligned(submission: pd.DataFrame, answers: pd.DataFrame, spec: CompetitionSpec):
    if spec.grade_by == "subset":
        return grade_rows.subset(submission, answers, spec)
    if len(submission) != len(answers):
        raise InvalidSubmissionError(f"{len(submission)} rows, the answers have {len(answers)}")
    if spec.grade_by == "row":
        return submission.reset_index(drop=True), answers.reset_index(drop=True)
    if spec.id_column not in submission.columns:
        raise InvalidSubmissionError(f"no id column {spec.id_column!r}")
    sub_keys = submission[spec.id_column].astype(str).to_numpy()
    ans_keys = answers[spec.id_column].astype(str).to_numpy()
    sub_order, ans_order = np.argsort(sub_keys, kind="stable"), np.argsort(ans_keys, kind="stable")
    if sub_keys[sub_order].tolist() != ans_keys[ans_order].tolist():
        raise InvalidSubmissionError(f"the ids in column {spec.id_column!r} differ from the answers' ids")
    return submission.iloc[sub_order].reset_index(drop=True), answers.iloc[ans_order].reset_index(drop=True)


def _numeric(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InvalidSubmissionError(f"missing column(s) {missing[:5]}")
    values = frame[columns].apply(pd.to_numeric, errors="coerce")
    if values.isna().any().any():
        raise InvalidSubmissionError(f"column {values.columns[values.isna().any()][0]!r}: empty or non-numeric")
    return values.to_numpy(dtype=np.float64)


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

    def score(self, rows: np.ndarray | None = None, fast: bool = False) -> float:
        """The metric on `rows` (all by default; a row may repeat); `fast`: the blend's array forms, the same
        figure without scikit-learn's checks (a resample with one class gives nan where scikit-learn raises)."""
        truth, pred = (self.truth, self.pred) if rows is None else (self.truth[rows], self.pred[rows])
        if self.scorer is not None:
            return float(self.scorer(truth, pred))
        if self.metric == EXACT_MATCH:
            return float((truth == pred).mean())
        if self.metric == "qwk":
            return metrics.qwk(truth, pred)
        return (metrics.fast_score if fast else metrics.score)(self.metric, truth, pred)


def _multilabel(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> _Scored:
    """Mean column ROC AUC over the scored labels; answer rows marked -1 (jigsaw's unscored rows) are left out."""
    columns = list(spec.scored_columns or [t for t in spec.targets if t in ans.columns])
    if not spec.scored_columns and set(sub.columns) != {spec.id_column, *columns}:  # jigsaw reads every column
        raise InvalidSubmissionError(f"columns must be exactly {[spec.id_column, *columns]}")
    pred, truth = _numeric(sub, columns), _numeric(ans, columns)
    if (pred < 0).any() or (pred > 1).any():
        raise InvalidSubmissionError("probabilities outside [0, 1]")
    scored = (truth != -1).all(axis=1)
    return _Scored(truth[scored], pred[scored], spec.metric)


def _probabilities(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> _Scored:
    classes = _class_columns(spec, ans)
    if spec.metric == "mean_column_roc_auc" and set(submission.columns) != {spec.id_column, *classes}:
        raise InvalidSubmissionError(f"columns must be exactly {[spec.id_column, *classes]}")
    pred = _numeric(sub, classes)
    if (pred < 0).any() or (pred > 1).any():
        raise InvalidSubmissionError("probabilities outside [0, 1]")
    if spec.metric == "log_loss" and not np.allclose(pred.sum(axis=1), 1.0, atol=1e-6):
        raise InvalidSubmissionError("probability rows do not sum to 1 within 1e-6")
    return _Scored(_numeric(ans, classes).argmax(axis=1), pred, spec.metric)


def _probability(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> _Scored:
    target = spec.targets[0]
    if spec.metric in CLIPPED:  # the grader clips each value into [0, 1]; a missing one scores 0, not invalid
        pred = grade_rows.numbers(sub, target).to_numpy(dtype=np.float64)
    else:
        pred = _numeric(sub, [target])[:, 0]
    if spec.metric not in CLIPPED and ((pred < 0).any() or (pred > 1).any()):
        raise InvalidSubmissionError(f"column {target!r}: probabilities outside [0, 1]")
    truth = ans[target].astype(str).map({"True": 1, "False": 0, "1": 1, "0": 0, "1.0": 1, "0.0": 0})
    if truth.isna().any():
        raise InvalidSubmissionError(f"answers column {target!r} is not 0/1")
    return _Scored(truth.to_numpy(dtype=int), np.column_stack([1 - pred, pred]), spec.metric)


def _label(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> _Scored:
    """One label per row: kappa's integer grades, else an exact match as strings (text normalisation's tokens,
    class names)."""
    target = _target(spec, sub)
    if spec.metric == "qwk":
        grades = pd.to_numeric(sub[target], errors="coerce")
        if grades.isna().any() or (grades != grades.round()).any():
            raise InvalidSubmissionError(f"column {target!r}: grades must be integers")
        return _Scored(ans[target].to_numpy(), grades.to_numpy(), "qwk")
    if spec.metric in DECIDED:  # 0/1 decisions: probabilities between make the grader fail
        labels = _numeric(sub, [target])[:, 0]
        if (labels != np.round(labels)).any():
            raise InvalidSubmissionError(f"column {target!r}: labels must be whole numbers, not probabilities "
                                         f"({labels[labels != np.round(labels)][0]!r})")
        return _Scored(_numeric(ans, [target])[:, 0], labels, spec.metric)
    return _Scored(ans[target].astype(str).to_numpy(), sub[target].astype(str).to_numpy(), EXACT_MATCH)


def _regression(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> _Scored:
    _target(spec, sub)
    pred = _numeric(sub, list(spec.targets))
    if spec.metric == "rmsle" and (pred < 0).any():
        raise InvalidSubmissionError("negative values: RMSLE is undefined for them")
    return _Scored(_numeric(ans, list(spec.targets)), pred, spec.metric)


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
    submission names counts for nothing, as MLE-bench's graders binarise)."""
    target = _target(spec, sub)
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
    truth[:] = [set(labels) for labels in label_lists(ans[target], spec.label_separator)]
    ranked = np.empty(len(sub), dtype=object)
    ranked[:] = label_lists(sub[target], spec.label_separator)
    k = spec.top_k
    return _Scored(truth, ranked, spec.metric,
                   lambda t, r: label_metrics.mean_average_precision(list(t), list(r), k))


# how each submission format is checked against the answers and scored: (spec, submission, and both aligned)
SCORERS: dict[str, Callable[..., _Scored]] = {
    "probabilities": _probabilities, "multilabel": _multilabel, "probability": _probability, "label": _label,
    "regression": _regression, "labels": _labels, "ranked": _ranked,
    "value_and_spread": lambda spec, submission, sub, ans: _Scored(*grade_rows.value_and_spread(spec, submission, sub,
                                                                                                ans), spec.metric),
}
CLIPPED = ("probabilistic_f1",)  # metrics whose grader clips probabilities into [0, 1] rather than refuse them
DECIDED = ("mcc",)  # metrics of 0/1 labels written as numbers


def _scored(spec: CompetitionSpec, submission: pd.DataFrame, answers: pd.DataFrame) -> _Scored:
    """The submission checked against the answers (InvalidSubmissionError naming what is wrong) and aligned; only
    the rows the grader scores are kept (the spec's `scored_rows` and `scored_last`, chosen among all answers)."""
    graded = grade_rows.graded(answers, spec)
    sub, ans = _aligned(submission, answers.assign(**{grade_rows.GRADED: graded}), spec)
    keep = ans.pop(grade_rows.GRADED).to_numpy(dtype=bool)  # the answers as given, less the marker
    if not keep.all():
        sub, ans = sub.loc[keep].reset_index(drop=True), ans.loc[keep].reset_index(drop=True)
    if spec.melted:  # a row per item and target: scored as (items x targets)
        return _Scored(*grade_rows.unmelted_pair(spec, sub, ans), spec.metric)
    if spec.submission not in SCORERS:
        raise InputError(f"spec {spec.id}: no grader for a {spec.submission!r} submission")
    return SCORERS[spec.submission](spec, submission, sub, ans)


def grade(submission_path: Path, spec: CompetitionSpec, answers_dir: Path,
          leaderboard: Path | None = None) -> GradeReport:
    """Score a submission file. An invalid submission gets score None and the reason in `error`. Medals from
    `leaderboard` where given, else from the spec's medal lines (MLE-bench's leaderboard, read once)."""
    answers = pd.read_csv(_answers_path(spec, answers_dir))
    limits = read_leaderboard(leaderboard) if leaderboard else spec_thresholds(spec)
    exists = submission_path.is_file() and submission_path.suffix == ".csv"
    value, error = None, None
    if not exists:
        error = f"{submission_path}: no submission"
    else:
        try:
            value = round(_scored(spec, pd.read_csv(submission_path), answers).score(), 5)
        except (InvalidSubmissionError, ValueError, pd.errors.ParserError) as exc:
            error = str(exc)
    return _report(spec, submission_path, exists, value, error, limits)


# saved to 5 decimals, as the grader's scores are; + 0.0 turns a rounded -0.0 into 0.0
Rounded = Annotated[float, PlainSerializer(lambda v: round(v, 5) + 0.0)]


@dataclass(frozen=True)
class Edge(Saved):
    """How much better one submission scores than another on the same answers, in the metric's units (positive:
    the first is better, whichever way the metric runs), and the 90% interval of that difference when the test
    rows are resampled with replacement (a paired bootstrap). An interval holding 0 means this test set cannot
    tell the two apart."""

    value: Rounded
    low: Rounded
    high: Rounded



def edge(spec: CompetitionSpec, ours: pd.DataFrame, theirs: pd.DataFrame, answers: pd.DataFrame,
         rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0) -> Edge:
    """The edge of submission `ours` over `theirs` (both valid for `answers`). Each resample scores both on the
    same rows, so what the two get right or wrong alike cancels out of the interval."""
    mine, other = _scored(spec, ours, answers), _scored(spec, theirs, answers)  # invalid: raises here
    sign = -1.0 if spec.lower_is_better else 1.0

    value, n = sign * (mine.score() - other.score()), len(mine.truth)
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(rounds):
        rows = rng.integers(0, n, n)
        try:
            samples.append(sign * (mine.score(rows, fast=True) - other.score(rows, fast=True)))
        except ValueError:  # a resample with one class only has no AUC
            continue
    samples = [d for d in samples if np.isfinite(d)]
    low, high = np.quantile(samples, EDGE_QUANTILES) if samples else (value, value)
    return Edge(value=value, low=float(low), high=float(high))


def compare(submission_path: Path, other_path: Path, spec: CompetitionSpec, answers_dir: Path) -> Edge:
    """The edge of one submission file over another on the competition's answers (both must be valid)."""
    answers = pd.read_csv(_answers_path(spec, answers_dir))
    return edge(spec, pd.read_csv(submission_path), pd.read_csv(other_path), answers)


def _answers_path(spec: CompetitionSpec, answers_dir: Path) -> Path:
    path = Path(answers_dir) / spec.answers_file
    if not path.is_file():
        raise InputError(f"{path}: answers not found (pass the competition's prepared/private folder)")
    return path


def _report(spec, path, exists, value, error, limits: Thresholds | None) -> GradeReport:
    lower = limits.lower_is_better if limits else spec.lower_is_better

    def beats(threshold: float | None, strict: bool = False) -> bool:
        if value is None or threshold is None:
            return False
        if strict:
            return value < threshold if lower else value > threshold
        return value <= threshold if lower else value >= threshold

    gold = beats(limits and limits.gold)
    silver = not gold and beats(limits and limits.silver)
    bronze = not gold and not silver and beats(limits and limits.bronze)
    return GradeReport(
        competition_id=spec.id, score=value,
        gold_threshold=limits and limits.gold, silver_threshold=limits and limits.silver,
        bronze_threshold=limits and limits.bronze, median_threshold=limits and limits.median,
        any_medal=gold or silver or bronze, gold_medal=gold, silver_medal=silver, bronze_medal=bronze,
        above_median=beats(limits and limits.median, strict=True), submission_exists=exists,
        valid_submission=value is not None, is_lower_better=lower,
        created_at=dt.datetime.now(dt.timezone.utc).isoformat(), submission_path=str(path),
        metric=spec.metric, error=error)
