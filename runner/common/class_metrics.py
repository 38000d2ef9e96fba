"""Metrics of one class label per row, scored on the labels themselves: macro-F1 over every label that the truth
or the prediction names (a label predicted but never true is a class of F1 0, as scikit-learn counts it when no
label list is given), and the top-1 error. Each takes what cross-validation has (class indices against class
probabilities, (n, k)) and what grading has (the labels a submission holds against the answers', (n,)) alike.

Grading reads a submission's labels as the competition's grader does (`LABEL_READERS`): each cell through
Python's int() (herbarium's, iwildcam-2019's), or a cell that is no integer through the first integer of its
space-separated string (inaturalist-2019's, where a top-k string is allowed and only its first label counts).
"""
from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from runner.common.errors import InvalidSubmissionError


def predicted_labels(pred: np.ndarray) -> np.ndarray:
    """The label each row predicts: the likeliest class of probabilities (n, k), the labels themselves (n,)."""
    pred = np.asarray(pred)
    return pred.argmax(axis=1) if pred.ndim == 2 else pred


def macro_f1(y: np.ndarray, pred: np.ndarray) -> float:
    """scikit-learn's macro-F1 over the union of the true and the predicted labels (zero where undefined)."""
    from sklearn.metrics import f1_score

    return float(f1_score(np.asarray(y), predicted_labels(pred), average="macro", zero_division=0))


def fast_macro_f1(y: np.ndarray, pred: np.ndarray) -> float:
    """`macro_f1` from counts alone (the blend's many evaluations): per label of the union, 2 TP / (true + said)."""
    truth, guess = np.asarray(y), predicted_labels(pred)
    labels, codes = np.unique(np.concatenate([truth, guess]), return_inverse=True)
    true_codes, guess_codes = codes[:len(truth)], codes[len(truth):]
    k = len(labels)
    hits = np.bincount(true_codes[true_codes == guess_codes], minlength=k)
    said = np.bincount(true_codes, minlength=k) + np.bincount(guess_codes, minlength=k)
    return float(np.mean(2 * hits / said)) if k else 0.0


def top1_error(y: np.ndarray, pred: np.ndarray) -> float:
    """The share of rows whose predicted label is not the true one (1 - accuracy)."""
    return float(np.mean(predicted_labels(pred) != np.asarray(y)))


def _cells(column: Iterable) -> list:
    """A column's cells as Python values, as iterating a pandas column gives them to a grader."""
    return list(column)


def integer_labels(column: Iterable) -> np.ndarray:
    """Each cell through int(): an integer, a float (cut towards zero, as int() does) or a string of an integer;
    an empty cell or any other text makes the submission invalid."""
    out = []
    for row, cell in enumerate(_cells(column)):
        try:
            out.append(int(cell))
        except (TypeError, ValueError) as exc:
            raise InvalidSubmissionError(f"row {row}: {cell!r} is no integer label") from exc
    return np.asarray(out, dtype=np.int64)


def first_integer_labels(column: Iterable) -> np.ndarray:
    """An integer cell as it is, a string's first space-separated token through int() (a ranked string's first
    label); a float (a column with an empty cell reads as floats) makes the submission invalid."""
    out = []
    for row, cell in enumerate(_cells(column)):
        try:
            if isinstance(cell, (int, np.integer)):
                out.append(int(cell))
            elif isinstance(cell, str):
                out.append(int(cell.split()[0]))
            else:
                raise TypeError(f"a {type(cell).__name__} is neither an integer nor a string")
        except (TypeError, ValueError, IndexError) as exc:
            raise InvalidSubmissionError(f"row {row}: {cell!r} is no label: {exc}") from exc
    return np.asarray(out, dtype=np.int64)


# a label metric's name -> how its grader reads a submission's (and the answers') label column
LABEL_READERS: dict[str, Callable[[Iterable], np.ndarray]] = {
    "macro_f1": integer_labels,
    "top1_error": first_integer_labels,
}
