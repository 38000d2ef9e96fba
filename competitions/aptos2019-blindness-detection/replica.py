"""A synthetic aptos2019-blindness-detection: PNG fundus photos graded 0-4 for diabetic retinopathy, about 56x48 in
the replica's own size and camera-sized (819x614 up to 4288x2848) at the real scale.

Each photo is an orange retina disc on black with an optic disc and dark vessels. The grade is ordinal in the
image: the number and size of bright yellow exudate spots grow with the grade (none at grade 0), and grades 3-4
add dark red haemorrhage blots. A small CNN (classifier or regressor rounded to 0-4) reaches a quadratic weighted
kappa of roughly 0.8-0.9; the sample submission (all grade 0) scores 0.

`sizes(scale)` says how many photos a scale writes and how large; large photos are drawn on a small canvas,
enlarged, several processes encoding them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, design, disc, folders, hex_ids, paint, quota, render, textured, to_image

TRAIN, TEST = 220, 60  # the replica's own counts
REAL_TRAIN, REAL_TEST = 3_295, 367  # 3,662 labelled photos, 10% of them the test split
GRADE_SHARES = (0.40, 0.15, 0.22, 0.10, 0.13)  # the real skew to grades 0 and 2, flattened so each grade shows up
SPOTS = (0, 3, 6, 10, 15)  # exudates per grade: the ordinal signal
SPOT_RADIUS = (0.0, 0.9, 1.1, 1.4, 1.7)  # and they grow with the grade (pixels of a photo 48 pixels high)
BLOTS = (0, 0, 0, 2, 4)  # haemorrhages appear only in the severe grades
UNIT = 48  # the short side the radii above are measured against
WIDTHS, HEIGHTS = (48, 63), (44, 51)  # the replica's own photos vary in size, as the real ones do
# the real photos come from a few fundus cameras: their frequent frame sizes, roughly in their proportions
CAMERAS = (((3216, 2136), 0.33), ((2588, 1958), 0.23), ((2416, 1736), 0.14), ((1050, 1050), 0.11),
           ((1844, 1226), 0.06), ((819, 614), 0.06), ((4288, 2848), 0.04), ((2048, 1536), 0.03))
DESIGN = 384  # the long side a large photo is drawn at before it is enlarged
PNG_LEVEL = 1  # zlib's fastest: a real-size PNG about three times faster than at 6, a fifth larger
CHUNK = 8  # photos a worker draws and writes per task


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many photos `scale` writes (a factor of the replica's own counts, or REAL) and their pixel sizes."""
    scale = parse_scale(scale)  # a factor that is not positive, or a word other than REAL, is refused
    train, test = scaled(TRAIN, REAL_TRAIN, scale, least=5), scaled(TEST, REAL_TEST, scale, least=5)
    if is_real(scale):
        return Sizes.of_cameras(train, test, CAMERAS)
    return Sizes(train, test, (WIDTHS[0], HEIGHTS[0]), (WIDTHS[1], HEIGHTS[1]))


def _vessels(image: Image.Image, cx: float, cy: float, radius: float, unit: float, rng: np.random.Generator) -> None:
    draw = ImageDraw.Draw(image)
    for angle in rng.uniform(0, 2 * np.pi, int(rng.integers(4, 7))):
        bend = rng.uniform(-0.5, 0.5)
        points = [(cx + r * radius * np.cos(angle + bend * r), cy + r * radius * np.sin(angle + bend * r))
                  for r in np.linspace(0, 0.9, 6)]
        draw.line(points, fill=(120, 30, 20), width=max(1, round(unit)))


