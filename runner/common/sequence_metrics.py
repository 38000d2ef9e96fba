"""Ordered label sequences written as one string per row ("2 12 3 ..."): the edit rate, the Levenshtein distances
of every row's predicted sequence from its true one, summed, over the true labels' count (it can pass 1). Labels
are whole tokens, compared as integers where the answers are integers (a gesture's number)."""
from __future__ import annotations

import numpy as np

from runner.common.errors import InvalidSubmissionError

MEDOID_ROWS = 2_000  # sequences a medoid is chosen among and measured against: 4M distances, about a second


def tokens(cell, row: int = 0) -> list[int]:
    """A row's sequence: its space-separated integers (a list or tuple is taken as it is). Anything else, an empty
    cell read as 'nan' included, is an InvalidSubmissionError naming the row."""
    if isinstance(cell, (list, tuple)):
        return list(cell)
    try:
        return [int(token) for token in str(cell).split()]
    except ValueError as exc:
        raise InvalidSubmissionError(f"row {row}: {str(cell)[:40]!r} is not integers separated by spaces") from exc


def distances(truth, pred) -> np.ndarray:
    """Each row's Levenshtein distance between its true and predicted sequence, in tokens."""
    from rapidfuzz.distance import Levenshtein

    return np.array([Levenshtein.distance(tokens(t, i), tokens(p, i)) for i, (t, p) in enumerate(zip(truth, pred))],
                    dtype=np.float64)


def edit_rate(truth: np.ndarray, pred: np.ndarray) -> float:
    """The summed distances over the true sequences' total length (0 when perfect; 1 for empty predictions)."""
    total = sum(len(tokens(t, i)) for i, t in enumerate(truth))
    return float(distances(truth, pred).sum() / total) if total else 0.0


def medoid(sequences: list) -> int:
    """The index of the sequence whose summed distance to all the others is least (the first of equals): the one
    constant answer that scores best on them, among them (MEDOID_ROWS of them spread evenly, where there are
    more)."""
    from rapidfuzz import process
    from rapidfuzz.distance import Levenshtein

    kept = np.unique(np.linspace(0, len(sequences) - 1, min(MEDOID_ROWS, len(sequences))).astype(int))
    parsed = [tokens(sequences[i], int(i)) for i in kept]
    matrix = process.cdist(parsed, parsed, scorer=Levenshtein.distance, dtype=np.int32)
    return int(kept[np.argmin(matrix.sum(axis=1))])
