"""Grading a submission against the private answers, with MLE-bench's report fields and medal positions."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
from pydantic import PlainSerializer

from runner.common.errors import InputError, InvalidSubmissionError
from runner.common.saved import Saved
from runner.competition.scoring import scored
from runner.competition.metric_grades import read_answers
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


def grade(submission_path: Path, spec: CompetitionSpec, answers_dir: Path,
          leaderboard: Path | None = None) -> GradeReport:
    """Score a submission file. An invalid submission gets score None and the reason in `error`. Medals from
    `leaderboard` where given, else from the spec's medal lines (MLE-bench's leaderboard, read once)."""
    answers = read_answers(spec, _answers_path(spec, answers_dir))
    limits = read_leaderboard(leaderboard) if leaderboard else spec_thresholds(spec)
    exists = submission_path.is_file() and submission_path.suffix == ".csv"
    value, error = None, None
    if not exists:
        error = f"{submission_path}: no submission"
    else:
        try:
            value = round(scored(spec, pd.read_csv(submission_path), answers).score(), 5)
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
    mine, other = scored(spec, ours, answers), scored(spec, theirs, answers)  # invalid: raises here
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
    answers = read_answers(spec, _answers_path(spec, answers_dir))
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
