"""How many training images a budget can afford to decode: every image is decoded once into the cache before the
first fold, and 27k camera-sized JPEGs or 3.6k retina PNGs on a few cores can take the whole window. The cost of
one decode is measured on a few training images spread over the list; when decoding every one (the test images
all, they must be predicted) would take more than DECODE_SHARE of the budget on the run's cores, the training
images are drawn at random to what it affords, said as a `Sampled`."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np

from runner.common.sampling import SAMPLING_SEED, Sampled

DECODE_SHARE = 0.15  # of the budget the first decode of the images may take on every core: the rest trains
PROBES = 8  # training images decoded and timed: enough for a median, milliseconds for small images
PROBE_SIDE = 256  # the side they are decoded at: about a mid-ladder model's cache
LEAST_TRAIN = 1_000  # training images kept at least however slow a decode: fewer would learn nothing useful


def decode_seconds(paths: list[Path | None], decode: Callable[[Path, int], object]) -> float:
    """Seconds one core takes to decode and resize one training image: the median over PROBES spread over the
    list (0.0 when none decodes)."""
    present = [p for p in paths if p is not None]
    times = []
    for k in np.unique(np.linspace(0, len(present) - 1, min(PROBES, len(present))).astype(int)):
        started = time.perf_counter()
        if decode(present[k], PROBE_SIDE) is not None:
            times.append(time.perf_counter() - started)
    return float(np.median(times)) if times else 0.0


def affordable_train(trainable: np.ndarray, n_test: int, seconds_each: float, budget_seconds: float, cores: int,
                     source: str) -> tuple[np.ndarray, Sampled | None]:
    """The training rows to keep (a mask within `trainable`) so that decoding them and every test image takes at
    most DECODE_SHARE of the budget on `cores`, drawn at random; and what was cut, or None when all fit."""
    if seconds_each <= 0:
        return trainable, None
    images = int(DECODE_SHARE * budget_seconds * max(1, cores) / seconds_each)
    rows = np.flatnonzero(trainable)
    most = max(LEAST_TRAIN, images - n_test)
    if len(rows) <= most:
        return trainable, None
    kept = np.zeros_like(trainable)
    kept[np.random.default_rng(SAMPLING_SEED).choice(rows, most, replace=False)] = True
    whole = (len(rows) + n_test) * seconds_each / max(1, cores)
    return kept, Sampled(what="training images", kept=most, of=len(rows), how="drawn at random", source=source,
                         why=f"decoding every image takes ~{whole:.0f} s on {cores} core(s) ({seconds_each * 1000:.0f}"
                             f" ms each), more than {DECODE_SHARE:.0%} of the {budget_seconds:.0f} s budget; "
                             f"every test image is decoded")
