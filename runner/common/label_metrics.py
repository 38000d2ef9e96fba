"""Metrics of labels written as strings: a set of labels scored by F1 over every (row, label) pair, a ranked list
by its mean average precision over the first k. Each takes the arrays cross-validation has (0/1 label matrices or
class probabilities) and grading makes from the strings (runner.competition.grade), so both score alike.

What the writer tunes on out-of-fold rows lives here too: the probability from which a label is in a set, and
where a ranked list puts the label of a new item (an item none of the training labels names: whale-categorization's
`new_whale`).
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


PRIOR_ROWS = 20_000  # training rows a constant set's threshold is tuned on: label shares hardly move past them


def constant_set_threshold(score, lower_is_better: bool, y: np.ndarray, shares: np.ndarray) -> float:
    """The threshold from which a label's share of the training rows puts it in the one set every row gets (the
    honest prior of a set of labels: the labels frequent enough to pay), tuned for `score` on up to PRIOR_ROWS
    training rows."""
    rows = np.random.default_rng(0).permutation(len(y))[:PRIOR_ROWS]
    return tune_threshold(score, lower_is_better, y[rows], np.tile(shares, (len(rows), 1)))[0]


def stand_in_truth(y: np.ndarray, new: int) -> np.ndarray:
    """The class indices an out-of-fold row would have in a test set of unseen items: a row whose label no other
    training row holds is a new item to any model that did not train on it (`new`, the new label's index)."""
    y = np.asarray(y).astype(int)
    counts = np.bincount(y)
    return np.where(counts[y] == 1, new, y)


def new_label_ranks(pred: np.ndarray, new: int, score: float, k: int) -> np.ndarray:
    """Where the new label lands (0-based, k: not among the first k) when it is given `score` in every row: after
    the other labels scored higher, and after those scored the same with a lower index (as `top_k` breaks ties)."""
    others = np.delete(np.asarray(pred, dtype=np.float64), new, axis=1)
    below = np.arange(others.shape[1]) < new  # the labels before the new one in index order
    ahead = (others > score) | ((others == score) & below)
    return np.minimum(ahead.sum(axis=1), k)


def _ap_with_new_label(truth: np.ndarray, other_rank: np.ndarray, new_rank: np.ndarray, new: int,
                       k: int) -> float:
    """MAP@k of single true labels when the new label is put at `new_rank` among the other labels ranked by
    `other_rank` (the truth's 0-based rank among them; k or more: beyond the list)."""
    rank = np.where(truth == new, new_rank, np.where(other_rank < new_rank, other_rank, other_rank + 1))
    return float(np.where(rank < k, 1.0 / (rank + 1), 0.0).mean())


NEW_LABEL_QUANTILES = np.linspace(0.0, 1.0, 21)  # of the rows' k-th likeliest other label: the scores tried


def _rank_of(pred: np.ndarray, label: np.ndarray) -> np.ndarray:
    """Each row's 0-based rank of its `label` in `pred` as `top_k` ranks: the labels scored higher, and those
    scored the same with a lower index, go ahead of it."""
    own = pred[np.arange(len(pred)), label][:, None]
    before = np.arange(pred.shape[1])[None, :] < label[:, None]
    return ((pred > own) | ((pred == own) & before)).sum(axis=1)


def tune_new_label(y: np.ndarray, pred: np.ndarray, new: int, k: int) -> tuple[float, float]:
    """(score, its MAP@k): the probability given to the new label in every row (its own replaced) that ranks it
    best on out-of-fold rows, each row whose label no other training row holds counted as a new item
    (`stand_in_truth`). Candidate scores are 0 (never ahead of a label), 1 (first in every list) and the
    quantiles of each row's likeliest and k-th likeliest other label between them."""
    pred = np.asarray(pred, dtype=np.float64)
    truth = stand_in_truth(y, new)
    others = np.delete(pred, new, axis=1)
    known = truth != new
    other_rank = np.full(len(pred), k, dtype=np.int64)
    shifted = np.where(truth > new, truth - 1, truth)  # a label's column among the others
    other_rank[known] = _rank_of(others[known], shifted[known])
    kth = min(k, others.shape[1])
    top = -np.partition(-others, kth - 1, axis=1)[:, :kth]
    edges = np.concatenate([top.max(axis=1), top.min(axis=1)])
    candidates = np.unique(np.concatenate([[0.0, 1.0], np.quantile(edges, NEW_LABEL_QUANTILES)]))
    best = (1.0, -1.0)
    for score in candidates:
        value = _ap_with_new_label(truth, other_rank, new_label_ranks(pred, new, score, k), new, k)
        if value > best[1]:
            best = (float(score), value)
    return best
