"""Competition metrics over arrays, shared by cross-validation and grading: each by its name in `METRICS`, with
the way it runs.

`y` is the truth: class indices (n,) for classification, values (n, t) for regression and multi-label (0/1).
`pred` is what an engine outputs: class probabilities (n, k) for classification, values (n, t) for regression.
Quadratic weighted kappa scores ordinal classes 0..k-1 by the expected grade of the probabilities, cut at
thresholds (halfway between grades unless tuned on out-of-fold predictions: `fit_grade_thresholds`). ROC AUC over
several 0/1 labels is pooled over every (row, label) pair, as mlsp-2013-birds is graded.

A metric of another family (sets of labels, rankings, strings) lives in a module named for what it scores and is
one line in `METRICS` here; grading turns a submission's strings into the same arrays
(runner.competition.grade).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from runner.common import (answer_metrics, bias_metrics, binary_metrics, box3d_metrics,
                           class_metrics, correlation_metrics, direction_metrics, distribution_metrics,
                           grouped_metrics, label_metrics, multilabel_metrics, order_metrics, ranking_metrics,
                           roc_metrics, sequence_metrics, spread_metrics, string_metrics)
from runner.common.mask_metrics import MASK_METRICS
from runner.common import box_rows, point_rows

THRESHOLD_ROUNDS = 3  # passes over the kappa cuts; a third rarely moves one


@dataclass(frozen=True)
class Metric:
    """A metric's direction and its function of (truth, engine output); `fast`: the same figure for the blend's
    many evaluations, without scikit-learn's input checks (None: `score` is fast enough). A `grouped` metric
    scores each group of rows apart and averages them: its functions take each row's group as a third argument
    (runner.common.grouped_metrics)."""

    lower_is_better: bool
    score: Callable[..., float]
    fast: Callable[..., float] | None = None
    grouped: bool = False


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


def _log_loss(y: np.ndarray, pred: np.ndarray) -> float:
    return float(_sk().log_loss(y, pred, labels=np.arange(pred.shape[1])))


def _accuracy(y: np.ndarray, pred: np.ndarray) -> float:
    return float(_sk().accuracy_score(y, pred.argmax(axis=1)))


def _roc_auc(y: np.ndarray, pred: np.ndarray) -> float:
    if np.ndim(y) == 2:  # several 0/1 labels: one AUC pooled over every (row, label)
        return float(_sk().roc_auc_score(np.ravel(y), np.ravel(pred)))
    return float(_sk().roc_auc_score(y, pred[:, 1] if pred.ndim == 2 else pred))


def _rmse(y: np.ndarray, pred: np.ndarray) -> float:
    return float(np.sqrt(_sk().mean_squared_error(y, pred)))


def _mae(y: np.ndarray, pred: np.ndarray) -> float:
    return float(_sk().mean_absolute_error(y, pred))


def _called(function: Callable[..., float], metric: Metric, y, pred, groups) -> float:
    """`function` of the truth and the prediction, and of each row's group where the metric scores groups apart
    (without them: every row in one group)."""
    if not metric.grouped:
        return function(y, pred)
    return function(y, pred, np.zeros(len(y), dtype=np.int8) if groups is None else groups)


def score(metric: str, y: np.ndarray, pred: np.ndarray, groups: np.ndarray | None = None) -> float:
    """The metric of engine output `pred` against truth `y` (see module docstring for shapes); `groups`: each
    row's group, for a metric that scores groups apart (ignored by the others)."""
    if metric not in METRICS:
        raise KeyError(f"unknown metric {metric!r}")
    return _called(METRICS[metric].score, METRICS[metric], y, pred, groups)


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


def _fast_log_loss(y: np.ndarray, pred: np.ndarray) -> float:
    eps = np.finfo(pred.dtype).eps
    return float(-np.mean(np.log(np.clip(pred[np.arange(len(y)), y.astype(int)], eps, 1 - eps))))


def _fast_roc_auc(y: np.ndarray, pred: np.ndarray) -> float:
    if y.ndim == 2:
        return _fast_auc(y.ravel(), pred.ravel())
    return _fast_auc(y, pred[:, 1] if pred.ndim == 2 else pred)


def _fast_mean_column_auc(y: np.ndarray, pred: np.ndarray) -> float:
    onehot = _label_matrix(y, pred.shape[1])
    return float(np.mean([_fast_auc(onehot[:, j], pred[:, j]) for j in range(pred.shape[1])]))


def _fast_rmse(y: np.ndarray, pred: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.atleast_2d(y.T).T - pred) ** 2)))


def _fast_mae(y: np.ndarray, pred: np.ndarray) -> float:
    return float(np.mean(np.abs(np.atleast_2d(y.T).T - pred)))


def _fast_rmsle(y: np.ndarray, pred: np.ndarray) -> float:
    y2, p2 = np.atleast_2d(y.T).T, np.clip(pred, 0, None)
    return float(np.mean(np.sqrt(np.mean((np.log1p(y2) - np.log1p(p2)) ** 2, axis=0))))


def fast_score(metric: str, y: np.ndarray, pred: np.ndarray, groups: np.ndarray | None = None) -> float:
    """`score` for arrays already in engine-output form (tested equal to it): the metric's fast form where it has
    one."""
    if metric not in METRICS:
        raise KeyError(f"unknown metric {metric!r}")
    chosen = METRICS[metric]
    return _called(chosen.fast or chosen.score, chosen, y, pred, groups)


