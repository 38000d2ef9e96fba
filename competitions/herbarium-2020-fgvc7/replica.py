"""A synthetic herbarium-2020-fgvc7: specimen sheets of species under public/nybg2020/, as MLE-bench's prepare.py
lays them out: `train/metadata.json` (COCO-style: images, annotations with each image's category_id, categories,
regions; indent 4, sorted keys) beside `train/images/<ccc>/<cc>/<image id>.jpg`, nested by category; the test
sheets in `test/images/<iii>/<idx>.jpg`, listed by `test/metadata.json` (images, info and licenses only, ids the
strings "0", "1", ...); `sample_submission.csv` (`Id,Predicted`, all 0) at the root; private/answers.csv.

Each category splits as MLE-bench splits it: a lone sheet trains, two to four give their last to test, five or more
a fifth drawn at random. Each species is a hue and a shape (runner.demo._herbarium); the categories have a long
tail of sheets. A model tells them apart; the majority species scores a macro-F1 near 0.

`sizes(scale)`: 24 species and 800 sheets of 44x64 at the replica's own scale; 32,093 species and 1,030,747 sheets
of 676x1000 at REAL.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from runner.demo._herbarium import herbarium_sizes, write_nybg
from runner.demo._pictures import Sizes

CATEGORIES, IMAGES = 24, 800  # the replica's own
REAL_CATEGORIES, REAL_IMAGES = 32_093, 1_030_747  # 811,623 train and 219,124 test sheets


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many sheets `scale` writes (train, test about a fifth of them) and their pixel size."""
    return herbarium_sizes(scale, CATEGORIES, IMAGES, REAL_CATEGORIES, REAL_IMAGES).sizes()


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public/nybg2020/{train,test}/ (metadata.json and images/), the sample and the answers."""
    herbarium = herbarium_sizes(scale, CATEGORIES, IMAGES, REAL_CATEGORIES, REAL_IMAGES)
    write_nybg(root, rng, herbarium, "nybg2020", "regions", ("family", "genus"), "Herbarium 2020 - FGVC7")
