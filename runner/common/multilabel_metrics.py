"""Metrics of several 0/1 labels per row scored together: the weighted multi-label log loss of an item with an
"any" label first and its parts after (rsna-2022-cervical-spine-fracture-detection's patient_overall, then C1 to
C7). Truth and predictions are (items, labels) matrices, as cross-validation has them and as grading makes them
from a melted submission (runner.competition.id_parts)."""
from __future__ import annotations

import numpy as np

CLIP = 1e-15  # probabilities kept this far from 0 and 1, as the grader does: a sure miss costs 34.5, not infinity
# each label's weight where its truth is 0: the "any" label first weighs as much as the seven parts together
NEGATIVE_WEIGHTS = (7.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
POSITIVE_FACTOR = 2.0  # a label's weight doubles where its truth is 1: a missed fracture costs twice a false alarm


def weighted_log_loss(y: np.ndarray, pred: np.ndarray) -> float:
    """Each item's binary log losses weighted by NEGATIVE_WEIGHTS (times POSITIVE_FACTOR where the truth is 1) and
    divided by its weights' sum, then the mean over items."""
    truth = np.asarray(y, dtype=np.float64)
    p = np.clip(np.asarray(pred, dtype=np.float64), CLIP, 1 - CLIP)
    if truth.ndim != 2 or truth.shape[1] != len(NEGATIVE_WEIGHTS) or p.shape != truth.shape:
        raise ValueError(f"weighted log loss needs {len(NEGATIVE_WEIGHTS)} labels per item, an any-label first; "
                         f"got truth {truth.shape}, predictions {p.shape}")
    losses = -(truth * np.log(p) + (1 - truth) * np.log(1 - p))
    weights = np.asarray(NEGATIVE_WEIGHTS) * np.where(truth == 1, POSITIVE_FACTOR, 1.0)
    return float(np.mean((losses * weights).sum(axis=1) / weights.sum(axis=1)))
