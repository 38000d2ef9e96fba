"""A synthetic ventilator-pressure-prediction: breaths of 80 time steps each, rows of train.csv and test.csv as
MLE-bench splits the real breaths 90/10 (whole breaths, in the split's shuffled order, `id` numbered 1.. afresh in
each file, `breath_id` kept); the answers in private/test.csv with `pressure`, the sample all 0.

Each breath is a lung of resistance R (5, 20 or 50) and compliance C (10, 20 or 50) filled by the ventilator's
inflow `u_in` for about a second (`u_out` 0, the only rows the grader scores), then let out (`u_out` 1). The
pressure is a resistive term, R times the inflow, plus the volume delivered so far (the running sum of the inflow
over the time step) over C, above a PEEP of 5, with a little sensor noise; on the way out it falls back towards
the PEEP. A row alone tells little (the inspiratory mean scores an MAE of about 7); the breath's running sum of
`u_in` and its neighbours tell nearly all (a GBM on them: well under 1).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled

STEPS = 80  # rows of a breath
TRAIN_BREATHS, TEST_BREATHS = 180, 40  # the replica's own counts
REAL_TRAIN, REAL_TEST = 67_905, 7_545  # MLE-bench's 90/10 split of the 75,450 real breaths
LEAST = 5  # breaths a split keeps at the smallest factors
BREATH_IDS = 125_749  # the real breath ids run up to here, with gaps
RS, CS = (5, 20, 50), (10, 20, 50)
STEP_SECONDS = 0.0335  # the sampling interval, jittered
PEEP = 5.0  # cmH2O: the pressure a breath starts from and returns to
RESISTIVE, ELASTIC = 0.006, 15.0  # cmH2O per (R x inflow); cmH2O per (volume / C)
NOISE = 0.15  # the pressure sensor's noise, cmH2O
INSPIRATION = (0.95, 1.05)  # seconds of inflow before the valve opens


def sizes(scale: float | str = 1.0) -> tuple[int, int]:
    """Train and test breaths at `scale` (a factor of the replica's own counts, or 'real', 'real/N')."""
    scale = parse_scale(scale)
    return scaled(TRAIN_BREATHS, REAL_TRAIN, scale, LEAST), scaled(TEST_BREATHS, REAL_TEST, scale, LEAST)


def _breaths(count: int, rng: np.random.Generator) -> pd.DataFrame:
    """`count` breaths of STEPS rows, drawn whole as (breaths, steps) arrays."""
    r = rng.choice(RS, count)
    c = rng.choice(CS, count)
    dt = STEP_SECONDS + rng.normal(0, 0.0004, (count, STEPS))
    dt[:, 0] = 0.0
    time = np.cumsum(dt, axis=1)
    out = (time >= rng.uniform(*INSPIRATION, (count, 1))).astype(np.int8)
    peak, rise = rng.uniform(5, 60, (count, 1)), rng.uniform(0.05, 0.3, (count, 1))
    fall = rng.uniform(0.4, 2, (count, 1))
    inflow = peak * (1 - np.exp(-time / rise)) * np.exp(-time / fall) + rng.normal(0, 0.6, (count, STEPS))
    inflow = np.clip(np.where(out == 1, rng.uniform(0, 5, (count, 1)), inflow), 0, 100)
    volume = np.cumsum(np.where(out == 0, inflow, 0.0) * np.diff(time, prepend=0.0, axis=1), axis=1)
    pressure = PEEP + RESISTIVE * r[:, None] * inflow + ELASTIC * volume / c[:, None]
    # out: the pressure falls back to the PEEP at the lung's own pace (R x C)
    since = np.where(out == 1, time - np.where(out == 1, time, np.inf).min(axis=1, keepdims=True), 0.0)
    at_release = np.take_along_axis(pressure, np.maximum(out.argmax(axis=1) - 1, 0)[:, None], axis=1)
    pressure = np.where(out == 1, PEEP + (at_release - PEEP) * np.exp(-since * 1000 / (r * c)[:, None] / 4),
                        pressure)
    pressure += rng.normal(0, NOISE, pressure.shape)
    ids = rng.choice(np.arange(1, BREATH_IDS + 1), count, replace=False)
    return pd.DataFrame({
        "breath_id": np.repeat(ids, STEPS).astype(np.int32), "R": np.repeat(r, STEPS).astype(np.int8),
        "C": np.repeat(c, STEPS).astype(np.int8), "time_step": time.ravel(), "u_in": inflow.ravel(),
        "u_out": out.ravel(), "pressure": pressure.ravel()})


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv, description.md) and
    prepared/private/test.csv, as many breaths as `sizes(scale)` says."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    train_breaths, test_breaths = sizes(scale)
    rows = _breaths(train_breaths + test_breaths, rng)
    train, test = rows.iloc[:train_breaths * STEPS].copy(), rows.iloc[train_breaths * STEPS:].copy()
    for frame in (train, test):  # numbered afresh in each file, as MLE-bench renumbers them
        frame.insert(0, "id", np.arange(1, len(frame) + 1, dtype=np.int32))
    written = dict(index=False, float_format="%.10g")
    train.to_csv(public / "train.csv", **written)
    test.drop(columns="pressure").to_csv(public / "test.csv", **written)
    test[["id"]].assign(pressure=0).to_csv(public / "sample_submission.csv", **written)
    test.to_csv(private / "test.csv", **written)
    describe(public, "Google Brain - Ventilator Pressure Prediction",
             "Predict the airway pressure of each time step of each test breath from the lung's R and C, the "
             "inspiratory valve's inflow u_in and the expiratory valve u_out.",
             "Submissions are scored on the mean absolute error of the pressure over the inspiratory phase "
             "(u_out == 0) of each breath; the expiratory phase is not scored.",
             "Submit `id,pressure` for every row of test.csv.")
