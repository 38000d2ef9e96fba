"""A synthetic dogs-vs-cats-redux-kernels-edition: JPEG "pets" whose class shows in the head's shape, 48x48 in the
replica's own size and a few hundred pixels a side (as the real photos) at the real scale.

A cat is a round head with two pointed ears on top and whiskers; a dog is a wider, longer head with floppy dark
ears hanging at its sides and a dark nose. Coat colours come from overlapping palettes, so shape matters more
than colour. The label is only in the train file names (cat.N.jpg, dog.N.jpg); test files are 1.jpg..N.jpg.
A small CNN reaches a log loss of about 0.1-0.2; the sample submission's constant 0.5 scores ln 2 = 0.693.

`sizes(scale)` says how many photos a scale writes and how large; several processes draw and encode them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, folders, quota, render, smooth_field, zip_folder_flat

SIZE = 48  # the replica's own photos; the drawing's pixel sizes are given for this side
TRAIN, TEST = 200, 60  # the replica's own counts
REAL_TRAIN, REAL_TEST = 22_500, 2_500  # 25,000 labelled photos, 10% of them the test split
# the real photos are web pictures of at most 500 pixels a side, most of them 300-500
REAL_SMALLEST, REAL_LARGEST = (250, 200), (500, 500)
CAT_COATS = ((120, 120, 125), (210, 140, 70), (235, 230, 220), (60, 55, 55), (165, 150, 135))
DOG_COATS = ((150, 100, 55), (200, 160, 105), (60, 55, 55), (230, 215, 185), (120, 80, 40))
CAT_EYES = ((90, 160, 60), (200, 150, 40), (80, 140, 200), (40, 30, 20))
CHUNK = 64  # photos a worker draws and writes per task


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many photos `scale` writes (a factor of the replica's own counts, or REAL) and their pixel sizes."""
    scale = parse_scale(scale)  # a factor that is not positive, or a word other than REAL, is refused
    train, test = scaled(TRAIN, REAL_TRAIN, scale, least=4), scaled(TEST, REAL_TEST, scale, least=4)
    if is_real(scale):
        return Sizes(train, test, REAL_SMALLEST, REAL_LARGEST)
    return Sizes(train, test, (SIZE, SIZE), (SIZE, SIZE))


def _coat(palette, rng: np.random.Generator) -> tuple[int, int, int]:
    base = np.asarray(palette[int(rng.integers(len(palette)))]) + rng.normal(0, 12, 3)
    return tuple(int(v) for v in np.clip(base, 0, 255))


def _cat(draw: ImageDraw.ImageDraw, cx: float, cy: float, r: float, u: float, coat, eyes) -> None:
    for side in (-1, 1):
        draw.polygon([(cx + side * 0.9 * r, cy - 0.2 * r), (cx + side * 0.75 * r, cy - 1.45 * r),
                      (cx + side * 0.15 * r, cy - 0.8 * r)], fill=coat)
    draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=coat)
    for side in (-1, 1):
        x, y = cx + side * 0.4 * r, cy - 0.25 * r
        draw.ellipse((x - 2 * u, y - 2 * u, x + 2 * u, y + 2 * u), fill=eyes)
        for dy in (-1, 2):
            draw.line((cx + side * 0.25 * r, cy + 0.3 * r, cx + side * 1.3 * r, cy + 0.3 * r + dy * u),
                      fill=(30, 30, 30), width=max(1, round(u)))
    draw.polygon([(cx - 2 * u, cy + 0.1 * r), (cx + 2 * u, cy + 0.1 * r), (cx, cy + 0.3 * r)], fill=(220, 120, 130))


