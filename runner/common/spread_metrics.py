"""Metrics of a value scored with the spread its submission states for it: the modified Laplace log-likelihood
(osic-pulmonary-fibrosis-progression's FVC and Confidence). Cross-validation has the values alone, (n, 1): their
spread is then the one constant that scores them best (`best_spread`), which is what the writer states for every
row; grading reads both columns, (n, 2). Both score alike."""
from __future__ import annotations

import numpy as np

LEAST_SPREAD = 70.0  # the grader raises a smaller stated spread to this: no row may claim more certainty
MOST_ERROR = 1000.0  # the grader caps each error at this: a wild miss costs no more than a large one


def _errors(y: np.ndarray, values: np.ndarray) -> np.ndarray:
    return np.minimum(np.abs(np.asarray(y, dtype=np.float64).reshape(len(y)) - values), MOST_ERROR)


def best_spread(y: np.ndarray, pred: np.ndarray) -> float:
    """The one spread that gives these values their best likelihood: sqrt(2) times their mean capped error (where
    the derivative of -sqrt(2) e / s - ln(sqrt(2) s) is 0), never under LEAST_SPREAD."""
    values = np.asarray(pred, dtype=np.float64).reshape(len(pred), -1)[:, 0]
    return float(max(LEAST_SPREAD, np.sqrt(2) * np.mean(_errors(y, values))))


def laplace_log_likelihood(y: np.ndarray, pred: np.ndarray) -> float:
    """Mean of -sqrt(2) * min(|error|, MOST_ERROR) / s - ln(sqrt(2) * s), s = max(spread, LEAST_SPREAD): the spread
    as given in a second column (a missing one counts as 0, as the grader fills it), else `best_spread`."""
    pred = np.asarray(pred, dtype=np.float64).reshape(len(pred), -1)
    values = pred[:, 0]
    if pred.shape[1] > 1:
        spread = np.maximum(np.nan_to_num(pred[:, 1], nan=0.0), LEAST_SPREAD)
    else:
        spread = np.full(len(values), best_spread(y, values))
    errors = _errors(y, values)
    return float(np.mean(-np.sqrt(2) * errors / spread - np.log(np.sqrt(2) * spread)))
