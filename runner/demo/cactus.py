"""A synthetic aerial-cactus-identification: 32x32 aerial JPEG thumbnails in flat train.zip/test.zip.

The ground is sandy with round olive shrubs in every image; a columnar cactus is a tall, narrow green stroke with
a dark shadow beside it, present in about 75% of images as in the real data. A small CNN separates the classes
almost perfectly (ROC AUC about 0.98-1.0); the sample submission's constant 0.5 scores 0.5.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe
from runner.demo._pictures import disc, encoded, flat_zip, folders, hex_ids, paint, quota, textured, to_image

SIZE = 32  # the real thumbnails are 32x32
TRAIN, TEST = 200, 60
CACTUS_SHARE = 0.75  # about the real share of has_cactus = 1
SAND = (178, 156, 118)


def _shrubs(canvas: np.ndarray, rng: np.random.Generator) -> None:
    for _ in range(int(rng.integers(1, 5))):
        mask = disc(SIZE, SIZE, rng.uniform(0, SIZE), rng.uniform(0, SIZE), rng.uniform(1.5, 3.5))
        paint(canvas, mask, (95 + rng.normal(0, 10), 100 + rng.normal(0, 10), 60), alpha=0.8)


def _cactus(canvas: np.ndarray, rng: np.random.Generator) -> None:
    width, length = int(rng.integers(2, 4)), int(rng.integers(14, 26))
    x, y = int(rng.integers(3, SIZE - 6)), int(rng.integers(0, SIZE - length + 1))
    canvas[y:y + length, x + width:x + width + 2] *= 0.55
    green = (55 + rng.normal(0, 8), 120 + rng.normal(0, 10), 60 + rng.normal(0, 8))
    paint(canvas, np.s_[y:y + length, x:x + width], green, alpha=0.9)


def thumbnail(has_cactus: bool, rng: np.random.Generator) -> bytes:
    tone = np.asarray(SAND) + rng.normal(0, 14)
    canvas = textured(rng, SIZE, SIZE, tone, swing=18, noise=9)
    _shrubs(canvas, rng)
    for _ in range(int(has_cactus) * int(rng.integers(1, 3))):
        _cactus(canvas, rng)
    return encoded(to_image(canvas), "JPEG", quality=int(rng.integers(85, 96)))


def _split(count: int, rng: np.random.Generator) -> tuple[pd.DataFrame, list[tuple[str, bytes]]]:
    labels = quota((1 - CACTUS_SHARE, CACTUS_SHARE), count, rng)
    ids = [f"{h}.jpg" for h in hex_ids(rng, count, 32)]
    members = [(name, thumbnail(bool(label), rng)) for name, label in zip(ids, labels)]
    return pd.DataFrame({"id": ids, "has_cactus": labels}), members


def generate(root: Path, rng: np.random.Generator) -> None:
    """Write prepared/public (train.csv, sample_submission.csv, flat train.zip and test.zip) and private/test.csv."""
    public, private = folders(root)
    train, train_members = _split(TRAIN, rng)
    test, test_members = _split(TEST, rng)
    flat_zip(public / "train.zip", train_members)
    flat_zip(public / "test.zip", test_members)
    train.to_csv(public / "train.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    test.assign(has_cactus=0.5).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Aerial Cactus Identification",
             "Predict the probability that each 32x32 aerial image in test.zip contains a columnar cactus.",
             "Submissions are evaluated on area under the ROC curve between the predicted probability and the "
             "observed target.",
             "Submit `id,has_cactus` for every test image, where `id` is the image file name.")