def _dog(draw: ImageDraw.ImageDraw, cx: float, cy: float, r: float, u: float, coat, _eyes) -> None:
    draw.ellipse((cx - 0.95 * r, cy - r, cx + 0.95 * r, cy + 1.1 * r), fill=coat)
    draw.ellipse((cx - 0.5 * r, cy + 0.2 * r, cx + 0.5 * r, cy + 1.4 * r), fill=coat)
    ear = tuple(int(v * 0.55) for v in coat)
    for side in (-1, 1):
        draw.ellipse((cx + side * 0.85 * r - 0.35 * r, cy - 0.8 * r, cx + side * 0.85 * r + 0.35 * r, cy + 0.6 * r),
                     fill=ear)
        x, y = cx + side * 0.35 * r, cy - 0.3 * r
        draw.ellipse((x - 2 * u, y - 2 * u, x + 2 * u, y + 2 * u), fill=(40, 25, 15))
    draw.ellipse((cx - 3 * u, cy + 0.95 * r, cx + 3 * u, cy + 1.25 * r), fill=(20, 15, 15))


def _backdrop(width: int, height: int, rng: np.random.Generator) -> Image.Image:
    """A backdrop colour with slow shading and pixel noise (float32: a real-size set draws billions of values)."""
    shade = smooth_field(rng, height, width)[..., None] * 30
    noise = rng.standard_normal((height, width, 3), np.float32) * 8
    pixels = rng.uniform(40, 220, 3).astype(np.float32) + shade + noise
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def photo(is_dog: bool, shape: tuple[int, int], rng: np.random.Generator) -> Image.Image:
    """A pet's head on a backdrop, `shape` (width, height), drawn in proportion to its short side."""
    width, height = (int(v) for v in shape)
    u = min(width, height) / SIZE
    image = _backdrop(width, height, rng)
    r = rng.uniform(9, 13) * u
    cx, cy = rng.uniform(r + 3 * u, width - r - 3 * u), rng.uniform(r + 6 * u, height - r - 6 * u)
    draw = ImageDraw.Draw(image)
    eyes = CAT_EYES[int(rng.integers(len(CAT_EYES)))]
    (_dog if is_dog else _cat)(draw, cx, cy, r, u, _coat(DOG_COATS if is_dog else CAT_COATS, rng), eyes)
    return image


def photos(items: list[tuple[Path, int, int, int]], seed: int) -> list:
    """Write (path, is a dog, width, height) items as JPEG photos."""
    rng = np.random.default_rng(seed)
    for path, is_dog, width, height in items:
        photo(bool(is_dog), (width, height), rng).save(path, quality=int(rng.integers(80, 95)))
    return []


def _train_names(is_dog: np.ndarray) -> list[str]:
    """cat.N.jpg and dog.N.jpg, numbered from 0 within each class in the order drawn."""
    counts = {"cat": 0, "dog": 0}
    names = []
    for dog in is_dog:
        kind = "dog" if dog else "cat"
        names.append(f"{kind}.{counts[kind]}.jpg")
        counts[kind] += 1
    return names


def _draw(folder: Path, names: list[str], labels: np.ndarray, size: Sizes, rng: np.random.Generator) -> None:
    items = [(folder / name, int(dog), int(w), int(h)) for name, dog, (w, h) in
             zip(names, labels, size.shapes(len(names), rng))]
    render(photos, items, rng, CHUNK, size.pixels(len(items)))


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train/, test/, flat train.zip and test.zip, sample_submission.csv) and
    prepared/private/answers.csv, as many photos as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root, "train", "test")
    train_labels = quota((0.5, 0.5), size.train, rng)
    _draw(public / "train", _train_names(train_labels), train_labels, size, rng)
    labels = quota((0.5, 0.5), size.test, rng)
    _draw(public / "test", [f"{k}.jpg" for k in range(1, size.test + 1)], labels, size, rng)
    zip_folder_flat(public / "train", public / "train.zip")
    zip_folder_flat(public / "test", public / "test.zip")
    ids = np.arange(1, size.test + 1)
    pd.DataFrame({"id": ids, "label": labels}).to_csv(private / "answers.csv", index=False)
    pd.DataFrame({"id": ids, "label": 0.5}).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Dogs vs. Cats Redux: Kernels Edition",
             "Predict the probability that each test image shows a dog (1 = dog, 0 = cat). Train labels are in "
             "the file names: cat.N.jpg and dog.N.jpg.",
             "Submissions are scored on the log loss between the predicted probabilities and the true labels.",
             "Submit `id,label` for every test image, where `id` is the number in the test file name.")
