"""A synthetic dog-breed-identification: JPEG photos of varied sizes whose breed shows in colour and shape.

Each breed is one (shape, colour) pair out of 8 shapes x 15 hues, drawn at a random place and scale on a noisy,
shaded background, so a small CNN learns it in minutes while a class prior scores ln(120) = 4.79. The photos are
180-519 by 160-459 pixels at every scale, the few hundred pixels a side of the real ones.

`sizes(scale, train_per_breed, test_per_breed)` says how many photos a scale writes; several processes draw and
encode them.
"""
from __future__ import annotations

import colorsys
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw, ImageFilter

from runner.demo._layout import is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, hex_ids, quota, render
from .breeds import BREEDS
from runner.common.errors import RunnerError

TRAIN_PER_BREED, TEST_PER_BREED = 8, 2  # the replica's own counts: 960 train and 240 test photos
REAL_TRAIN, REAL_TEST = 9_199, 1_023  # 10,222 labelled photos, 10% of them the test split
SMALLEST, LARGEST = (180, 160), (519, 459)  # (width, height): a few hundred pixels a side, as the real photos
CHUNK = 32  # photos a worker draws and writes per task
SHAPES = ("ellipse", "rectangle", "triangle", "cross", "ring", "hstripes", "vstripes", "diamond")


def _look(breed: int) -> tuple[str, tuple[int, int, int]]:
    shape, hue = SHAPES[breed % len(SHAPES)], (breed // len(SHAPES)) / 15
    r, g, b = colorsys.hsv_to_rgb(hue, 0.85, 0.9)
    return shape, (int(r * 255), int(g * 255), int(b * 255))


def _draw(draw: ImageDraw.ImageDraw, shape: str, box: tuple[int, int, int, int], colour) -> None:
    x0, y0, x1, y1 = box
    cx, cy, w, h = (x0 + x1) // 2, (y0 + y1) // 2, x1 - x0, y1 - y0
    if shape == "ellipse":
        draw.ellipse(box, fill=colour)
    elif shape == "rectangle":
        draw.rectangle(box, fill=colour)
    elif shape == "triangle":
        draw.polygon([(cx, y0), (x1, y1), (x0, y1)], fill=colour)
    elif shape == "diamond":
        draw.polygon([(cx, y0), (x1, cy), (cx, y1), (x0, cy)], fill=colour)
    elif shape == "cross":
        draw.rectangle((x0, cy - h // 6, x1, cy + h // 6), fill=colour)
        draw.rectangle((cx - w // 6, y0, cx + w // 6, y1), fill=colour)
    elif shape == "ring":
        draw.ellipse(box, outline=colour, width=max(3, w // 7))
    else:
        step = max(6, (h if shape == "hstripes" else w) // 5)
        for k in range(0, h if shape == "hstripes" else w, 2 * step):
            if shape == "hstripes":
                draw.rectangle((x0, y0 + k, x1, y0 + k + step), fill=colour)
            else:
                draw.rectangle((x0 + k, y0, x0 + k + step, y1), fill=colour)


def sizes(scale: float | str = 1.0, train_per_breed: int | None = None, test_per_breed: int | None = None) -> Sizes:
    """How many photos `scale` writes and their pixel sizes: the per-breed counts (the replica's own by default)
    times the factor, spread evenly over the breeds, or at REAL the real counts (which the per-breed counts would
    contradict: refused with them)."""
    scale = parse_scale(scale)  # a factor that is not positive, or a word other than REAL, is refused
    if is_real(scale) and (train_per_breed or test_per_breed):
        raise RunnerError("dog-breed: real and real/N take the real counts; give them no per-breed counts")
    train = len(BREEDS) * (TRAIN_PER_BREED if train_per_breed is None else train_per_breed)
    test = len(BREEDS) * (TEST_PER_BREED if test_per_breed is None else test_per_breed)
    return Sizes(scaled(train, REAL_TRAIN, scale, least=len(BREEDS)), scaled(test, REAL_TEST, scale),
                 SMALLEST, LARGEST)


def photo(breed: int, shape: tuple[int, int], rng: np.random.Generator) -> Image.Image:
    """One 'photo' of a breed, `shape` (width, height): shaded background, the breed's mark, noise and blur."""
    width, height = (int(v) for v in shape)
    base = rng.integers(60, 200, size=3).astype(np.float32)
    shade = np.linspace(0.7, 1.2, height, dtype=np.float32)[:, None, None]
    noise = rng.standard_normal((height, width, 3), np.float32) * 18  # float32: a real-size set draws billions
    pixels = np.clip(base * shade + noise, 0, 255).astype(np.uint8)
    image = Image.fromarray(pixels)
    shape_name, colour = _look(breed)
    side = int(min(width, height) * rng.uniform(0.45, 0.8))
    x0, y0 = int(rng.integers(0, width - side + 1)), int(rng.integers(0, height - side + 1))
    _draw(ImageDraw.Draw(image), shape_name, (x0, y0, x0 + side, y0 + side), colour)
    return image.filter(ImageFilter.GaussianBlur(float(rng.uniform(0, 1.2))))


def photos(items: list[tuple[Path, int, int, int]], seed: int) -> list:
    """Write (path, breed, width, height) items as JPEG photos."""
    rng = np.random.default_rng(seed)
    for path, breed, width, height in items:
        photo(breed, (width, height), rng).save(path, quality=int(rng.integers(80, 96)))
    return []


def _split(count: int, folder: Path, size: Sizes, rng: np.random.Generator) -> tuple[list[str], list[str]]:
    """Photos of `count` breeds, as evenly spread as the count allows, in random order: (ids, breed names)."""
    breeds = quota((1,) * len(BREEDS), count, rng)
    ids = hex_ids(rng, count, 32)
    items = [(folder / f"{i}.jpg", int(b), int(w), int(h)) for i, b, (w, h) in zip(ids, breeds,
                                                                                   size.shapes(count, rng))]
    render(photos, items, rng, CHUNK, size.pixels(count))
    return ids, [BREEDS[b] for b in breeds]


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0, train_per_breed: int | None = None,
             test_per_breed: int | None = None) -> None:
    """Write prepared/public (labels.csv, train/, test/, sample_submission.csv) and prepared/private/test.csv, as
    many photos as `sizes(scale, train_per_breed, test_per_breed)` says."""
    size = sizes(scale, train_per_breed, test_per_breed)
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    for folder in (public / "train", public / "test", private):
        folder.mkdir(parents=True, exist_ok=True)
    ids, names = _split(size.train, public / "train", size, rng)
    pd.DataFrame({"id": ids, "breed": names}).to_csv(public / "labels.csv", index=False)
    test_ids, answers = _split(size.test, public / "test", size, rng)
    sample = pd.DataFrame({"id": test_ids, **{b: 1 / len(BREEDS) for b in BREEDS}})
    sample.to_csv(public / "sample_submission.csv", index=False)
    onehot = pd.DataFrame({"id": test_ids, **{b: [int(n == b) for n in answers] for b in BREEDS}})
    onehot.to_csv(private / "test.csv", index=False)
    (public / "description.md").write_text(
        "# Dog Breed Identification (synthetic demo)\n\nPredict a probability for each of 120 breeds. "
        "Submissions are evaluated on Multi Class Log Loss.\n")
