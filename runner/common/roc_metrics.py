"""The area under the ROC curve with bands of the true-positive rate weighted apart (alaska2-image-steganalysis:
TPR 0-0.4 counts twice, 0.4-1 once). Each band's area is taken between the curve and the FPR = 1 line over that
band's TPR values, on the curve with a point added at every band edge it lacks (its FPR interpolated linearly);
the bands' weighted sum is divided by the weighted sum of their widths, so a perfect ranking scores 1, any
constant score (0.64 + 0.18) / 1.4 = 0.5857 and the exact opposite 0.

Scores are any real numbers (only their order counts): one score per row (n,), or class probabilities (n, 2),
whose second column is the positive class's.
"""
from __future__ import annotations

import numpy as np

# (lowest TPR, highest TPR, weight) of each band
ALASKA_BANDS = ((0.0, 0.4, 2.0), (0.4, 1.0, 1.0))


def _positive_scores(pred: np.ndarray) -> np.ndarray:
    pred = np.asarray(pred, dtype=np.float64)
    return pred[:, 1] if pred.ndim == 2 else pred


def _with_edges(fpr: np.ndarray, tpr: np.ndarray, edges) -> tuple[np.ndarray, np.ndarray]:
    """The curve with a point at each TPR edge it does not pass through exactly, before the first point above the
    edge, its FPR interpolated between that point and the one before."""
    for edge in edges:
        if edge in tpr:
            continue
        above = int(np.argmax(tpr > edge))
        if tpr[above] <= edge:  # the curve never rises above it
            continue
        share = (edge - tpr[above - 1]) / (tpr[above] - tpr[above - 1])
        fpr = np.insert(fpr, above, fpr[above - 1] + share * (fpr[above] - fpr[above - 1]))
        tpr = np.insert(tpr, above, edge)
    return fpr, tpr


def banded_auc(y: np.ndarray, pred: np.ndarray, bands=ALASKA_BANDS) -> float:
    """The band-weighted ROC area of scores `pred` against 0/1 truth `y` (see the module's docstring)."""
    from sklearn.metrics import auc, roc_curve

    fpr, tpr, _ = roc_curve(np.asarray(y), _positive_scores(pred), pos_label=1)
    fpr, tpr = _with_edges(fpr, tpr, sorted({edge for low, high, _ in bands for edge in (low, high)}))
    total = 0.0
    for low, high, weight in bands:
        inside = (tpr >= low) & (tpr <= high)
        if not inside.any():
            continue
        xs = np.append(fpr[inside], 1.0)
        ys = np.append(tpr[inside], high) - low
        total += weight * auc(xs, ys)
    return float(total / sum(weight * (high - low) for low, high, weight in bands))
