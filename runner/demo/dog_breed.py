"""A synthetic dog-breed-identification: JPEG photos of varied sizes whose breed shows in colour and shape.

Each breed is one (shape, colour) pair out of 8 shapes x 15 hues, drawn at a random place and scale on a noisy,
shaded background, so a small CNN learns it in minutes while a class prior scores ln(120) = 4.79.
"""
from __future__ import annotations

import colorsys
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw, ImageFilter

from runner.demo.breeds import BREEDS

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


def photo(breed: int, rng: np.random.Generator) -> Image.Image:
    """One 'photo' of a breed: random size and aspect, shaded background, the breed's mark, noise and blur."""
    width, height = int(rng.integers(180, 520)), int(rng.integers(160, 460))
    base = rng.integers(60, 200, size=3)
    shade = np.linspace(0.7, 1.2, height)[:, None, None] * np.ones((height, width, 1))
    pixels = np.clip(base * shade + rng.normal(0, 18, (height, width, 3)), 0, 255).astype(np.uint8)
    image = Image.fromarray(pixels)
    shape, colour = _look(breed)
    side = int(min(width, height) * rng.uniform(0.45, 0.8))
    x0, y0 = int(rng.integers(0, width - side + 1)), int(rng.integers(0, height - side + 1))
    _draw(ImageDraw.Draw(image), shape, (x0, y0, x0 + side, y0 + side), colour)
    return image.filter(ImageFilter.GaussianBlur(float(rng.uniform(0, 1.2))))


def generate(root: Path, rng: np.random.Generator, train_per_breed: int = 8, test_per_breed: int = 2) -> None:
    """Write prepared/public (labels.csv, train/, test/, sample_submission.csv) and prepared/private/test.csv."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    for folder in (public / "train", public / "test", private):
        folder.mkdir(parents=True, exist_ok=True)
    labels, answers = [], []
    for breed, name in enumerate(BREEDS):
        for split, count in (("train", train_per_breed), ("test", test_per_breed)):
            for _ in range(count):
                image_id = uuid.UUID(bytes=rng.bytes(16)).hex
                photo(breed, rng).save(public / split / f"{image_id}.jpg", quality=int(rng.integers(80, 96)))
                (labels if split == "train" else answers).append((image_id, name))
    order = rng.permutation(len(labels))
    pd.DataFrame([labels[i] for i in order], columns=["id", "breed"]).to_csv(public / "labels.csv", index=False)
    test_ids = [image_id for image_id, _ in answers]
    sample = pd.DataFrame({"id": test_ids, **{b: 1 / len(BREEDS) for b in BREEDS}})
    sample.to_csv(public / "sample_submission.csv", index=False)
    onehot = pd.DataFrame({"id": test_ids, **{b: [int(n == b) for _, n in answers] for b in BREEDS}})
    onehot.to_csv(private / "test.csv", index=False)
    (public / "description.md").write_text(
        "# Dog Breed Identification (synthetic demo)\n\nPredict a probability for each of 120 breeds. "
        "Submissions are evaluated on Multi Class Log Loss.\n")
