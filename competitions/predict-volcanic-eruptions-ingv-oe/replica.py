"""A synthetic predict-volcanic-eruptions-ingv-oe: one CSV per ten-minute segment of ten seismic sensors
(train/<segment_id>.csv and test/<segment_id>.csv, columns sensor_1 .. sensor_10, whole numbers, a broken sensor's
column empty), the time to the next eruption in train.csv (`segment_id,time_to_eruption`), as MLE-bench's 90/10
split of the real train.csv lays them out: no test.csv, the sample (all 0) lists the test segments; the answers
in private/test.csv.

The closer an eruption, the louder the tremor and the more of it at low frequencies: each sensor is noise of the
segment's own loudness times a rise as the eruption nears, with a slow rumble growing beside it; a sensor's gain
is its own, and about one segment in five has a dead sensor or two. The sensors' spread and band powers learn
most of it; the training median for every segment scores an MAE of about a quarter of the targets' range, the
sample's zeros about half.

`sizes(scale)`: 300 rows a segment at a factor of the replica's own counts; at REAL the 4,431 segments of 60,001
rows (ten minutes at 100 Hz).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import folders

SENSORS = 10
ROWS, REAL_ROWS = 300, 60_001
TRAIN, TEST = 270, 130  # the replica's own counts
REAL_TRAIN, REAL_TEST = 3_987, 444  # MLE-bench's 90/10 split of the 4,431 segments
LEAST = 20
LONGEST = 49_000_000  # the real targets run from 0 to about 4.9e7 (hundredths of a second)
NEAR = 12_000_000  # the tremor's rise: e-fold over this time to the eruption
DEAD_SHARE = 0.2  # segments with a dead sensor (or two): its column is empty


@dataclass(frozen=True)
class Segments:
    train: int
    test: int
    rows: int


def sizes(scale: float | str = 1.0) -> Segments:
    """How many segments `scale` writes (a factor of the replica's own counts, or REAL) and their rows."""
    scale = parse_scale(scale)
    return Segments(scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST),
                    REAL_ROWS if is_real(scale) else ROWS)


def segment(time_to_eruption: int, rows: int, rng: np.random.Generator) -> pd.DataFrame:
    """Ten sensors' readings over a segment: louder and lower in pitch as the eruption nears."""
    rise = 1.0 + 4.0 * np.exp(-time_to_eruption / NEAR)
    loudness = rng.uniform(0.6, 1.5) * 100 * rise
    t = np.arange(rows)
    rumble = np.sin(2 * np.pi * t / rng.uniform(20, 40) + rng.uniform(0, 2 * np.pi))
    columns = {}
    for k in range(SENSORS):
        gain = rng.uniform(0.5, 2.0)
        values = gain * loudness * (rng.standard_normal(rows) + (rise - 1.0) * 0.6 * rumble)
        columns[f"sensor_{k + 1}"] = pd.array(np.round(values).astype(np.int64), dtype="Int64")
    frame = pd.DataFrame(columns)
    if rng.random() < DEAD_SHARE:
        for k in rng.choice(SENSORS, int(rng.integers(1, 3)), replace=False):
            frame[f"sensor_{k + 1}"] = pd.NA
    return frame


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, train/, test/, sample_submission.csv) and prepared/private/test.csv, as
    many segments as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root, "train", "test")
    count = size.train + size.test
    ids = np.unique(rng.integers(1_000_000, 2**31 - 1, 2 * count))  # ten-digit-ish ids, distinct
    ids = rng.permutation(ids)[:count]
    targets = rng.integers(6_000, LONGEST, count)
    for k, (segment_id, target) in enumerate(zip(ids, targets)):
        folder = public / ("train" if k < size.train else "test")
        segment(int(target), size.rows, rng).to_csv(folder / f"{segment_id}.csv", index=False)
    table = pd.DataFrame({"segment_id": ids, "time_to_eruption": targets})
    table[:size.train].to_csv(public / "train.csv", index=False)
    answers = table[size.train:]
    answers.to_csv(private / "test.csv", index=False)
    answers.assign(time_to_eruption=0).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "INGV - Volcanic Eruption Prediction",
             "Predict, for each ten-minute segment of ten seismic sensors in test/<segment_id>.csv, the time until "
             "the next eruption; train.csv gives it for the segments in train/.",
             "Submissions are evaluated on the mean absolute error between the predicted and the actual times.",
             "Submit `segment_id,time_to_eruption` for every test segment.")
