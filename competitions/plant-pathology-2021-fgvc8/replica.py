"""A synthetic plant-pathology-2021-fgvc8: JPEG photos of apple leaves in train_images/ and test_images/, each
labelled with a set of diseases (train.csv `image,labels`, the labels space-separated), as MLE-bench's 80/20 split
of the real train set lays them out; the answers in private/answers.csv, the sample labels every photo `healthy`.

Each photo is a green leaf on a blurred orchard background. Each disease leaves its own mark, so several marks are
several labels: scab dark olive patches, rust bright orange dots, frog_eye_leaf_spot pale spots ringed in brown,
powdery_mildew a whitish haze over the leaf, complex large irregular brown blotches; a healthy leaf is clean. The
label sets are the real competition's twelve, in their real shares. A small CNN or image embeddings with one
classifier a label find them; the sample's `healthy` scores a micro-F1 of about 0.3, the most frequent labels'
set about 0.4.

`sizes(scale)`: 64x43 photos at a factor of the replica's own counts, 4000x2672 (as the real ones) at REAL.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw, ImageFilter

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import (Sizes, design, disc, folders, grain, hex_ids, paint, quota, render, textured,
                                   to_image)

WIDTH, HEIGHT = 64, 43  # the replica's photos: landscape, as the real ones
REAL_WIDTH, REAL_HEIGHT = 4000, 2672
TRAIN, TEST = 240, 60  # the replica's own counts
REAL_TRAIN, REAL_TEST = 14_905, 3_727  # MLE-bench's 80/20 split of the 18,632 labelled photos
LEAST = 12  # photos a split keeps at the smallest factors: the commonest sets each still have one
# the real label sets and their counts in the 18,632 photos
SETS = (("scab", 4826), ("healthy", 4624), ("frog_eye_leaf_spot", 3181), ("rust", 1860), ("complex", 1602),
        ("powdery_mildew", 1184), ("scab frog_eye_leaf_spot", 686), ("scab frog_eye_leaf_spot complex", 200),
        ("frog_eye_leaf_spot complex", 165), ("rust frog_eye_leaf_spot", 120), ("rust complex", 97),
        ("powdery_mildew complex", 87))
SCAB, RUST, RING, BLOTCH = (75, 70, 35), (240, 150, 30), (120, 70, 30), (110, 75, 40)
DESIGN = 400  # a larger photo's long side while it is drawn
GRAIN = 7  # grey levels of the full-size grain an enlarged photo gets
CHUNK = 8  # photos one task draws


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many photos `scale` writes (a factor of the replica's own counts, or REAL) and their pixel size."""
    scale = parse_scale(scale)
    shape = (REAL_WIDTH, REAL_HEIGHT) if is_real(scale) else (WIDTH, HEIGHT)
    return Sizes(scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST), shape, shape)


