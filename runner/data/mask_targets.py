"""Masks as training targets: each row's run-length strings (one column per mask class) decoded into one row of
0/1 pixels, the classes' (height, width) masks flattened one after another, as the engines that learn pixels
predict them and the writer reads them back (runner.results.submission)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

from runner.common import rle
from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec

# bytes the supervisor holds a learned mask pixel in: its float32 target, and a member's float64 out-of-fold or test
# probability and the blend's beside it (two members' worth, the least a blend has)
HELD_BYTES = {"target": 4, "prediction": 3 * 8}


def held_bytes(pixels: int, n_train: int, n_test: int) -> int:
    """What the supervisor holds of masks of `pixels` a row (every class): each training row's target, every row's
    predictions for two members and the blend."""
    return pixels * (n_train * HELD_BYTES["target"] + (n_train + n_test) * HELD_BYTES["prediction"])


def mask_columns(spec: CompetitionSpec) -> list[str]:
    """The train file's run-length columns, one per mask class (a row per item and class: the classes, gathered
    into columns by the items reader, runner.data.slice_rows)."""
    if spec.mask.class_column:
        return list(spec.mask.classes)
    return [spec.mask.train_column] if spec.mask.train_column else list(spec.targets)


def mask_pixels(spec: CompetitionSpec, sample: pd.DataFrame | None = None) -> tuple[int, int]:
    """(height, width) of every mask: the spec's `mask.shape`, else the one size the sample's size columns give
    every row (an InputError where neither says, or the rows' sizes differ)."""
    if spec.mask is not None and spec.mask.shape is not None:
        height, width = spec.mask.shape
        return int(height), int(width)
    columns = list(spec.mask.size_columns) if spec.mask is not None else []
    if sample is None or len(columns) != 2 or not set(columns) <= set(sample.columns):
        raise InputError(f"spec {spec.id}: learning masks needs their size (`mask: shape: [height, width]`, or "
                         "size_columns the sample holds)")
    sizes = sample[columns].drop_duplicates()
    if len(sizes) != 1:
        raise InputError(f"sample submission: masks of {len(sizes)} sizes in {columns}; one size is learned")
    return int(sizes.iloc[0, 0]), int(sizes.iloc[0, 1])


def with_mask_shape(spec: CompetitionSpec, sample: pd.DataFrame) -> CompetitionSpec:
    """The spec with its masks' size, from the sample's size columns where the spec gives none."""
    if spec.submission != "mask" or spec.mask is None or spec.mask.shape is not None or spec.mask.own_size:
        return spec  # (masks as large as their items: their canvas is measured on the masks, runner.data.canvas)
    return dataclasses.replace(spec, mask=dataclasses.replace(spec.mask, shape=mask_pixels(spec, sample)))


def mask_targets(spec: CompetitionSpec, train: pd.DataFrame, path: Path) -> np.ndarray:
    """(rows, classes x height x width) float32 0/1: each row's masks decoded in the spec's order; an empty cell,
    or the spec's empty token, is an empty mask. A string no grader would decode is an InputError naming it."""
    height, width = mask_pixels(spec)
    columns, pixels = mask_columns(spec), height * width
    missing = [c for c in columns if c not in train.columns]
    if missing:
        raise InputError(f"{path}: missing run-length column(s) {missing}")
    y = np.zeros((len(train), len(columns) * pixels), dtype=np.float32)
    empty = spec.mask.empty or ""
    for k, column in enumerate(columns):
        for row, text in enumerate(train[column].tolist()):
            text = "" if text is None or (isinstance(text, float) and np.isnan(text)) or text == empty else str(text)
            try:
                y[row, k * pixels:(k + 1) * pixels] = rle.decode(text, height, width, spec.mask.order).ravel()
            except rle.RleError as exc:
                raise InputError(f"{path}: row {row + 2}, column {column!r}: {exc}") from None
    return y
