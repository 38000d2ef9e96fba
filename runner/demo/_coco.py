"""What the replicas of COCO-style competitions share (herbarium 2020-2022, inaturalist-2019): how many images
each category has (a long tail, as species have), MLE-bench's split of each category into train and test, and
the JSON written as its prepare.py writes it."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

TAIL = 0.8  # a category's share falls as its rank to this power: a long tail, the commonest a few times the median


def category_counts(categories: int, images: int, rng: np.random.Generator, least: int = 1) -> np.ndarray:
    """Images per category, `images` in all (about), each at least `least`, in a random order: a long tail."""
    weights = 1.0 / np.arange(1, categories + 1) ** TAIL
    counts = np.maximum(least, np.round(weights / weights.sum() * images)).astype(int)
    return rng.permutation(counts)


def split_category(members: list, share: float, rng: np.random.Generator, few_rule: bool = True) -> tuple[list, list]:
    """(train, test) of one category's members as MLE-bench splits them: with `few_rule`, a lone member trains, two
    to four give their last max(1, int(share n)) to test; otherwise (and from five on) ceil(share n) drawn at
    random go to test, as scikit-learn's train_test_split counts them."""
    n = len(members)
    if few_rule and n == 1:
        return list(members), []
    if few_rule and n < 5:
        k = max(1, int(n * share))
        return list(members[:-k]), list(members[-k:])
    order = rng.permutation(n)
    k = math.ceil(share * n)
    return [members[i] for i in sorted(order[k:])], [members[i] for i in order[:k]]


def dump(path: Path, document, indent: int | None = 4, sort_keys: bool = True) -> None:
    """A JSON file as prepare.py writes it (json.dump, by default with indent 4 and sorted keys)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        json.dump(document, handle, indent=indent, sort_keys=sort_keys)
