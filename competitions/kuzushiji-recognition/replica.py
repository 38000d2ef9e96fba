"""A synthetic kuzushiji-recognition: scanned pages of cursive Japanese as JPEGs in train_images.zip and
test_images.zip (flat, `<image_id>.jpg`), the training characters in train.csv (`image_id,labels`: `unicode x y width
height` groups, the box's top-left corner in pixels), unicode_translation.csv (`Unicode,char`); the answers in
private/test.csv and private/gold_submission.csv (`unicode x+1 y+1` points), the sample puts `U+003F 1 1 U+FF2F 2 2`
on every page.

Characters are written in columns from right to left on yellowed, grainy paper. Each code has its own glyph: a
fixed set of strokes, as its shape is, drawn by a brush a little differently each time; codes are as unevenly
frequent as the real ones. A detector of characters with a classifier of their crops reads them; predicting
nothing scores an F1 of 0.

`sizes(scale)`: pages of 96-112 x 128-144 pixels at a factor of the replica's counts, 2,000-2,800 x 3,000-3,900 at
the real counts (drawn at most DESIGN pixels long and enlarged, the boxes scaled with them).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, encoded, flat_zip, folders, smooth_field

TRAIN, TEST = 150, 60  # pages: the replica's own counts
REAL_TRAIN, REAL_TEST = 3_492, 389  # MLE-bench's 90/10 split of the 3,881 labelled pages
LEAST = 6
SMALL, LARGE = (96, 128), (112, 144)
REAL_SMALL, REAL_LARGE = (2_000, 3_000), (2_800, 3_900)
DESIGN = 768  # a larger page is drawn this long, then enlarged
# the replica's codes (hiragana), commonest first; their frequencies fall as a power of their rank, as real text's
CODES = (0x306B, 0x306E, 0x3057, 0x3066, 0x3068, 0x306F, 0x304B, 0x308B, 0x3092, 0x3044, 0x304F, 0x3089, 0x308A,
         0x306A, 0x3082, 0x3078)
ZIPF = 1.0
CHARACTER = (9.0, 12.0)  # a character's side in the replica's pixels
STROKES = (3, 5)  # a glyph's strokes
GLYPH_SEED = 7  # the glyphs' shapes: fixed, so that a code looks the same on every page of every replica
BOOKS = ("hnsd", "umgy", "brsk", "200003076", "100241706", "200014740", "bvmz")


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many pages `scale` writes (a factor of the replica's counts, or the real ones) and their size bounds."""
    scale = parse_scale(scale)
    small, large = (REAL_SMALL, REAL_LARGE) if is_real(scale) else (SMALL, LARGE)
    return Sizes(scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST), small, large)


def glyphs() -> dict[int, np.ndarray]:
    """Each code's strokes: (strokes, 3 points, x/y) in a unit box, the same in every replica."""
    rng = np.random.default_rng(GLYPH_SEED)
    return {code: rng.uniform(0.1, 0.9, (int(rng.integers(*STROKES)), 3, 2)) for code in CODES}


def page_ids(rng: np.random.Generator, count: int) -> list[str]:
    """Distinct page ids in the real ones' forms: `hnsd006-002`, `100241706_00004_2`."""
    ids: set[str] = set()
    while len(ids) < count:
        book = BOOKS[int(rng.integers(len(BOOKS)))]
        if book.isdigit():
            ids.add(f"{book}_{int(rng.integers(1, 60)):05}_{int(rng.integers(1, 3))}")
        else:
            ids.add(f"{book}{int(rng.integers(1, 40)):03}-{int(rng.integers(1, 60)):03}")
    return sorted(ids, key=lambda _: rng.random())


