"""A synthetic cassava-leaf-disease-classification: JPEG photos of cassava leaves, as MLE-bench's prepare.py lays
them out: 16 TFRecord shards of the labelled photos split 14 to 2, the photos of the two held-out shards the test
set: `train.csv` (`image_id,label`) with `train_images/`, `test_images/` (no test table: the sample lists them),
`train_tfrecords/ld_train<NN>-<count>.tfrec` and `test_tfrecords/ld_test<NN>-<count>.tfrec` (each record a photo's
JPEG, its name and its label, the held-out shards' labels included, as in the real ones),
`label_num_to_disease_map.json`, `sample_submission.csv` (every label 4); private/test.csv.

A leaf is green on soil; each disease leaves its own mark: bacterial blight (0) dark brown angular spots, brown
streak (1) yellow streaks along the veins, green mottle (2) pale mottled patches, mosaic (3) a strong yellow mosaic,
healthy (4) none; in the real shares, mosaic 61%. The majority label scores about 0.61, the sample's 4 about 0.12.

`sizes(scale)`: 1,280 photos of 48x36 at the replica's own scale; 21,397 of 800x600 at REAL.
"""
from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw, ImageFilter

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, design, disc, folders, grain, paint, quota, render, textured, to_image
from .tfrecords import example, write_records

PHOTOS, REAL_PHOTOS = 1_280, 21_397  # the replica's own; the real labelled photos, 18,721 train and 2,676 test
WIDTH, HEIGHT = 48, 36
REAL_WIDTH, REAL_HEIGHT = 800, 600
SHARDS, TEST_SHARDS = 16, 2
SHARES = (1_087, 2_189, 2_386, 13_158, 2_577)  # the real photos of each label
DISEASES = {"0": "Cassava Bacterial Blight (CBB)", "1": "Cassava Brown Streak Disease (CBSD)",
            "2": "Cassava Green Mottle (CGM)", "3": "Cassava Mosaic Disease (CMD)", "4": "Healthy"}
SAMPLE_LABEL = 4
DESIGN = 320  # a larger photo's long side while it is drawn
CHUNK = 32


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many photos `scale` writes (test the two held-out shards' share) and their pixel size."""
    scale = parse_scale(scale)
    shape = (REAL_WIDTH, REAL_HEIGHT) if is_real(scale) else (WIDTH, HEIGHT)
    photos = scaled(PHOTOS, REAL_PHOTOS, scale, least=SHARDS)
    test = photos * TEST_SHARDS // SHARDS
    return Sizes(photos - test, test, shape, shape)


def photo(label: int, rng: np.random.Generator, shape: tuple[int, int]) -> Image.Image:
    """One photo of `shape` (width, height): a leaf on soil with its disease's marks."""
    width, height = design(shape, DESIGN)
    unit = width / WIDTH
    canvas = textured(rng, height, width, (105, 85, 60), swing=30, noise=8)
    mask_image = Image.new("L", (width, height))
    cx, cy = width / 2 + rng.normal(0, 3) * unit, height / 2 + rng.normal(0, 2) * unit
    ImageDraw.Draw(mask_image).ellipse((cx - 20 * unit, cy - 15 * unit, cx + 20 * unit, cy + 15 * unit), fill=255)
    leaf = np.asarray(mask_image) > 0
    paint(canvas, leaf, (60 + rng.normal(0, 8), 140 + rng.normal(0, 12), 55), alpha=0.95)
    ys, xs = np.nonzero(leaf)
    if label == 0:  # blight: dark brown angular spots
        for k in rng.integers(0, len(xs), int(rng.integers(4, 8))):
            r = rng.uniform(1.5, 3) * unit
            paint(canvas, leaf & disc(height, width, xs[k], ys[k], r, 0.7 * r), (70, 45, 25), alpha=0.9)
    elif label == 1:  # brown streak: yellow streaks along the veins
        for offset in rng.uniform(-10, 10, int(rng.integers(2, 4))) * unit:
            streak = np.abs(np.arange(height)[:, None] - (cy + offset) - 0.3 * (np.arange(width)[None] - cx)) \
                < 1.2 * unit
            paint(canvas, leaf & streak, (200, 190, 60), alpha=0.8)
    elif label == 2:  # green mottle: pale patches
        for k in rng.integers(0, len(xs), int(rng.integers(5, 9))):
            paint(canvas, leaf & disc(height, width, xs[k], ys[k], rng.uniform(2, 4) * unit), (160, 200, 130),
                  alpha=0.7)
    elif label == 3:  # mosaic: a strong yellow mosaic
        paint(canvas, leaf & (rng.random((height, width)) < 0.35), (215, 210, 70), alpha=0.8)
    image = to_image(canvas).filter(ImageFilter.SMOOTH)
    if image.size != tuple(shape):
        image = grain(image.resize(tuple(shape), Image.BICUBIC), rng, 7)
    return image


def _photos(items: list[tuple[str, int, Path]], seed: int, shape: tuple[int, int]) -> list:
    rng = np.random.default_rng(seed)
    for name, label, folder in items:
        photo(label, rng, shape).save(folder / name, quality=int(rng.integers(85, 96)))
    return []


def _shards(frame: pd.DataFrame, folder: Path, images: Path, prefix: str) -> None:
    """The shards' TFRecord files, each named by its index and its records' count."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, (_, shard) in enumerate(frame.groupby("shard", sort=True)):
        records = [example({"image": (images / name).read_bytes(), "image_name": name.encode(), "target": int(label)})
                   for name, label in zip(shard["image_id"], shard["label"])]
        write_records(folder / f"{prefix}{index:02d}-{len(records)}.tfrec", records)


def _distinct(rng: np.random.Generator, count: int) -> list[int]:
    """`count` distinct numbers of up to ten digits, as the real photos' names are, in a random order."""
    seen: dict[int, None] = {}
    while len(seen) < count:
        seen.update(dict.fromkeys(rng.integers(1_000_000, 2_147_483_647, count).tolist()))
    return list(seen)[:count]


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, both image folders, both TFRecord folders, the label map, the sample) and
    prepared/private/test.csv."""
    size = sizes(scale)
    public, private = folders(root, "train_images", "test_images")
    count = size.train + size.test
    names = _distinct(rng, count)
    table = pd.DataFrame({"image_id": [f"{n}.jpg" for n in names], "label": quota(SHARES, count, rng),
                          "shard": np.arange(count) % SHARDS})
    held = set(rng.choice(SHARDS, TEST_SHARDS, replace=False).tolist())
    is_test = table["shard"].isin(held).to_numpy()
    train, test = table[~is_test], table[is_test]
    jobs = [(n, lab, public / ("test_images" if t else "train_images"))
            for n, lab, t in zip(table["image_id"], table["label"], is_test)]
    render(partial(_photos, shape=size.smallest), jobs, rng, CHUNK, size.pixels(count))
    _shards(train, public / "train_tfrecords", public / "train_images", "ld_train")
    _shards(test, public / "test_tfrecords", public / "test_images", "ld_test")
    (public / "label_num_to_disease_map.json").write_text(json.dumps(DISEASES))
    train[["image_id", "label"]].to_csv(public / "train.csv", index=False)
    test[["image_id", "label"]].to_csv(private / "test.csv", index=False)
    test[["image_id"]].assign(label=SAMPLE_LABEL).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Cassava Leaf Disease Classification",
             "Classify each cassava leaf photo in test_images/ into one of four diseases or healthy (0-4, see "
             "label_num_to_disease_map.json); train.csv gives each training photo's label.",
             "Submissions are evaluated on the categorization accuracy.",
             "Submit `image_id,label` for every test image.")
