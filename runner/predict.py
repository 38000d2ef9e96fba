"""Predictions from whatever folds finished: the mean of their test predictions, and the out-of-fold score."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from runner import metrics
from runner.folds import FoldResult
from runner.submission import Predictions


def fold_dir(out_dir: Path, fold: int) -> Path:
    return Path(out_dir) / "folds" / str(fold)


def ensemble(results: list[FoldResult], out_dir: Path, classes: list | None) -> Predictions | None:
    """Mean of the usable folds' test predictions (None when no fold is usable yet)."""
    usable = sorted(r.fold for r in results if r.usable)
    if not usable:
        return None
    stacked = np.mean([np.load(fold_dir(out_dir, k) / "test.npy") for k in usable], axis=0)
    source = f"mean of {len(usable)} fold(s): {', '.join(map(str, usable))}"
    return Predictions(stacked, tuple(classes) if classes is not None else None, source)


def out_of_fold(results: list[FoldResult], out_dir: Path, fold_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, predictions) of the validation rows of the usable folds, in row order."""
    usable = sorted(r.fold for r in results if r.usable)
    rows = np.flatnonzero(np.isin(fold_ids, usable))
    if not usable:
        return rows, np.empty((0, 0))
    preds = {k: np.load(fold_dir(out_dir, k) / "val.npy") for k in usable}
    first = next(iter(preds.values()))
    oof = np.zeros((len(fold_ids), first.shape[1]))
    for k, pred in preds.items():
        oof[fold_ids == k] = pred
    return rows, oof[rows]


def cv_scores(metric: str, y: np.ndarray, results: list[FoldResult], out_dir: Path, fold_ids: np.ndarray,
              prior: np.ndarray) -> tuple[float | None, float | None]:
    """(model, baseline) scores on the same out-of-fold rows; the baseline predicts `prior` for every row."""
    rows, oof = out_of_fold(results, out_dir, fold_ids)
    if len(rows) == 0:
        return None, None
    baseline = np.tile(prior, (len(rows), 1))
    return metrics.score(metric, y[rows], oof), metrics.score(metric, y[rows], baseline)
