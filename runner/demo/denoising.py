"""A synthetic denoising-dirty-documents: small grayscale PNG "scanned pages" and their clean versions.

A clean page is white with lines of dark glyph-like text strokes. Its noisy scan has a grey, unevenly lit paper
tone, blurred coffee stains and rings, pixel noise and slightly lighter text. Pages are 64 px wide and 40 or 48 px
tall (the real ones are 540 wide and 258 or 420 tall). Every pixel is one submission row, `<stem>_<row>_<col>`.
A per-pixel model on a small neighbourhood (or a small conv net) reaches an RMSE of about 0.03-0.06; copying the
noisy pixels scores about 0.2, and the sample submission's all-white 1 about 0.35.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageFilter

from runner.demo._layout import describe
from runner.demo._pictures import disc, folders, smooth_field

WIDTH, HEIGHTS = 64, (40, 48)  # two page heights, as the real pages come in two
TRAIN, TEST = 32, 8  # 8 test pages give about 22k submission rows
GLYPHS = 26
GLYPH_SHAPE = (5, 3)  # rows, columns of one glyph
LINE_PITCH = 8  # text line spacing in pixels
NAMES = 216  # the real page names are integers up to 216


def _alphabet(rng: np.random.Generator) -> np.ndarray:
    """Random 5x3 glyph bitmaps, each with a vertical stroke so that none is blank."""
    glyphs = rng.random((GLYPHS, *GLYPH_SHAPE)) < 0.45
    glyphs[np.arange(GLYPHS), :, rng.integers(0, 3, GLYPHS)] = True
    return glyphs


def clean_page(height: int, alphabet: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    page = np.full((height, WIDTH), 255.0)
    ink = rng.uniform(15, 60)
    for top in range(3, height - GLYPH_SHAPE[0] - 1, LINE_PITCH):
        x, end = int(rng.integers(2, 6)), WIDTH - int(rng.integers(2, 12))
        while x + GLYPH_SHAPE[1] < end:
            for _ in range(int(rng.integers(2, 7))):
                if x + GLYPH_SHAPE[1] >= end:
                    break
                glyph = alphabet[int(rng.integers(GLYPHS))]
                page[top:top + GLYPH_SHAPE[0], x:x + GLYPH_SHAPE[1]][glyph] = ink + rng.normal(0, 8)
                x += GLYPH_SHAPE[1] + 1
            x += 3
    return np.clip(page, 0, 255).round()


def _stains(height: int, rng: np.random.Generator) -> np.ndarray:
    """Multiplicative darkening in (0, 1]: blurred blots and coffee rings."""
    stain = np.zeros((height, WIDTH))
    for _ in range(int(rng.integers(1, 4))):
        cx, cy, r = rng.uniform(0, WIDTH), rng.uniform(0, height), rng.uniform(6, 18)
        blot = disc(height, WIDTH, cx, cy, r, r * rng.uniform(0.6, 1.2)).astype(float)
        if rng.random() < 0.5:
            blot -= disc(height, WIDTH, cx, cy, r * 0.8, r * rng.uniform(0.5, 0.9))
        stain += rng.uniform(0.15, 0.4) * blot
    blurred = Image.fromarray((np.clip(stain, 0, 0.7) * 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(2))
    return 1 - np.asarray(blurred) / 255


def noisy_page(clean: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    height = clean.shape[0]
    paper = rng.uniform(195, 235) + 18 * smooth_field(rng, height, WIDTH, cells=3)
    tone = paper * _stains(height, rng)
    text = clean / 255
    page = tone * (0.15 + 0.85 * text) + rng.normal(0, 7, clean.shape)
    return np.clip(page, 0, 255).round()


def _save(pixels: np.ndarray, path: Path) -> None:
    Image.fromarray(pixels.astype(np.uint8)).save(path)


def _pixel_rows(stem: str, clean: np.ndarray) -> pd.DataFrame:
    rows, cols = np.indices(clean.shape) + 1
    ids = [f"{stem}_{r}_{c}" for r, c in zip(rows.ravel(), cols.ravel())]
    return pd.DataFrame({"id": ids, "value": clean.ravel() / 255.0})


def generate(root: Path, rng: np.random.Generator) -> None:
    """Write prepared/public (train/, train_cleaned/, test/, sampleSubmission.csv) and private/answers.csv."""
    public, private = folders(root, "train", "train_cleaned", "test")
    alphabet = _alphabet(rng)
    names = rng.choice(np.arange(1, NAMES + 1), TRAIN + TEST, replace=False)
    answers = {}
    for k, name in enumerate(names):
        clean = clean_page(int(rng.choice(HEIGHTS)), alphabet, rng)
        noisy = noisy_page(clean, rng)
        if k < TRAIN:
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
