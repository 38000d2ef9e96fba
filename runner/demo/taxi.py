"""A synthetic new-york-city-taxi-fare-prediction: Manhattan-ish rides whose fare follows the meter.

The fare is a flag drop plus a per-km rate on the haversine distance (higher from September 2012), with night
and rush-hour surcharges, a flat JFK fare for airport rides and an occasional toll. As in the real labels.csv
(the training table), a few rows carry zero coordinates, zero passengers or negative fares; the test rows are
clean. A GBM on the distance and time features gets an RMSE of about 1.7, where the constant 11.35 sample
submission scores about 8.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe

TRAIN_ROWS, TEST_ROWS = 2000, 200
FIRST, SPAN_DAYS = datetime(2009, 1, 1), 6.5 * 365  # rides run from 2009 to mid-2015
RATE_RISE = datetime(2012, 9, 4)  # the meter rate went up here
CENTRE, SPREAD = (-73.975, 40.755), (0.02, 0.025)  # midtown Manhattan, in degrees
JFK, JFK_FARE, AIRPORT_RATE = (-73.782, 40.644), 52.0, 0.03
ZERO_RATE, NEGATIVE_RATE, EMPTY_RATE = 0.02, 0.004, 0.004  # train-only dirt, roughly as in the real table
TOLL, TOLL_RATE = 5.33, 0.05  # a bridge or tunnel toll on some rides, unseen in the features
SAMPLE_FARE = 11.35
RTF = ("{\\rtf1\\ansi\\deff0 {\\fonttbl {\\f0 Helvetica;}}\n\\f0\\fs24 Google Cloud Platform coupons\\par\n"
       "This placeholder stands in for the coupon instructions that came with the competition data.\\par\n}\n")
COLUMNS = ("key", "fare_amount", "pickup_datetime", "pickup_longitude", "pickup_latitude", "dropoff_longitude",
           "dropoff_latitude", "passenger_count")


def haversine_km(lon1, lat1, lon2, lat2) -> np.ndarray:
    lon1, lat1, lon2, lat2 = map(np.radians, (lon1, lat1, lon2, lat2))
    h = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin((lon2 - lon1) / 2) ** 2
    return 2 * 6371 * np.arcsin(np.sqrt(h))


def _times(count: int, rng: np.random.Generator) -> list[datetime]:
    seconds = rng.integers(0, int(SPAN_DAYS * 86400), size=count)
    return [FIRST + timedelta(seconds=int(s)) for s in seconds]


def _keys(times: list[datetime], rng: np.random.Generator) -> list[str]:
    """The pickup time plus a 7-digit suffix that makes it unique, e.g. 2009-06-15 17:26:21.0000001."""
    keys, taken = [], set()
    for time, suffix in zip(times, rng.integers(1, 9, size=len(times))):
        key = f"{time:%Y-%m-%d %H:%M:%S}.{suffix:07d}"
        while key in taken:
            suffix += 1
            key = f"{time:%Y-%m-%d %H:%M:%S}.{suffix:07d}"
        taken.add(key)
        keys.append(key)
    return keys


def _rides(count: int, rng: np.random.Generator) -> pd.DataFrame:
    times = _times(count, rng)
    pick = np.array(CENTRE) + rng.normal(0, 1, (count, 2)) * SPREAD
    km = rng.lognormal(np.log(2.5), 0.7, count)
    heading = rng.uniform(0, 2 * np.pi, count)
    drop = pick + np.c_[km * np.cos(heading) / 84.2, km * np.sin(heading) / 111.0]
    airport = rng.random(count) < AIRPORT_RATE
    drop[airport] = np.array(JFK) + rng.normal(0, 0.004, (int(airport.sum()), 2))
    return pd.DataFrame({
        "key": _keys(times, rng), "time": times,
        "pickup_longitude": pick[:, 0].round(6), "pickup_latitude": pick[:, 1].round(6),
        "dropoff_longitude": drop[:, 0].round(6), "dropoff_latitude": drop[:, 1].round(6),
        "passenger_count": rng.choice([1, 2, 3, 4, 5, 6], size=count, p=[0.69, 0.15, 0.04, 0.02, 0.07, 0.03]),
        "airport": airport,
    })


def _fares(rides: pd.DataFrame, rng: np.random.Generator) -> np.ndarray:
    km = haversine_km(rides["pickup_longitude"], rides["pickup_latitude"], rides["dropoff_longitude"],
                      rides["dropoff_latitude"]).to_numpy()
    late = (rides["time"] >= RATE_RISE).to_numpy()
    hour = np.array([t.hour for t in rides["time"]])
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


def generate(root: Path, rng: np.random.Generator, train_rows: int = TRAIN_ROWS) -> None:
    """Write prepared/public (labels.csv, test.csv, sample_submission.csv, GCP-Coupons-Instructions.rtf) and
    prepared/private/test.csv. `train_rows` sets the size of labels.csv."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    rides = _rides(train_rows + TEST_ROWS, rng)
    rides["fare_amount"] = _fares(rides, rng)
    rides["pickup_datetime"] = [f"{t:%Y-%m-%d %H:%M:%S} UTC" for t in rides["time"]]
    frame = rides[list(COLUMNS)]
    train, test = _dirty(frame.iloc[:train_rows], rng), frame.iloc[train_rows:]
    train.to_csv(public / "labels.csv", index=False)
    test.drop(columns="fare_amount").to_csv(public / "test.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    test[["key"]].assign(fare_amount=SAMPLE_FARE).to_csv(public / "sample_submission.csv", index=False)
    (public / "GCP-Coupons-Instructions.rtf").write_text(RTF)
    describe(public, "New York City Taxi Fare Prediction",
             "Predict the fare_amount of each taxi ride from its pickup time, coordinates and passenger count; "
             "labels.csv is the training table.",
             "Submissions are evaluated using the root mean squared error (RMSE).",
             "Submit key,fare_amount for each key in test.csv.")
