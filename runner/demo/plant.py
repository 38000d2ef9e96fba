"""A synthetic plant-pathology-2020-fgvc7: 64x48 JPEG photos of apple leaves, train and test mixed in images/.

Each photo is a green leaf with a midrib on a blurred orchard background. Healthy leaves are clean; rust adds
bright orange spots; scab adds dark olive-brown patches; multiple_diseases has both. Classes are mutually
exclusive and stored one-hot (shares about 30/12/30/28%, with multiple_diseases raised from the real ~5% so the
small test set has several). A small CNN reaches a mean column-wise ROC AUC of about 0.9-0.98; the sample
submission's constant 0.25 scores 0.5.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from runner.demo._layout import describe
from runner.demo._pictures import disc, folders, paint, quota, textured, to_image

WIDTH, HEIGHT = 64, 48  # landscape, as the real 2048x1365 photos
TRAIN, TEST = 220, 60
CLASSES = ("healthy", "multiple_diseases", "rust", "scab")
SHARES = (0.30, 0.12, 0.30, 0.28)
RUST, SCAB = (240, 150, 30), (75, 70, 35)


def _leaf(rng: np.random.Generator) -> tuple[Image.Image, np.ndarray]:
    """The leaf photo and a mask of the leaf's pixels."""
    backdrop = to_image(textured(rng, HEIGHT, WIDTH, (70, 95 + rng.normal(0, 15), 60), swing=35, noise=10))
    angle, cx, cy = rng.uniform(-0.5, 0.5), WIDTH / 2 + rng.normal(0, 3), HEIGHT / 2 + rng.normal(0, 2)
    length, width = rng.uniform(24, 29), rng.uniform(11, 15)
    t = np.linspace(0, 2 * np.pi, 40)
    u, v = length * np.cos(t), width * np.sin(t) * (1 - 0.3 * np.cos(t))
    outline = [(cx + a * np.cos(angle) - b * np.sin(angle), cy + a * np.sin(angle) + b * np.cos(angle))
               for a, b in zip(u, v)]
    mask_image = Image.new("L", (WIDTH, HEIGHT))
    ImageDraw.Draw(mask_image).polygon(outline, fill=255)
    mask = np.asarray(mask_image) > 0
    leaf = textured(rng, HEIGHT, WIDTH, (70 + rng.normal(0, 10), 150 + rng.normal(0, 15), 50), swing=15, noise=5)
    canvas = np.where(mask[..., None], leaf, np.asarray(backdrop, dtype=float))
    image = to_image(canvas)
    tip = (cx + length * np.cos(angle), cy + length * np.sin(angle))
    ImageDraw.Draw(image).line([(2 * cx - tip[0], 2 * cy - tip[1]), tip], fill=(150, 200, 110), width=1)
    return image, mask


def _spots(canvas: np.ndarray, mask: np.ndarray, rng: np.random.Generator, count: int, radius, colour) -> None:
    ys, xs = np.nonzero(mask)
    for k in rng.integers(0, len(xs), count):
        spot = disc(HEIGHT, WIDTH, xs[k], ys[k], rng.uniform(*radius), rng.uniform(*radius)) & mask
        paint(canvas, spot, np.asarray(colour) + rng.normal(0, 12, 3), alpha=0.9)


def photo(label: str, rng: np.random.Generator) -> Image.Image:
    image, mask = _leaf(rng)
    canvas = np.asarray(image, dtype=float).copy()
    if label in ("rust", "multiple_diseases"):
        _spots(canvas, mask, rng, int(rng.integers(5, 11)), (1.2, 2.2), RUST)
    if label in ("scab", "multiple_diseases"):
        _spots(canvas, mask, rng, int(rng.integers(3, 7)), (2.5, 4.0), SCAB)
    return to_image(canvas)


def _split(prefix: str, count: int, folder: Path, rng: np.random.Generator) -> pd.DataFrame:
    labels = quota(SHARES, count, rng)
    ids = [f"{prefix}_{i}" for i in range(count)]
    for image_id, label in zip(ids, labels):
        photo(CLASSES[label], rng).save(folder / f"{image_id}.jpg", quality=int(rng.integers(85, 96)))
    return pd.DataFrame({"image_id": ids, **{name: (labels == k).astype(int) for k, name in enumerate(CLASSES)}})


def generate(root: Path, rng: np.random.Generator) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv, images/) and prepared/private/test.csv."""
    public, private = folders(root, "images")
    _split("Train", TRAIN, public / "images", rng).to_csv(public / "train.csv", index=False)
    test = _split("Test", TEST, public / "images", rng)
    test.to_csv(private / "test.csv", index=False)
    test[["image_id"]].to_csv(public / "test.csv", index=False)
    test.assign(**{name: 0.25 for name in CLASSES}).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Plant Pathology 2020 - FGVC7",
             "Predict, for each apple-leaf photo listed in test.csv, the probability of each class: healthy, "
             "multiple_diseases, rust and scab. Train and test photos share the images/ folder.",
             "Submissions are evaluated on mean column-wise ROC AUC.",
             "Submit `image_id,healthy,multiple_diseases,rust,scab` for every test image.")
