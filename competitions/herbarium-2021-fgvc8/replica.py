"""A synthetic herbarium-2021-fgvc8: specimen sheets of species, as MLE-bench's prepare.py lays them out (the
2020 layout at the public root, with institutions for regions): `train/metadata.json` (COCO-style: images,
annotations with each image's category_id and institution_id, categories, institutions; indent 4, sorted keys)
beside `train/images/<ccc>/<cc>/<image id>.jpg`; the test sheets in `test/images/<iii>/<idx>.jpg`, listed by
`test/metadata.json` (images, info and licenses only, ids "0", "1", ...); `sample_submission.csv` (`Id,Predicted`,
all 0); private/answers.csv.

Each category splits as MLE-bench splits it (a lone sheet trains, two to four give their last to test, five or more
a fifth at random). Each species is a hue and a shape (runner.demo._herbarium), with a long tail of sheets.

`sizes(scale)`: 24 species and 800 sheets of 44x64 at the replica's own scale; 64,500 species and 2,257,759
sheets of 676x1000 at REAL.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from runner.demo._herbarium import herbarium_sizes, write_nybg
from runner.demo._pictures import Sizes

CATEGORIES, IMAGES = 24, 800  # the replica's own
REAL_CATEGORIES, REAL_IMAGES = 64_500, 2_257_759  # about 1,779,953 train and 477,806 test sheets


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many sheets `scale` writes (train, test about a fifth of them) and their pixel size."""
    return herbarium_sizes(scale, CATEGORIES, IMAGES, REAL_CATEGORIES, REAL_IMAGES).sizes()


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public/{train,test}/ (metadata.json and images/), the sample and the answers."""
    herbarium = herbarium_sizes(scale, CATEGORIES, IMAGES, REAL_CATEGORIES, REAL_IMAGES)
    write_nybg(root, rng, herbarium, "", "institutions", ("family", "order"), "Herbarium 2021 - FGVC8")
