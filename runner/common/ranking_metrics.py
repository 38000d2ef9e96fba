"""Metrics of how each row ranks its labels: label-weighted label-ranking average precision (lwlrap), where every
(row, true label) pair weighs the same. It takes one score per label and row, a 0/1 truth of the same shape, and
reads only the order of the scores within a row (ties count against the true label, as scikit-learn's label
ranking average precision counts them), so engine output and a submission read back score alike.
"""
from __future__ import annotations

import numpy as np


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
