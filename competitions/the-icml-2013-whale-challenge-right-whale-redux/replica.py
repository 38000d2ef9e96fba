"""A synthetic the-icml-2013-whale-challenge-right-whale-redux: 2 kHz AIFF clips, some with an up-call.

train2.zip and test2.zip (each with its top-level folder) hold clips from four days: the first two are train,
the last two test. The label is in the train file name (`..._TRAIN<i>_<0|1>.aif`); test clips end `_Test<i>.aif`
and the submission id is the full test file name. A whale clip carries a faint upward sweep (about 90 -> 260 Hz)
in noise of varying loudness, as the real up-calls sit in ocean noise; half the noise clips carry a distractor
instead: a flat tone, a downward sweep, or an up-sweep above the whales' band. On 400 such clips logistic
regression on log-mel band statistics reaches a cross-validated ROC AUC of about 0.80 and LightGBM on them
0.87, so a model that learns the sweep's shape has room above them; the all-zero sample submission scores 0.5.

`sizes(scale)` says how many clips a scale writes and how long: 1-second clips at a factor of the replica's own
counts; at REAL the 47,841 2-second clips of the real train2.zip's four days. Clips are drawn as numpy batches,
by worker processes when there are many samples.
"""
from __future__ import annotations

import os
import shutil
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import quota, render
from runner.demo._sounds import Clips, burst, write_aiff

RATE = 2000  # the real clips are 2 kHz mono
SAMPLES, REAL_SAMPLES = 2000, 4000  # one second keeps the replica small; the real clips are two seconds
DAYS = ("20090328", "20090329", "20090330", "20090331")  # first two train, last two test
TRAIN, TEST = 300, 120  # the replica's own counts: a test AUC steady enough to tell models apart
# the real train2.zip holds 47,841 clips of four days, MLE-bench's train the first two; how they fall on the days
# is not published, so the days are taken as even
REAL_TRAIN, REAL_TEST = 23_920, 23_921
LEAST = 20  # clips a split keeps at the smallest factors: 6 of them whales, so a test AUC is defined
WHALE_SHARE = 0.3  # share of clips with an up-call
DISTRACTOR_SHARE = 0.5  # share of noise clips with a tone, a down-sweep or an up-sweep out of the whales' band
CALL_LEVEL = (0.1, 0.5)  # a call's amplitude against noise of standard deviation NOISE_LEVEL: often barely there
NOISE_LEVEL = (0.3, 0.8)
FILE_TIME = 1364428800  # fixed modification time (2013-03-28) so the zips are identical for a seed
STEMS_A_DAY = 96 * 900 * 10  # distinct clip start times in a day: 96 quarter-hour files, 900 s, tenths of a second
BATCH = 1024  # clips drawn as one numpy batch: 8 MB of samples at the real length


def sizes(scale: float | str = 1.0) -> Clips:
    """How many clips `scale` writes (a factor of the replica's own counts, or REAL) and their length."""
    scale = parse_scale(scale)
    return Clips(scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST), RATE,
                 REAL_SAMPLES if is_real(scale) else SAMPLES)


