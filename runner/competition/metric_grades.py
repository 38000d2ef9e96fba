"""Grading where the metric, not the submission's shape, says how a file is read: correlations of values (every
column must vary), toxicity decisions weighed by identity subgroups, spans and texts as strings, orderings of
items, and answers found in documents. Each scorer takes the spec, the submission as read, and both aligned row
for row (runner.competition.grade), checks what that metric's grader checks (InvalidSubmissionError naming it)
and gives the rows' truths and predictions beside the grader's function of them.

Also the answers themselves where they are no CSV: JSON Lines records, and Natural Questions' annotations as the
rows their submission has (`<example_id>_long`, `<example_id>_short`, each with its valid answers).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from runner.common import answer_metrics, bias_metrics, correlation_metrics, order_metrics, string_metrics
from runner.common.errors import InputError, InvalidSubmissionError
from runner.competition import grade_rows
from runner.competition.spec import CompetitionSpec

ANSWERS_COLUMN = "answers"  # Natural Questions' rows: each row's valid answers
ANSWER_KINDS = ("_long", "_short")  # the rows of one example: its long answer (a paragraph), its short one


@dataclass(frozen=True)
class Rows:
    """The rows' truths and predictions (in the answers' order) and the grader's function of them."""

    truth: np.ndarray
    pred: np.ndarray
    scorer: Callable[[np.ndarray, np.ndarray], float]


def _objects(values) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def _column(spec: CompetitionSpec, sub: pd.DataFrame) -> str:
    target = spec.targets[0]
    if target not in sub.columns:
        raise InvalidSubmissionError(f"missing column {target!r}")
    return target


