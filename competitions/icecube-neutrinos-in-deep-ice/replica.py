"""A synthetic icecube-neutrinos-in-deep-ice: neutrino events as pulses in batch files (train/batch_<n>.parquet,
test/batch_<n>.parquet: `sensor_id, time, charge, auxiliary` indexed by `event_id`, each event's pulses together),
a meta table per split (train_meta.parquet, test_meta.parquet: `batch_id, event_id, first_pulse_index,
last_pulse_index`, and in train the direction each neutrino came from: `azimuth, zenith` in radians) and the
sensors' positions (sensor_geometry.csv), as MLE-bench's 90/10 split of the real batches lays them out; the
sample says 1 and 1 for every test event, the answers are in private/test.csv.

The sensors hang on 86 strings of 60 in a hexagonal grid, as the real detector's. Each event is a muon track
through it from a direction uniform over the sky: the sensors near the track see light, later the further along
the track they are, more of it the nearer they are, with some jitter; a few noise pulses on auxiliary readouts
come at random. Where the light arrived first says where the track came from: a line fit of the pulses' positions
against their times learns most of it; one direction for every event scores a mean angular error of about pi/2.

`sizes(scale)`: 20 batches of 100 events at a factor of the replica's own counts; at REAL the 660 batches of
200,000 events (about 114 GB of parquet).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import folders

STRINGS, PER_STRING = 86, 60  # 5,160 sensors, as the real detector
SPACING = 125.0  # m between neighbouring strings
DEPTHS = np.linspace(-500.0, 500.0, PER_STRING)  # m: a string's sensors, bottom to top
BATCHES, EVENTS = 20, 100  # the replica's own counts: batches and events per batch
REAL_BATCHES, REAL_EVENTS = 660, 200_000
TEST_SHARE = 0.1  # of the batches, whole (MLE-bench's split)
LIGHT = 0.3  # m/ns: how fast a track runs and its light spreads ahead
REACH = 70.0  # m: sensors nearer the track than this see it
SCATTER = 30.0  # m: the light's reach falls off over this distance
JITTER = 4.0  # ns
NOISE_PULSES = (1, 5)  # per event, from .. below: random pulses flagged auxiliary


@dataclass(frozen=True)
class Batches:
    batches: int
    events: int  # per batch


def sizes(scale: float | str = 1.0) -> Batches:
    """How many batches `scale` writes (a factor of the replica's own counts, or REAL) and events in each: the
    events a share of the real ones, in at least two batches (a train and a test one)."""
    scale = parse_scale(scale)
    batches = scaled(BATCHES, REAL_BATCHES, scale, 2)
    events = scaled(BATCHES * EVENTS, REAL_BATCHES * REAL_EVENTS, scale, 2)
    return Batches(batches, max(1, round(events / batches)))


def geometry() -> pd.DataFrame:
    """sensor_geometry.csv: the strings on a hexagonal grid around the centre, nearest first, 60 sensors each."""
    q, r = np.mgrid[-6:7, -6:7].reshape(2, -1)
    x, y = SPACING * (q + r / 2), SPACING * r * np.sqrt(3) / 2
    nearest = np.argsort(np.hypot(x, y), kind="stable")[:STRINGS]
    xs, ys = np.repeat(x[nearest], PER_STRING), np.repeat(y[nearest], PER_STRING)
    zs = np.tile(DEPTHS, STRINGS)
    return pd.DataFrame({"sensor_id": np.arange(STRINGS * PER_STRING), "x": np.round(xs, 2), "y": np.round(ys, 2),
                         "z": np.round(zs, 2)})


def event(positions: np.ndarray, rng: np.random.Generator) -> tuple[float, float, tuple[np.ndarray, ...]]:
    """One event: the direction it came from (azimuth, zenith) and its pulses in time order (sensor, time, charge,
    auxiliary)."""
    azimuth, zenith = rng.uniform(0, 2 * np.pi), np.arccos(rng.uniform(-1, 1))
    came_from = np.array([np.cos(azimuth) * np.sin(zenith), np.sin(azimuth) * np.sin(zenith), np.cos(zenith)])
    through = rng.uniform(-350, 350, 3)
    relative = positions - through
    along = relative @ -came_from  # how far down the track each sensor's nearest point is
    distance = np.linalg.norm(relative + along[:, None] * came_from, axis=1)
    seen = np.flatnonzero((distance < REACH) & (rng.random(len(positions)) < np.exp(-distance / SCATTER) + 0.2))
    start = rng.uniform(9_000, 11_000)
    time = start + along[seen] / LIGHT + distance[seen] / LIGHT * 0.3 + rng.normal(0, JITTER, len(seen))
    charge = np.round(np.exp(-distance[seen] / SCATTER) * rng.lognormal(0.5, 0.5, len(seen)) + 0.2, 3)
    noise = int(rng.integers(*NOISE_PULSES))
    sensor = np.concatenate([seen, rng.integers(0, len(positions), noise)])
    time = np.round(np.concatenate([time, start + rng.uniform(-2_000, 4_000, noise)]))
    charge = np.concatenate([charge, np.round(rng.uniform(0.2, 1.5, noise), 3)])
    auxiliary = np.concatenate([rng.random(len(seen)) < 0.05, np.ones(noise, dtype=bool)])
    order = np.argsort(time, kind="stable")
    return azimuth, zenith, (sensor[order], time[order], charge[order], auxiliary[order])


def batch(number: int, count: int, first_event: int, positions: np.ndarray, folder: Path,
          rng: np.random.Generator) -> pd.DataFrame:
    """Write folder/batch_<number>.parquet; return its meta rows (with the targets)."""
    event_ids = first_event + np.cumsum(rng.integers(1, 4, count))  # rising, with gaps, as the real ones
    drawn = [event(positions, rng) for _ in range(count)]
    lengths = np.array([len(pulses[0]) for *_, pulses in drawn])
    ends = np.cumsum(lengths)
    columns = [np.concatenate([pulses[k] for *_, pulses in drawn]) for k in range(4)]
    hits = pd.DataFrame({"sensor_id": columns[0].astype(np.int16), "time": columns[1].astype(np.int64),
                         "charge": columns[2], "auxiliary": columns[3].astype(bool)},
                        index=pd.Index(np.repeat(event_ids, lengths), name="event_id"))
    hits.to_parquet(folder / f"batch_{number}.parquet")
    return pd.DataFrame({"batch_id": number, "event_id": event_ids, "first_pulse_index": ends - lengths,
                         "last_pulse_index": ends - 1, "azimuth": [d[0] for d in drawn],
                         "zenith": [d[1] for d in drawn]})


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train_meta.parquet, test_meta.parquet, train/, test/, sensor_geometry.csv,
    sample_submission.csv) and prepared/private/test.csv, as many batches as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root, "train", "test")
    sensors = geometry()
    sensors.to_csv(public / "sensor_geometry.csv", index=False)
    positions = sensors[["x", "y", "z"]].to_numpy()
    tested = set(rng.choice(np.arange(1, size.batches + 1), max(1, round(TEST_SHARE * size.batches)),
                            replace=False).tolist())
    metas = {"train": [], "test": []}
    for number in range(1, size.batches + 1):
        split = "test" if number in tested else "train"
        first = 24 + (number - 1) * 4 * size.events  # event ids rise through the batches
        metas[split].append(batch(number, size.events, first, positions, public / split, rng))
    train, test = (pd.concat(metas[s], ignore_index=True) for s in ("train", "test"))
    train = train.astype({"azimuth": np.float32, "zenith": np.float32})
    train.to_parquet(public / "train_meta.parquet", index=False)
    test.drop(columns=["azimuth", "zenith"]).to_parquet(public / "test_meta.parquet", index=False)
    test[["event_id", "azimuth", "zenith"]].to_csv(private / "test.csv", index=False)
    test[["event_id"]].assign(azimuth=1, zenith=1).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "IceCube - Neutrinos in Deep Ice",
             "Predict, for each event of test_meta.parquet, the direction its neutrino came from (azimuth and "
             "zenith, radians) from its pulses in test/batch_<n>.parquet and the sensors' positions in "
             "sensor_geometry.csv.",
             "Submissions are evaluated on the mean angular error between the predicted and the true directions.",
             "Submit `event_id,azimuth,zenith` for every test event.")
