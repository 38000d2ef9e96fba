"""A synthetic the-icml-2013-whale-challenge-right-whale-redux: 1-second 2 kHz AIFF clips, some with an up-call.

train2.zip and test2.zip (each with its top-level folder) hold clips from four days: the first two are train,
the last two test. The label is in the train file name (`..._TRAIN<i>_<0|1>.aif`); test clips end `_Test<i>.aif`
and the submission id is the full test file name. A whale clip carries a faint upward sweep (about 90 -> 260 Hz)
in noise of varying loudness, as the real up-calls sit in ocean noise; half the noise clips carry a distractor
instead: a flat tone, a downward sweep, or an up-sweep above the whales' band. On 400 such clips logistic
regression on log-mel band statistics reaches a cross-validated ROC AUC of about 0.80 and LightGBM on them
0.87, so a model that learns the sweep's shape has room above them; the all-zero sample submission scores 0.5.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe
from runner.demo._sounds import chirp, write_aiff

RATE, SAMPLES = 2000, 2000  # the real clips are 2 kHz mono; one second keeps the replica small
DAYS = ("20090328", "20090329", "20090330", "20090331")  # first two train, last two test
CLIPS_PER_DAY = (150, 150, 60, 60)  # 300 train and 120 test clips: a test AUC steady enough to tell models apart
WHALE_SHARE = 0.3  # share of clips with an up-call
DISTRACTOR_SHARE = 0.5  # share of noise clips with a tone, a down-sweep or an up-sweep out of the whales' band
CALL_LEVEL = (0.1, 0.5)  # a call's amplitude against noise of standard deviation NOISE_LEVEL: often barely there
NOISE_LEVEL = (0.3, 0.8)
FILE_TIME = 1364428800  # fixed modification time (2013-03-28) so the zips are identical for a seed


def _clip(whale: bool, rng: np.random.Generator) -> np.ndarray:
    """Noise with a low hum; a whale clip adds a faint up-sweep, half the noise clips a distractor."""
    t = np.arange(SAMPLES) / RATE
    signal = rng.normal(0, rng.uniform(*NOISE_LEVEL), SAMPLES) + 0.3 * np.sin(2 * np.pi * rng.uniform(30, 60) * t)
    length = int(rng.integers(900, 1400))
    at = int(rng.integers(0, SAMPLES - length))
    if whale:
        start = rng.uniform(70, 110)
        signal += rng.uniform(*CALL_LEVEL) * chirp(SAMPLES, RATE, start, start + rng.uniform(130, 190), at, length)
    elif rng.random() < DISTRACTOR_SHARE:
        kind, start = int(rng.integers(3)), rng.uniform(120, 300)
        end = (start, start - rng.uniform(60, 100), None)[kind]
        if end is None:  # an up-sweep, but above the whales' band
            start = rng.uniform(250, 400)
            end = start + rng.uniform(130, 190)
        signal += rng.uniform(*CALL_LEVEL) * chirp(SAMPLES, RATE, start, end, at, length)
    return signal


def _day(day: str, count: int, rng: np.random.Generator) -> list[str]:
    """Sorted, distinct name stems `YYYYMMDD_HHMMSS_<sec>s<tenth>ms` within the day's 15-minute recordings."""
    stems: set[str] = set()
    while len(stems) < count:
        quarter, second, tenth = int(rng.integers(0, 96)), int(rng.integers(0, 900)), int(rng.integers(0, 10))
        stems.add(f"{day}_{quarter // 4:02d}{quarter % 4 * 15:02d}00_{second:03d}s{tenth}ms")
    return sorted(stems)


def _archive(public: Path, folder: str) -> None:
    """Zip public/<folder> with its top-level folder, as shutil.make_archive does, then drop the folder."""
    for path in [public / folder, *(public / folder).iterdir()]:
        os.utime(path, (FILE_TIME, FILE_TIME))
    shutil.make_archive(str(public / folder), "zip", public, folder)
    shutil.rmtree(public / folder)


def generate(root: Path, rng: np.random.Generator) -> None:
    """Write prepared/public (train2.zip, test2.zip, sampleSubmission.csv) and prepared/private/test.csv."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    for folder in (public / "train2", public / "test2", private):
        folder.mkdir(parents=True, exist_ok=True)
    train_stems = _day(DAYS[0], CLIPS_PER_DAY[0], rng) + _day(DAYS[1], CLIPS_PER_DAY[1], rng)
    test_stems = _day(DAYS[2], CLIPS_PER_DAY[2], rng) + _day(DAYS[3], CLIPS_PER_DAY[3], rng)
    for idx, stem in enumerate(train_stems):
        whale = bool(rng.random() < WHALE_SHARE)
        write_aiff(public / "train2" / f"{stem}_TRAIN{idx}_{int(whale)}.aif", _clip(whale, rng), RATE)
    answers = []
    for idx, stem in enumerate(test_stems):
        whale = bool(rng.random() < WHALE_SHARE)
        clip = f"{stem}_Test{idx}.aif"
        write_aiff(public / "test2" / clip, _clip(whale, rng), RATE)
        answers.append((clip, int(whale)))
    _archive(public, "train2")
    _archive(public, "test2")
    truth = pd.DataFrame(answers, columns=["clip", "probability"])
    truth.to_csv(private / "test.csv", index=False)
    truth.assign(probability=0).to_csv(public / "sampleSubmission.csv", index=False)
    describe(public, "The ICML 2013 Whale Challenge - Right Whale Redux",
             "Predict the probability that each test clip (in test2.zip) contains a right whale up-call; train "
             "clips ending in `_1.aif` are whale calls, `_0.aif` noise.",
             "Submissions are judged on area under the ROC curve.",
             "Submit `clip,probability` with clip = the full test file name, e.g. `20090330_000000_012s0ms_Test0.aif`.")
