"""A synthetic new-york-city-taxi-fare-prediction: Manhattan-ish rides whose fare follows the meter.

The fare is a flag drop plus a per-km rate on the haversine distance (higher from September 2012), with night
and rush-hour surcharges, a flat JFK fare for airport rides and an occasional toll. As in the real labels.csv
(the training table), a few rows carry zero coordinates, zero passengers or negative fares; the test rows are
clean. A GBM on the distance and time features gets an RMSE of about 1.7, where the constant 11.35 sample
submission scores about 8.
"""
from __future__ import annotations

import os
from datetime import datetime
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.units.fork_server import main_hidden

TRAIN_ROWS, TEST_ROWS = 2000, 200
REAL_TRAIN = 55_413_942  # Kaggle's 55,423,856 training rides less the 9,914 that MLE-bench holds out as test
REAL_TEST = 9914  # MLE-bench's test: as many rides as Kaggle's own test had
MIN_ROWS = 50  # at the smallest factors, still a few dozen rides in each split
CHUNK_ROWS = 1_000_000  # rides made and written at a time (about 0.3 GB): the real 55M never sit in memory at once
FIRST, SPAN_DAYS = datetime(2009, 1, 1), 6.5 * 365  # rides run from 2009 to mid-2015; FIRST is a midnight
RATE_RISE = datetime(2012, 9, 4)  # the meter rate went up here
CENTRE, SPREAD = (-73.975, 40.755), (0.02, 0.025)  # midtown Manhattan, in degrees
JFK, JFK_FARE, AIRPORT_RATE = (-73.782, 40.644), 52.0, 0.03
ZERO_RATE, NEGATIVE_RATE, EMPTY_RATE = 0.02, 0.004, 0.004  # train-only dirt, roughly as in the real table
TOLL, TOLL_RATE = 5.33, 0.05  # a bridge or tunnel toll on some rides, unseen in the features
SAMPLE_FARE = 11.35
KEY_DIGITS = 7  # the key's suffix after the pickup time, e.g. .0000001
RTF = ("{\\rtf1\\ansi\\deff0 {\\fonttbl {\\f0 Helvetica;}}\n\\f0\\fs24 Google Cloud Platform coupons\\par\n"
       "This placeholder stands in for the coupon instructions that came with the competition data.\\par\n}\n")
COLUMNS = ("key", "fare_amount", "pickup_datetime", "pickup_longitude", "pickup_latitude", "dropoff_longitude",
           "dropoff_latitude", "passenger_count")


def haversine_km(lon1, lat1, lon2, lat2) -> np.ndarray:
    lon1, lat1, lon2, lat2 = map(np.radians, (lon1, lat1, lon2, lat2))
    h = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin((lon2 - lon1) / 2) ** 2
    return 2 * 6371 * np.arcsin(np.sqrt(h))


def _stamps(seconds: np.ndarray) -> np.ndarray:
    """'YYYY-MM-DD hh:mm:ss' for seconds after FIRST, formatted by numpy for the whole column."""
    times = np.datetime64(FIRST, "s") + seconds.astype("timedelta64[s]")
    return np.strings.replace(np.datetime_as_string(times, unit="s"), "T", " ")


def _keys(seconds: np.ndarray, stamps: np.ndarray, block: int, blocks: int) -> np.ndarray:
    """The pickup time plus a suffix that makes it unique, e.g. 2009-06-15 17:26:21.0000001: rides of a block
    sharing a second are numbered in turn, and the block's number is folded in, so that keys made by separate
    blocks (each written on its own) never meet."""
    order = np.argsort(seconds, kind="stable")
    ordered = seconds[order]
    run_start = np.maximum.accumulate(np.where(np.r_[True, ordered[1:] != ordered[:-1]], np.arange(len(order)), 0))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - run_start
    suffix = (rank * blocks + block + 1).astype(str)
    return np.strings.add(np.strings.add(stamps, "."), np.strings.zfill(suffix, KEY_DIGITS))


def _rides(count: int, rng: np.random.Generator) -> pd.DataFrame:
    seconds = rng.integers(0, int(SPAN_DAYS * 86400), size=count)
    pick = np.array(CENTRE) + rng.normal(0, 1, (count, 2)) * SPREAD
    km = rng.lognormal(np.log(2.5), 0.7, count)
    heading = rng.uniform(0, 2 * np.pi, count)
    drop = pick + np.c_[km * np.cos(heading) / 84.2, km * np.sin(heading) / 111.0]
    airport = rng.random(count) < AIRPORT_RATE
    drop[airport] = np.array(JFK) + rng.normal(0, 0.004, (int(airport.sum()), 2))
    return pd.DataFrame({
        "seconds": seconds,
        "pickup_longitude": pick[:, 0].round(6), "pickup_latitude": pick[:, 1].round(6),
        "dropoff_longitude": drop[:, 0].round(6), "dropoff_latitude": drop[:, 1].round(6),
        "passenger_count": rng.choice([1, 2, 3, 4, 5, 6], size=count, p=[0.69, 0.15, 0.04, 0.02, 0.07, 0.03]),
        "airport": airport,
    })