def page(rng: np.random.Generator, width: int, height: int, shapes: dict) -> tuple[Image.Image, str]:
    """A page and its labels string: columns of characters from right to left."""
    factor = min(1.0, DESIGN / max(width, height))
    w, h = max(16, round(width * factor)), max(16, round(height * factor))
    unit = w / SMALL[0]
    shade = smooth_field(rng, h, w, cells=4)[..., None]
    paper = np.array([222, 205, 168]) + 10 * shade + rng.normal(0, 5, (h, w, 3))
    picture = Image.fromarray(np.clip(paper, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(picture)
    frequency = 1 / np.arange(1, len(CODES) + 1) ** ZIPF
    labels = []
    x = w - rng.uniform(4, 8) * unit
    while x > 8 * unit:
        side = rng.uniform(*CHARACTER) * unit
        y = rng.uniform(4, 8) * unit
        while y + side < h - 4 * unit:
            code = CODES[int(rng.choice(len(CODES), p=frequency / frequency.sum()))]
            size = side * rng.uniform(0.85, 1.1)
            left, top = x - size, y
            for stroke in shapes[code] + rng.normal(0, 0.03, shapes[code].shape):
                points = [(left + px * size, top + py * size) for px, py in stroke]
                draw.line(points, fill=(35, 28, 24), width=max(1, round(unit * 1.2)), joint="curve")
            labels.append((code, left / factor, top / factor, size / factor, size / factor))
            y += size + rng.uniform(1, 3) * unit
        x -= side + rng.uniform(3, 6) * unit
    if factor < 1.0:
        picture = picture.resize((width, height), Image.BILINEAR)
    text = " ".join(f"U+{code:04X} {int(round(a))} {int(round(b))} {int(round(c))} {int(round(d))}"
                    for code, a, b, c, d in labels)
    return picture, text


def _split(rng: np.random.Generator, pages: list[str], size: Sizes, shapes: dict, archive: Path) -> pd.DataFrame:
    members, labels = [], []
    for name, (width, height) in zip(pages, size.shapes(len(pages), rng)):
        picture, text = page(rng, int(width), int(height), shapes)
        members.append((f"{name}.jpg", encoded(picture, "JPEG", quality=int(rng.integers(85, 95)))))
        labels.append(text)
    flat_zip(archive, members)
    return pd.DataFrame({"image_id": pages, "labels": labels})


def _points(labels: str) -> str:
    """A page's `unicode x+1 y+1` points, inside each true box (MLE-bench's gold submission)."""
    tokens = labels.split()
    return " ".join(f"{c} {int(x) + 1} {int(y) + 1}" for c, x, y in zip(tokens[0::5], tokens[1::5], tokens[2::5]))


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, train_images.zip, test_images.zip, unicode_translation.csv,
    sample_submission.csv) and prepared/private (test.csv, gold_submission.csv)."""
    size = sizes(scale)
    public, private = folders(root)
    shapes = glyphs()
    pages = page_ids(rng, size.train + size.test)
    _split(rng, pages[:size.train], size, shapes, public / "train_images.zip").to_csv(public / "train.csv",
                                                                                      index=False)
    answers = _split(rng, pages[size.train:], size, shapes, public / "test_images.zip")
    answers.to_csv(private / "test.csv", index=False)
    answers.assign(labels=answers["labels"].map(_points)).to_csv(private / "gold_submission.csv", index=False)
    answers.assign(labels="U+003F 1 1 U+FF2F 2 2").to_csv(public / "sample_submission.csv", index=False)
    codes = [*range(0x3041, 0x3097), *range(0x30A1, 0x30FB), *range(0x4E00, 0x4E80)]
    pd.DataFrame({"Unicode": [f"U+{c:04X}" for c in codes], "char": [chr(c) for c in codes]}).to_csv(
        public / "unicode_translation.csv", index=False)
    describe(public, "Kuzushiji Recognition",
             "Find and read the characters of each test page (test_images.zip).",
             "Submissions are evaluated on the F1 score of points inside the true characters' boxes with their codes.",
             "Submit `image_id,labels` for every test page: `unicode x y` points, space-separated; nothing where "
             "there are none.")
