"""A synthetic denoising-dirty-documents: grayscale PNG "scanned pages" and their clean versions.

A clean page is white with lines of dark glyph-like text strokes. Its noisy scan has a grey, unevenly lit paper
tone, blurred coffee stains and rings, pixel noise and slightly lighter text. Pages are 64 px wide and 40 or 48 px
tall (the real ones are 540 wide and 258 or 420 tall). Every pixel is one submission row, `<stem>_<row>_<col>`.
A per-pixel model on a small neighbourhood (or a small conv net) reaches an RMSE of about 0.03-0.06; copying the
noisy pixels scores about 0.2, and the sample submission's all-white 1 about 0.35.

`sizes(scale)` says how many pages a scale writes and how large: the replica's 64-px pages at a factor of its own
counts; at REAL the real 115 and 29 pages, 540 px wide and 258 or 420 tall, with type, stains and blur grown in
proportion (the submission then has about five million rows).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageFilter

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, disc, folders, smooth_field

WIDTH, HEIGHTS = 64, (40, 48)  # two page heights, as the real pages come in two
REAL_WIDTH, REAL_HEIGHTS = 540, (258, 420)  # the real pages' sizes
TRAIN, TEST = 32, 8  # 8 test pages give about 22k submission rows
REAL_TRAIN, REAL_TEST = 115, 29  # 144 original train pages, 20% of them the test split
LEAST = 2  # pages a split keeps at the smallest factors
TYPE_WIDTH = 270  # page width per step of type size: the real 540-px scans carry glyphs twice the replica's
GLYPHS = 26
GLYPH_SHAPE = (5, 3)  # rows, columns of one glyph
LINE_PITCH = 8  # text line spacing in pixels
NAMES = 216  # the real page names are integers up to 216 (more pages than that take more names)


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many pages `scale` writes (a factor of the replica's own counts, or REAL) and their sizes, either
    height as likely."""
    scale = parse_scale(scale)
    width, heights = (REAL_WIDTH, REAL_HEIGHTS) if is_real(scale) else (WIDTH, HEIGHTS)
    return Sizes.of_cameras(scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST),
                            tuple(((width, height), 1.0) for height in heights))


def _alphabet(rng: np.random.Generator) -> np.ndarray:
    """Random 5x3 glyph bitmaps, each with a vertical stroke so that none is blank."""
    glyphs = rng.random((GLYPHS, *GLYPH_SHAPE)) < 0.45
    glyphs[np.arange(GLYPHS), :, rng.integers(0, 3, GLYPHS)] = True
    return glyphs


def clean_page(height: int, alphabet: np.ndarray, rng: np.random.Generator, width: int = WIDTH) -> np.ndarray:
    """White page with lines of glyphs; a wider page has its type (glyphs, gaps, margins) `zoom` times larger."""
    zoom = max(1, round(width / TYPE_WIDTH))
    glyphs = alphabet.repeat(zoom, axis=1).repeat(zoom, axis=2)
    tall, wide = glyphs.shape[1:]
    page = np.full((height, width), 255.0)
    ink = rng.uniform(15, 60)
    for top in range(3 * zoom, height - tall - zoom, LINE_PITCH * zoom):
        x, end = int(rng.integers(2, 6)) * zoom, width - int(rng.integers(2, 12)) * zoom
        while x + wide < end:
            for _ in range(int(rng.integers(2, 7))):
                if x + wide >= end:
                    break
                glyph = glyphs[int(rng.integers(GLYPHS))]
                page[top:top + tall, x:x + wide][glyph] = ink + rng.normal(0, 8)
                x += wide + zoom
            x += 3 * zoom
    return np.clip(page, 0, 255).round()


def _stains(height: int, width: int, rng: np.random.Generator) -> np.ndarray:
    """Multiplicative darkening in (0, 1]: blurred blots and coffee rings, their size in proportion to the page."""
    unit, stain = width / WIDTH, np.zeros((height, width))
    for _ in range(int(rng.integers(1, 4))):
        cx, cy, r = rng.uniform(0, width), rng.uniform(0, height), rng.uniform(6, 18) * unit
        blot = disc(height, width, cx, cy, r, r * rng.uniform(0.6, 1.2)).astype(float)
        if rng.random() < 0.5:
            blot -= disc(height, width, cx, cy, r * 0.8, r * rng.uniform(0.5, 0.9))
        stain += rng.uniform(0.15, 0.4) * blot
    blurred = Image.fromarray((np.clip(stain, 0, 0.7) * 255).astype(np.uint8)).filter(
        ImageFilter.GaussianBlur(2 * unit))
    return 1 - np.asarray(blurred) / 255


def noisy_page(clean: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    height, width = clean.shape
    paper = rng.uniform(195, 235) + 18 * smooth_field(rng, height, width, cells=3)
    tone = paper * _stains(height, width, rng)
    text = clean / 255
    page = tone * (0.15 + 0.85 * text) + rng.normal(0, 7, clean.shape)
    return np.clip(page, 0, 255).round()


def _save(pixels: np.ndarray, path: Path) -> None:
    Image.fromarray(pixels.astype(np.uint8)).save(path)


def _pixel_rows(stem: str, clean: np.ndarray) -> pd.DataFrame:
    """One row a pixel, row-major, ids `<stem>_<row>_<col>` 1-based (the row and column parts made once each)."""
    height, width = clean.shape
    columns = [f"_{c}" for c in range(1, width + 1)]
    ids = [f"{stem}_{r}{c}" for r in range(1, height + 1) for c in columns]
    return pd.DataFrame({"id": ids, "value": clean.ravel() / 255.0})


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train/, train_cleaned/, test/, sampleSubmission.csv) and private/answers.csv, as
    many pages as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root, "train", "train_cleaned", "test")
    alphabet = _alphabet(rng)
    pages = size.train + size.test
    names = rng.choice(np.arange(1, max(NAMES, pages) + 1), pages, replace=False)
    (width, _), heights = size.smallest, [height for (_, height), _ in size.cameras]
    answers = {}
    for k, name in enumerate(names):
        clean = clean_page(int(rng.choice(heights)), alphabet, rng, width)
        noisy = noisy_page(clean, rng)
        if k < size.train:
            _save(noisy, public / "train" / f"{name}.png")
            _save(clean, public / "train_cleaned" / f"{name}.png")
        else:
            _save(noisy, public / "test" / f"{name}.png")
            answers[f"{name}.png"] = _pixel_rows(str(name), clean)
    frame = pd.concat([answers[file] for file in sorted(answers)], ignore_index=True)
    frame.to_csv(private / "answers.csv", index=False)
    frame.assign(value=1).to_csv(public / "sampleSubmission.csv", index=False)
    describe(public, "Denoising Dirty Documents",
             "Remove the stains and noise from each scanned page in test/: predict the clean intensity of every "
             "pixel (0 = black, 1 = white). train/ and train_cleaned/ hold noisy and clean pages with the same names.",
             "Submissions are evaluated on the root mean squared error between the cleaned pixel intensities and "
             "the actual grayscale pixel intensities.",
             "Submit `id,value` with one row per pixel, `id` = `<image>_<row>_<col>` (1-based), as in "
             "sampleSubmission.csv.")
