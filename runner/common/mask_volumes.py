"""Rows of flat class masks (a slice's classes side by side, each a square flattened) gathered into the volumes a
metric of series scores (`dice_hausdorff`): a series' rows, in their order, are its depths, as the grader stacks a
series' slices in the order of their ids. On them the pixel cut and least size of a mask submission are tuned, and
the depth prior (each class's share of the training masks by depth and place, the `slice_prior` rule's kind) is
drawn that a learned blend must beat as written.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from runner.common.mask_metrics import MASK_CUT, TUNE_SECONDS, MaskMetric, best_pair

# series the cut is tuned on: each adds a Hausdorff distance per cut tried (a real scan's a second or so), and a
# few dozen series already settle a cut shared by every pixel
TUNING_SERIES = 24
DEPTH_BINS = 8  # depths of a series averaged apart (as the slice_prior rule's)


def series_rows(series: np.ndarray) -> list[np.ndarray]:
    """Each series' row indices, in their order; the series in the order they first appear."""
    codes, names = pd.factorize(pd.Series(np.asarray(series, dtype=object)))
    order = np.argsort(codes, kind="stable")
    return np.split(order, np.cumsum(np.bincount(codes, minlength=len(names)))[:-1])


def side_of(width: int, classes: int) -> int:
    """The square side of a row of `classes` flattened masks `width` wide."""
    side = int(round(np.sqrt(width / classes)))
    if classes * side * side != width:
        raise ValueError(f"rows of {width} pixels are no {classes} square masks")
    return side


def decided_classes(pred: np.ndarray, classes: int, cut: float = MASK_CUT, least: int = 0) -> np.ndarray:
    """Rows of probabilities as the masks written: a pixel from `cut` on, each class's mask left empty where it
    holds fewer than `least` pixels (a row per slice and class is written, and dropped, alone)."""
    masks = (np.asarray(pred) >= cut).reshape(len(pred), classes, -1)
    masks[masks.sum(axis=2) < least] = False
    return masks.reshape(len(pred), -1)


def volume_score(metric: MaskMetric, truth: np.ndarray, masks: np.ndarray, groups: list[np.ndarray],
                 classes: int) -> float:
    """The metric of boolean rows `masks` against `truth`, each of `groups` (row indices) one series' volume."""
    side = side_of(truth.shape[1], classes)
    statistics = [metric.row(truth[rows].reshape(len(rows), classes, side, side),
                             masks[rows].reshape(len(rows), classes, side, side)) for rows in groups]
    return float(metric.total(np.vstack(statistics))) if statistics else float("nan")


def tuning_groups(series: np.ndarray, most: int = TUNING_SERIES) -> list[np.ndarray]:
    """Up to `most` series spread over all of them (each series' rows whole)."""
    groups = series_rows(series)
    if len(groups) <= most:
        return groups
    return [groups[k] for k in np.unique(np.linspace(0, len(groups) - 1, most).round().astype(int))]


def tune_volume_cut(metric: MaskMetric, y: np.ndarray, pred: np.ndarray, series: np.ndarray,
                    classes: int, seconds: float = TUNE_SECONDS) -> tuple[float, int, float]:
    """(cut, least pixels of a class's mask, score): the pair of CUTS x LEAST_SHARES whose masks score best for
    the metric of volumes on up to TUNING_SERIES series of the rows, within `seconds` (runner.common.mask_metrics
    .best_pair); MASK_CUT and no least size win ties."""
    groups = tuning_groups(series)
    rows = np.concatenate(groups)
    truth, guess = np.asarray(y)[rows] >= MASK_CUT, np.asarray(pred)[rows]
    starts = np.cumsum([0, *[len(g) for g in groups]])
    local = [np.arange(a, b) for a, b in zip(starts[:-1], starts[1:])]
    return best_pair(lambda cut, least: volume_score(metric, truth, decided_classes(guess, classes, cut, least),
                                                      local, classes), truth.shape[1] // classes, seconds)


def depth_prior(y: np.ndarray, series: np.ndarray, bins: int = DEPTH_BINS) -> np.ndarray:
    """Each row's depth prior: the mean of the rows (of every series) at its depth bin, a row's depth its place
    in its series from 0 (first) to 1 (last). Drawn from every row it is later scored on, so it is the prior at
    its best: a learned blend that beats it beats the rule's own."""
    depth_bin = np.zeros(len(y), dtype=int)
    for rows in series_rows(series):
        places = np.arange(len(rows)) / max(1, len(rows) - 1) if len(rows) > 1 else np.full(1, 0.5)
        depth_bin[rows] = np.minimum(bins - 1, (places * bins).astype(int))
    shares = np.zeros((bins, y.shape[1]), dtype=np.float32)
    for b in np.unique(depth_bin):
        shares[b] = np.asarray(y[depth_bin == b], dtype=np.float32).mean(axis=0)
    return shares[depth_bin]
