"""A synthetic imet-2020-fgvc7: PNG photos of museum artworks in train/ and test/ (`<32 hex>.png`), each with a set
of attributes: train.csv `id,attribute_ids` (space-separated attribute ids), labels.csv naming every attribute
(`culture::...` or `tag::...`), as MLE-bench's 85/15 random split of the real train set lays them out; the answers
in private/answers.csv, the sample gives every artwork `0 1 2`.

Each artwork has one culture and one to four tags. A culture is the ground the work is painted on (its colour and
grain); a tag is a motif drawn on it, somewhere: its shape (a disc, a block, a bar across, a bar up, a ring) in its
colour. Cultures and tags are drawn with uneven shares, as the real ones are, so a few are common and many rare. A
multi-label CNN or one classifier a label on pixels or embeddings finds the motifs; the prior (the commonest
attributes for every artwork) scores a micro-F1 of about 0.2.

`sizes(scale)`: 32x32 pictures at a factor of the replica's own counts; at REAL the real counts at 300x400.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageFilter

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, folders, hex_ids, render, textured, to_image

SHAPE = (32, 32)  # the replica's pictures (width, height)
REAL_SHAPE = (300, 400)  # the real ones are 300 pixels on their shorter side
ARTWORKS = 600  # the replica's artworks: 510 to train, 90 to test
REAL_ARTWORKS = 142_119  # the real train set: 120,801 to MLE-bench's train and 21,318 to its test
TEST_SHARE = 0.15  # MLE-bench's split
CULTURES = 8  # the replica's cultures: one per artwork, its ground
GROUNDS = ((225, 205, 160), (190, 100, 70), (60, 70, 120), (120, 130, 60), (150, 150, 150), (220, 160, 180),
           (70, 150, 150), (120, 85, 55))  # each culture's ground: parchment, terracotta, navy, olive, ...
SHAPES = ("disc", "block", "across", "up", "ring")
HUES = ((220, 40, 40), (40, 170, 60), (40, 70, 210), (235, 200, 30), (150, 50, 190), (20, 20, 20),
        (250, 250, 250))  # a tag is a shape in one of these colours: 35 tags
REAL_ATTRIBUTES = 3_474  # what the real labels.csv names
TAGS_PER_WORK = (1, 5)  # tags an artwork has, drawn uniformly in [1, 5)
ZIPF = 1.1  # how unevenly cultures and tags are shared: the k-th commonest is drawn with weight k ** -ZIPF
SAMPLE = "0 1 2"
DESIGN = 200
CHUNK = 16
WORDS = ("french", "italian", "dutch", "japanese", "chinese", "egyptian", "greek", "roman", "persian", "aztec")


def sizes(scale: float | str = 1.0) -> Sizes:
    scale = parse_scale(scale)
    shape = REAL_SHAPE if is_real(scale) else SHAPE
    total = scaled(ARTWORKS, REAL_ARTWORKS, scale, 20)
    test = max(3, round(TEST_SHARE * total))
    return Sizes(total - test, test, shape, shape)


def attributes(rng: np.random.Generator) -> pd.DataFrame:
    """labels.csv: the attribute ids (drawn from the real range) and names, cultures first; each with its kind and
    what it looks like (a culture's ground colour, a tag's shape and hue)."""
    tags = [(shape, hue) for shape in SHAPES for hue in range(len(HUES))]
    ids = np.sort(rng.choice(REAL_ATTRIBUTES, CULTURES + len(tags), replace=False))
    ids = rng.permutation(ids)
    names = [f"culture::{WORDS[k % len(WORDS)]}{'' if k < len(WORDS) else k}" for k in range(CULTURES)] + \
        [f"tag::{shape} {'red green blue yellow purple black white'.split()[hue]}" for shape, hue in tags]
    return pd.DataFrame({"attribute_id": ids, "attribute_name": names,
                         "look": [GROUNDS[k % len(GROUNDS)] for k in range(CULTURES)] + tags})


def _weights(count: int, rng: np.random.Generator) -> np.ndarray:
    weights = rng.permutation(np.arange(1, count + 1) ** -ZIPF)
    return weights / weights.sum()


def _sets(count: int, table: pd.DataFrame, rng: np.random.Generator) -> list[list[int]]:
    """Each artwork's attributes, as row indices of `table`: one culture, then its tags."""
    cultures = rng.choice(CULTURES, count, p=_weights(CULTURES, rng))
    tag_weights = _weights(len(table) - CULTURES, rng)
    sets = []
    for culture in cultures:
        tags = rng.choice(len(tag_weights), int(rng.integers(*TAGS_PER_WORK)), replace=False, p=tag_weights)
        sets.append([int(culture), *(CULTURES + tags).tolist()])
    return sets


