"""Metrics of predicted distributions against distributions: the Kullback-Leibler divergence of each row's true
distribution (experts' votes shared out) from the predicted one, averaged over rows.

Engine output (a value per class that need not sum to one) is scored as the writer writes it: clipped at
`FLOOR` and shared out to sum to one. A row that already sums to one, as every row of a valid submission read back
does, is scored as it is, so grading a file and scoring what made it agree to the grader's last digit.
"""
from __future__ import annotations

import numpy as np

CLIP = 1e-15  # predictions clipped into [CLIP, 1 - CLIP], as Kaggle's KL metric clips them: no infinite loss
FLOOR = 1e-7  # a class's least share when engine output is made a distribution (runner.results.submission's EPS)
SUMS_TO_ONE = 1e-5  # a row within this of one is a distribution already (the grader's check rounds to 5 decimals)


def as_distributions(values: np.ndarray) -> np.ndarray:
    """Each row as a distribution: rows already summing to one stay as they are; others are clipped at FLOOR
    and divided by their sum."""
    values = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0)
    given = np.abs(values.sum(axis=1) - 1.0) <= SUMS_TO_ONE
    shared = np.clip(values, FLOOR, None)
    shared /= shared.sum(axis=1, keepdims=True)
    return np.where(given[:, None], values, shared)


def shares(counts: np.ndarray) -> np.ndarray:
    """Counts per class (votes) as each row's shares of them; a row without any stays zero."""
    counts = np.asarray(counts, dtype=np.float64)
    totals = counts.sum(axis=1, keepdims=True)
    return np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)


def kl_divergence(y: np.ndarray, pred: np.ndarray) -> float:
    """Mean over rows of sum_c y_c ln(y_c / q_c), the classes where y_c is 0 counting nothing; q is the prediction
    as a distribution (`as_distributions`) clipped into [CLIP, 1 - CLIP]."""
    truth = np.asarray(y, dtype=np.float64)
    q = np.clip(as_distributions(pred), CLIP, 1 - CLIP)
    terms = np.where(truth > 0, truth * np.log(np.where(truth > 0, truth, 1.0) / q), 0.0)
    return float(terms.sum(axis=1).mean())
