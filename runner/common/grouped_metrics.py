"""Metrics averaged over parts of the answers, so that each part weighs the same however many rows it has: the log
of the mean absolute error of each group of rows (champs' coupling types), the RMSE of each column (MCRMSE), and
the haversine error of each track (a trip), its median and 95th percentile averaged.

A grouped metric takes each row's group as its third argument (runner.common.metrics calls it so); the groups are
any labels (strings, codes), and the mean is over the groups present in the rows scored.
"""
from __future__ import annotations

import numpy as np

EARTH_RADIUS_M = 6_371_000  # the haversine's sphere, in metres, as the GSDC graders take it
TRACK_QUANTILES = (0.50, 0.95)  # a track's error: the mean of its median and its 95th percentile


def _columns(values: np.ndarray) -> np.ndarray:
    """Values as a 2-D array of rows x columns (one column stays one column)."""
    return np.atleast_2d(np.asarray(values, dtype=np.float64).T).T


def _group_index(groups: np.ndarray) -> tuple[int, np.ndarray]:
    """(the number of groups, each row's group number)."""
    _, inverse = np.unique(np.asarray(groups).astype(str), return_inverse=True)
    return int(inverse.max()) + 1 if len(inverse) else 0, inverse.ravel()


def group_log_mae(y: np.ndarray, pred: np.ndarray, groups: np.ndarray) -> float:
    """The mean over groups of log(MAE within the group): a 1% smaller error in any group gains the same. A group
    predicted exactly gives -inf, as the log of 0 is."""
    errors = np.abs(_columns(y) - _columns(pred)).mean(axis=1)
    count, index = _group_index(groups)
    mae = np.bincount(index, weights=errors, minlength=count) / np.bincount(index, minlength=count)
    with np.errstate(divide="ignore"):
        return float(np.mean(np.log(mae)))


def mcrmse(y: np.ndarray, pred: np.ndarray) -> float:
    """The mean over columns of each column's root mean squared error."""
    return float(np.mean(np.sqrt(np.mean((_columns(y) - _columns(pred)) ** 2, axis=0))))


def haversine_m(lat1, lon1, lat2, lon2) -> np.ndarray:
    """Great-circle metres between points given in degrees."""
    lat1, lon1, lat2, lon2 = (np.radians(np.asarray(v, dtype=np.float64)) for v in (lat1, lon1, lat2, lon2))
    a = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin((lon2 - lon1) / 2) ** 2
    return 2 * EARTH_RADIUS_M * np.arcsin(np.sqrt(a))


def track_error(y: np.ndarray, pred: np.ndarray, groups: np.ndarray) -> float:
    """Rows of (latitude, longitude) in degrees: each group's (a track's) haversine errors in metres, the mean of
    their median and 95th percentile (linear quantiles), averaged over the groups."""
    truth, guess = _columns(y), _columns(pred)
    distances = haversine_m(guess[:, 0], guess[:, 1], truth[:, 0], truth[:, 1])
    count, index = _group_index(groups)
    order = np.argsort(index, kind="stable")
    parts = np.split(distances[order], np.cumsum(np.bincount(index, minlength=count))[:-1])
    return float(np.mean([np.mean(np.quantile(part, TRACK_QUANTILES)) for part in parts]))
