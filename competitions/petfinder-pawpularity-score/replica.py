"""A synthetic petfinder-pawpularity-score: pet photos with their Pawpularity (1-100), as MLE-bench's prepare.py
lays them out: `train.csv` (Id, the twelve 0/1 photo metadata columns, Pawpularity) and `test.csv` (without it),
`train/<Id>.jpg` and `test/<Id>.jpg`; `sample_submission.csv` (`Id,Pawpularity`, uniform random in [1, 100] to 2
places from NumPy's default_rng(0)); private/test.csv (the test rows whole).

Each photo shows one pet (three with Group) of a warm coat on a room's background; how appealing it is, a hidden
score, makes the pet larger and brighter, and Pawpularity is that score plus the metadata's own pulls (a face, a
near shot and a group up; blur and a human down), with noise, cut to 1-100: a table model learns the metadata's
part, an image model the pet's, and neither all of it. The train mean scores an RMSE of about the target's
spread (~20); the random sample far worse.

`sizes(scale)`: 1,500 photos of 40x40 at the replica's own scale; 9,912 of 720x960 at REAL.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageFilter

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, design, disc, folders, hex_ids, paint, render, textured, to_image

PHOTOS, REAL_PHOTOS = 1_500, 9_912  # the replica's own; the real labelled photos, 8,920 train and 992 test
SIDE = 40
REAL_WIDTH, REAL_HEIGHT = 720, 960
TEST_SHARE = 0.1
COLUMNS = ("Subject Focus", "Eyes", "Face", "Near", "Action", "Accessory", "Group", "Collage", "Human",
           "Occlusion", "Info", "Blur")
SHARES = (0.03, 0.77, 0.9, 0.86, 0.01, 0.07, 0.13, 0.05, 0.17, 0.17, 0.06, 0.07)  # each column's real share of 1s
PULLS = {"Face": 5.0, "Near": 4.0, "Group": 5.0, "Blur": -8.0, "Human": -4.0}  # Pawpularity points each 1 adds
MEAN, APPEAL, NOISE = 34.0, 13.0, 9.0  # the score's centre, the hidden appeal's pull and what nothing explains
DESIGN = 160
CHUNK = 32


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many photos `scale` writes (test a tenth) and their pixel size."""
    scale = parse_scale(scale)
    shape = (REAL_WIDTH, REAL_HEIGHT) if is_real(scale) else (SIDE, SIDE)
    photos = scaled(PHOTOS, REAL_PHOTOS, scale, least=20)
    test = round(TEST_SHARE * photos)
    return Sizes(photos - test, test, shape, shape)


def photo(appeal: float, row: dict, rng: np.random.Generator, shape: tuple[int, int]) -> Image.Image:
    """One photo: a room's background, the pet (or a group of three), larger and brighter with `appeal`; a
    human's arm, blur and a near shot where the metadata says so."""
    width, height = design(shape, DESIGN)
    unit = min(width, height) / SIDE
    canvas = textured(rng, height, width, rng.uniform(70, 170, 3), swing=30, noise=6)
    pets = 3 if row["Group"] else 1
    radius = (7.0 + 1.8 * appeal + (3.0 if row["Near"] else 0.0)) * unit / (1.6 if pets > 1 else 1.0)
    coat = np.array([200, 140, 80]) * (0.75 + 0.12 * appeal) + rng.normal(0, 12, 3)
    for _ in range(pets):
        cx, cy = rng.uniform(radius, width - radius), rng.uniform(radius, height - radius)
        paint(canvas, disc(height, width, cx, cy, max(2.0, radius), max(2.0, 0.8 * radius)), coat, alpha=0.95)
    if row["Human"]:
        paint(canvas, disc(height, width, rng.uniform(0, width), height, 6 * unit, 12 * unit), (225, 185, 160))
    image = to_image(canvas)
    image = image.filter(ImageFilter.GaussianBlur(2.0 * unit)) if row["Blur"] else image.filter(ImageFilter.SMOOTH)
    return image if image.size == tuple(shape) else image.resize(tuple(shape), Image.BICUBIC)


def _photos(items: list[tuple[str, float, dict, Path]], seed: int, shape: tuple[int, int]) -> list:
    rng = np.random.default_rng(seed)
    for name, appeal, row, folder in items:
        photo(appeal, row, rng, shape).save(folder / f"{name}.jpg", quality=int(rng.integers(85, 96)))
    return []


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, train/, test/, the sample) and prepared/private/test.csv."""
    size = sizes(scale)
    public, private = folders(root, "train", "test")
    count = size.train + size.test
    table = pd.DataFrame({"Id": hex_ids(rng, count, 32)})
    for column, share in zip(COLUMNS, SHARES):
        table[column] = (rng.random(count) < share).astype(int)
    appeal = rng.normal(0, 1, count)
    score = MEAN + APPEAL * appeal + sum(pull * table[c] for c, pull in PULLS.items()) + rng.normal(0, NOISE, count)
    table["Pawpularity"] = np.clip(np.round(score), 1, 100).astype(int)
    is_test = np.zeros(count, dtype=bool)
    is_test[rng.choice(count, size.test, replace=False)] = True
    jobs = [(name, a, row, public / ("test" if t else "train"))
            for name, a, row, t in zip(table["Id"], appeal, table[list(COLUMNS)].to_dict("records"), is_test)]
    render(partial(_photos, shape=size.smallest), jobs, rng, CHUNK, size.pixels(count))
    train, test = table[~is_test], table[is_test]
    train.to_csv(public / "train.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    test.drop(columns="Pawpularity").to_csv(public / "test.csv", index=False)
    sample = test[["Id"]].assign(Pawpularity=np.random.default_rng(0).uniform(1, 100, len(test)).round(2))
    sample.to_csv(public / "sample_submission.csv", index=False)
    describe(public, "PetFinder.my - Pawpularity Contest",
             "Predict each test pet photo's Pawpularity (1-100) from the photo in test/ and its twelve metadata "
             "columns in test.csv; train.csv gives the training photos' Pawpularity.",
             "Submissions are evaluated on the root mean squared error.",
             "Submit `Id,Pawpularity` for every test photo, each value within [1, 100].")
