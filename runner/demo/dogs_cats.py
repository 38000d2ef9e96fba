"""A synthetic dogs-vs-cats-redux-kernels-edition: 48x48 JPEG "pets" whose class shows in the head's shape.

A cat is a round head with two pointed ears on top and whiskers; a dog is a wider, longer head with floppy dark
ears hanging at its sides and a dark nose. Coat colours come from overlapping palettes, so shape matters more
than colour. The label is only in the train file names (cat.N.jpg, dog.N.jpg); test files are 1.jpg..N.jpg.
A small CNN reaches a log loss of about 0.1-0.2; the sample submission's constant 0.5 scores ln 2 = 0.693.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import ImageDraw

from runner.demo._layout import describe
from runner.demo._pictures import folders, quota, textured, to_image, zip_folder_flat

SIZE = 48
TRAIN, TEST = 200, 60
CAT_COATS = ((120, 120, 125), (210, 140, 70), (235, 230, 220), (60, 55, 55), (165, 150, 135))
DOG_COATS = ((150, 100, 55), (200, 160, 105), (60, 55, 55), (230, 215, 185), (120, 80, 40))
CAT_EYES = ((90, 160, 60), (200, 150, 40), (80, 140, 200), (40, 30, 20))


def _coat(palette, rng: np.random.Generator) -> tuple[int, int, int]:
    base = np.asarray(palette[int(rng.integers(len(palette)))]) + rng.normal(0, 12, 3)
    return tuple(int(v) for v in np.clip(base, 0, 255))


def _cat(draw: ImageDraw.ImageDraw, cx: float, cy: float, r: float, coat, eyes) -> None:
    for side in (-1, 1):
        draw.polygon([(cx + side * 0.9 * r, cy - 0.2 * r), (cx + side * 0.75 * r, cy - 1.45 * r),
                      (cx + side * 0.15 * r, cy - 0.8 * r)], fill=coat)
    draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=coat)
    for side in (-1, 1):
        draw.ellipse((cx + side * 0.4 * r - 2, cy - 0.25 * r - 2, cx + side * 0.4 * r + 2, cy - 0.25 * r + 2),
                     fill=eyes)
        for dy in (-1, 2):
            draw.line((cx + side * 0.25 * r, cy + 0.3 * r, cx + side * 1.3 * r, cy + 0.3 * r + dy), fill=(30, 30, 30))
    draw.polygon([(cx - 2, cy + 0.1 * r), (cx + 2, cy + 0.1 * r), (cx, cy + 0.3 * r)], fill=(220, 120, 130))


def _dog(draw: ImageDraw.ImageDraw, cx: float, cy: float, r: float, coat, _eyes) -> None:
    draw.ellipse((cx - 0.95 * r, cy - r, cx + 0.95 * r, cy + 1.1 * r), fill=coat)
    draw.ellipse((cx - 0.5 * r, cy + 0.2 * r, cx + 0.5 * r, cy + 1.4 * r), fill=coat)
    ear = tuple(int(v * 0.55) for v in coat)
    for side in (-1, 1):
        draw.ellipse((cx + side * 0.85 * r - 0.35 * r, cy - 0.8 * r, cx + side * 0.85 * r + 0.35 * r, cy + 0.6 * r),
                     fill=ear)
        draw.ellipse((cx + side * 0.35 * r - 2, cy - 0.3 * r - 2, cx + side * 0.35 * r + 2, cy - 0.3 * r + 2),
                     fill=(40, 25, 15))
    draw.ellipse((cx - 3, cy + 0.95 * r, cx + 3, cy + 1.25 * r), fill=(20, 15, 15))


def photo(is_dog: bool, rng: np.random.Generator):
    backdrop = textured(rng, SIZE, SIZE, rng.uniform(40, 220, 3), swing=30, noise=8)
    image = to_image(backdrop)
    r = rng.uniform(9, 13)
    cx, cy = rng.uniform(r + 3, SIZE - r - 3), rng.uniform(r + 6, SIZE - r - 6)
    draw = ImageDraw.Draw(image)
    eyes = CAT_EYES[int(rng.integers(len(CAT_EYES)))]
    (_dog if is_dog else _cat)(draw, cx, cy, r, _coat(DOG_COATS if is_dog else CAT_COATS, rng), eyes)
    return image


def _save(image, path: Path, rng: np.random.Generator) -> None:
    image.save(path, quality=int(rng.integers(80, 95)))


def generate(root: Path, rng: np.random.Generator) -> None:
    """Write prepared/public (train/, test/, flat train.zip and test.zip, sample_submission.csv) and
    prepared/private/answers.csv."""
    public, private = folders(root, "train", "test")
    counts = {"cat": 0, "dog": 0}
    for is_dog in quota((0.5, 0.5), TRAIN, rng):
        kind = "dog" if is_dog else "cat"
        _save(photo(bool(is_dog), rng), public / "train" / f"{kind}.{counts[kind]}.jpg", rng)
        counts[kind] += 1
    labels = quota((0.5, 0.5), TEST, rng)
    for k, is_dog in enumerate(labels, start=1):
        _save(photo(bool(is_dog), rng), public / "test" / f"{k}.jpg", rng)
    zip_folder_flat(public / "train", public / "train.zip")
    zip_folder_flat(public / "test", public / "test.zip")
    ids = np.arange(1, TEST + 1)
    pd.DataFrame({"id": ids, "label": labels}).to_csv(private / "answers.csv", index=False)
    pd.DataFrame({"id": ids, "label": 0.5}).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Dogs vs. Cats Redux: Kernels Edition",
             "Predict the probability that each test image shows a dog (1 = dog, 0 = cat). Train labels are in "
             "the file names: cat.N.jpg and dog.N.jpg.",
             "Submissions are scored on the log loss between the predicted probabilities and the true labels.",
             "Submit `id,label` for every test image, where `id` is the number in the test file name.")
