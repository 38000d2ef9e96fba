"""A synthetic plant-pathology-2020-fgvc7: JPEG photos of apple leaves, train and test mixed in images/.

Each photo is a green leaf with a midrib on a blurred orchard background. Healthy leaves are clean; rust adds
bright orange spots; scab adds dark olive-brown patches; multiple_diseases has both. Classes are mutually
exclusive and stored one-hot (shares about 30/12/30/28%, with multiple_diseases raised from the real ~5% so the
small test set has several). A small CNN reaches a mean column-wise ROC AUC of about 0.9-0.98; the sample
submission's constant 0.25 scores 0.5.

`sizes(scale)` says how many photos a scale writes and how large: 64x48 at a factor of the replica's own counts,
2048x1365 (as the real photos) at REAL. A large photo is drawn with its long side DESIGN pixels, enlarged and given
a sensor grain at full size; chunks of photos are drawn by worker processes when there are many pixels.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, design, disc, folders, grain, paint, quota, render, textured, to_image

WIDTH, HEIGHT = 64, 48  # the replica's photos: landscape, as the real ones
REAL_WIDTH, REAL_HEIGHT = 2048, 1365  # the real photos' size
TRAIN, TEST = 220, 60  # the replica's own counts
REAL_TRAIN, REAL_TEST = 1_638, 183  # 1,821 labelled photos, 10% of them the test split
LEAST = 10  # photos a split keeps at the smallest factors: the rarest class (12%) still has one in each
CLASSES = ("healthy", "multiple_diseases", "rust", "scab")
SHARES = (0.30, 0.12, 0.30, 0.28)
RUST, SCAB = (240, 150, 30), (75, 70, 35)
DESIGN = 512  # a larger photo's long side while it is drawn: leaf, shading and spots are smooth at this size
GRAIN = 7  # grey levels of the full-size grain an enlarged photo gets (+-3), as a camera's photo has
CHUNK = 8  # photos one task draws: a few seconds of work at the real size


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many photos `scale` writes (a factor of the replica's own counts, or REAL) and their pixel size."""
    scale = parse_scale(scale)
    shape = (REAL_WIDTH, REAL_HEIGHT) if is_real(scale) else (WIDTH, HEIGHT)
    return Sizes(scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST), shape, shape)


def _leaf(rng: np.random.Generator, width: int, height: int) -> tuple[Image.Image, np.ndarray]:
    """The leaf photo on a width x height canvas and a mask of the leaf's pixels; lengths are in the replica's
    pixels times `unit`, so a leaf fills a larger canvas alike."""
    unit = width / WIDTH
    backdrop = textured(rng, height, width, (70, 95 + rng.normal(0, 15), 60), swing=35, noise=10)
    angle = rng.uniform(-0.5, 0.5)
    cx, cy = width / 2 + rng.normal(0, 3) * unit, height / 2 + rng.normal(0, 2) * unit
    length, breadth = rng.uniform(24, 29) * unit, rng.uniform(11, 15) * unit
    t = np.linspace(0, 2 * np.pi, 40)
    u, v = length * np.cos(t), breadth * np.sin(t) * (1 - 0.3 * np.cos(t))
    outline = list(zip(cx + u * np.cos(angle) - v * np.sin(angle), cy + u * np.sin(angle) + v * np.cos(angle)))
    mask_image = Image.new("L", (width, height))
    ImageDraw.Draw(mask_image).polygon(outline, fill=255)
    mask = np.asarray(mask_image) > 0
    leaf = textured(rng, height, width, (70 + rng.normal(0, 10), 150 + rng.normal(0, 15), 50), swing=15, noise=5)
    image = to_image(np.where(mask[..., None], leaf, backdrop))
    tip = (cx + length * np.cos(angle), cy + length * np.sin(angle))
    ImageDraw.Draw(image).line([(2 * cx - tip[0], 2 * cy - tip[1]), tip], fill=(150, 200, 110),
                               width=max(1, round(unit)))
    return image, mask


def _spots(canvas: np.ndarray, mask: np.ndarray, rng: np.random.Generator, count: int, radius, colour) -> None:
    height, width = mask.shape
    ys, xs = np.nonzero(mask)
    for k in rng.integers(0, len(xs), count):
        spot = disc(height, width, xs[k], ys[k], rng.uniform(*radius), rng.uniform(*radius)) & mask
        paint(canvas, spot, np.asarray(colour) + rng.normal(0, 12, 3), alpha=0.9)


def photo(label: str, rng: np.random.Generator, shape: tuple[int, int] = (WIDTH, HEIGHT)) -> Image.Image:
    """One photo of `shape` (width, height) showing `label`."""
    width, height = design(shape, DESIGN)
    image, mask = _leaf(rng, width, height)
    canvas = np.asarray(image, dtype=float).copy()
    unit = width / WIDTH
    if label in ("rust", "multiple_diseases"):
        _spots(canvas, mask, rng, int(rng.integers(5, 11)), (1.2 * unit, 2.2 * unit), RUST)
    if label in ("scab", "multiple_diseases"):
        _spots(canvas, mask, rng, int(rng.integers(3, 7)), (2.5 * unit, 4.0 * unit), SCAB)
    image = to_image(canvas)
    if image.size != tuple(shape):
        image = grain(image.resize(tuple(shape), Image.BICUBIC), rng, GRAIN)
    return image


def _photos(items: list[tuple[str, str]], seed: int, folder: Path, shape: tuple[int, int]) -> list:
    """Write folder/<id>.jpg for each (id, label): one task's chunk, drawn from its own seed."""
    rng = np.random.default_rng(seed)
    for image_id, label in items:
        photo(label, rng, shape).save(folder / f"{image_id}.jpg", quality=int(rng.integers(85, 96)))
    return []


def _split(prefix: str, count: int, folder: Path, size: Sizes, rng: np.random.Generator) -> pd.DataFrame:
    labels = quota(SHARES, count, rng)
    ids = [f"{prefix}_{i}" for i in range(count)]
    render(partial(_photos, folder=folder, shape=size.smallest), [(i, CLASSES[k]) for i, k in zip(ids, labels)],
           rng, CHUNK, size.pixels(count))
    return pd.DataFrame({"image_id": ids, **{name: (labels == k).astype(int) for k, name in enumerate(CLASSES)}})


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv, images/) and prepared/private/test.csv,
    as many photos as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root, "images")
    _split("Train", size.train, public / "images", size, rng).to_csv(public / "train.csv", index=False)
    test = _split("Test", size.test, public / "images", size, rng)
    test.to_csv(private / "test.csv", index=False)
    test[["image_id"]].to_csv(public / "test.csv", index=False)
    test.assign(**{name: 0.25 for name in CLASSES}).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Plant Pathology 2020 - FGVC7",
             "Predict, for each apple-leaf photo listed in test.csv, the probability of each class: healthy, "
             "multiple_diseases, rust and scab. Train and test photos share the images/ folder.",
             "Submissions are evaluated on mean column-wise ROC AUC.",
             "Submit `image_id,healthy,multiple_diseases,rust,scab` for every test image.")
