"""A synthetic whale-categorization-playground: JPEG photos of humpback whale flukes in train/ and test/, train.csv
`Image,Id` naming each whale (`w_<7 hex>`) or `new_whale`, split as MLE-bench's prepare.py splits the real train
set: of each whale with two photos or more, one photo to train and one to test; a whale's only photo to test one
time in ten; the rest 90/10; a test whale no training photo shows becomes `new_whale` in private/test.csv. The
sample ranks the same five ids for every photo, `new_whale` first.

Each whale is its own fluke: a dark two-lobed tail of its own tone and span, marked with white patches of its own
sizes and places. Its photos are views of that fluke (shifted, scaled, lit and grained anew; a quarter in gray);
each `new_whale` photo is a whale of its own, seen once. Images of one whale look alike and unlike every other's, so
a model that compares photos (pixels, embeddings) ranks the right whale first for many test photos; the prior
(`new_whale` and the four commonest whales, the sample's shape) scores the share of new whales in the test set.

`sizes(scale)`: photos of 56x24 at a factor of the replica's own counts; at REAL the real counts, as the real
photos' sizes.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageFilter

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, folders, grain, hex_ids, quota, render, textured, to_image

SHAPE = (56, 24)  # the replica's photos (width, height): wide, as a fluke is
REAL_CAMERAS = (((1050, 700), 0.5), ((1050, 450), 0.3), ((700, 500), 0.2))  # the real photos vary in size
WHALES = 150  # the replica's whales, beside its new_whale photos
REAL_WHALES = 4_250  # the real train set's ids: 9,850 photos, 7,240 to MLE-bench's train and 2,610 to its test
NEW_SHARE = 0.082  # new_whale photos among all (810 of the real 9,850)
# photos per whale and each count's share: half the real whales have one photo, a few dozens
PHOTOS = ((1, 0.5), (2, 0.25), (3, 0.11), (4, 0.06), (5, 0.03), (7, 0.03), (12, 0.015), (25, 0.005))
TEST_SHARE = 0.1  # a lone photo's chance of going to test, and the test share of the rest (MLE-bench's)
SAMPLE_IDS = "new_whale w_1287fbc w_98baff9 w_7554f44 w_1eafe46"  # what the real sample ranks for every photo
GRAY_SHARE = 0.25  # photos saved in gray, as some of the real ones are
DESIGN = 360  # a larger photo's long side while it is drawn
GRAIN = 7
CHUNK = 16


def sizes(scale: float | str = 1.0) -> Sizes:
    """The whales (as `train`: photos follow from their counts) and the photo sizes at `scale`."""
    scale = parse_scale(scale)
    whales = scaled(WHALES, REAL_WHALES, scale, 8)
    if is_real(scale):
        return Sizes.of_cameras(whales, 0, REAL_CAMERAS)
    return Sizes(whales, 0, SHAPE, SHAPE)


def _whale(rng: np.random.Generator) -> dict:
    """One fluke: its tone, span, droop and white patches (across -1..1, down 0..1, radius, brightness)."""
    patches = int(rng.integers(2, 7))
    return dict(tone=rng.uniform(25, 85), span=rng.uniform(0.78, 0.95), droop=rng.uniform(-0.15, 0.25),
                patches=np.column_stack([rng.uniform(-0.85, 0.85, patches), rng.uniform(0.15, 0.85, patches),
                                         rng.uniform(0.06, 0.16, patches), rng.uniform(0.55, 1.0, patches)]))


def _fluke_mask(h: int, w: int, cx: float, cy: float, half: float, depth: float, droop: float) -> np.ndarray:
    """The fluke's pixels: two lobes reaching `half` to each side of the notch at (cx, cy), their tips drooping by
    `droop` of the depth, a notch cut between them."""
    y, x = np.ogrid[:h, :w]
    lobes = np.zeros((h, w), dtype=bool)
    for side in (-1, 1):
        lx, ly = cx + side * half * 0.5, cy + droop * depth * 0.5
        lobes |= ((x - lx) / (half * 0.52)) ** 2 + ((y - ly) / (depth * 0.45)) ** 2 <= 1
    notch = (np.abs(x - cx) < depth * 0.25 - (y - cy + depth * 0.45) * 0.5) & (y < cy)
    return lobes & ~notch


def photo(whale: dict, rng: np.random.Generator, shape: tuple[int, int] = SHAPE) -> Image.Image:
    """One view of `whale`'s fluke at `shape` (width, height): placed, scaled and lit anew, with grain."""
    width, height = shape
    factor = min(1.0, DESIGN / max(width, height))
    w, h = max(SHAPE[0], round(width * factor)), max(SHAPE[1], round(height * factor))
    canvas = textured(rng, h, w, (95 + rng.normal(0, 12), 115 + rng.normal(0, 12), 135 + rng.normal(0, 12)),
                      swing=20, noise=5)
    scale = whale["span"] * rng.uniform(0.94, 1.06)
    cx, cy = w / 2 + rng.normal(0, 0.03) * w, h / 2 + rng.normal(0, 0.04) * h
    half, depth = scale * w / 2, scale * h * 0.75
    mask = _fluke_mask(h, w, cx, cy, half, depth, whale["droop"])
    light = rng.uniform(-12, 12)
    canvas[mask] = whale["tone"] + light + rng.normal(0, 4, (int(mask.sum()), 1))
    y, x = np.ogrid[:h, :w]
    for across, down, radius, bright in whale["patches"]:
        px, py = cx + across * half, cy - depth * 0.5 + down * depth
        spot = ((x - px) / (radius * half)) ** 2 + ((y - py) / (radius * half * 0.8)) ** 2 <= 1
        canvas[spot & mask] = canvas[spot & mask] * (1 - bright) + (215 + light) * bright
    image = to_image(canvas).filter(ImageFilter.SMOOTH)
    if image.size != (width, height):
        image = grain(image.resize((width, height), Image.BICUBIC), rng, GRAIN)
    return image.convert("L") if rng.random() < GRAY_SHARE else image


