"""Run-length encoded masks, as segmentation competitions write them: space-separated `start length` pairs,
1-indexed, over the mask flattened column by column ("column": pixel 1 is (row 1, col 1), pixel 2 is (row 2,
col 1)) or row by row ("row": pixel 2 is (row 1, col 2)).

Decoding checks what MLE-bench's graders assert of a submitted string: integer tokens in pairs, starts rising,
starts and lengths positive, no two runs overlapping; a run past the mask's end is cut there. An empty (or blank)
string is an empty mask; a competition may write the empty mask as another token (contrails' "-"), which the
caller maps to "" before decoding.
"""
from __future__ import annotations

import numpy as np

ORDERS = ("column", "row")  # column: top to bottom, then left to right; row: left to right, then top to bottom


class RleError(ValueError):
    """A run-length string a grader cannot decode (named by what is wrong with it)."""


def runs(text: str, size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The (starts, lengths) of a run-length string, 1-indexed as written, checked as MLE-bench's graders check
    them: every start positive and rising, every length positive, no run covering a pixel an earlier one covers
    within the first `size` pixels (all, without it). An unpaired last start is read as their decoder's array
    arithmetic reads it: with the one length of a single pair it is a second run of that length, alone it is
    nothing, after several pairs the string is refused."""
    if not isinstance(text, str):
        raise RleError(f"a run-length mask must be a string, not {type(text).__name__} {text!r}")
    tokens = text.split()
    try:
        values = np.array([int(t) for t in tokens], dtype=np.int64)
    except (ValueError, OverflowError) as exc:
        raise RleError(f"a run-length mask holds a token that is no integer: {exc}") from None
    starts, lengths = values[0::2], values[1::2]
    if (np.diff(starts) < 0).any():
        raise RleError("the runs' starts must rise")
    if (starts <= 0).any() or (lengths <= 0).any():
        raise RleError("every start and length must be a positive integer")
    if len(starts) > len(lengths):  # an unpaired last start: numpy's broadcasting in MLE-bench's decoder decides
        if len(lengths) > 1:
            raise RleError(f"a run-length mask needs start/length pairs, it has {len(values)} numbers")
        lengths = np.repeat(lengths, len(starts))  # one length serves both starts; none: no run at all
        starts = starts[:len(lengths)]
    if len(starts) > 1:
        limit = np.iinfo(np.int64).max if size is None else size
        ends = np.minimum(starts - 1 + lengths, limit)
        covered = np.maximum.accumulate(ends)[:-1]  # the furthest pixel the earlier runs reach
        begins = starts[1:] - 1
        if ((begins < covered) & (begins < limit)).any():
            raise RleError("two runs overlap")
    return starts, lengths


def decode(text: str, height: int, width: int, order: str = "column") -> np.ndarray:
    """The (height, width) boolean mask a run-length string describes (RleError when graders reject it)."""
    _check_order(order)
    size = height * width
    starts, lengths = runs(text, size)
    flat = np.zeros(size, dtype=bool)
    for begin, end in zip((starts - 1).tolist(), (starts - 1 + lengths).tolist()):  # a slice each: no copy
        flat[begin:end] = True
    return flat.reshape(width, height).T if order == "column" else flat.reshape(height, width)


def encode(mask: np.ndarray, order: str = "column") -> str:
    """The run-length string of a 2-D mask (nonzero = in it); "" for an empty mask."""
    _check_order(order)
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise ValueError(f"a run-length mask is 2-D, this is {mask.shape}")
    flat = (mask.T if order == "column" else mask).ravel() != 0
    edges = np.diff(np.concatenate([[0], flat.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    pairs = np.column_stack([starts + 1, ends - starts]).ravel()
    return " ".join(map(str, pairs.tolist()))


def written(mask: np.ndarray, order: str = "column", empty: str = "") -> str:
    """A mask as a submission's cell: its run-length string, or `empty` when it holds no pixel."""
    text = encode(mask, order)
    return text if text else empty


def whole(height: int, width: int) -> str:
    """Every pixel of a (height, width) mask: one run, the same in either order."""
    return f"1 {height * width}"


def _check_order(order: str) -> None:
    if order not in ORDERS:
        raise ValueError(f"run-length order {order!r} is not one of {ORDERS}")