def _lesions(canvas: np.ndarray, grade: int, cx: float, cy: float, radius: float, unit: float,
             rng: np.random.Generator) -> None:
    height, width = canvas.shape[:2]
    for _ in range(max(0, SPOTS[grade] + int(rng.integers(-1, 2))) if grade else 0):
        r, a = radius * np.sqrt(rng.uniform(0.02, 0.7)), rng.uniform(0, 2 * np.pi)
        spot = disc(height, width, cx + r * np.cos(a), cy + r * np.sin(a),
                    SPOT_RADIUS[grade] * unit * rng.uniform(0.8, 1.3))
        paint(canvas, spot, (255, 240, 120), alpha=0.9)
    for _ in range(BLOTS[grade]):
        r, a = radius * np.sqrt(rng.uniform(0.02, 0.6)), rng.uniform(0, 2 * np.pi)
        paint(canvas, disc(height, width, cx + r * np.cos(a), cy + r * np.sin(a), rng.uniform(1.5, 2.5) * unit),
              (90, 10, 10), alpha=0.8)


def photo(grade: int, shape: tuple[int, int], rng: np.random.Generator) -> Image.Image:
    """A fundus photo of `shape` (width, height): drawn on a canvas of at most DESIGN pixels a side, then enlarged
    where the photo is larger (the enlarged texture alone makes a PNG about as large as a real one: 0.5-0.6 bytes
    a pixel, the real 10.2 GB for 3,662 photos)."""
    width, height = design(shape, DESIGN)
    unit = min(width, height) / UNIT
    cx, cy = width / 2 + rng.normal(0, unit), height / 2 + rng.normal(0, unit)
    radius = min(width, height) * 0.46
    retina = textured(rng, height, width, (200 + rng.normal(0, 15), 95 + rng.normal(0, 12), 40), swing=25, noise=6)
    y, x = np.ogrid[:height, :width]
    retina *= np.clip(1.15 - 0.55 * np.hypot(x - cx, y - cy) / radius, 0, 1)[..., None]
    field = disc(height, width, cx, cy, radius)
    background = rng.normal(4, 2, (height, width, 3))
    canvas = np.where(field[..., None], retina, background)
    side = rng.choice([-1, 1])
    paint(canvas, disc(height, width, cx + side * radius * 0.45, cy, radius * 0.16), (250, 215, 150), alpha=0.85)
    image = to_image(canvas)
    _vessels(image, cx + side * radius * 0.45, cy, radius, unit, rng)
    canvas = np.asarray(image, dtype=float).copy()
    _lesions(canvas, grade, cx, cy, radius, unit, rng)
    image = to_image(np.where(field[..., None], canvas, background))
    return image if image.size == tuple(shape) else image.resize(tuple(int(v) for v in shape), Image.BILINEAR)


def photos(items: list[tuple[Path, int, int, int]], seed: int) -> list:
    """Write (path, grade, width, height) items as PNG photos."""
    rng = np.random.default_rng(seed)
    for path, grade, width, height in items:
        photo(grade, (width, height), rng).save(path, compress_level=PNG_LEVEL)
    return []


def _split(count: int, folder: Path, size: Sizes, rng: np.random.Generator) -> pd.DataFrame:
    grades = quota(GRADE_SHARES, count, rng)
    ids = hex_ids(rng, count, 12)
    items = [(folder / f"{i}.png", int(g), int(w), int(h)) for i, g, (w, h) in zip(ids, grades,
                                                                                   size.shapes(count, rng))]
    render(photos, items, rng, CHUNK, size.pixels(count))
    return pd.DataFrame({"id_code": ids, "diagnosis": grades})


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv, train_images/, test_images/) and
    prepared/private/test.csv, as many photos as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root, "train_images", "test_images")
    _split(size.train, public / "train_images", size, rng).to_csv(public / "train.csv", index=False)
    test = _split(size.test, public / "test_images", size, rng)
    test.to_csv(private / "test.csv", index=False)
    test[["id_code"]].to_csv(public / "test.csv", index=False)
    test.assign(diagnosis=0).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "APTOS 2019 Blindness Detection",
             "Grade the severity of diabetic retinopathy in each retina photo on a 0-4 scale (0 = none, "
             "4 = proliferative).",
             "Submissions are scored based on the quadratic weighted kappa, which measures the agreement between "
             "the predicted and the actual grades.",
             "Submit `id_code,diagnosis` for every test image, with an integer grade 0-4.")
