"""Events recorded as hits in shared batch files, summarised into one row of features per event (icecube's
neutrinos: each event's pulses, the sensor, time and charge of each, lie in a parquet file of its batch, at the
rows a meta table gives as `first_pulse_index` .. `last_pulse_index`; a positions table says where each sensor is).

Per event: how many hits and how much charge (and the share on auxiliary sensors), when they came (first, last,
spread), where (the charge-weighted centre and the spread of the hit sensors), and the line fit: the least-squares
velocity of hit positions against time, whose reverse points where a track came from, with its speed (a track
runs near the speed of light; a cascade's hits spread at no steady speed). The table engines learn the direction
from these.

The items reader `pulse_events` (runner.data.items' READERS makes its `Items`): `items_file` and
`test_items_file` are the meta tables (`batch_id, event_id, first_pulse_index, last_pulse_index`, the targets in
the training one), `image_dir` and `test_image_dir` the folders of batch files (the batch's number in the name:
`batch_<n>.parquet`), `positions_file` the sensors' `sensor_id, x, y, z`. Whole batches are read, in order, until
MAX_TRAIN_EVENTS training events (the real competition's 118 million would not fit a run's memory or window); every
test event is read.
"""
from __future__ import annotations

import logging
import os
import re
from multiprocessing.pool import ThreadPool
from pathlib import Path

import numpy as np
import pandas as pd

from runner.common.errors import InputError
from runner.common.sampling import Sampled
from runner.competition.spec import CompetitionSpec
from runner.data.reading import image_files, located, read_csv, read_table

log = logging.getLogger(__name__)

MAX_TRAIN_EVENTS = 2_000_000  # ten real batches: minutes of boosting on a 16-core node, a few GiB of features
THREADS = min(4, os.cpu_count() or 1)  # batches summarised at once: each holds ~1-2 GiB of a real batch's pulses
BATCH_NUMBER = re.compile(r"(\d+)\.parquet$")  # the batch a file holds, by the last number in its name
META = ("batch_id", "event_id", "first_pulse_index", "last_pulse_index")
HITS = ("sensor_id", "time", "charge", "auxiliary")
FEATURES = ("hits", "charge", "log_charge", "auxiliary_share", "first_time", "last_time", "time_spread",
            "centre_x", "centre_y", "centre_z", "spread_x", "spread_y", "spread_z",
            "velocity_x", "velocity_y", "velocity_z", "speed", "from_x", "from_y", "from_z")


def batch_files(data_dir: Path, folder: str, work_dir: Path) -> dict[int, Path]:
    """The batch files of a folder by batch number."""
    files = {}
    for path in image_files(data_dir, folder, work_dir):
        if match := BATCH_NUMBER.search(path.name):
            files[int(match.group(1))] = path
    if not files:
        raise InputError(f"{data_dir / folder}: no batch file (`batch_<n>.parquet`)")
    return files


def sensor_positions(path: Path, root: Path) -> np.ndarray:
    """(sensors x 3) positions indexed by sensor id (NaN for an id the table lacks)."""
    table = read_csv(path, "sensor positions", root)
    missing = [c for c in ("sensor_id", "x", "y", "z") if c not in table.columns]
    if missing:
        raise InputError(f"{path}: no column(s) {missing}")
    ids = table["sensor_id"].astype(int).to_numpy()
    positions = np.full((ids.max() + 1, 3), np.nan)
    positions[ids] = table[["x", "y", "z"]].to_numpy(dtype=np.float64)
    return positions


