"""Metrics of one yes-or-no answer per row that reward decisions more than ranks: probabilistic F1 (each row's
probability counted as that much of a positive: rsna-breast-cancer-detection) and the Matthews correlation of 0/1
labels (nfl-player-contact-detection). Each takes what cross-validation has (class indices against class
probabilities, (n, 2)) and what grading reads from a submission (the truth against one column of probabilities or
labels) alike; `tune_decision` finds the probability from which a row is written as a yes, on out-of-fold rows.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

QUANTILES = np.linspace(0.0, 1.0, 201)  # candidate cut-offs: the predictions' own quantiles, half a percent apart
DEFAULT_CUT = 0.5  # a yes from this probability on, where nothing was tuned


def positive_probability(pred: np.ndarray) -> np.ndarray:
    """The positive class's probability of each row: the second column of class probabilities (n, 2), or the
    column itself (a submission's probabilities or 0/1 labels, (n,) or (n, 1))."""
    pred = np.asarray(pred, dtype=np.float64)
    if pred.ndim == 2 and pred.shape[1] == 2:
        return pred[:, 1]
    return pred.reshape(len(pred))


def probabilistic_f1(y: np.ndarray, pred: np.ndarray) -> float:
    """F1 of probabilities: each clipped into [0, 1], their sum over the positive rows the true positives, over the
    negative rows the false positives; 0 where precision or recall is 0, and where a missing probability leaves
    them undefined (MLE-bench's grader). No positive row leaves recall undefined: a ValueError."""
    truth = np.asarray(y).reshape(len(y)).astype(bool)
    if not truth.any():
        raise ValueError("probabilistic F1 needs a positive row: recall is undefined without one")
    p = np.clip(positive_probability(pred), 0.0, 1.0)
    true_positive, false_positive = p[truth].sum(), p[~truth].sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = true_positive / (true_positive + false_positive)
    recall = true_positive / truth.sum()
    if not (precision > 0 and recall > 0):  # also NaN: a missing probability poisons both sums
        return 0.0
    return float(2 * precision * recall / (precision + recall))


def labels_of(pred: np.ndarray) -> np.ndarray:
    """0/1 labels: the likelier class of class probabilities (n, 2), or the labels as given."""
    pred = np.asarray(pred, dtype=np.float64)
    if pred.ndim == 2 and pred.shape[1] == 2:
        return pred.argmax(axis=1)
    return pred.reshape(len(pred))


def mcc(y: np.ndarray, pred: np.ndarray) -> float:
    """The Matthews correlation of 0/1 labels (0 when either side holds one label only, as scikit-learn gives)."""
    from sklearn.metrics import matthews_corrcoef

    return float(matthews_corrcoef(np.asarray(y).reshape(len(y)).astype(int), labels_of(pred).astype(int)))


def fast_mcc(y: np.ndarray, pred: np.ndarray) -> float:
    """`mcc` of 0/1 labels from the confusion counts (the blend's many evaluations; scikit-learn's checks cost
    more than the counting)."""
    truth, guess = np.asarray(y).reshape(len(y)) > 0.5, labels_of(pred) > 0.5
    tp, fp = float(np.sum(truth & guess)), float(np.sum(~truth & guess))
    fn, tn = float(np.sum(truth & ~guess)), float(np.sum(~truth & ~guess))
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return float((tp * tn - fp * fn) / denominator) if denominator else 0.0


def decide(p: np.ndarray, cut: float) -> np.ndarray:
    """0/1 decisions: a yes where the positive probability reaches `cut`."""
    return (positive_probability(p) >= cut).astype(np.int64)


def tune_decision(score: Callable[[np.ndarray, np.ndarray], float], lower_is_better: bool, y: np.ndarray,
                  pred: np.ndarray) -> tuple[float, float]:
    """(cut, its score): the probability from which a row is decided a yes that `score`s best on these rows, among
    the predictions' own quantiles; DEFAULT_CUT unless one does strictly better (a constant prediction's tie
    between all yes and all no stays the likelier class)."""
    p = positive_probability(pred)
    direction = -1.0 if lower_is_better else 1.0
    best = (DEFAULT_CUT, -np.inf)
    for cut in [DEFAULT_CUT, *np.unique(np.quantile(p, QUANTILES))]:
        try:
            value = direction * score(y, decide(p, cut))
        except ValueError:  # a metric undefined on these rows (no positive)
            continue
        if value > best[1]:
            best = (float(cut), value)
    return best[0], float(direction * best[1])
