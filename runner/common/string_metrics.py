"""Metrics of strings written whole: the word-level Jaccard index of a predicted span and the true one (two
graders' forms), and the mean character edit distance of a predicted text to the true one.

Each takes the rows' truths and predictions as sequences of strings (an empty cell already the empty string).
Words are the lower-cased whitespace-separated tokens, punctuation attached, as both graders split them. A span
chosen among candidates (runner.data.spans) is scored in the engines' form too: the truth is each candidate's
Jaccard with the true span (rows x candidates), the prediction a score per candidate, and each row counts the
Jaccard of the candidate it scores highest, which is what the writer submits.
"""
from __future__ import annotations

import numpy as np

from runner.common.errors import InvalidSubmissionError


def words(text: str) -> set[str]:
    return set(str(text).lower().split())


def _candidates(truth) -> bool:
    """Whether the truth is the candidates' Jaccards (the engines' form) rather than strings."""
    return isinstance(truth, np.ndarray) and truth.ndim == 2 and truth.dtype.kind == "f"


def chosen_jaccard(gains: np.ndarray, pred: np.ndarray) -> float:
    """The mean over rows of the Jaccard of each row's highest-scored candidate."""
    return float(np.mean(gains[np.arange(len(gains)), np.asarray(pred).argmax(axis=1)])) if len(gains) else 0.0


def word_jaccard(truth, pred) -> float:
    """The mean over rows of |A & B| / (|A| + |B| - |A & B|) of the two word sets, as the tweet competition defined
    it: a row whose prediction and truth are both empty divides by zero, which its grader lets through as an
    error, so the submission scores nothing (InvalidSubmissionError here)."""
    if _candidates(truth):
        return chosen_jaccard(truth, pred)
    total = 0.0
    for answer, guess in zip(truth, pred):
        a, b = words(answer), words(guess)
        shared = len(a & b)
        if not a and not b:
            raise InvalidSubmissionError("a row whose prediction and answer are both empty: the word Jaccard "
                                         "divides by zero there")
        total += shared / (len(a) + len(b) - shared)
    return total / len(truth) if len(truth) else 0.0


def word_jaccard_samples(truth, pred) -> float:
    """The mean over rows of |A & B| / |A | B|, a row with both sets empty scoring 0 (scikit-learn's
    jaccard_score over binarised word sets, average='samples')."""
    if _candidates(truth):
        return chosen_jaccard(truth, pred)
    scores = [len(a & b) / len(a | b) if (a | b) else 0.0
              for a, b in ((words(x), words(y)) for x, y in zip(truth, pred))]
    return float(np.mean(scores)) if scores else 0.0


def mean_levenshtein(truth, pred) -> float:
    """The mean over rows of the character edit distance (insertions, deletions, substitutions: Levenshtein's)
    between the true and the predicted string; lower is better."""
    from rapidfuzz.distance import Levenshtein

    distances = [Levenshtein.distance(str(a), str(b)) for a, b in zip(truth, pred)]
    return float(np.mean(distances)) if distances else 0.0
