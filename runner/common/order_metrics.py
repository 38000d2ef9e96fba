"""Metrics of orderings: Kendall's tau of predicted orders of items against the true ones, pooled over every
ordering (a notebook's cells): 1 - 4 * (inversions summed over the orderings) / (sum of n * (n - 1)), so a long
ordering weighs more than a short one, as the AI4Code competition scores its notebooks.
"""
from __future__ import annotations

import numpy as np

from runner.common.errors import InvalidSubmissionError


def inversions(ranks: np.ndarray) -> int:
    """The pairs (i < j) with ranks[i] > ranks[j]."""
    ranks = np.asarray(ranks)
    if len(ranks) < 2:
        return 0
    return int(np.triu(ranks[:, None] > ranks[None, :], k=1).sum())


def kendall_tau(truth, pred) -> float:
    """Pooled Kendall's tau of each predicted ordering (a sequence of item ids) against its true ordering; a
    predicted id that the true ordering lacks, or a different number of ids, makes the submission invalid (the
    grader raises on both)."""
    swapped, most = 0, 0
    for true_order, guess in zip(truth, pred):
        true_order, guess = list(true_order), list(guess)
        if len(true_order) != len(guess):
            raise InvalidSubmissionError(f"an ordering of {len(guess)} items where the answer has {len(true_order)}")
        place = {item: k for k, item in enumerate(true_order)}
        unknown = [item for item in guess if item not in place]
        if unknown:
            raise InvalidSubmissionError(f"item {unknown[0]!r} is not one of its row's items")
        swapped += inversions(np.array([place[item] for item in guess]))
        most += len(true_order) * (len(true_order) - 1)
    if most == 0:
        raise InvalidSubmissionError("no ordering of two or more items: Kendall's tau is undefined")
    return 1.0 - 4.0 * swapped / most
