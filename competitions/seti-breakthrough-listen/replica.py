"""A synthetic seti-breakthrough-listen: one float16 NumPy array per snippet (6 cadence panels x time x frequency),
in train/<first character of the id>/<id>.npy and test/<c>/<id>.npy, labels in train_labels.csv (`id,target`), as
MLE-bench's 90/10 split of the real labelled snippets lays them out; the old, leaky data of the first launch
beside them (old_leaky_data/), the answers in private/test.csv, the sample's targets 0.5.

Each panel is noise. A needle (target 1) is a faint narrow line drifting in frequency through the on-target panels
0, 2 and 4 only; a share of the negatives carry interference instead, a line of the same kind through all six
panels, so "a line is there" is not enough: it must be on the on-target panels alone. The panels' strongest
columns tell them apart (a table model on them learns much of it), a CNN on the cadence as a picture the rest;
any constant scores an AUC of 0.5.

`sizes(scale)`: 6 x 16 x 64 arrays at a factor of the replica's own counts; at REAL the 60,000 snippets of
6 x 273 x 256 (839 kB each, 50 GB).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import folders, hex_ids

PANELS = 6  # the cadence: on-target (A) at 0, 2, 4; off-target at 1, 3, 5
ON = (0, 2, 4)
TIMES, CHANNELS = 16, 64  # the replica's panels: 16 time steps x 64 frequency channels
REAL_TIMES, REAL_CHANNELS = 273, 256
TRAIN, TEST = 360, 200  # the replica's own counts: a test AUC steady to a few hundredths
REAL_TRAIN, REAL_TEST = 54_000, 6_000  # MLE-bench's 90/10 split of the 60,000 labelled snippets
OLD = 12  # old_leaky_data's arrays per split in the replica (the real first launch's 50,165 and 35,847)
LEAST = 20
NEEDLE_SHARE = 0.15  # the real snippets hold about a tenth of needles; a few more steady the replica's AUC
INTERFERENCE_SHARE = 0.3  # of the negatives: a line through every panel
LEVEL = (1.0, 2.5)  # a line's brightness against the noise's standard deviation
DRIFT = 0.18  # the most a line drifts over the cadence, either way: this share of the channels
ID_LENGTH = 15


@dataclass(frozen=True)
class Arrays:
    train: int
    test: int
    shape: tuple[int, int, int]


def sizes(scale: float | str = 1.0) -> Arrays:
    """How many snippets `scale` writes (a factor of the replica's own counts, or REAL) and their shape."""
    scale = parse_scale(scale)
    shape = (PANELS, REAL_TIMES, REAL_CHANNELS) if is_real(scale) else (PANELS, TIMES, CHANNELS)
    return Arrays(scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST), shape)


def cadence(kind: int, shape: tuple[int, int, int], rng: np.random.Generator) -> np.ndarray:
    """One snippet: noise, and (kind 1) a needle in the on-target panels or (kind 2) interference in all six."""
    panels, times, channels = shape
    array = rng.standard_normal(shape).astype(np.float32)
    if kind:
        width = channels / CHANNELS  # a line as wide, and drifting as far, at every size
        start, drift = rng.uniform(0.2, 0.8) * channels, rng.uniform(-DRIFT, DRIFT) * channels
        level = rng.uniform(*LEVEL)
        at = start + drift * np.linspace(0, 1, panels * times)  # the line's channel over the cadence
        columns = np.arange(channels)[None, :]
        line = level * np.exp(-0.5 * ((columns - at[:, None]) / width) ** 2)  # (cadence time x channels)
        shown = ON if kind == 1 else range(panels)
        for p in shown:
            array[p] += line[p * times:(p + 1) * times]
    return array.astype(np.float16)


def _write(ids: list[str], kinds: np.ndarray, folder: Path, shape, rng: np.random.Generator) -> None:
    for name, kind in zip(ids, kinds):
        (folder / name[0]).mkdir(parents=True, exist_ok=True)
        np.save(folder / name[0] / f"{name}.npy", cadence(int(kind), shape, rng))


def _kinds(count: int, rng: np.random.Generator) -> np.ndarray:
    """0 noise, 1 needle, 2 interference: NEEDLE_SHARE needles, INTERFERENCE_SHARE of the rest interference."""
    needle = rng.permutation(np.arange(count) < round(NEEDLE_SHARE * count))
    return np.where(needle, 1, np.where(rng.random(count) < INTERFERENCE_SHARE, 2, 0))


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train_labels.csv, train/, test/, old_leaky_data/, sample_submission.csv) and
    prepared/private/test.csv, as many snippets as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root, "train", "test", "old_leaky_data")
    ids = hex_ids(rng, size.train + size.test + 2 * OLD, ID_LENGTH)
    kinds = _kinds(len(ids), rng)
    train, test = slice(0, size.train), slice(size.train, size.train + size.test)
    _write(ids[train], kinds[train], public / "train", size.shape, rng)
    _write(ids[test], kinds[test], public / "test", size.shape, rng)
    labels = pd.DataFrame({"id": ids, "target": (kinds == 1).astype(int)})
    labels[train].to_csv(public / "train_labels.csv", index=False)
    labels[test].to_csv(private / "test.csv", index=False)
    labels[test].assign(target=0.5).to_csv(public / "sample_submission.csv", index=False)
    old = public / "old_leaky_data"
    for k, split in enumerate(("train", "test")):  # the first launch's data, its test labels published
        rows = slice(size.train + size.test + k * OLD, size.train + size.test + (k + 1) * OLD)
        _write(ids[rows], kinds[rows], old / f"{split}_old", size.shape, rng)
        labels[rows].to_csv(old / f"{split}_labels_old.csv", index=False)
    describe(public, "SETI Breakthrough Listen - E.T. Signal Search",
             "Predict, for each snippet in test/<first character of its id>/<id>.npy (6 cadence panels x time x "
             "frequency; the telescope on the target in panels 0, 2 and 4), the probability that it holds a "
             "signal from the target: a narrow line drifting in frequency in the on-target panels only.",
             "Submissions are evaluated on the area under the ROC curve.",
             "Submit `id,target` for every test snippet.")
