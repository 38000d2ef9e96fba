"""Competition metrics over arrays, shared by cross-validation and grading.

`y` is the truth: class indices (n,) for classification, values (n, t) for regression and multi-label (0/1).
`pred` is what an engine outputs: class probabilities (n, k) for classification, values (n, t) for regression.
Quadratic weighted kappa scores ordinal classes 0..k-1 by the expected grade of the probabilities, cut at
thresholds (halfway between grades unless tuned on out-of-fold predictions: `fit_grade_thresholds`). ROC AUC over
several 0/1 labels is pooled over every (row, label) pair, as mlsp-2013-birds is graded.
"""
from __future__ import annotations

import numpy as np

# every metric a spec may name, and which way it runs
LOWER_IS_BETTER = {"log_loss": True, "rmsle": True, "rmse": True, "mae": True, "roc_auc": False,
                   "mean_column_roc_auc": False, "accuracy": False, "qwk": False}
THRESHOLD_ROUNDS = 3  # passes over the kappa cuts; a third rarely moves one


def _sk():
    """scikit-learn's metrics, imported where first scored: a command or run that never scores (a run ending at
    its input's error, `runner plan`) does not pay its second of imports (scipy.stats among them)."""
    from sklearn import metrics

    return metrics


def _one_hot(y: np.ndarray, k: int) -> np.ndarray:
    return np.eye(k)[y.astype(int)]


def _rmsle(y: np.ndarray, pred: np.ndarray) -> float:
    y, pred = np.atleast_2d(y.T).T, np.atleast_2d(pred.T).T
    return float(np.mean([_sk().root_mean_squared_log_error(y[:, j], np.clip(pred[:, j], 0, None))
                          for j in range(y.shape[1])]))


def _mean_column_auc(y_onehot: np.ndarray, pred: np.ndarray) -> float:
    return float(np.mean([_sk().roc_auc_score(y_onehot[:, j], pred[:, j]) for j in range(pred.shape[1])]))


def _label_matrix(y: np.ndarray, k: int) -> np.ndarray:
    """The 0/1 matrix of a multi-label truth (already one) or of class indices."""
    return y if y.ndim == 2 else _one_hot(y, k)


def grades(pred: np.ndarray, thresholds=None) -> np.ndarray:
    """Integer grades 0..k-1 from class probabilities: the expected grade cut at `thresholds` (k-1 rising cuts)."""
    k = pred.shape[1]
    cuts = np.arange(k - 1) + 0.5 if thresholds is None else np.sort(np.asarray(thresholds, dtype=np.float64))
    return _cut(pred @ np.arange(k), cuts)


def _cut(expected: np.ndarray, cuts) -> np.ndarray:
    """The grade of each expected grade: how many of the rising cuts it reaches."""
    return np.searchsorted(cuts, expected, side="right")


def qwk(y: np.ndarray, labels: np.ndarray) -> float:
    return float(_sk().cohen_kappa_score(y.astype(int), labels.astype(int), weights="quadratic"))


def fit_grade_thresholds(y: np.ndarray, pred: np.ndarray) -> tuple[float, ...]:
    """Cuts of the expected grade that maximise the kappa of out-of-fold predictions: one cut at a time over the
    midpoints of the sorted expected grades, a few rounds, starting halfway between grades."""
    k = pred.shape[1]
    expected = pred @ np.arange(k)
    cuts = list(np.arange(k - 1) + 0.5)
    candidates = np.unique(np.quantile(expected, np.linspace(0, 1, 101)))
    for _ in range(THRESHOLD_ROUNDS):
        for j in range(k - 1):
            low = cuts[j - 1] if j else -np.inf
            high = cuts[j + 1] if j + 1 < k - 1 else np.inf
            options = [c for c in candidates if low <= c <= high] + [cuts[j]]
            cuts[j] = max(options, key=lambda c: qwk(y, _cut(expected, cuts[:j] + [c] + cuts[j + 1:])))
    return tuple(float(c) for c in cuts)


def score(metric: str, y: np.ndarray, pred: np.ndarray) -> float:
    """The metric of engine output `pred` against truth `y` (see module docstring for shapes)."""
    if metric == "log_loss":
        return float(_sk().log_loss(y, pred, labels=np.arange(pred.shape[1])))
    if metric == "accuracy":
        return float(_sk().accuracy_score(y, pred.argmax(axis=1)))
    if metric == "roc_auc" and np.ndim(y) == 2:  # several 0/1 labels: one AUC pooled over every (row, label)
        return float(_sk().roc_auc_score(np.ravel(y), np.ravel(pred)))
    if metric == "roc_auc":
        return float(_sk().roc_auc_score(y, pred[:, 1] if pred.ndim == 2 else pred))
    if metric == "mean_column_roc_auc":
        return _mean_column_auc(_label_matrix(y, pred.shape[1]), pred)
    if metric == "qwk":
        return qwk(y, grades(pred))
    if metric == "rmsle":
        return _rmsle(y, pred)
    if metric == "rmse":
        return float(np.sqrt(_sk().mean_squared_error(y, pred)))
    if metric == "mae":
        return float(_sk().mean_absolute_error(y, pred))
    raise KeyError(f"unknown metric {metric!r}")


def better(metric: str, a: float, b: float) -> bool:
    """True when score a is strictly better than score b."""
    return a < b if LOWER_IS_BETTER[metric] else a > b


# --- the same metrics without scikit-learn's input checks, for the blend's many evaluations -------------------

def _fast_auc(y: np.ndarray, p: np.ndarray) -> float:
    """ROC AUC from average ranks (ties share their rank, as scikit-learn counts them)."""
    from scipy.stats import rankdata

    positive = y.astype(bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    ranks = rankdata(p)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def fast_score(metric: str, y: np.ndarray, pred: np.ndarray) -> float:
    """`score` for arrays already in engine-output form (tested equal to it); falls back to `score` for metrics
    without a fast form."""
    if metric == "log_loss":
        eps = np.finfo(pred.dtype).eps
        return float(-np.mean(np.log(np.clip(pred[np.arange(len(y)), y.astype(int)], eps, 1 - eps))))
    if metric == "accuracy":
        return float(np.mean(pred.argmax(axis=1) == y))
    if metric == "roc_auc" and y.ndim == 2:
        return _fast_auc(y.ravel(), pred.ravel())
    if metric == "roc_auc":
        return _fast_auc(y, pred[:, 1] if pred.ndim == 2 else pred)
    if metric == "mean_column_roc_auc":
        onehot = _label_matrix(y, pred.shape[1])
        return float(np.mean([_fast_auc(onehot[:, j], pred[:, j]) for j in range(pred.shape[1])]))
    if metric == "rmse":
        return float(np.sqrt(np.mean((np.atleast_2d(y.T).T - pred) ** 2)))
    if metric == "mae":
        return float(np.mean(np.abs(np.atleast_2d(y.T).T - pred)))
    if metric == "rmsle":
        y2, p2 = np.atleast_2d(y.T).T, np.clip(pred, 0, None)
        return float(np.mean(np.sqrt(np.mean((np.log1p(y2) - np.log1p(p2)) ** 2, axis=0))))
    return score(metric, y, pred)
