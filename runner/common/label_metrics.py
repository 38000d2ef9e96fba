"""Metrics of labels written as strings: a set of labels scored by F1 over every (row, label) pair, a ranked list
by its mean average precision over the first k. Each takes the arrays cross-validation has (0/1 label matrices or
class probabilities) and grading makes from the strings (runner.competition.grade), so both score alike.
"""
from __future__ import annotations

import numpy as np

LABEL_THRESHOLD = 0.5  # a label's probability from which it is in the set, until one is tuned on out-of-fold rows


def chosen(pred: np.ndarray, threshold: float | np.ndarray = LABEL_THRESHOLD) -> np.ndarray:
    """The 0/1 label matrix of probabilities (0/1 values stay as they are): each label from `threshold` on."""
    return (np.asarray(pred, dtype=np.float64) >= threshold).astype(np.int8)


def decided(pred: np.ndarray, threshold: float = LABEL_THRESHOLD) -> np.ndarray:
    """The sets a submission writes from probabilities: each label from `threshold` on, and the row's likeliest
    label at least (runner.results.submission); a 0/1 matrix (a submission read back) stays as it is."""
    pred = np.asarray(pred, dtype=np.float64)
    if np.isin(pred, (0.0, 1.0)).all():
        return pred.astype(np.int8)
    sets = chosen(pred, threshold)
    sets[np.arange(len(pred)), pred.argmax(axis=1)] = 1
    return sets


def micro_f1(y: np.ndarray, pred: np.ndarray) -> float:
    """F1 over every (row, label) pair of a 0/1 truth and a prediction (probabilities decided as a submission
    writes them: `decided`); 0 when neither holds a label, as scikit-learn's zero division gives."""
    truth, guess = np.asarray(y) > 0.5, decided(pred).astype(bool)
    true_positives = np.logical_and(truth, guess).sum()
    total = truth.sum() + guess.sum()
    return float(2 * true_positives / total) if total else 0.0


def top_k(pred: np.ndarray, k: int) -> np.ndarray:
    """The indices of each row's k likeliest classes, likeliest first (ties: the lower index first)."""
    order = np.argsort(-np.asarray(pred, dtype=np.float64), axis=1, kind="stable")
    return order[:, :k]


def average_precision_at_k(actual: set, ranked, k: int) -> float:
    """Precision at each rank that finds a label of `actual` for the first time, summed over the first k ranks, over
    the least of k and the labels there are; 0 for an empty `actual`."""
    if not actual:
        return 0.0
    hits, total, seen = 0, 0.0, set()
    for rank, label in enumerate(list(ranked)[:k]):
        if label in actual and label not in seen:
            hits += 1
            total += hits / (rank + 1)
        seen.add(label)
    return total / min(len(actual), k)


def mean_average_precision(actual: list[set], ranked: list, k: int) -> float:
    """MAP@k over rows: each row's set of true labels against its ranked list."""
    return float(np.mean([average_precision_at_k(a, r, k) for a, r in zip(actual, ranked)])) if actual else 0.0


def map_at_k(k: int):
    """MAP@k of class probabilities (n, classes) against class indices (n,): each row's k likeliest classes."""

    def score(y: np.ndarray, pred: np.ndarray) -> float:
        return mean_average_precision([{int(v)} for v in y], top_k(pred, k).tolist(), k)

    return score


THRESHOLDS = np.round(np.arange(0.05, 0.96, 0.05), 2)  # the set thresholds tried on out-of-fold rows


def tune_threshold(score, lower_is_better: bool, y: np.ndarray, pred: np.ndarray) -> tuple[float, float]:
    """(threshold, its score): the probability from which a label is in a row's set that `score`s best on these
    rows, each row keeping its likeliest label at least (as the writer does)."""
    best = (LABEL_THRESHOLD, np.inf if lower_is_better else -np.inf)
    direction = -1.0 if lower_is_better else 1.0
    for threshold in THRESHOLDS:
        value = score(y, decided(pred, threshold))
        if direction * value > direction * best[1]:
            best = (float(threshold), value)
    return best[0], float(best[1])
