"""Metrics of directions: the mean angle between true and predicted directions in 3-D, in radians.

A direction is given either as two angles per row, azimuth then zenith (radians: x = cos(az) sin(zen),
y = sin(az) sin(zen), z = cos(zen)), as a submission writes it, or as a vector (x, y, z) of any length, as the
engines learn it; both score alike, so cross-validation measures what the grader measures.
"""
from __future__ import annotations

import numpy as np

UP = np.array([0.0, 0.0, 1.0])  # the direction of a vector too short to have one (a prior of opposite directions)
SHORTEST = 1e-12  # a vector shorter than this has no direction


def unit_vectors(directions: np.ndarray) -> np.ndarray:
    """(rows x 3) unit vectors of (rows x 2) azimuth-zenith angles or of (rows x 3) vectors."""
    directions = np.asarray(directions, dtype=np.float64)
    if directions.ndim != 2 or directions.shape[1] not in (2, 3):
        raise ValueError(f"directions must be (rows x 2) angles or (rows x 3) vectors, not {directions.shape}")
    if directions.shape[1] == 2:
        azimuth, zenith = directions[:, 0], directions[:, 1]
        return np.stack([np.cos(azimuth) * np.sin(zenith), np.sin(azimuth) * np.sin(zenith), np.cos(zenith)], axis=1)
    length = np.linalg.norm(directions, axis=1, keepdims=True)
    return np.where(length > SHORTEST, directions / np.maximum(length, SHORTEST), UP)


def angles(vectors: np.ndarray) -> np.ndarray:
    """(rows x 2) azimuth in [0, 2 pi) and zenith in [0, pi] of (rows x 3) vectors."""
    unit = unit_vectors(vectors)
    azimuth = np.mod(np.arctan2(unit[:, 1], unit[:, 0]), 2 * np.pi)
    return np.stack([azimuth, np.arccos(np.clip(unit[:, 2], -1.0, 1.0))], axis=1)


def mean_angular_error(y: np.ndarray, pred: np.ndarray) -> float:
    """The mean over rows of the angle between the true and the predicted direction (radians, 0 to pi)."""
    cosine = np.clip((unit_vectors(y) * unit_vectors(pred)).sum(axis=1), -1.0, 1.0)
    return float(np.mean(np.abs(np.arccos(cosine))))