def _photos(items: list[tuple[str, dict]], seed: int, folder: Path, shapes: dict) -> list:
    """Write folder/<name> for each (name, whale): one task's chunk, from its own seed."""
    rng = np.random.default_rng(seed)
    for name, whale in items:
        photo(whale, rng, shapes[name]).save(folder / name, quality=int(rng.integers(85, 96)))
    return []


def _pool(whales: int, rng: np.random.Generator) -> pd.DataFrame:
    """The raw train set: each whale's photos (counts with PHOTOS' shares) and the new_whale photos, in a random
    order, named by 8 hex digits, with the index of the fluke each shows."""
    counts = np.asarray([n for n, _ in PHOTOS])[quota(tuple(s for _, s in PHOTOS), whales, rng)]
    ids = [f"w_{h}" for h in hex_ids(rng, whales, 7)]
    rows = [(ids[k], k) for k in range(whales) for _ in range(counts[k])]
    new = max(2, round(NEW_SHARE / (1 - NEW_SHARE) * len(rows)))
    rows += [("new_whale", whales + j) for j in range(new)]  # a whale of its own each
    order = rng.permutation(len(rows))
    names = [f"{h}.jpg" for h in hex_ids(rng, len(rows), 8)]
    return pd.DataFrame({"Image": names, "Id": [rows[i][0] for i in order], "fluke": [rows[i][1] for i in order]})


def split(pool: pd.DataFrame, rng: np.random.Generator) -> np.ndarray:
    """True for the rows MLE-bench's prepare.py sends to test: one of each id with two photos or more (another to
    train), a lone photo with chance TEST_SHARE, and TEST_SHARE of the rest."""
    to_test = np.zeros(len(pool), dtype=bool)
    decided = np.zeros(len(pool), dtype=bool)
    for _, rows in pool.groupby("Id", sort=False).indices.items():
        if len(rows) >= 2:
            pair = rng.choice(rows, 2, replace=False)
            to_test[pair[1]], decided[pair] = True, True
        else:
            to_test[rows[0]], decided[rows[0]] = rng.random() < TEST_SHARE, True
    rest = np.flatnonzero(~decided)
    to_test[rng.choice(rest, round(TEST_SHARE * len(rest)), replace=False)] = True
    return to_test


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, train/, test/, sample_submission.csv) and prepared/private/test.csv."""
    size = sizes(scale)
    public, private = folders(root, "train", "test")
    pool = _pool(size.train, rng)
    flukes = [_whale(rng) for _ in range(int(pool["fluke"].max()) + 1)]
    shapes = dict(zip(pool["Image"], map(tuple, size.shapes(len(pool), rng))))
    to_test = split(pool, rng)
    for rows, folder in ((~to_test, public / "train"), (to_test, public / "test")):
        part = pool.loc[rows]
        render(partial(_photos, folder=folder, shapes=shapes), list(zip(part["Image"], (flukes[k] for k in
               part["fluke"]))), rng, CHUNK, size.pixels(len(part)))
    train, answers = pool.loc[~to_test, ["Image", "Id"]], pool.loc[to_test, ["Image", "Id"]].copy()
    answers.loc[~answers["Id"].isin(set(train["Id"])), "Id"] = "new_whale"  # seen in test only: new
    train.to_csv(public / "train.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)
    answers.assign(Id=SAMPLE_IDS).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Humpback Whale Identification Challenge",
             "Identify each whale in test/ from the photo of its fluke: rank up to five whale ids (train.csv's "
             "`Id`, or `new_whale` for a whale no training photo shows), best first, space-separated.",
             "Submissions are evaluated on the Mean Average Precision @ 5 (MAP@5).",
             "Submit `Image,Id` for every test image, and no other column.")
