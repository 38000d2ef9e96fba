"""Submissions whose rows are vectors: a score per label in the answers' label columns, a distribution over
classes, a direction as two angles. Each is checked as MLE-bench's grader checks it (InvalidSubmissionError
naming what is wrong) and turned into the (truth, prediction) arrays its metric scores
(runner.competition.grade's SCORERS wraps them); the submission and the answers come aligned row for row.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from runner.common.distribution_metrics import shares
from runner.common.errors import InvalidSubmissionError
from runner.competition.spec import CompetitionSpec


def numbers(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """The columns as float64, or an InvalidSubmissionError naming a missing, empty or non-numeric one."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InvalidSubmissionError(f"missing column(s) {missing[:5]}")
    values = frame[columns].apply(pd.to_numeric, errors="coerce")
    if values.isna().any().any():
        raise InvalidSubmissionError(f"column {values.columns[values.isna().any()][0]!r}: empty or non-numeric")
    return values.to_numpy(dtype=np.float64)


def label_columns(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame,
                  ans: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """A score per label in the answers' label columns, in their order after the id (as freesound's grader reads
    them: any numbers, only their order within a row counts)."""
    columns = [c for c in ans.columns if c != spec.id_column]
    if list(submission.columns) != [spec.id_column, *columns]:
        raise InvalidSubmissionError(f"columns must be {spec.id_column!r} then the {len(columns)} labels in the "
                                     "answers' order")
    return numbers(ans, columns), numbers(sub, columns)


def distribution(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame,
                 ans: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each row's predicted distribution against the answers' counts shared out. Its columns must sum to 1 to 5
    decimals; any other column besides the id is read as a probability too (Kaggle's KL metric checks every
    column): numbers in [0, 1] that keep each row's sum at 1."""
    columns = list(spec.targets)
    pred = numbers(sub, columns)
    every = numbers(sub, [c for c in sub.columns if c != spec.id_column])
    if (every < 0).any() or (every > 1).any():
        raise InvalidSubmissionError("probabilities outside [0, 1]")
    if (np.round(pred.sum(axis=1), 5) != 1).any():
        raise InvalidSubmissionError("probability rows do not sum to 1 (to 5 decimals)")
    if not np.allclose(every.sum(axis=1), 1):
        raise InvalidSubmissionError("an extra column moves the rows' sums away from 1")
    return shares(numbers(ans, columns)), pred


def direction(spec: CompetitionSpec, submission: pd.DataFrame, sub: pd.DataFrame,
              ans: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Azimuth and zenith (radians): columns of numbers (as the file reads them), finite, and exactly the id's
    and theirs."""
    columns = list(spec.targets)
    if set(submission.columns) != {spec.id_column, *columns}:
        raise InvalidSubmissionError(f"columns must be exactly {[spec.id_column, *columns]}")
    for column in columns:
        if not pd.api.types.is_numeric_dtype(sub[column]) or pd.api.types.is_bool_dtype(sub[column]):
            raise InvalidSubmissionError(f"column {column!r} is not numeric")
    pred = sub[columns].to_numpy(dtype=np.float64)
    if not np.isfinite(pred).all():
        raise InvalidSubmissionError("non-finite or empty angles")
    return numbers(ans, columns), pred
