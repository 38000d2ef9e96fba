"""A synthetic aptos2019-blindness-detection: small PNG fundus photos graded 0-4 for diabetic retinopathy.

Each photo is an orange retina disc on black with an optic disc and dark vessels. The grade is ordinal in the
image: the number and size of bright yellow exudate spots grow with the grade (none at grade 0), and grades 3-4
add dark red haemorrhage blots. A small CNN (classifier or regressor rounded to 0-4) reaches a quadratic weighted
kappa of roughly 0.8-0.9; the sample submission (all grade 0) scores 0.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from runner.demo._layout import describe
from runner.demo._pictures import disc, folders, hex_ids, paint, quota, textured, to_image

TRAIN, TEST = 220, 60
GRADE_SHARES = (0.40, 0.15, 0.22, 0.10, 0.13)  # the real skew to grades 0 and 2, flattened so each grade shows up
SPOTS = (0, 3, 6, 10, 15)  # exudates per grade: the ordinal signal
SPOT_RADIUS = (0.0, 0.9, 1.1, 1.4, 1.7)  # and they grow with the grade
BLOTS = (0, 0, 0, 2, 4)  # haemorrhages appear only in the severe grades
WIDTHS, HEIGHTS = (48, 64), (44, 52)  # photos vary in size, as the real ones do


def _vessels(image: Image.Image, cx: float, cy: float, radius: float, rng: np.random.Generator) -> None:
    draw = ImageDraw.Draw(image)
    for angle in rng.uniform(0, 2 * np.pi, int(rng.integers(4, 7))):
        bend = rng.uniform(-0.5, 0.5)
        points = [(cx + r * radius * np.cos(angle + bend * r), cy + r * radius * np.sin(angle + bend * r))
                  for r in np.linspace(0, 0.9, 6)]
        draw.line(points, fill=(120, 30, 20), width=1)


def photo(grade: int, rng: np.random.Generator) -> Image.Image:
    width, height = int(rng.integers(*WIDTHS)), int(rng.integers(*HEIGHTS))
    cx, cy, radius = width / 2 + rng.normal(0, 1), height / 2 + rng.normal(0, 1), min(width, height) * 0.46
    retina = textured(rng, height, width, (200 + rng.normal(0, 15), 95 + rng.normal(0, 12), 40), swing=25, noise=6)
    y, x = np.ogrid[:height, :width]
    retina *= np.clip(1.15 - 0.55 * np.hypot(x - cx, y - cy) / radius, 0, 1)[..., None]
    field = disc(height, width, cx, cy, radius)
    background = rng.normal(4, 2, (height, width, 3))
    canvas = np.where(field[..., None], retina, background)
    side = rng.choice([-1, 1])
    paint(canvas, disc(height, width, cx + side * radius * 0.45, cy, radius * 0.16), (250, 215, 150), alpha=0.85)
    image = to_image(canvas)
    _vessels(image, cx + side * radius * 0.45, cy, radius, rng)
    canvas = np.asarray(image, dtype=float).copy()
    for _ in range(max(0, SPOTS[grade] + int(rng.integers(-1, 2))) if grade else 0):
        r, a = radius * np.sqrt(rng.uniform(0.02, 0.7)), rng.uniform(0, 2 * np.pi)
        spot = disc(height, width, cx + r * np.cos(a), cy + r * np.sin(a), SPOT_RADIUS[grade] * rng.uniform(0.8, 1.3))
        paint(canvas, spot, (255, 240, 120), alpha=0.9)
    for _ in range(BLOTS[grade]):
        r, a = radius * np.sqrt(rng.uniform(0.02, 0.6)), rng.uniform(0, 2 * np.pi)
        paint(canvas, disc(height, width, cx + r * np.cos(a), cy + r * np.sin(a), rng.uniform(1.5, 2.5)),
              (90, 10, 10), alpha=0.8)
    return to_image(np.where(field[..., None], canvas, background))


def _split(count: int, folder: Path, rng: np.random.Generator) -> pd.DataFrame:
    grades = quota(GRADE_SHARES, count, rng)
    ids = hex_ids(rng, count, 12)
    for id_code, grade in zip(ids, grades):
        photo(int(grade), rng).save(folder / f"{id_code}.png")
    return pd.DataFrame({"id_code": ids, "diagnosis": grades})


def generate(root: Path, rng: np.random.Generator) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv, train_images/, test_images/) and
    prepared/private/test.csv."""
    public, private = folders(root, "train_images", "test_images")
    _split(TRAIN, public / "train_images", rng).to_csv(public / "train.csv", index=False)
    test = _split(TEST, public / "test_images", rng)
    test.to_csv(private / "test.csv", index=False)
    test[["id_code"]].to_csv(public / "test.csv", index=False)
    test.assign(diagnosis=0).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "APTOS 2019 Blindness Detection",
             "Grade the severity of diabetic retinopathy in each retina photo on a 0-4 scale (0 = none, "
             "4 = proliferative).",
             "Submissions are scored based on the quadratic weighted kappa, which measures the agreement between "
             "the predicted and the actual grades.",
             "Submit `id_code,diagnosis` for every test image, with an integer grade 0-4.")