def _sums(values: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Each event's sum of `values` over its rows starts..ends-1 (starts rising): summed in place where the
    events' rows follow one another (as a batch file holds them), else from cumulative sums."""
    if len(starts) and np.array_equal(starts[1:], ends[:-1]) and ends[-1] == len(values) and (ends > starts).all():
        return np.add.reduceat(values.astype(np.float64, copy=False), starts)
    running = np.concatenate([[0.0], np.cumsum(values, dtype=np.float64)])
    return running[ends] - running[starts]


def event_features(hits: pd.DataFrame, positions: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """(events x FEATURES) of the events whose hits are rows starts..ends-1 of one batch's `hits`."""
    sensor = hits["sensor_id"].to_numpy().astype(np.int64)
    where = positions[np.clip(sensor, 0, len(positions) - 1)]
    time = hits["time"].to_numpy(dtype=np.float64)
    time -= np.median(time) if len(time) else 0.0  # nearer zero: sums of squares keep their precision
    charge = hits["charge"].to_numpy(dtype=np.float64)
    auxiliary = hits["auxiliary"].to_numpy().astype(np.float64)
    count = np.maximum(ends - starts, 1).astype(np.float64)
    total = _sums(charge, starts, ends)
    mean_t = _sums(time, starts, ends) / count
    t_square = _sums(time * time, starts, ends) / count - mean_t ** 2
    first = np.minimum.reduceat(time, starts) if len(time) else np.zeros(len(starts))
    last = np.maximum.reduceat(time, starts) if len(time) else np.zeros(len(starts))
    columns = [count, total, np.log1p(total), _sums(auxiliary, starts, ends) / count, first - mean_t,
               last - mean_t, np.sqrt(np.maximum(t_square, 0))]
    centres, spreads, velocity = [], [], []
    for axis in range(3):
        x = np.nan_to_num(where[:, axis])
        mean_x = _sums(x, starts, ends) / count
        centres.append(_sums(x * charge, starts, ends) / np.maximum(total, 1e-9))
        spreads.append(np.sqrt(np.maximum(_sums(x * x, starts, ends) / count - mean_x ** 2, 0)))
        covariance = _sums(x * time, starts, ends) / count - mean_x * mean_t
        velocity.append(covariance / np.maximum(t_square, 1e-9))
    velocity = np.stack(velocity, axis=1)
    speed = np.linalg.norm(velocity, axis=1)
    origin = -velocity / np.maximum(speed, 1e-12)[:, None]  # a track comes from where its hits came first
    return np.column_stack([*columns, *centres, *spreads, velocity, speed, origin]).astype(np.float32)


def batch_features(meta: pd.DataFrame, path: Path, positions: np.ndarray) -> pd.DataFrame:
    """The features of one batch's events (`meta`'s rows of that batch, in its order)."""
    try:
        hits = pd.read_parquet(path, columns=list(HITS))
    except Exception as exc:  # pyarrow's errors, a missing column
        raise InputError(f"{path}: cannot read its hits: {exc}") from exc
    order = np.argsort(meta["first_pulse_index"].to_numpy(), kind="stable")
    starts = meta["first_pulse_index"].to_numpy()[order].astype(np.int64)
    ends = meta["last_pulse_index"].to_numpy()[order].astype(np.int64) + 1
    if len(starts) and (starts.min() < 0 or ends.max() > len(hits)):
        raise InputError(f"{path}: the meta table's pulse rows run past its {len(hits)} hits")
    features = np.empty((len(meta), len(FEATURES)), dtype=np.float32)
    features[order] = event_features(hits, positions, starts, ends)
    return pd.DataFrame(features, columns=list(FEATURES), index=meta.index)


def _read_meta(path: Path, root: Path, batches: list | None = None) -> pd.DataFrame:
    """An event table, or only its rows of `batches` (read by pyarrow's filter: the real training table holds
    118.8 million events)."""
    if batches is None:
        meta = read_table(path, "event table", root)
    else:
        try:
            meta = pd.read_parquet(located(path, "event table", root), filters=[("batch_id", "in", batches)])
        except Exception as exc:  # pyarrow's errors
            raise InputError(f"{path}: cannot read event table: {exc}") from exc
    missing = [c for c in META if c not in meta.columns]
    if missing:
        raise InputError(f"{path}: no column(s) {missing}")
    return meta


def _batch_sizes(path: Path, root: Path) -> pd.Series:
    """Events per batch, in the table's order, from its `batch_id` column alone."""
    try:
        batch_ids = pd.read_parquet(located(path, "event table", root), columns=["batch_id"])["batch_id"]
    except Exception as exc:  # pyarrow's errors, a missing column
        raise InputError(f"{path}: cannot read its batch_id column: {exc}") from exc
    return batch_ids.groupby(batch_ids, sort=False).size()


def _features(meta: pd.DataFrame, files: dict[int, Path], positions: np.ndarray, where: str) -> pd.DataFrame:
    """Every event of `meta` with its batch's features (NaN for an event whose batch file is missing)."""
    def one(job) -> pd.DataFrame:
        batch, events = job
        if int(batch) not in files:
            log.warning("%s: no file of batch %s: its %d events have no features", where, batch, len(events))
            return pd.DataFrame(np.nan, index=events.index, columns=list(FEATURES))
        return batch_features(events, files[int(batch)], positions)

    with ThreadPool(THREADS) as pool:  # NumPy and pyarrow work outside the GIL
        parts = pool.map(one, list(meta.groupby("batch_id", sort=False)), chunksize=1)
    return pd.concat([meta, pd.concat(parts).reindex(meta.index)], axis=1)


def pulse_events(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame) -> tuple:
    """(training table, training files, test files, where, test table): the fields of runner.data.items' `Items`."""
    for field in ("items_file", "test_items_file", "image_dir", "test_image_dir", "positions_file"):
        if not getattr(spec, field):
            raise InputError(f"spec {spec.id}: pulse_events needs {field}")
    train_path = data_dir / spec.items_file
    sizes = _batch_sizes(train_path, data_dir)
    read = sizes.index[(sizes.cumsum() - sizes) < MAX_TRAIN_EVENTS]  # whole batches, in order, to the cap
    kept = _read_meta(train_path, data_dir, None if len(read) == len(sizes) else read.tolist())
    test_meta = _read_meta(data_dir / spec.test_items_file, data_dir)
    positions = sensor_positions(data_dir / spec.positions_file, data_dir)
    train_files = batch_files(data_dir, spec.image_dir, work_dir)
    test_files = batch_files(data_dir, spec.test_image_dir, work_dir)
    train = _features(kept.reset_index(drop=True), train_files, positions, str(data_dir / spec.image_dir))
    if len(kept) < sizes.sum():
        train.attrs["sampled"] = Sampled(what="training events", kept=len(kept), of=int(sizes.sum()),
                                         how=f"the first {len(read)} of {len(sizes)} batches, whole",
                                         source=str(train_path),
                                         why=f"at most {MAX_TRAIN_EVENTS:,} events are read and summarised")
    test = _features(test_meta, test_files, positions, str(data_dir / spec.test_image_dir))
    order = pd.Index(test[spec.id_column].astype(str)).get_indexer(sample[spec.id_column].astype(str))
    if (order < 0).all():
        raise InputError(f"{data_dir / spec.test_items_file}: none of the sample submission's ids is in it")
    test = test.reindex(order).reset_index(drop=True)
    test[spec.id_column] = sample[spec.id_column].to_numpy()
    files = [train_files.get(int(b)) for b in train["batch_id"]]
    return train, files, [None] * len(test), str(train_path), test
