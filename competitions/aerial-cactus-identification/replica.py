"""A synthetic aerial-cactus-identification: 32x32 aerial JPEG thumbnails in flat train.zip/test.zip.

The ground is sandy with olive shrubs, some of them long and narrow; a columnar cactus is a tall, narrow green
stroke with a dark shadow beside it, present in about 75% of images as in the real data. Some cacti are short or
faint, dry stalks cast cactus-like shadows, tracks cross some images, and a few images are labelled wrongly (a
reviewer missed a cactus, or saw one that is not there), so no model separates the classes perfectly: a good
one-minute run reaches a ROC AUC of about 0.9-0.97; the sample submission's constant 0.5 scores 0.5.

`sizes(scale)` says how many thumbnails a scale writes; every chunk of them is drawn as one numpy batch.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._pictures import (Sizes, discs, encoded, flat_zip, folders, hex_ids, mislabelled, paint_batch,
                                   quota, render, smooth_fields, to_image)

SIDE = 32  # the real thumbnails are 32x32, at every scale
TRAIN, TEST = 200, 60  # the replica's own counts
REAL_TRAIN, REAL_TEST = 14_175, 3_325  # 17,500 labelled thumbnails, 19% of them the test split
CACTUS_SHARE = 0.75  # about the real share of has_cactus = 1
MISLABELLED = 0.03  # share of each split whose image shows the other class: the real labels are not all right
SAND = (178, 156, 118)
SHRUBS = 4  # at most this many shrubs an image
LONG_SHRUBS = 0.3  # share of shrubs that are long and narrow: green and upright like a cactus, but round-ended
STALKS = 0.3  # share of images with a dry stalk: a dark cactus-like shadow with no green
TRACKS = 0.35  # share of images a pale track crosses
CHUNK = 256  # thumbnails drawn in one numpy batch


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many thumbnails `scale` writes (a factor of the replica's own counts, or REAL) and their pixel size."""
    scale = parse_scale(scale)  # a factor that is not positive, or a word other than REAL, is refused
    return Sizes(scaled(TRAIN, REAL_TRAIN, scale, least=4), scaled(TEST, REAL_TEST, scale, least=4),
                 (SIDE, SIDE), (SIDE, SIDE))


def _grid() -> tuple[np.ndarray, np.ndarray]:
    y, x = np.ogrid[:SIDE, :SIDE]
    return y[None], x[None]


def _shrubs(canvas: np.ndarray, rng: np.random.Generator) -> None:
    n = len(canvas)
    count = rng.integers(1, SHRUBS + 1, n)
    for k in range(SHRUBS):
        radius = rng.uniform(1.5, 3.5, n)
        long = rng.random(n) < LONG_SHRUBS
        masks = discs(SIDE, SIDE, rng.uniform(0, SIDE, n), rng.uniform(0, SIDE, n), np.where(long, 1.2, radius),
                      np.where(long, rng.uniform(4, 8, n), radius))
        colours = np.stack([95 + rng.normal(0, 10, n), 100 + rng.normal(0, 10, n), np.full(n, 60.0)], axis=1)
        paint_batch(canvas, masks & (k < count)[:, None, None], colours, 0.8)


def _strokes(rng: np.random.Generator, n: int, lengths: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(n, SIDE, SIDE) masks of upright strokes and of the 2-pixel shadows to their right."""
    y, x = _grid()
    width, length = rng.integers(2, 4, n), rng.integers(*lengths, n)
    left, top = rng.integers(3, SIDE - 6, n), rng.integers(0, SIDE - length + 1)
    left, top, width, length = (a[:, None, None] for a in (left, top, width, length))
    rows = (y >= top) & (y < top + length)
    return rows & (x >= left) & (x < left + width), rows & (x >= left + width) & (x < left + width + 2)


def _cacti(canvas: np.ndarray, has_cactus: np.ndarray, rng: np.random.Generator) -> None:
    n = len(canvas)
    count = has_cactus * rng.integers(1, 3, n)
    for k in range(2):
        stroke, shadow = _strokes(rng, n, (8, 26))  # some short ones: a cactus seen from straight above
        on = (k < count)[:, None, None]
        canvas *= 1 - 0.45 * (shadow & on)[..., None]
        green = np.stack([55 + rng.normal(0, 8, n), 120 + rng.normal(0, 10, n), 60 + rng.normal(0, 8, n)], axis=1)
        paint_batch(canvas, stroke & on, green, rng.uniform(0.35, 0.9, n))  # faint where the light is flat


def _confounders(canvas: np.ndarray, rng: np.random.Generator) -> None:
    n = len(canvas)
    stroke, shadow = _strokes(rng, n, (10, 26))
    stalk = (rng.random(n) < STALKS)[:, None, None]
    canvas *= 1 - 0.4 * ((shadow | stroke) & stalk)[..., None]
    y, x = _grid()
    angle, offset = rng.uniform(0, np.pi, n)[:, None, None], rng.uniform(-SIDE / 3, SIDE / 3, n)[:, None, None]
    track = np.abs((x - SIDE / 2) * np.sin(angle) - (y - SIDE / 2) * np.cos(angle) - offset) < 1.2
    paint_batch(canvas, track & (rng.random(n) < TRACKS)[:, None, None], np.tile((205, 190, 160), (n, 1)), 0.6)


def thumbnails(items: list[tuple[str, int]], seed: int) -> list[tuple[str, bytes]]:
    """JPEG thumbnails for (file name, shows a cactus) pairs, drawn as one batch."""
    rng = np.random.default_rng(seed)
    n = len(items)
    shows = np.array([cactus for _, cactus in items], dtype=bool)
    tone = np.asarray(SAND, np.float32) + rng.normal(0, 14, (n, 1)).astype(np.float32)
    canvas = (tone[:, None, None, :] + 18 * smooth_fields(rng, n, SIDE, SIDE)[..., None]
              + 9 * rng.standard_normal((n, SIDE, SIDE, 3), np.float32))
    _shrubs(canvas, rng)
    _confounders(canvas, rng)
    _cacti(canvas, shows, rng)
    qualities = rng.integers(85, 96, n)
    return [(name, encoded(to_image(pixels), "JPEG", quality=int(q)))
            for (name, _), pixels, q in zip(items, canvas, qualities)]


def _split(count: int, rng: np.random.Generator) -> tuple[pd.DataFrame, list[tuple[str, bytes]]]:
    labels = quota((1 - CACTUS_SHARE, CACTUS_SHARE), count, rng)
    shown = mislabelled(labels, MISLABELLED, rng)
    ids = [f"{h}.jpg" for h in hex_ids(rng, count, 32)]
    members = render(thumbnails, list(zip(ids, shown.tolist())), rng, CHUNK, count * SIDE * SIDE)
    return pd.DataFrame({"id": ids, "has_cactus": labels}), members


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, sample_submission.csv, flat train.zip and test.zip) and private/test.csv,
    as many thumbnails as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root)
    train, train_members = _split(size.train, rng)
    test, test_members = _split(size.test, rng)
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

