"""A synthetic tgs-salt-identification-challenge: 101 x 101 greyscale seismic slices in train/images/ and
test/images/, the training salt masks in train/masks/ and as column-major run-length strings in train.csv
(`id,rle_mask`, an empty cell where there is no salt, sorted by id), each training slice's depth in depths.csv
(`id,z`, train ids only); the answers in private/test.csv, the sample marks pixel 1 of every test slice (`1 1`).

Sediment shows as bright and dark layers, gently folded; salt is a smooth-edged body of faint, grainy texture, a
little brighter than the layers it cuts, with a bright reflection along its top. As in the real set about 39% of
the slices hold no salt, and a salt body covers anything from a sliver to the whole slice. A model of each pixel's
neighbourhood (its layering against its grain) finds the salt; the empty masks score about 0.4.

`sizes(scale)`: 101 x 101 slices (as the real ones) at a factor of the replica's counts, or the real counts.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from runner.common import rle
from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._pictures import Sizes, folders, hex_ids, smooth_fields

SIDE = 101  # every slice, as the real ones
TRAIN, TEST = 150, 100  # the replica's own counts
REAL_TRAIN, REAL_TEST = 3_000, 1_000  # MLE-bench's 75/25 split of the 4,000 labelled slices
LEAST = 8
EMPTY = 0.39  # share of slices without salt, as in the real training set
LAYER_PERIOD = (5.0, 9.0)  # pixels between sediment layers
CHUNK = 64  # slices drawn at once


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many slices `scale` writes (a factor of the replica's own counts, or the real ones) and their size."""
    scale = parse_scale(scale)
    return Sizes(scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST), (SIDE, SIDE),
                 (SIDE, SIDE))


def salt_masks(rng: np.random.Generator, count: int) -> np.ndarray:
    """(count, SIDE, SIDE) salt bodies: a smooth field, deeper more likely, cut at a level that covers a drawn share
    of the slice (none for EMPTY of them, the whole slice now and then)."""
    depth = np.linspace(-1, 1, SIDE, dtype=np.float32)[None, :, None]
    field = smooth_fields(rng, count, SIDE, SIDE, cells=3) + rng.uniform(0, 1.2, (count, 1, 1)) * depth
    cover = np.where(rng.random(count) < EMPTY, 0.0, np.clip(rng.beta(1.2, 1.6, count) * 1.15, 0.01, 1.0))
    levels = np.array([np.quantile(f, 1 - c) if 0 < c < 1 else (np.inf if c == 0 else -np.inf)
                       for f, c in zip(field, cover)], dtype=np.float32)
    return field >= levels[:, None, None]


def slices(rng: np.random.Generator, salt: np.ndarray) -> np.ndarray:
    """(count, SIDE, SIDE) uint8 seismic slices showing the salt bodies of `salt`."""
    count = len(salt)
    y = np.arange(SIDE, dtype=np.float32)[None, :, None]
    fold = smooth_fields(rng, count, SIDE, SIDE, cells=3) * rng.uniform(3, 9, (count, 1, 1))
    period = rng.uniform(*LAYER_PERIOD, (count, 1, 1)).astype(np.float32)
    layers = 118 + rng.uniform(25, 45, (count, 1, 1)) * np.sin(2 * np.pi * (y + fold) / period)
    grain = rng.normal(0, 1, salt.shape).astype(np.float32)
    grain = (grain + np.roll(grain, 1, 1) + np.roll(grain, 1, 2) + np.roll(grain, (1, 1), (1, 2))) / 2
    body = 140 + 9 * grain
    top = salt & ~np.roll(salt, 2, axis=1)  # the salt's upper edge reflects brightly
    image = np.where(salt, body, layers) + np.where(top, 45, 0) + rng.normal(0, 5, salt.shape)
    return np.clip(image, 0, 255).astype(np.uint8)


def _write(rng: np.random.Generator, ids: list[str], images: Path, masks: Path | None) -> list[str]:
    """Draw the slices of `ids` into `images` (and their masks into `masks`); their run-length strings."""
    encoded = []
    for start in range(0, len(ids), CHUNK):
        part = ids[start:start + CHUNK]
        salt = salt_masks(rng, len(part))
        for name, picture, mask in zip(part, slices(rng, salt), salt):
            Image.fromarray(picture, "L").save(images / f"{name}.png")
            if masks is not None:
                Image.fromarray((mask * 255).astype(np.uint8), "L").save(masks / f"{name}.png")
            encoded.append(rle.encode(mask, "column"))
    return encoded


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, depths.csv, train/images, train/masks, test/images, sample_submission.csv)
    and prepared/private/test.csv, as many slices as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root, "train/images", "train/masks", "test/images")
    ids = hex_ids(rng, size.train + size.test, 10)
    train_ids, test_ids = sorted(ids[:size.train]), sorted(ids[size.train:])
    train = pd.DataFrame({"id": train_ids, "rle_mask": _write(rng, train_ids, public / "train" / "images",
                                                              public / "train" / "masks")})
    train.to_csv(public / "train.csv", index=False)
    answers = pd.DataFrame({"id": test_ids, "rle_mask": _write(rng, test_ids, public / "test" / "images", None)})
    answers.to_csv(private / "test.csv", index=False)
    answers.assign(rle_mask="1 1").to_csv(public / "sample_submission.csv", index=False)
    pd.DataFrame({"id": train_ids, "z": rng.integers(51, 960, len(train_ids))}).to_csv(public / "depths.csv",
                                                                                       index=False)
    describe(public, "TGS Salt Identification Challenge",
             "Segment the salt in each 101 x 101 seismic slice of test/images/.",
             "Submissions are evaluated on the mean average precision at IoU thresholds from 0.5 to 0.95 (step 0.05).",
             "Submit `id,rle_mask` for every test slice: the salt's pixels run-length encoded, numbered from top to "
             "bottom, then left to right, 1-indexed; an empty string where there is no salt.")
