"""Metrics of how each row ranks its labels: label-weighted label-ranking average precision (lwlrap), where every
(row, true label) pair weighs the same. It takes one score per label and row, a 0/1 truth of the same shape, and
reads only the order of the scores within a row (ties count against the true label, as scikit-learn's label
ranking average precision counts them), so engine output and a submission read back score alike.
"""
from __future__ import annotations

import numpy as np

CHUNK_CELLS = 2**24  # rows x labels x labels compared at once by the fast form: 16 MB of booleans


def lwlrap(y: np.ndarray, scores: np.ndarray) -> float:
    """Label-weighted label-ranking average precision of (rows x labels) `scores` against a 0/1 truth: each row's
    label-ranking average precision weighted by its count of true labels; rows with no true label are left out
    (they have no ranking to score)."""
    from sklearn.metrics import label_ranking_average_precision_score

    truth = np.asarray(y) > 0
    weights = truth.sum(axis=1)
    rows = np.flatnonzero(weights > 0)
    if not len(rows):
        raise ValueError("lwlrap: no row holds a true label")
    return float(label_ranking_average_precision_score(truth[rows], np.asarray(scores, dtype=np.float64)[rows],
                                                       sample_weight=weights[rows]))


def fast_lwlrap(y: np.ndarray, scores: np.ndarray) -> float:
    """`lwlrap` without scikit-learn's checks, for many resamples: each (row, true label)'s share of true labels
    among the labels scored at least as high, averaged over every such pair; NaN where no row holds a label."""
    truth, scores = np.asarray(y) > 0, np.asarray(scores, dtype=np.float64)
    total, pairs = 0.0, int(truth.sum())
    step = max(1, CHUNK_CELLS // max(1, scores.shape[1] ** 2))
    for start in range(0, len(scores), step):
        s, t = scores[start:start + step], truth[start:start + step]
        at_least = s[:, None, :] >= s[:, :, None]  # [row, j, k]: label k scored at least as high as label j
        ranks = at_least.sum(axis=2)
        hits = (at_least & t[:, None, :]).sum(axis=2)
        total += float((hits / ranks)[t].sum())
    return total / pairs if pairs else float("nan")