def _fares(rides: pd.DataFrame, rng: np.random.Generator) -> np.ndarray:
    km = haversine_km(rides["pickup_longitude"], rides["pickup_latitude"], rides["dropoff_longitude"],
                      rides["dropoff_latitude"]).to_numpy()
    seconds = rides["seconds"].to_numpy()
    late = seconds >= (RATE_RISE - FIRST).total_seconds()
    hour = seconds // 3600 % 24
    surcharge = 0.5 * ((hour >= 20) | (hour < 6)) + 1.0 * ((hour >= 16) & (hour < 20))
    meter = np.where(late, 3.0, 2.5) + np.where(late, 1.75, 1.45) * km * rng.lognormal(0, 0.12, len(km))
    toll = TOLL * (rng.random(len(km)) < TOLL_RATE)
    fare = np.where(rides["airport"], JFK_FARE + 5.0 * late, meter + surcharge) + toll
    step = np.where(late, 0.5, 0.1)
    return np.round(np.round(fare / step) * step, 2)


def _dirty(frame: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """Zero coordinates, zero passengers and negative fares, as some real training rows have."""
    frame = frame.copy()
    zero = rng.random(len(frame)) < ZERO_RATE
    frame.loc[zero, ["pickup_longitude", "pickup_latitude", "dropoff_longitude", "dropoff_latitude"]] = 0.0
    frame.loc[rng.random(len(frame)) < EMPTY_RATE, "passenger_count"] = 0
    negative = rng.random(len(frame)) < NEGATIVE_RATE
    frame.loc[negative, "fare_amount"] = -frame.loc[negative, "fare_amount"]
    return frame


def _block(count: int, block: int, blocks: int, seed: int) -> pd.DataFrame:
    """`count` rides with the COLUMNS, made from their own seed; block 0 is the (clean) test, the rest train."""
    rng = np.random.default_rng(seed)
    rides = _rides(count, rng)
    rides["fare_amount"] = _fares(rides, rng)
    stamps = _stamps(rides["seconds"].to_numpy())
    rides["key"] = _keys(rides["seconds"].to_numpy(), stamps, block, blocks).astype(object)
    rides["pickup_datetime"] = np.strings.add(stamps, " UTC").astype(object)
    frame = rides[list(COLUMNS)]
    return frame if block == 0 else _dirty(frame, rng)


def _train_csv(task: tuple[int, int, int, int]) -> str:
    """One chunk of labels.csv as text; the first carries the header."""
    count, block, blocks, seed = task
    return _block(count, block, blocks, seed).to_csv(index=False, header=block == 1)


def _write_train(path: Path, tasks: list[tuple[int, int, int, int]]) -> None:
    """labels.csv chunk by chunk, in order. Past one chunk, chunks are made side by side in worker processes,
    which halves the real size's 5 minutes on two cores: fresh interpreters (safe whatever threads the caller
    runs), started with the caller's main module hidden, so that they never re-run a script or fail on stdin."""
    workers = min(len(tasks), os.cpu_count() or 1)
    with open(path, "w", newline="") as out:
        if workers <= 1:
            out.writelines(map(_train_csv, tasks))
            return
        with main_hidden():
            pool = get_context("spawn").Pool(workers)
        with pool:
            out.writelines(pool.imap(_train_csv, tasks))


def counts(scale: float | str = 1.0, train_rows: int | None = None) -> tuple[int, int]:
    """Rides in labels.csv and in test at `scale` (a factor of the replica's own, or 'real'); `train_rows` given
    outright is taken as it is, whatever the scale."""
    scale = parse_scale(scale)
    return (scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS) if train_rows is None else train_rows,
            scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS))


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0, train_rows: int | None = None) -> None:
    """Write prepared/public (labels.csv, test.csv, sample_submission.csv, GCP-Coupons-Instructions.rtf) and
    prepared/private/test.csv. `train_rows`, when given, sets the size of labels.csv whatever the scale.
    labels.csv is made and written by chunks of CHUNK_ROWS rides, each from its own seed drawn here."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    train_rows, test_rows = counts(scale, train_rows)
    sizes = [min(CHUNK_ROWS, train_rows - start) for start in range(0, train_rows, CHUNK_ROWS)]
    blocks = 1 + len(sizes)
    seeds = rng.integers(0, 2 ** 63, size=blocks)
    test = _block(test_rows, 0, blocks, seeds[0])
    _write_train(public / "labels.csv", [(n, k + 1, blocks, seeds[k + 1]) for k, n in enumerate(sizes)])
    test.drop(columns="fare_amount").to_csv(public / "test.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    test[["key"]].assign(fare_amount=SAMPLE_FARE).to_csv(public / "sample_submission.csv", index=False)
    (public / "GCP-Coupons-Instructions.rtf").write_text(RTF)
    describe(public, "New York City Taxi Fare Prediction",
             "Predict the fare_amount of each taxi ride from its pickup time, coordinates and passenger count; "
             "labels.csv is the training table.",
             "Submissions are evaluated using the root mean squared error (RMSE).",
             "Submit key,fare_amount for each key in test.csv.")
