"""The `slice_prior` rule: masks for series of slices (uw-madison's scans, a row per slice and organ) from what the
training masks say alone. Each class's (organ's) training masks are averaged on a GRID x GRID cell grid of the slice
at each of DEPTH_BINS depths of the series: the share of training slices at that depth marking each cell. A test
row's mask is its class's share at its slice's depth, cut at a level; the level is the one of LEVELS that the
competition's metric scores best on up to TUNING_SERIES training series. The prior is then a blob where the organ
usually is, at the depths where it usually is, and nothing elsewhere.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from runner.common import rle
from runner.common.errors import InputError
from runner.common.mask_metrics import MASK_METRICS
from runner.competition.spec import CompetitionSpec
from runner.data.reading import read_csv
from runner.data.slices import SliceFile, depths, slice_files

GRID = 32  # cells a side of the averaged slice: finer than an organ, coarse enough for a few hundred slices
DEPTH_BINS = 8  # depths of a series averaged apart
LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)  # shares of training slices from which a cell is in the prior
TUNING_SERIES = 12  # training series the level is chosen on: the Hausdorff term needs whole series, and is costly


def _cells(mask: np.ndarray) -> np.ndarray:
    """A mask's share of marked pixels in each GRID x GRID cell."""
    return np.asarray(Image.fromarray(mask.astype(np.float32)).resize((GRID, GRID), Image.BOX))


def _enlarged(cells: np.ndarray, height: int, width: int) -> np.ndarray:
    return np.asarray(Image.fromarray(cells.astype(np.uint8) * 255).resize((width, height), Image.NEAREST)) > 0


def _depth_bin(depth: float) -> int:
    return min(DEPTH_BINS - 1, int(depth * DEPTH_BINS))


class _Shares:
    """Each (class, depth bin)'s mean training mask on the grid."""

    def __init__(self) -> None:
        self.sums: dict[tuple, np.ndarray] = {}
        self.counts: dict[tuple, int] = {}

    def add(self, key: tuple, cells: np.ndarray | None) -> None:
        self.sums[key] = self.sums.get(key, np.zeros((GRID, GRID))) + (0 if cells is None else cells)
        self.counts[key] = self.counts.get(key, 0) + 1

    def mask(self, key: tuple, level: float, height: int, width: int) -> np.ndarray:
        if not self.counts.get(key):
            return np.zeros((height, width), bool)
        return _enlarged(self.sums[key] / self.counts[key] >= level, height, width)


def _decoded(text, slice_file: SliceFile, order: str, where: str) -> np.ndarray | None:
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        return rle.decode(text, slice_file.height, slice_file.width, order)
    except rle.RleError as exc:
        raise InputError(f"{where}: {exc}") from None


def _series_score(spec: CompetitionSpec, rows: pd.DataFrame, slices: dict[str, SliceFile], depth: dict[str, float],
                  shares: _Shares, level: float, groups: list[str], truth: dict) -> float:
    """The metric of the prior cut at `level` on the training series `rows` holds (their truths in `truth`)."""
    metric = MASK_METRICS[spec.metric]
    statistics = []
    for _, series in rows.groupby("_series", sort=True):
        series = series.sort_values(spec.id_column, kind="stable")
        ids = pd.unique(series[spec.id_column])
        classes = max(series.groupby(spec.id_column).size())
        first = slices[ids[0]]
        true = np.zeros((len(ids), classes, first.height, first.width), bool)
        guess = np.zeros_like(true)
        for d, (slice_id, part) in enumerate(series.groupby(spec.id_column, sort=True)):
            for c, (index, row) in enumerate(part.iterrows()):
                if truth.get(index) is not None:
                    true[d, c] = truth[index]
                key = (*[row[g] for g in groups], _depth_bin(depth[slice_id]))
                guess[d, c] = shares.mask(key, level, first.height, first.width)
        statistics.append(metric.row(true, guess))
    return float(metric.total(np.vstack(statistics)))


def slice_prior(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
                work_dir: Path) -> tuple[pd.DataFrame, str]:
    layout, data_dir = spec.mask, Path(data_dir)
    if not (spec.train_file and layout and layout.series):
        raise InputError(f"spec {spec.id}: the slice prior needs a train file and a mask format with series")
    label = layout.train_column or columns[0]
    train = read_csv(data_dir / spec.train_file, "train file", data_dir, literal=True)
    groups = [c for c in sample.columns if c not in (spec.id_column, *columns) and c in train.columns]
    for name in (spec.id_column, label):
        if name not in train.columns:
            raise InputError(f"{data_dir / spec.train_file}: no column {name!r}")
    slices = slice_files(data_dir / (spec.image_dir or "train"))
    depth = depths(slices)
    train = train[train[spec.id_column].astype(str).isin(slices)].reset_index(drop=True)
    if train.empty:
        raise InputError(f"{data_dir / (spec.image_dir or 'train')}: no training slice file matches train.csv's ids")
    train["_series"] = [slices[i].series for i in train[spec.id_column].astype(str)]
    tuned = set(pd.unique(train["_series"])[:TUNING_SERIES])
    shares, truth = _Shares(), {}
    for index, row in train.iterrows():
        slice_id = str(row[spec.id_column])
        mask = _decoded(row[label], slices[slice_id], layout.order, str(data_dir / spec.train_file))
        shares.add((*[row[g] for g in groups], _depth_bin(depth[slice_id])), None if mask is None else _cells(mask))
        if row["_series"] in tuned:
            truth[index] = mask
    tuning = train[train["_series"].isin(tuned)]
    scores = {level: _series_score(spec, tuning, slices, depth, shares, level, groups, truth) for level in LEVELS}
    level = max(LEVELS, key=lambda v: (scores[v], -v))
    return _test_masks(spec, data_dir, sample, columns, groups, shares, level), \
        f"each {'/'.join(groups) or 'mask'}'s training share by depth and place, cut at {level} (it scored " \
        f"{scores[level]:.4f} on {len(tuned)} training series; an empty mask scores 0)"


def _test_masks(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str], groups: list[str],
                shares: _Shares, level: float) -> pd.DataFrame:
    layout = spec.mask
    slices = slice_files(data_dir / (spec.test_image_dir or "test"))
    depth = depths(slices)
    empty = "" if layout.empty is None else layout.empty
    values = []
    for _, row in sample.iterrows():
        slice_id = str(row[spec.id_column])
        if slice_id not in slices:
            values.append(empty)
            continue
        s = slices[slice_id]
        mask = shares.mask((*[row[g] for g in groups], _depth_bin(depth[slice_id])), level, s.height, s.width)
        values.append(rle.written(mask, layout.order, empty))
    return pd.DataFrame({columns[0]: values})
