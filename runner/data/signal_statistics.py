"""A recording per item, one table a file (CSV or parquet: each numeric column a channel, each row a moment, such
as ten seismic sensors at 100 Hz or twenty EEG leads at 200 Hz), summarised into one row of a table the table
engines learn from: per channel its missing share, level, spread, percentiles, roughness (mean absolute step) and
how its power spreads over octave bands of the recording's own frequency range (the rate need not be known: the
bands are shares of the Nyquist frequency, from the top octave down).

Files several rows share (an EEG per label window) are read once. A file that cannot be read gives its rows no
values (NaN: the boosters take them as missing). At most MAX_ROWS rows of a file are summarised, the middle ones:
a recording of hours says in minutes what its level and rhythms are.
"""
from __future__ import annotations

import logging
from multiprocessing.pool import ThreadPool
from pathlib import Path

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)

MAX_ROWS = 2**17  # rows of one file summarised: ~22 min at 100 Hz, an FFT of milliseconds per channel
PERCENTILES = (5, 25, 50, 75, 95)
OCTAVES = 8  # power bands: the top octave of the frequency range (Nyquist/2 .. Nyquist), the one below, ...
SEGMENT = 1024  # Welch's segment: 1024 samples resolve the lowest band of eight (Nyquist/256) by two bins
STATISTICS = ("missing", "mean", "std", "min", "max", *(f"p{q}" for q in PERCENTILES), "step",
              *(f"band{k}" for k in range(OCTAVES)))
POWER_FLOOR = 1e-12  # of the total: the log of a band with no power at all


def read_recording(path: Path) -> pd.DataFrame:
    """A recording's numeric columns as float32 (parquet by its name, else CSV), at most MAX_ROWS middle rows."""
    path = Path(path)
    frame = pd.read_parquet(path) if path.suffix.lower() == ".parquet" else pd.read_csv(path)
    frame = frame.select_dtypes("number").astype(np.float32)
    if frame.shape[1] == 0:
        raise ValueError("no numeric column")
    if len(frame) > MAX_ROWS:
        start = (len(frame) - MAX_ROWS) // 2
        frame = frame.iloc[start:start + MAX_ROWS]
    return frame


def band_shares(signal: np.ndarray) -> np.ndarray:
    """log10 of the share of a signal's power (its mean removed) in each of OCTAVES octave bands, the top octave
    first; NaN when it is too short or silent."""
    from scipy.signal import welch

    if len(signal) < 16 or not np.any(signal != signal[0]):
        return np.full(OCTAVES, np.nan, dtype=np.float32)
    frequencies, power = welch(signal - signal.mean(), nperseg=min(SEGMENT, len(signal)))
    relative = frequencies / frequencies[-1]  # 0 .. 1 of the Nyquist frequency
    total = power.sum() or 1.0
    shares = [power[(relative > 2.0 ** -(k + 1)) & (relative <= 2.0 ** -k)].sum() / total for k in range(OCTAVES)]
    return np.log10(np.maximum(shares, POWER_FLOOR)).astype(np.float32)


def channel_statistics(values: np.ndarray) -> np.ndarray:
    """STATISTICS of one channel (NaN for a missing sample)."""
    present = values[np.isfinite(values)]
    missing = 1.0 - len(present) / max(1, len(values))
    if not len(present):
        return np.array([missing] + [np.nan] * (len(STATISTICS) - 1), dtype=np.float32)
    step = float(np.abs(np.diff(present)).mean()) if len(present) > 1 else 0.0
    return np.concatenate([[missing, present.mean(), present.std(), present.min(), present.max()],
                           np.percentile(present, PERCENTILES), [step], band_shares(present)]).astype(np.float32)


def recording_row(path: Path) -> pd.Series:
    """One recording's STATISTICS, channel by channel, as a row named `<channel>_<statistic>`."""
    frame = read_recording(path)
    values = np.concatenate([channel_statistics(frame[c].to_numpy()) for c in frame.columns])
    return pd.Series(values, index=[f"{c}_{s}" for c in frame.columns for s in STATISTICS])


def _rows(paths: list[Path | None], found: dict, workers: int) -> None:
    """Each new file's row into `found` (None where it cannot be read), on `workers` threads."""
    new = [p for p in dict.fromkeys(paths) if p is not None and p not in found]

    def one(path):
        try:
            return recording_row(path)
        except (OSError, ValueError, ImportError, pd.errors.ParserError) as exc:
            log.warning("%s: cannot be read as a recording: %s", path, exc)
            return None

    with ThreadPool(max(1, workers)) as pool:
        found.update(zip(new, pool.map(one, new, chunksize=4)))


def statistics_table(paths: list[Path | None], found: dict, columns: list[str]) -> pd.DataFrame:
    """The rows of `paths` from `found`, in `columns` (NaN where a file gave none or lacks a channel): each file's
    row made once, then repeated for the rows that share it."""
    files = [p for p in dict.fromkeys(paths) if p is not None and found.get(p) is not None]
    matrix = np.full((len(files) + 1, len(columns)), np.nan, dtype=np.float32)  # the last row: no file
    for i, path in enumerate(files):
        matrix[i] = found[path].reindex(columns).to_numpy(dtype=np.float32)
    where = {p: i for i, p in enumerate(files)}
    return pd.DataFrame(matrix[[where.get(p, len(files)) for p in paths]], columns=columns)


def signal_statistics(spec, train: list[Path | None], test: list[Path | None], work_dir: Path,
                      workers: int = 1) -> dict[str, tuple]:
    """The table view: a row of per-channel statistics for each training and test row's recording."""
    found: dict = {}
    _rows(list(train) + list(test), found, workers)
    columns = list(dict.fromkeys(c for row in found.values() if row is not None for c in row.index))
    return {"table": (statistics_table(train, found, columns), statistics_table(test, found, columns))}
