"""Correlations of predicted values with the truth: Spearman's rank correlation of each target column, averaged
over the columns, and Pearson's correlation of one column.

A correlation with a constant column is undefined. The graders give NaN there (scipy's value), which poisons a
mean of columns: `strict_*` score as they do. Cross-validation counts a constant prediction as ranking nothing (0),
which is what the honest prior is worth, and leaves out a column whose truth is constant on the rows scored (a
fold with one value has nothing to rank). The writer never submits a constant column (`varied`).
"""
from __future__ import annotations

import numpy as np

CORRELATIONS = ("mean_column_spearman", "pearson")  # the metrics (runner.common.metrics) of this module
TIE_SPREAD = 1e-6  # of a constant column's scale: its rows told apart by their order, nothing more


def _matrix(values: np.ndarray) -> np.ndarray:
    return np.atleast_2d(np.asarray(values, dtype=np.float64).T).T


def _column_pearson(y: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Pearson's r of each column of `pred` with the same column of `y`; NaN where either side is constant."""
    a, b = y - y.mean(axis=0), pred - pred.mean(axis=0)
    scale = np.sqrt((a * a).sum(axis=0) * (b * b).sum(axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (a * b).sum(axis=0) / scale
    constant = (np.ptp(y, axis=0) == 0) | (np.ptp(pred, axis=0) == 0)
    return np.where(constant, np.nan, np.clip(r, -1.0, 1.0))


def column_spearman(y: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Spearman's rho of each column: Pearson's r of the average ranks (ties share their rank, as scipy's)."""
    from scipy.stats import rankdata

    y, pred = _matrix(y), _matrix(pred)
    return _column_pearson(rankdata(y, axis=0), rankdata(pred, axis=0))


def _lenient(r: np.ndarray, y: np.ndarray) -> float:
    """The mean over the columns whose truth varies, a constant prediction's column counting 0."""
    varies = np.ptp(y, axis=0) > 0
    return float(np.mean(np.nan_to_num(r[varies], nan=0.0))) if varies.any() else 0.0


def mean_column_spearman(y: np.ndarray, pred: np.ndarray) -> float:
    """Cross-validation's mean column Spearman (see the module docstring)."""
    return _lenient(column_spearman(y, pred), _matrix(y))


def strict_mean_column_spearman(y: np.ndarray, pred: np.ndarray) -> float:
    """The grader's: the plain mean of the columns' rho, NaN when any column's is."""
    return float(np.mean(column_spearman(y, pred)))


def pearson(y: np.ndarray, pred: np.ndarray) -> float:
    """Cross-validation's Pearson's r of the first column (0 for a constant prediction)."""
    y, pred = _matrix(y)[:, :1], _matrix(pred)[:, :1]
    return _lenient(_column_pearson(y, pred), y)


def strict_pearson(y: np.ndarray, pred: np.ndarray) -> float:
    """The grader's Pearson's r: NaN when either side is constant."""
    return float(_column_pearson(_matrix(y)[:, :1], _matrix(pred)[:, :1])[0])


def varied(values: np.ndarray) -> np.ndarray:
    """The values with each constant column spread by a hair down the rows (TIE_SPREAD of its scale), so that a
    correlation with it is defined (about 0, as nothing orders the rows) where the grader's would be NaN."""
    values = _matrix(values).copy()
    if len(values) < 2:
        return values
    for j in np.flatnonzero(np.ptp(values, axis=0) == 0):
        values[:, j] += np.linspace(0.0, TIE_SPREAD * max(1.0, abs(values[0, j])), len(values))
    return values
