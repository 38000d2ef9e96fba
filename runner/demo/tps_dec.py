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

from runner.demo._layout import describe

TRAIN_ROWS, TEST_ROWS = 1200, 300
CLASSES = (1, 2, 3, 4, 5, 6, 7)
SHARES = (0.36, 0.5495, 0.05, 0.004, 0.0015, 0.01, 0.025)  # the real skew, with the rare classes kept visible
MIN_TRAIN = {4: 3, 5: 2}  # the rarest classes still show up in train
ELEVATION = {1: 3050, 2: 2800, 3: 2350, 4: 2150, 5: 2550, 6: 2400, 7: 3300}
ROADWAYS = {1: 2600, 2: 1900, 3: 1100, 4: 900, 5: 1500, 6: 1200, 7: 3000}
WILDERNESS = {1: (0.6, 0.1, 0.3, 0.0), 2: (0.45, 0.05, 0.45, 0.05), 3: (0.0, 0.0, 0.4, 0.6),
              4: (0.0, 0.0, 0.1, 0.9), 5: (0.1, 0.0, 0.9, 0.0), 6: (0.0, 0.0, 0.5, 0.5), 7: (0.4, 0.5, 0.1, 0.0)}
SOIL_BASE_RATE, SOIL_FAVOURED_RATE = 0.02, 0.6
SAMPLE_CLASS = 2


def _classes(rng: np.random.Generator) -> np.ndarray:
    labels = rng.choice(CLASSES, size=TRAIN_ROWS + TEST_ROWS, p=SHARES)
    for label, least in MIN_TRAIN.items():
        missing = least - int((labels[:TRAIN_ROWS] == label).sum())
        if missing > 0:
            labels[rng.choice(np.flatnonzero(labels[:TRAIN_ROWS] == 2), size=missing, replace=False)] = label
    return labels


def _numeric(labels: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = len(labels)
    return {
        "Elevation": np.array([ELEVATION[c] for c in labels]) + rng.normal(0, 160, n),
        "Aspect": rng.uniform(-30, 390, n), "Slope": np.abs(rng.normal(15, 8, n)),
        "Horizontal_Distance_To_Hydrology": rng.gamma(2, 130, n) - 20,
        "Vertical_Distance_To_Hydrology": rng.normal(50, 60, n),
        "Horizontal_Distance_To_Roadways": np.array([ROADWAYS[c] for c in labels]) * rng.lognormal(0, 0.35, n),
        "Hillshade_9am": rng.normal(212, 30, n), "Hillshade_Noon": rng.normal(222, 22, n),
        "Hillshade_3pm": rng.normal(140, 40, n), "Horizontal_Distance_To_Fire_Points": rng.gamma(2.5, 700, n) - 100,
    }


def _binary(labels: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    area = np.array([rng.choice(4, p=WILDERNESS[c]) for c in labels])
    columns = {f"Wilderness_Area{k + 1}": (area == k).astype(int) for k in range(4)}
    favoured = {c: rng.choice(40, size=3, replace=False) for c in CLASSES}
    rate = np.full((len(labels), 40), SOIL_BASE_RATE)
    for row, c in enumerate(labels):
        rate[row, favoured[c]] = SOIL_FAVOURED_RATE
    soil = (rng.random(rate.shape) < rate).astype(int)
    columns.update({f"Soil_Type{k + 1}": soil[:, k] for k in range(40)})
    return columns


def generate(root: Path, rng: np.random.Generator) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv) and prepared/private/test.csv."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    labels = _classes(rng)
    numeric = {k: np.round(v).astype(int) for k, v in _numeric(labels, rng).items()}
    frame = pd.DataFrame({"Id": rng.permutation(len(labels)), **numeric, **_binary(labels, rng),
                          "Cover_Type": labels})
    train, test = frame.iloc[:TRAIN_ROWS], frame.iloc[TRAIN_ROWS:]
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns="Cover_Type").to_csv(public / "test.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    test[["Id"]].assign(Cover_Type=SAMPLE_CLASS).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Tabular Playground Series - Dec 2021",
             "Predict the forest Cover_Type (an integer from 1 to 7) of each row.",
             "Submissions are evaluated on multi-class classification accuracy.",
             "Submit Id,Cover_Type for each Id in test.csv.")
