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
LEVELS = (0.2, 0.3, 0.4, 0.5)  # shares of training slices from which a cell is in the prior
# training series the level is chosen on: the Hausdorff term needs whole series, and a real scan's takes a second
TUNING_SERIES = 6


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


def _tuning_series(spec: CompetitionSpec, ids: list[str], keys: list[tuple], truths: dict[int, np.ndarray],
                   slices: dict[str, SliceFile]) -> list[tuple[np.ndarray, list]]:
    """The training series the level is tuned on, each as its true (depth, classes, height, width) volume and, for
    each of its (slice, class) rows, its place there and its prior's key; slices in the order of their ids, a
    slice's rows in theirs, as the grader stacks them."""
    by_series: dict[str, dict[str, list[int]]] = {}
    for row in sorted(truths, key=lambda r: ids[r]):
        by_series.setdefault(slices[ids[row]].series, {}).setdefault(ids[row], []).append(row)
    out = []
    for series in by_series.values():
        first = slices[next(iter(series))]
        classes = max(len(rows) for rows in series.values())
        true = np.zeros((len(series), classes, first.height, first.width), bool)
        places = []
        for d, rows in enumerate(series.values()):
            for c, row in enumerate(rows):
                if truths[row] is not None:
                    true[d, c] = truths[row]
                places.append((d, c, keys[row]))
        out.append((true, places))
    return out


def _score_at(spec: CompetitionSpec, series: list[tuple[np.ndarray, list]], shares: _Shares, level: float) -> float:
    """The metric of the prior cut at `level` on the tuning series."""
    metric = MASK_METRICS[spec.metric]
    statistics, drawn = [], {}
    for true, places in series:
        guess = np.zeros_like(true)
        size = true.shape[2:]
        for d, c, key in places:
            if (key, size) not in drawn:
                drawn[key, size] = shares.mask(key, level, *size)
            guess[d, c] = drawn[key, size]
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
    ids = train[spec.id_column].astype(str).tolist()
    keys = [(*values, _depth_bin(depth[i])) for i, values in zip(ids, zip(*[train[g] for g in groups]))] if groups \
        else [(_depth_bin(depth[i]),) for i in ids]
    tuned = set(list(dict.fromkeys(slices[i].series for i in ids))[:TUNING_SERIES])
    shares, truths = _Shares(), {}
    where = str(data_dir / spec.train_file)
    for row, (slice_id, key, text) in enumerate(zip(ids, keys, train[label].tolist())):
        mask = _decoded(text, slices[slice_id], layout.order, where)
        shares.add(key, None if mask is None else _cells(mask))
        if slices[slice_id].series in tuned:
            truths[row] = mask
    series = _tuning_series(spec, ids, keys, truths, slices)
    scores = {level: _score_at(spec, series, shares, level) for level in LEVELS}
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
    drawn: dict[tuple, str] = {}
    for slice_id, values_of_groups in zip(sample[spec.id_column].astype(str), zip(*[sample[g] for g in groups])
                                          if groups else [()] * len(sample)):
        if slice_id not in slices:
            values.append(empty)
            continue
        s = slices[slice_id]
        key = ((*values_of_groups, _depth_bin(depth[slice_id])), s.height, s.width)
        if key not in drawn:
            drawn[key] = rle.written(shares.mask(key[0], level, s.height, s.width), layout.order, empty)
        values.append(drawn[key])
    return pd.DataFrame({columns[0]: values})
