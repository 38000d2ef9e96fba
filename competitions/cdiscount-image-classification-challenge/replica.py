"""A synthetic cdiscount-image-classification-challenge: products with one to four pictures each, as MLE-bench's
prepare.py lays them out: `train.bson`, one BSON document per product (`_id`, `category_id`, `imgs`: a list of
`{picture: <JPEG bytes>}`) in ascending `_id` order, a tenth of the products held out in `test.bson` (the same
documents without `category_id`); `train_example.bson`, the first 100 documents of train.bson;
`category_names.csv` (category_id and its three levels of names); `sample_submission.csv` (`_id,category_id`, every
row 1000010653, ids ascending); private/answers.csv.

Each category is a hue and a shape on a white studio background (runner.demo._specimens), a product's pictures
its views (placed, sized and turned apart); most products have one picture, as the real ones. The commonest
category, 1000010653, is the sample's answer and the majority's accuracy.

`sizes(scale)`: 16 categories and 1,300 products of 32x32 pictures at the replica's own scale; 5,270 categories
and 7,069,896 products of 180x180 pictures at REAL.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._coco import category_counts
from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, encoded, folders
from runner.demo._specimens import looks, specimen

PRODUCTS, CATEGORIES = 1_300, 16  # the replica's own
REAL_PRODUCTS, REAL_CATEGORIES = 7_069_896, 5_270  # 6,362,906 train and 706,990 test products
SIDE, REAL_SIDE = 32, 180
TEST_SHARE = 0.1
COMMONEST = 1_000_010_653  # the real commonest category: the sample's answer
PICTURES = (0.6, 0.2, 0.1, 0.1)  # the shares of products with one, two, three and four pictures
EXAMPLES = 100  # documents of train_example.bson
WHITE = (242, 242, 242)


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many products `scale` writes (test a tenth) and their pictures' size."""
    scale = parse_scale(scale)
    side = REAL_SIDE if is_real(scale) else SIDE
    products = scaled(PRODUCTS, REAL_PRODUCTS, scale, least=20)
    test = round(TEST_SHARE * products)
    return Sizes(products - test, test, (side, side), (side, side))


def _categories(count: int, rng: np.random.Generator) -> list[int]:
    """`count` category ids as the real ones look (ten digits from 1000000000), the commonest first."""
    others = rng.choice(np.arange(1_000_000_000, 1_000_030_000), count - 1, replace=False)
    return [COMMONEST, *sorted(int(c) for c in others if c != COMMONEST)][:count]


def _product(look, rng: np.random.Generator, side: int) -> list[dict]:
    """A product's pictures as the documents hold them."""
    count = int(rng.choice(len(PICTURES), p=PICTURES)) + 1
    return [{"picture": encoded(specimen(look, rng, (side, side), WHITE, size=0.3, swing=8, noise=4), "JPEG",
                                quality=90)} for _ in range(count)]


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.bson, test.bson, train_example.bson, category_names.csv, the sample) and
    prepared/private/answers.csv."""
    import bson

    size = sizes(scale)
    real = is_real(parse_scale(scale))
    public, private = folders(root)
    products = size.train + size.test
    categories = _categories(REAL_CATEGORIES if real else CATEGORIES, rng)
    counts = np.sort(category_counts(len(categories), products, rng))[::-1]  # the commonest is COMMONEST
    labels = rng.permutation(np.repeat(categories, counts))[:products]
    palette = dict(zip(categories, looks(len(categories), rng)))
    held = np.zeros(len(labels), dtype=bool)
    held[rng.choice(len(labels), round(TEST_SHARE * len(labels)), replace=False)] = True
    with open(public / "train.bson", "wb") as train, open(public / "test.bson", "wb") as test, \
            open(public / "train_example.bson", "wb") as example:
        examples = 0
        for product, (label, is_test) in enumerate(zip(labels.tolist(), held)):
            pictures = _product(palette[label], rng, size.smallest[0])
            if is_test:
                test.write(bson.encode({"_id": product, "imgs": pictures}))
                continue
            document = bson.encode({"_id": product, "category_id": label, "imgs": pictures})
            train.write(document)
            if examples < EXAMPLES:
                example.write(document)
                examples += 1
    pd.DataFrame({"category_id": categories,
                  "category_level1": [f"RAYON {c % 7}" for c in categories],
                  "category_level2": [f"FAMILLE {c % 31}" for c in categories],
                  "category_level3": [f"PRODUIT {c}" for c in categories]}).to_csv(
        public / "category_names.csv", index=False)
    answers = pd.DataFrame({"_id": np.flatnonzero(held), "category_id": labels[held]})
    answers.to_csv(private / "answers.csv", index=False)
    answers.assign(category_id=COMMONEST).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Cdiscount's Image Classification Challenge",
             "Predict the category of each product in test.bson from its one to four pictures; train.bson gives "
             "each training product's category_id.",
             "Submissions are evaluated on the categorization accuracy.",
             "Submit `_id,category_id` for every product of test.bson.")