def _numbers(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """The columns as numbers, an empty cell NaN (a grader scores it NaN); text where numbers belong is invalid."""
    values = frame[columns].apply(pd.to_numeric, errors="coerce")
    text = values.isna() & frame[columns].notna()
    if text.any().any():
        column = values.columns[text.any()][0]
        raise InvalidSubmissionError(f"column {column!r}: {frame.loc[text[column], column].iloc[0]!r} is no number")
    return values.to_numpy(dtype=np.float64)


def correlations(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> Rows:
    """Values correlated with the truth, column by column; a constant column scores NaN, as the grader's does. The
    mean-of-columns grader takes exactly the id and the targets (no other column)."""
    columns = list(spec.targets)
    missing = [c for c in columns if c not in sub.columns]
    if missing:
        raise InvalidSubmissionError(f"missing column(s) {missing[:5]}")
    several = spec.metric == "mean_column_spearman"
    if several and len(submission.columns) != len(columns) + 1:
        raise InvalidSubmissionError(f"{len(submission.columns) - 1} columns beside the id, the grader takes exactly "
                                     f"the {len(columns)} targets")
    strict = correlation_metrics.strict_mean_column_spearman if several else correlation_metrics.strict_pearson
    return Rows(_numbers(ans, columns), _numbers(sub, columns), strict)


def toxicity_decisions(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame,
                       ans: pd.DataFrame) -> Rows:
    """Values cut at 0.5 into decisions, scored against the answers' toxicity and identity columns (the
    submission's column may also carry the answers' own name, as the grader allows)."""
    answer = (spec.answer_targets or spec.targets)[0]
    column = next((c for c in (spec.targets[0], answer) if c in sub.columns), None)
    if column is None:
        raise InvalidSubmissionError(f"missing column {spec.targets[0]!r}")
    missing = [c for c in (answer, *spec.subgroup_columns) if c not in ans.columns]
    if missing:
        raise InputError(f"the answers have no column(s) {missing}")
    truth = ans[[answer, *spec.subgroup_columns]].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
    return Rows(truth, _numbers(sub, [column])[:, 0], bias_metrics.bias_auc)


def _strings(column: pd.Series) -> np.ndarray:
    return _objects(column.astype(object).fillna("").astype(str))


def strings(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> Rows:
    """A string per row: a span's words (Jaccard) or a whole text (edit distance). The edit distance's grader
    fails on an empty cell (pandas reads it as NaN); the samples Jaccard's lower-cases every cell, which fails on a
    column pandas read as numbers."""
    target = _column(spec, sub)
    answer = (spec.answer_targets or spec.targets)[0]
    if spec.metric == "mean_levenshtein" and sub[target].isna().any():
        raise InvalidSubmissionError(f"column {target!r}: an empty text, which the grader's edit distance cannot read")
    if spec.metric == "word_jaccard_samples" and pd.api.types.is_numeric_dtype(sub[target]) \
            and sub[target].notna().any():
        raise InvalidSubmissionError(f"column {target!r} holds only numbers, which the grader cannot lower-case")
    return Rows(_strings(ans[answer]), _strings(sub[target]), STRING_SCORERS[spec.metric])


STRING_SCORERS = {"word_jaccard": string_metrics.word_jaccard,
                  "word_jaccard_samples": string_metrics.word_jaccard_samples,
                  "mean_levenshtein": string_metrics.mean_levenshtein}


def orderings(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> Rows:
    """A space-separated ordering of a row's items (an empty cell reads 'nan', one item, as the grader reads it)."""
    target = _column(spec, sub)
    answer = (spec.answer_targets or spec.targets)[0]
    split = lambda column: _objects(column.astype(str).str.split().tolist())  # noqa: E731
    return Rows(split(ans[answer]), split(sub[target]), order_metrics.kendall_tau)


def found_answers(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame, ans: pd.DataFrame) -> Rows:
    """Each row's answer (`start:end`, YES, NO or blank) against its valid answers; every cell must parse."""
    target = _column(spec, sub)
    pred = _strings(sub[target])
    for text in pred:
        answer_metrics.parsed(text)
    return Rows(ans[ANSWERS_COLUMN].to_numpy(), pred, answer_metrics.answered_share)


# the metrics whose grading reads the file its own way (the others are read by the submission's format)
METRIC_SCORERS: dict[str, Callable[..., Rows]] = {
    "mean_column_spearman": correlations, "pearson": correlations, "bias_auc": toxicity_decisions,
    "word_jaccard": strings, "word_jaccard_samples": strings, "mean_levenshtein": strings,
    "kendall_tau": orderings, "answer_micro_f1": found_answers,
    "probabilistic_f1": lambda *frames: Rows(*grade_rows.clipped_probabilities(*frames)),
    "mcc": lambda *frames: Rows(*grade_rows.decided_labels(*frames)),
    "laplace_log_likelihood": lambda *frames: Rows(*grade_rows.value_and_spread(*frames)),
}


# --- answers that are no CSV -----------------------------------------------------------------------------------------

def question_answer_rows(records: list[dict], id_column: str) -> pd.DataFrame:
    """Natural Questions' annotated examples as their submission's rows: `<id>_long` with its long answer's span
    (none where its start is -1), `<id>_short` with its short answers' spans and its YES/NO answer (where not
    NONE); the first annotation of each example."""
    ids, answers = [], []
    for record in records:
        annotation = record["annotations"][0]
        long_answer = annotation["long_answer"]
        short = [(int(s["start_token"]), int(s["end_token"])) for s in annotation["short_answers"]]
        if annotation["yes_no_answer"] != "NONE":
            short.append(annotation["yes_no_answer"])
        whole = [(int(long_answer["start_token"]), int(long_answer["end_token"]))] \
            if long_answer["start_token"] != -1 else []
        ids += [f"{record['example_id']}{kind}" for kind in ANSWER_KINDS]
        answers += [whole, short]
    return pd.DataFrame({id_column: ids, ANSWERS_COLUMN: _objects(answers)})


def read_answers(spec: CompetitionSpec, path: Path) -> pd.DataFrame:
    """The answers file: a CSV, or JSON Lines records (annotated questions become their submission's rows)."""
    if Path(path).suffix != ".jsonl":
        return pd.read_csv(path)
    try:
        with open(path, encoding="utf-8") as handle:
            records = [json.loads(line) for line in handle if line.strip()]
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read JSON Lines answers: {exc}") from exc
    if records and "annotations" in records[0]:
        return question_answer_rows(records, spec.id_column)
    return pd.DataFrame.from_records(records)
