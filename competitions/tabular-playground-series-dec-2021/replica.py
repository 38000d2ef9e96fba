"""A synthetic tabular-playground-series-dec-2021: forest cover type from the 54 real feature columns.

Cover_Type 1..7 is drawn first, with classes 1 and 2 dominant and 4 and 5 down to a handful of rows; then the
elevation (the strongest feature), the distance to roadways, the wilderness area and three favoured soil types
follow the class, and the rest is noise. A GBM reaches an accuracy of about 0.95, where the all-2 sample
submission gets about 0.55.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled

TRAIN_ROWS, TEST_ROWS = 1200, 300
REAL_TRAIN, REAL_TEST = 3_600_000, 400_000  # MLE-bench's 90/10 split of the 4,000,000 Kaggle train rows
MIN_ROWS = 50  # at the smallest factors, still rows of the common classes in each split
CHUNK_ROWS = 500_000  # rows made and written at a time: a chunk's 56 columns stay well under 1 GB
CLASSES = (1, 2, 3, 4, 5, 6, 7)
SHARES = (0.36, 0.5495, 0.05, 0.004, 0.0015, 0.01, 0.025)  # the real skew, with the rare classes kept visible
MIN_TRAIN = {4: 3, 5: 2}  # the rarest classes still show up in train
ELEVATION = {1: 3050, 2: 2800, 3: 2350, 4: 2150, 5: 2550, 6: 2400, 7: 3300}
ROADWAYS = {1: 2600, 2: 1900, 3: 1100, 4: 900, 5: 1500, 6: 1200, 7: 3000}
WILDERNESS = {1: (0.6, 0.1, 0.3, 0.0), 2: (0.45, 0.05, 0.45, 0.05), 3: (0.0, 0.0, 0.4, 0.6),
              4: (0.0, 0.0, 0.1, 0.9), 5: (0.1, 0.0, 0.9, 0.0), 6: (0.0, 0.0, 0.5, 0.5), 7: (0.4, 0.5, 0.1, 0.0)}
AREAS, SOILS, FAVOURED_SOILS = 4, 40, 3  # wilderness areas, soil types, and the soils each class favours
SOIL_BASE_RATE, SOIL_FAVOURED_RATE = 0.02, 0.6
SAMPLE_CLASS = 2


def _per_class(table: dict, labels: np.ndarray) -> np.ndarray:
    """Each row's entry of a per-class table, looked up for all rows at once."""
    return np.array([table[c] for c in CLASSES])[labels - CLASSES[0]]


def _classes(train_rows: int, test_rows: int, rng: np.random.Generator) -> np.ndarray:
    labels = rng.choice(CLASSES, size=train_rows + test_rows, p=SHARES)
    for label, least in MIN_TRAIN.items():
        missing = least - int((labels[:train_rows] == label).sum())
        if missing > 0:
            labels[rng.choice(np.flatnonzero(labels[:train_rows] == 2), size=missing, replace=False)] = label
    return labels


def _numeric(labels: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = len(labels)
    return {
        "Elevation": _per_class(ELEVATION, labels) + rng.normal(0, 160, n),
        "Aspect": rng.uniform(-30, 390, n), "Slope": np.abs(rng.normal(15, 8, n)),
        "Horizontal_Distance_To_Hydrology": rng.gamma(2, 130, n) - 20,
        "Vertical_Distance_To_Hydrology": rng.normal(50, 60, n),
        "Horizontal_Distance_To_Roadways": _per_class(ROADWAYS, labels) * rng.lognormal(0, 0.35, n),
        "Hillshade_9am": rng.normal(212, 30, n), "Hillshade_Noon": rng.normal(222, 22, n),
        "Hillshade_3pm": rng.normal(140, 40, n), "Horizontal_Distance_To_Fire_Points": rng.gamma(2.5, 700, n) - 100,
    }


def _favoured(rng: np.random.Generator) -> np.ndarray:
    """(classes, soils): whether each class favours each soil type; drawn once, shared by every chunk."""
    favoured = np.zeros((len(CLASSES), SOILS), dtype=bool)
    for row in favoured:
        row[rng.choice(SOILS, size=FAVOURED_SOILS, replace=False)] = True
    return favoured


def _binary(labels: np.ndarray, favoured: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    cdf = np.cumsum(_per_class(WILDERNESS, labels), axis=1)
    area = np.minimum((rng.random(len(labels))[:, None] >= cdf).sum(axis=1), AREAS - 1)  # inverse CDF per row
    columns = {f"Wilderness_Area{k + 1}": (area == k).astype(int) for k in range(AREAS)}
    rate = np.where(favoured[labels - CLASSES[0]], SOIL_FAVOURED_RATE, SOIL_BASE_RATE)
    soil = (rng.random(rate.shape) < rate).astype(int)
    columns.update({f"Soil_Type{k + 1}": soil[:, k] for k in range(SOILS)})
    return columns


def _frame(ids: np.ndarray, labels: np.ndarray, favoured: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
    numeric = {k: np.round(v).astype(int) for k, v in _numeric(labels, rng).items()}
    return pd.DataFrame({"Id": ids, **numeric, **_binary(labels, favoured, rng), "Cover_Type": labels})


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    """Train and test rows at `scale`: a factor of the replica's own, or 'real'."""
    scale = parse_scale(scale)
    return scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS), scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv) and prepared/private/test.csv.
    Labels and ids are drawn for every row first; the features are made and written by chunks of rows."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    train_rows, test_rows = counts(scale)
    labels = _classes(train_rows, test_rows, rng)
    ids, favoured = rng.permutation(len(labels)), _favoured(rng)
    with open(public / "train.csv", "w", newline="") as train:
        for start in range(0, train_rows, CHUNK_ROWS):
            rows = slice(start, min(start + CHUNK_ROWS, train_rows))
            _frame(ids[rows], labels[rows], favoured, rng).to_csv(train, index=False, header=start == 0)
    test = _frame(ids[train_rows:], labels[train_rows:], favoured, rng)
    test.drop(columns="Cover_Type").to_csv(public / "test.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    test[["Id"]].assign(Cover_Type=SAMPLE_CLASS).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Tabular Playground Series - Dec 2021",
             "Predict the forest Cover_Type (an integer from 1 to 7) of each row.",
             "Submissions are evaluated on multi-class classification accuracy.",
             "Submit Id,Cover_Type for each Id in test.csv.")
