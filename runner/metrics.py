"""Competition metrics over arrays, shared by cross-validation and grading.

`y` is the truth: class indices (n,) for classification, values (n, t) for regression.
`pred` is what an engine outputs: class probabilities (n, k) for classification, values (n, t) for regression.
"""
from __future__ import annotations

import numpy as np
from sklearn import metrics as skm

from runner.spec import LOWER_IS_BETTER


def _one_hot(y: np.ndarray, k: int) -> np.ndarray:
    return np.eye(k)[y.astype(int)]


def _rmsle(y: np.ndarray, pred: np.ndarray) -> float:
    y, pred = np.atleast_2d(y.T).T, np.atleast_2d(pred.T).T
    return float(np.mean([skm.root_mean_squared_log_error(y[:, j], np.clip(pred[:, j], 0, None))
                          for j in range(y.shape[1])]))


def _mean_column_auc(y_onehot: np.ndarray, pred: np.ndarray) -> float:
    return float(np.mean([skm.roc_auc_score(y_onehot[:, j], pred[:, j]) for j in range(pred.shape[1])]))


def score(metric: str, y: np.ndarray, pred: np.ndarray) -> float:
    """The metric of engine output `pred` against truth `y` (see module docstring for shapes)."""
    if metric == "log_loss":
        return float(skm.log_loss(y, pred, labels=np.arange(pred.shape[1])))
    if metric == "accuracy":
        return float(skm.accuracy_score(y, pred.argmax(axis=1)))
    if metric == "roc_auc":
        return float(skm.roc_auc_score(y, pred[:, 1] if pred.ndim == 2 else pred))
    if metric == "mean_column_roc_auc":
        return _mean_column_auc(_one_hot(y, pred.shape[1]), pred)
    if metric == "rmsle":
        return _rmsle(y, pred)
    if metric == "rmse":
        return float(np.sqrt(skm.mean_squared_error(y, pred)))
    if metric == "mae":
        return float(skm.mean_absolute_error(y, pred))
    raise KeyError(f"unknown metric {metric!r}")


def better(metric: str, a: float, b: float) -> bool:
    """True when score a is strictly better than score b."""
    return a < b if LOWER_IS_BETTER[metric] else a > b
