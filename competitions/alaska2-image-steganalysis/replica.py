"""A synthetic alaska2-image-steganalysis: JPEG covers and their stego versions, as MLE-bench's prepare.py lays
them out: `Cover/`, `JMiPOD/`, `JUNIWARD/` and `UERD/` hold the same names (`00001.jpg`, ...), each stego file the
cover of its name with a message hidden by that algorithm; `Test/` (`0001.jpg`, ...) holds held-out covers, each
either as it is (Label 0) or one of its three stego versions (Label 1), half and half; `sample_submission.csv`
(`Id,Label`, all 0, ids ascending); private/test.csv.

A cover is a textured scene of soft blobs; each algorithm leaves its own faint mark, a tint of a few levels with a
fine grain over a part of the picture (JMiPOD the upper left, JUNIWARD the lower right, UERD the middle), weak
beside the scenes' own shading, so a model ranks the stego files well but not perfectly. The real messages
change single DCT coefficients by one and are invisible; any constant scores 0.5857.

`sizes(scale)`: 150 covers (600 training files) and 300 test files of 64x64 at the replica's own scale; 70,000
covers (280,000 files) and 5,000 test files of 512x512 at REAL.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, folders, render, textured, to_image
from runner.demo._specimens import Look, mask_of

COVERS, TEST = 150, 300  # the replica's own
REAL_COVERS, REAL_TEST = 70_000, 5_000
SIDE, REAL_SIDE = 64, 512
ALGORITHMS = ("JMiPOD", "JUNIWARD", "UERD")
# where each algorithm's mark lies, as (top, left, bottom, right) shares of the picture, and its tint (RGB levels)
MARKS = {"JMiPOD": ((0.0, 0.0, 0.5, 0.5), (0, 0, 9)), "JUNIWARD": ((0.5, 0.5, 1.0, 1.0), (9, 0, 0)),
         "UERD": ((0.25, 0.25, 0.75, 0.75), (0, 8, 0))}
GRAIN = 4.0  # the mark's fine grain (levels)
QUALITIES = (75, 90, 95)  # the JPEG qualities of the real covers
CHUNK = 16  # covers one task draws (each with its three stego versions)


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many training files (covers x 4) and test files `scale` writes, and their pixel size."""
    scale = parse_scale(scale)
    side = REAL_SIDE if is_real(scale) else SIDE
    covers = scaled(COVERS, REAL_COVERS, scale, least=4)
    return Sizes(4 * covers, scaled(TEST, REAL_TEST, scale, least=4), (side, side), (side, side))


def cover(rng: np.random.Generator, side: int) -> np.ndarray:
    """A float canvas: a shaded scene with a few soft blobs of other colours."""
    canvas = textured(rng, side, side, rng.uniform(50, 200, 3), swing=40, noise=6)
    for _ in range(int(rng.integers(2, 5))):
        look = Look(tuple(rng.uniform(30, 230, 3)), "disc")
        r = rng.uniform(0.1, 0.3) * side
        mask = mask_of(look, side, side, rng.uniform(0, side), rng.uniform(0, side), r, 0.0)
        canvas[mask] = 0.6 * canvas[mask] + 0.4 * np.asarray(look.colour)
    return canvas


def hidden(canvas: np.ndarray, algorithm: str, rng: np.random.Generator) -> np.ndarray:
    """The cover with the algorithm's mark: a tint and a fine grain over its part of the picture."""
    (top, left, bottom, right), tint = MARKS[algorithm]
    side = canvas.shape[0]
    rows, cols = slice(int(top * side), int(bottom * side)), slice(int(left * side), int(right * side))
    out = canvas.copy()
    part = out[rows, cols]
    out[rows, cols] = part + np.asarray(tint, dtype=float) + rng.normal(0, GRAIN, part.shape)
    return out


def _train(items: list[str], seed: int, public: Path, side: int) -> list:
    """Each name's cover in Cover/ and its stego versions in the algorithms' folders."""
    rng = np.random.default_rng(seed)
    for name in items:
        canvas, quality = cover(rng, side), int(rng.choice(QUALITIES))
        to_image(canvas).save(public / "Cover" / name, quality=quality)
        for algorithm in ALGORITHMS:
            to_image(hidden(canvas, algorithm, rng)).save(public / algorithm / name, quality=quality)
    return []


def _test(items: list[tuple[str, str | None]], seed: int, public: Path, side: int) -> list:
    """Each test name as a held-out cover, or its version by the algorithm given."""
    rng = np.random.default_rng(seed)
    for name, algorithm in items:
        canvas, quality = cover(rng, side), int(rng.choice(QUALITIES))
        picture = canvas if algorithm is None else hidden(canvas, algorithm, rng)
        to_image(picture).save(public / "Test" / name, quality=quality)
    return []


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (the four training folders, Test/, the sample) and prepared/private/test.csv."""
    size = sizes(scale)
    side = size.smallest[0]
    public, private = folders(root, "Cover", *ALGORITHMS, "Test")
    names = [f"{k:05d}.jpg" for k in range(1, size.train // 4 + 1)]
    render(partial(_train, public=public, side=side), names, rng, CHUNK, size.pixels(size.train))
    ids = [f"{k:04d}.jpg" for k in range(1, size.test + 1)]
    positive = rng.random(size.test) < 0.5
    algorithms = [str(rng.choice(ALGORITHMS)) if p else None for p in positive]
    render(partial(_test, public=public, side=side), list(zip(ids, algorithms)), rng, CHUNK, size.pixels(size.test))
    answers = pd.DataFrame({"Id": ids, "Label": positive.astype(int)})
    answers.to_csv(private / "test.csv", index=False)
    answers.assign(Label=0).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "ALASKA2 Image Steganalysis",
             "Detect, for each image in Test/, whether a message is hidden in it; Cover/ holds unaltered training "
             "images and JMiPOD/, JUNIWARD/ and UERD/ the same images with messages hidden by three algorithms.",
             "Submissions are evaluated on the weighted AUC (TPR 0-0.4 weighted twice).",
             "Submit `Id,Label` for every test image: any real score, higher for likelier stego.")