def picture(looks: list, rng: np.random.Generator, shape: tuple[int, int] = SHAPE) -> Image.Image:
    """One artwork of `shape` (width, height): its culture's ground (looks[0]) and each tag's motif."""
    width, height = shape
    factor = min(1.0, DESIGN / max(width, height))
    w, h = max(SHAPE[0], round(width * factor)), max(SHAPE[1], round(height * factor))
    canvas = textured(rng, h, w, np.asarray(looks[0]) + rng.normal(0, 8, 3), swing=20, noise=6)
    y, x = np.ogrid[:h, :w]
    unit = min(w, h) / SHAPE[0]
    for shape_name, hue in looks[1:]:
        cx, cy = rng.uniform(0.2, 0.8) * w, rng.uniform(0.2, 0.8) * h
        size = rng.uniform(3.0, 4.5) * unit
        dx, dy = np.abs(x - cx), np.abs(y - cy)
        mask = {"disc": dx ** 2 + dy ** 2 <= size ** 2, "block": (dx <= size) & (dy <= size),
                "across": (dx <= size * 2.2) & (dy <= size * 0.45), "up": (dx <= size * 0.45) & (dy <= size * 2.2),
                "ring": (np.abs(np.hypot(dx, dy) - size * 1.3) <= size * 0.4)}[shape_name]
        canvas[mask] = np.asarray(HUES[hue]) + rng.normal(0, 12, 3)
    image = to_image(canvas).filter(ImageFilter.SMOOTH)
    return image if image.size == (width, height) else image.resize((width, height), Image.BICUBIC)


def _pictures(items: list[tuple[str, list]], seed: int, folder: Path, shape: tuple[int, int]) -> list:
    rng = np.random.default_rng(seed)
    for name, looks in items:
        picture(looks, rng, shape).save(folder / f"{name}.png")
    return []


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, labels.csv, train/, test/, sample_submission.csv) and
    prepared/private/answers.csv."""
    size = sizes(scale)
    public, private = folders(root, "train", "test")
    table = attributes(rng)
    total = size.train + size.test
    sets = _sets(total, table, rng)
    ids = hex_ids(rng, total, 32)
    written = [" ".join(str(table["attribute_id"].iloc[k]) for k in rng.permutation(row)) for row in sets]
    rows = pd.DataFrame({"id": ids, "attribute_ids": written})
    test = np.zeros(total, dtype=bool)
    test[rng.choice(total, size.test, replace=False)] = True
    order = rng.permutation(total)  # the split shuffles both parts
    for part, folder in ((order[~test[order]], public / "train"), (order[test[order]], public / "test")):
        render(partial(_pictures, folder=folder, shape=size.smallest),
               [(ids[i], [table["look"].iloc[k] for k in sets[i]]) for i in part], rng, CHUNK, size.pixels(len(part)))
    rows.iloc[order[~test[order]]].to_csv(public / "train.csv", index=False)
    answers = rows.iloc[order[test[order]]]
    answers.to_csv(private / "answers.csv", index=False)
    answers.assign(attribute_ids=SAMPLE).to_csv(public / "sample_submission.csv", index=False)
    names = table[["attribute_id", "attribute_name"]]
    if is_real(parse_scale(scale)):  # the real labels.csv names every attribute, used or not
        others = np.setdiff1d(np.arange(REAL_ATTRIBUTES), names["attribute_id"])
        names = pd.concat([names, pd.DataFrame({"attribute_id": others,
                                                "attribute_name": [f"tag::motif {k}" for k in others]})])
    names.sort_values("attribute_id").to_csv(public / "labels.csv", index=False)
    describe(public, "iMet Collection 2020 - FGVC7",
             "Predict, for each artwork in test/, the set of its attributes (labels.csv names them): their ids, "
             "space-separated.",
             "Submissions are evaluated on the micro-averaged F1 score over every artwork and attribute.",
             "Submit `id,attribute_ids` for every test image.")