def _sweeps(whale: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each clip's sweep as (start, end) Hz, NaN where it has none: the whale's up-call, or for half the noise
    clips a flat tone, a down-sweep, or an up-sweep above the whales' band."""
    n = len(whale)
    low, rise, tone, high = rng.uniform(70, 110, n), rng.uniform(130, 190, n), rng.uniform(120, 300, n), \
        rng.uniform(250, 400, n)
    kind = np.where(rng.random(n) < DISTRACTOR_SHARE, rng.integers(0, 3, n), -1)
    cases = [whale, ~whale & (kind == 0), ~whale & (kind == 1), ~whale & (kind == 2)]
    start = np.select(cases, [low, tone, tone, high], np.nan)
    end = np.select(cases, [low + rise, tone, tone - rng.uniform(60, 100, n), high + rise], np.nan)
    return start, end


def clips(whale: np.ndarray, samples: int, rng: np.random.Generator) -> np.ndarray:
    """(clips, samples) signals: noise of each clip's own loudness with a low hum, and its sweep if it has one."""
    n, t = len(whale), np.arange(samples) / RATE
    signal = rng.standard_normal((n, samples)) * rng.uniform(*NOISE_LEVEL, (n, 1))
    signal += 0.3 * np.sin(2 * np.pi * rng.uniform(30, 60, (n, 1)) * t)
    length = rng.integers(900, 1400, n)
    at, level = rng.integers(0, samples - length), rng.uniform(*CALL_LEVEL, n)
    start, end = _sweeps(whale, rng)
    for k in np.flatnonzero(~np.isnan(start)):  # a call costs its own length, not the clip's
        signal[k, at[k]:at[k] + length[k]] += level[k] * burst(int(length[k]), RATE, start[k], end[k])
    return signal


def _write(items: list[tuple[str, bool]], seed: int, folder: Path, samples: int) -> list:
    """Write folder/<name> for each (name, whale): one task's batch, drawn from its own seed."""
    signals = clips(np.array([whale for _, whale in items], dtype=bool), samples, np.random.default_rng(seed))
    for (name, _), signal in zip(items, signals):
        write_aiff(folder / name, signal, RATE)
    return []


def _day(day: str, count: int, rng: np.random.Generator) -> list[str]:
    """Sorted, distinct name stems `YYYYMMDD_HHMMSS_<sec>s<tenth>ms` within the day's 15-minute recordings."""
    quarter, rest = np.divmod(np.sort(rng.choice(STEMS_A_DAY, count, replace=False)), 900 * 10)
    second, tenth = np.divmod(rest, 10)
    return [f"{day}_{q // 4:02d}{q % 4 * 15:02d}00_{s:03d}s{t}ms" for q, s, t in zip(quarter, second, tenth)]


def _split(days: tuple[str, str], count: int, folder: Path, size: Clips, rng: np.random.Generator,
           pattern: str) -> pd.DataFrame:
    """Write one split's clips over its two days, named by `pattern` (of stem, idx and whale); return the clip
    file names with their labels."""
    stems = _day(days[0], count // 2, rng) + _day(days[1], count - count // 2, rng)
    whale = quota((1 - WHALE_SHARE, WHALE_SHARE), count, rng).astype(bool)
    files = [pattern.format(stem=stem, idx=idx, whale=int(label))
             for idx, (stem, label) in enumerate(zip(stems, whale))]
    render(partial(_write, folder=folder, samples=size.samples), list(zip(files, whale.tolist())), rng, BATCH,
           count * size.samples)
    return pd.DataFrame({"clip": files, "probability": whale.astype(int)})


def _archive(public: Path, folder: str) -> None:
    """Zip public/<folder> with its top-level folder, as shutil.make_archive does, then drop the folder."""
    for path in [public / folder, *(public / folder).iterdir()]:
        os.utime(path, (FILE_TIME, FILE_TIME))
    shutil.make_archive(str(public / folder), "zip", public, folder)
    shutil.rmtree(public / folder)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train2.zip, test2.zip, sampleSubmission.csv) and prepared/private/test.csv, as many
    clips as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    for folder in (public / "train2", public / "test2", private):
        folder.mkdir(parents=True, exist_ok=True)
    _split(DAYS[:2], size.train, public / "train2", size, rng, "{stem}_TRAIN{idx}_{whale}.aif")
    truth = _split(DAYS[2:], size.test, public / "test2", size, rng, "{stem}_Test{idx}.aif")
    _archive(public, "train2")
    _archive(public, "test2")
    truth.to_csv(private / "test.csv", index=False)
    truth.assign(probability=0).to_csv(public / "sampleSubmission.csv", index=False)
    describe(public, "The ICML 2013 Whale Challenge - Right Whale Redux",
             "Predict the probability that each test clip (in test2.zip) contains a right whale up-call; train "
             "clips ending in `_1.aif` are whale calls, `_0.aif` noise.",
             "Submissions are judged on area under the ROC curve.",
             "Submit `clip,probability` with clip = the full test file name, e.g. `20090330_000000_012s0ms_Test0.aif`.")