# every metric a spec may name: its direction and its functions
METRICS: dict[str, Metric] = {
    "log_loss": Metric(True, _log_loss, _fast_log_loss),
    "rmsle": Metric(True, _rmsle, _fast_rmsle),
    "rmse": Metric(True, _rmse, _fast_rmse),
    "mae": Metric(True, _mae, _fast_mae),
    "roc_auc": Metric(False, _roc_auc, _fast_roc_auc),
    "mean_column_roc_auc": Metric(False, lambda y, p: _mean_column_auc(_label_matrix(y, p.shape[1]), p),
                                  _fast_mean_column_auc),
    "accuracy": Metric(False, _accuracy, lambda y, p: float(np.mean(p.argmax(axis=1) == y))),
    "qwk": Metric(False, lambda y, p: qwk(y, grades(p))),
    "micro_f1": Metric(False, label_metrics.micro_f1),  # a set of labels per row (0/1 or probabilities cut)
    "map_at_5": Metric(False, label_metrics.map_at_k(5)),  # the 5 likeliest labels, ranked, against the truth
    "probabilistic_f1": Metric(False, binary_metrics.probabilistic_f1),  # probabilities counted as shares of a yes
    "mcc": Metric(False, binary_metrics.mcc, binary_metrics.fast_mcc),  # 0/1 labels (the likelier class)
    "weighted_multilabel_log_loss": Metric(True, multilabel_metrics.weighted_log_loss),  # an any-label, then parts
    "laplace_log_likelihood": Metric(False, spread_metrics.laplace_log_likelihood),  # a value and its spread
    "map_at_12": Metric(False, label_metrics.map_at_k(12)),  # the 12 likeliest (items bought next), ranked
    "group_log_mae": Metric(True, grouped_metrics.group_log_mae, grouped=True),  # log MAE of each group, averaged
    "mcrmse": Metric(True, grouped_metrics.mcrmse),  # the RMSE of each column, averaged
    # the haversine metres of each group (a trip), its median and 95th percentile averaged, then the groups'
    "track_error": Metric(True, grouped_metrics.track_error, grouped=True),
    # Levenshtein distances between ordered label strings over the true labels' count (gestures)
    "sequence_edit_rate": Metric(True, sequence_metrics.edit_rate),
    "box3d_map": Metric(False, box3d_metrics.box3d_map),  # 3-D boxes' mAP over IoU 0.5 to 0.95, a sample's mean
    # masks: sequences of boolean masks (a series' volume of class masks for dice_hausdorff)
    "mask_iou_sweep": Metric(False, MASK_METRICS["mask_iou_sweep"]),
    "mean_dice": Metric(False, MASK_METRICS["mean_dice"]),
    "global_dice": Metric(False, MASK_METRICS["global_dice"]),
    "pixel_f05": Metric(False, MASK_METRICS["pixel_f05"]),
    "dice_hausdorff": Metric(False, MASK_METRICS["dice_hausdorff"]),
    # boxes and points: each row's list of labelled boxes (points) on both sides
    "coco_map_iou40": Metric(False, box_rows.coco_map_rows),  # rows of boxes (engines') or lists of boxes
    "class_ap_iou50": Metric(False, box_rows.class_ap_rows),  # rows of boxes (engines') or lists of boxes
    "point_in_box_f1": Metric(False, point_rows.point_f1_rows),  # rows of points (the engine's) or lists
    "mean_column_spearman": Metric(False, correlation_metrics.mean_column_spearman),  # each target's ranks
    "pearson": Metric(False, correlation_metrics.pearson),  # one target's values
    "bias_auc": Metric(False, bias_metrics.decided_auc),  # toxicity decisions, weighed by identity subgroups
    "word_jaccard": Metric(False, string_metrics.word_jaccard),  # a span's words; both empty: invalid
    "word_jaccard_samples": Metric(False, string_metrics.word_jaccard_samples),  # a span's words; both empty: 0
    "mean_levenshtein": Metric(True, string_metrics.mean_levenshtein),  # a text's character edits
    "kendall_tau": Metric(False, order_metrics.kendall_tau),  # orderings of items, pooled
    "answer_micro_f1": Metric(False, answer_metrics.answered_share),  # an answer found or rightly left blank
    # MAE rounded to a whole number (Python's round, half to even), as some graders report it
    "mae_integer": Metric(True, lambda y, p: float(round(_mae(y, p))), lambda y, p: float(round(_fast_mae(y, p)))),
    # each row's labels ranked; every (row, true label) weighs alike
    "lwlrap": Metric(False, ranking_metrics.lwlrap, ranking_metrics.fast_lwlrap),
    "kl_divergence": Metric(True, distribution_metrics.kl_divergence),  # distributions (votes shared out), per row
    "mean_angular_error": Metric(True, direction_metrics.mean_angular_error),  # radians between 3-D directions
    # F1 of each label, averaged over the labels either side names
    "macro_f1": Metric(False, class_metrics.macro_f1, class_metrics.fast_macro_f1),
    "top1_error": Metric(True, class_metrics.top1_error),  # the share of rows whose label is wrong
    "weighted_auc": Metric(False, roc_metrics.banded_auc),  # ROC area, TPR 0-0.4 weighted twice (alaska2)
}
LOWER_IS_BETTER = {name: metric.lower_is_better for name, metric in METRICS.items()}
