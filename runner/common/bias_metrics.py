"""The bias-weighted ROC AUC of toxicity decisions (Jigsaw Unintended Bias): a quarter the overall AUC, and a
quarter each the power mean (p = -5) over the identity subgroups of three AUCs: within the subgroup, on the
background's toxic rows with the subgroup's non-toxic ones (BPSN), and on the background's non-toxic rows with the
subgroup's toxic ones (BNSP). The power mean leans on the worst subgroup.

Its grader cuts every prediction at 0.5 (from 0.5 on: toxic) before any AUC, so each AUC is the balanced accuracy
of those decisions, (TPR + TNR) / 2. Cross-validation knows no subgroup of the rows it scores and measures the
overall term, at the cut the writer will take (`best_cut`: where the out-of-fold balanced accuracy peaks).
"""
from __future__ import annotations

import numpy as np

CUT = 0.5  # the grader's: a prediction (and a truth, an identity share) from 0.5 on is 1
POWER = -5  # of the mean over subgroups
WEIGHT = 0.25  # of the overall AUC and of each of the three power means


def _auc(truth: np.ndarray, decided: np.ndarray) -> float:
    """The ROC AUC of 0/1 decisions; NaN where the rows hold one class (scikit-learn's value, and the grader's
    score then)."""
    from sklearn.metrics import roc_auc_score

    if len(np.unique(truth)) < 2:
        return float("nan")
    return float(roc_auc_score(truth, decided))


def _power_mean(values: list[float]) -> float:
    """The power mean at POWER. An AUC of 0 has no negative power: the grader's raises there (ZeroDivisionError),
    which makes the submission invalid (ValueError here, as a grade reads it)."""
    if any(v == 0 for v in values):
        raise ValueError("an AUC of 0 in a family of subgroup AUCs: 0 has no negative power")
    return float((np.sum(np.power(values, POWER)) / len(values)) ** (1 / POWER))


def bias_auc(truth: np.ndarray, pred: np.ndarray) -> float:
    """The grader's score: `truth` (n, 1 + g) holds the toxicity then each identity's share (cut at CUT here, a
    missing share counting 0), `pred` (n,) the submitted values (cut at CUT)."""
    truth = np.nan_to_num(np.asarray(truth, dtype=np.float64), nan=0.0) >= CUT
    decided = (np.nan_to_num(np.asarray(pred, dtype=np.float64).reshape(len(truth), -1)[:, -1], nan=0.0)
               >= CUT).astype(int)
    toxic, groups = truth[:, 0], truth[:, 1:]
    families = [[], [], []]
    for member in groups.T:
        for k, rows in enumerate((member, (~toxic & member) | (toxic & ~member),
                                  (toxic & member) | (~toxic & ~member))):
            families[k].append(_auc(toxic[rows], decided[rows]))
    overall = _auc(toxic, decided)
    if not groups.shape[1]:
        return overall
    return WEIGHT * overall + sum(WEIGHT * _power_mean(family) for family in families)


def best_cut(y: np.ndarray, p: np.ndarray) -> tuple[float, float]:
    """(the probability from which a row is called toxic, the balanced accuracy that gives) on these rows: where
    TPR - FPR peaks (Youden's J); a cut that calls no row toxic (1.0) where nothing separates them."""
    from sklearn.metrics import roc_curve

    y = np.asarray(y).astype(int)
    if len(np.unique(y)) < 2:
        return 1.0, 0.5
    fpr, tpr, thresholds = roc_curve(y, p)
    best = int(np.argmax(tpr - fpr))
    return float(min(thresholds[best], 1.0)), float(0.5 + (tpr[best] - fpr[best]) / 2)


def decided_auc(y: np.ndarray, pred: np.ndarray) -> float:
    """Cross-validation's form: the overall balanced accuracy of toxic-class probabilities `pred` ((n, 2), or (n,))
    cut where it peaks on these rows (class indices `y`)."""
    p = pred[:, -1] if np.ndim(pred) == 2 else pred
    return best_cut(y, p)[1]