def _leaf(rng: np.random.Generator, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """A leaf on its background (float canvas) and the mask of the leaf's pixels."""
    unit = width / WIDTH
    canvas = textured(rng, height, width, (70, 95 + rng.normal(0, 15), 60), swing=35, noise=10)
    angle = rng.uniform(-0.5, 0.5)
    cx, cy = width / 2 + rng.normal(0, 3) * unit, height / 2 + rng.normal(0, 2) * unit
    length, breadth = rng.uniform(24, 29) * unit, rng.uniform(12, 16) * unit
    t = np.linspace(0, 2 * np.pi, 40)
    u, v = length * np.cos(t), breadth * np.sin(t) * (1 - 0.3 * np.cos(t))
    outline = list(zip(cx + u * np.cos(angle) - v * np.sin(angle), cy + u * np.sin(angle) + v * np.cos(angle)))
    mask_image = Image.new("L", (width, height))
    ImageDraw.Draw(mask_image).polygon(outline, fill=255)
    mask = np.asarray(mask_image) > 0
    leaf = textured(rng, height, width, (70 + rng.normal(0, 10), 150 + rng.normal(0, 15), 50), swing=15, noise=5)
    return np.where(mask[..., None], leaf, canvas), mask


def _marks(canvas: np.ndarray, mask: np.ndarray, rng: np.random.Generator, count: int, radius, colour,
           ring=None) -> None:
    """`count` marks of `colour` on the leaf, each of a radius drawn from `radius`; with `ring`, a darker edge."""
    height, width = mask.shape
    ys, xs = np.nonzero(mask)
    for k in rng.integers(0, len(xs), count):
        rx, ry = rng.uniform(*radius), rng.uniform(*radius)
        if ring is not None:
            paint(canvas, disc(height, width, xs[k], ys[k], rx * 1.5, ry * 1.5) & mask, ring, alpha=0.9)
        paint(canvas, disc(height, width, xs[k], ys[k], rx, ry) & mask, np.asarray(colour) + rng.normal(0, 10, 3),
              alpha=0.9)


def photo(labels: str, rng: np.random.Generator, shape: tuple[int, int] = (WIDTH, HEIGHT)) -> Image.Image:
    """One photo of `shape` (width, height) showing every disease of the space-separated `labels`."""
    width, height = design(shape, DESIGN)
    canvas, mask = _leaf(rng, width, height)
    unit, shown = width / WIDTH, set(labels.split())
    if "scab" in shown:
        _marks(canvas, mask, rng, int(rng.integers(3, 7)), (2.0 * unit, 3.5 * unit), SCAB)
    if "rust" in shown:
        _marks(canvas, mask, rng, int(rng.integers(5, 10)), (1.0 * unit, 2.0 * unit), RUST)
    if "frog_eye_leaf_spot" in shown:
        _marks(canvas, mask, rng, int(rng.integers(3, 6)), (1.2 * unit, 2.0 * unit), (215, 200, 150), ring=RING)
    if "complex" in shown:
        _marks(canvas, mask, rng, int(rng.integers(2, 4)), (4.0 * unit, 6.0 * unit), BLOTCH)
    if "powdery_mildew" in shown:
        paint(canvas, mask & (rng.random(mask.shape) < 0.6), (235, 235, 225), alpha=0.55)
    image = to_image(canvas).filter(ImageFilter.SMOOTH)
    if image.size != tuple(shape):
        image = grain(image.resize(tuple(shape), Image.BICUBIC), rng, GRAIN)
    return image


def _photos(items: list[tuple[str, str]], seed: int, folder: Path, shape: tuple[int, int]) -> list:
    """Write folder/<image> for each (image, labels): one task's chunk, drawn from its own seed."""
    rng = np.random.default_rng(seed)
    for name, labels in items:
        photo(labels, rng, shape).save(folder / name, quality=int(rng.integers(85, 96)))
    return []


def _split(count: int, folder: Path, size: Sizes, rng: np.random.Generator) -> pd.DataFrame:
    names = [f"{h}.jpg" for h in hex_ids(rng, count, 16)]
    labels = [SETS[k][0] for k in quota(tuple(n for _, n in SETS), count, rng)]
    render(partial(_photos, folder=folder, shape=size.smallest), list(zip(names, labels)), rng, CHUNK,
           size.pixels(count))
    return pd.DataFrame({"image": names, "labels": labels})


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, train_images/, test_images/, sample_submission.csv) and
    prepared/private/answers.csv, as many photos as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root, "train_images", "test_images")
    _split(size.train, public / "train_images", size, rng).to_csv(public / "train.csv", index=False)
    answers = _split(size.test, public / "test_images", size, rng)
    answers.to_csv(private / "answers.csv", index=False)
    answers.assign(labels="healthy").to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Plant Pathology 2021 - FGVC8",
             "Predict, for each apple-leaf photo in test_images/, the set of its diseases: any of healthy, scab, "
             "rust, frog_eye_leaf_spot, powdery_mildew and complex, space-separated.",
             "Submissions are evaluated on the mean F1 score (micro-averaged over every image and label).",
             "Submit `image,labels` for every test image.")
