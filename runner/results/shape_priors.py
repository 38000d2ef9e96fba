"""Honest submissions of shapes no engine draws yet, each the best its metric allows without a model of them:

- `whole_mask`: every pixel of each test item, where a mask's Dice gains from any pixel the truth holds and loses
  nothing for an empty truth it never meets (contrails' global Dice, hubmap's per-image Dice of glomeruli every
  image has): one run covering the item, its size from the sample's size columns, the spec's shape, or the item's
  image file.
- `region_mask`: each test item's own region file (vesuvius' `mask.png`, the papyrus): ink lies only there, so
  marking the region has the precision of the ink's share of it and all of its recall.
- `constant_by_suffix`: a constant per kind of row, told by how its id ends (siim-covid19's `_study` rows take every
  study label, each with the dummy box; its `_image` rows `none`): a metric that averages one precision per class
  scores a class's constant by that class's share of its rows, whatever the confidence.

Each rule takes what every rule of runner.results.baselines takes and gives the value columns and what they are.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from runner.common import rle
from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec
from runner.data.canvas import image_size

def _item_path(spec: CompetitionSpec, data_dir: Path, item: str) -> Path:
    return data_dir / (spec.test_image_dir or "test") / f"{item}{spec.test_suffix}"


def mask_sizes(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame) -> list[tuple[int, int]]:
    """Each sample row's (height, width): from the sample's size columns, the spec's one shape, or the row's test
    image file."""
    layout = spec.mask
    if layout.size_columns and set(layout.size_columns) <= set(sample.columns):
        height, width = layout.size_columns
        return [(int(h), int(w)) for h, w in zip(sample[height], sample[width])]
    if layout.shape:
        return [tuple(layout.shape)] * len(sample)
    return [image_size(_item_path(spec, data_dir, str(item))) for item in sample[spec.id_column]]


def whole_mask(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
               work_dir: Path) -> tuple[pd.DataFrame, str]:
    values = [rle.whole(h, w) for h, w in mask_sizes(spec, Path(data_dir), sample)]
    return pd.DataFrame({columns[0]: values}), "every pixel of each test item (the best constant mask for this Dice)"


def region_mask(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
                work_dir: Path) -> tuple[pd.DataFrame, str]:
    """Each test item's `<test_image_dir>/<id>/<region>` (nonzero = inside) as its mask; an item whose region
    file is missing or empty gets every pixel of it."""
    layout, data_dir = spec.mask, Path(data_dir)
    values, whole = [], 0
    for item in sample[spec.id_column].astype(str):
        path = data_dir / (spec.test_image_dir or "test") / item / layout.region
        if not path.is_file():
            raise InputError(f"{path}: no region file for test item {item!r}")
        with Image.open(path) as image:
            region = np.asarray(image.convert("L")) > 0
        if not region.any():
            whole += 1
            region[:] = True
        values.append(rle.encode(region, layout.order))
    note = f"each test item's {layout.region} as its mask (the best mask without a model of what lies inside)"
    return pd.DataFrame({columns[0]: values}), note + (f"; {whole} empty region(s) marked whole" if whole else "")


def constant_by_suffix(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
                       work_dir: Path) -> tuple[pd.DataFrame, str]:
    """Each (suffix, string) of `baseline_values` for the rows whose id ends with the suffix; a row none names keeps
    the sample's."""
    ids = sample[spec.id_column].astype(str)
    values = sample[columns[0]].astype(object).fillna("").copy()
    told = []
    for suffix, value in spec.baseline_values:
        rows = ids.str.endswith(suffix).to_numpy()
        values[rows] = value
        told.append(f"{value!r} for the {int(rows.sum())} `{suffix}` rows")
    return pd.DataFrame({columns[0]: values.reset_index(drop=True)}), "; ".join(told)
