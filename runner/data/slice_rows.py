"""Slices whose masks are written a row per slice and class (`items: slice_rows`, uw-madison's organs: three rows a
slice, `mask.class_column` naming each row's class): the rows of a slice gathered into one item with a mask column
per class, each mask resized from the slice's own size (its file name's, runner.data.slices) to the one square the
engine learns (`mask.shape`) and written as a run-length string again, so that masks are read one way
(runner.data.mask_targets). A test item is a slice the sample names, in the order its rows first appear; the writer
gives each sample row its slice's mask of its class at the slice's own size (`row_places`, `slice_sizes`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.common import rle
from runner.common.errors import InputError, InvalidSubmissionError
from runner.common.mask_metrics import MASK_CUT
from runner.competition.spec import CompetitionSpec, MaskFormat
from runner.data.canvas import at_side, card_side, resized
from runner.data.reading import read_csv
from runner.data.slices import SliceFile, slice_files

SIZES = "slice_sizes"  # the sample's attrs key: each row's slice (height, width), None where no file was found


def _layout(spec: CompetitionSpec) -> MaskFormat:
    layout = spec.mask
    if layout is None or not (layout.class_column and layout.classes and layout.shape and layout.series):
        raise InputError(f"spec {spec.id}: slices a row per class need mask.class_column, mask.classes, mask.shape "
                         "(the learned size) and mask.series")
    return layout


def _learned_mask(text, found: SliceFile, layout: MaskFormat, where: str) -> np.ndarray:
    """A training row's mask at the learned size (empty where its cell is)."""
    height, width = layout.shape
    if not isinstance(text, str) or not text.strip() or text == layout.empty:
        return np.zeros((height, width), bool)
    try:
        mask = rle.decode(text, found.height, found.width, layout.order)
    except rle.RleError as exc:
        raise InputError(f"{where}: {exc}") from None
    return resized(mask, height, width) >= 0.5


def _gathered(spec: CompetitionSpec, train: pd.DataFrame, slices: dict[str, SliceFile], where: str) -> pd.DataFrame:
    """One row per slice (in the order of their ids, a series' slices by depth): its id and a run-length column
    per class at the learned size."""
    layout = spec.mask
    label = layout.train_column or spec.targets[0]
    for name in (spec.id_column, layout.class_column, label):
        if name not in train.columns:
            raise InputError(f"{where}: no column {name!r}")
    ids = train[spec.id_column].astype(str)
    train = train[ids.isin(slices)]
    cells = {(i, c): t for i, c, t in zip(train[spec.id_column].astype(str), train[layout.class_column].astype(str),
                                          train[label].tolist())}
    rows = []
    for slice_id in sorted(set(train[spec.id_column].astype(str))):
        masks = [_learned_mask(cells.get((slice_id, c)), slices[slice_id], layout, f"{where}, id {slice_id!r}")
                 for c in layout.classes]
        rows.append([slice_id, *(rle.written(m, layout.order, layout.empty or "") for m in masks)])
    return pd.DataFrame(rows, columns=[spec.id_column, *layout.classes])


def test_items(spec: CompetitionSpec, sample: pd.DataFrame) -> np.ndarray:
    """The sample's slices, in the order their rows first appear: the test items."""
    return pd.unique(sample[spec.id_column].astype(str))


def row_places(spec: CompetitionSpec, sample: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each sample row's test item (its place in `test_items`) and class (its place in mask.classes; -1: none)."""
    layout = spec.mask
    items = pd.Index(test_items(spec, sample)).get_indexer(sample[spec.id_column].astype(str))
    classes = pd.Index(list(layout.classes)).get_indexer(sample[layout.class_column].astype(str))
    return items, classes


def with_slice_sizes(spec: CompetitionSpec, sample: pd.DataFrame, data_dir: Path) -> None:
    """Each sample row's slice size in the sample's attrs, read from the test slices' file names: the writer
    gives each row its mask at its own size."""
    found = slice_files(Path(data_dir) / (spec.test_image_dir or spec.image_dir or ""))
    sample.attrs[SIZES] = [(found[i].height, found[i].width) if i in found else None
                           for i in sample[spec.id_column].astype(str)]


def on_card_side(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame,
                 memory: int) -> tuple[CompetitionSpec, str]:
    """The spec with the side a card learns the slices at (runner.data.canvas.card_side: their median shorter side
    at most, within memory), and what was chosen."""
    found = slice_files(Path(data_dir) / (spec.image_dir or "train"))
    own = int(np.median([min(s.height, s.width) for s in found.values()])) if found else 0
    side = card_side(spec, own, len(found), len(test_items(spec, sample)), memory)
    return at_side(spec, side), (f"masks learned at {side} x {side} on the card (the slices' median shorter side "
                                 f"{own}, at most {spec.mask.card_side}, the pixels held within memory; "
                                 f"{max(spec.mask.shape)} without a card)")


def slice_rows(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame):
    """(training items: id and a run-length column per class, their slice files, the test items' files, what was
    read, each training item's series): rows of one series share a fold, as the grader scores it whole."""
    _layout(spec)
    where = str(data_dir / spec.train_file)
    train_slices = slice_files(data_dir / (spec.image_dir or "train"))
    if not train_slices:
        raise InputError(f"{data_dir / (spec.image_dir or 'train')}: no slice file")
    train = _gathered(spec, read_csv(data_dir / spec.train_file, "train file", data_dir, literal=True), train_slices,
                      where)
    if train.empty:
        raise InputError(f"{where}: no id names a training slice file")
    test_slices = slice_files(data_dir / (spec.test_image_dir or "test"))
    ids = train[spec.id_column]
    tests = [test_slices[i].path if i in test_slices else None for i in test_items(spec, sample)]
    series = [train_slices[i].series for i in ids]
    return train, [train_slices[i].path for i in ids], tests, where, None, series, series


def row_masks(values: np.ndarray, sample: pd.DataFrame, spec: CompetitionSpec) -> np.ndarray:
    """Each sample row's probabilities at the learned size: its slice's (a test item's row of `values`) of its
    class (none: zeros)."""
    items, classes = row_places(spec, sample)
    layout, values = spec.mask, np.asarray(values, dtype=np.float32)
    pixels = layout.shape[0] * layout.shape[1]
    if len(values) != len(test_items(spec, sample)) or values.shape[1] != len(layout.classes) * pixels:
        raise InvalidSubmissionError(f"{values.shape} predictions for {len(test_items(spec, sample))} slices x "
                                     f"{len(layout.classes)} classes of {pixels} pixels")
    out = np.zeros((len(sample), pixels), dtype=np.float32)
    known = classes >= 0
    for c in range(len(layout.classes)):
        chosen = known & (classes == c)
        out[chosen] = values[items[chosen], c * pixels:(c + 1) * pixels]
    return out


def written_rows(values: np.ndarray, thresholds, sample: pd.DataFrame, spec: CompetitionSpec) -> list[str]:
    """Each row's mask as a run-length string at its slice's own size: the probabilities resized to it, a pixel
    from the tuned cut on; a mask of fewer pixels than the tuned least size (counted at the learned size, where it
    was tuned) left empty; an empty mask where the slice's size is unknown (no file)."""
    layout = spec.mask
    sizes = sample.attrs.get(SIZES)
    if sizes is None or len(sizes) != len(sample):
        raise InvalidSubmissionError("the test slices' sizes are unknown: a row per class is written at its own size")
    cut, least = thresholds[:2] if thresholds else (MASK_CUT, 0)
    empty = layout.empty or ""
    out = []
    for row, size in zip(np.nan_to_num(np.asarray(values, dtype=np.float32)), sizes):
        square = row.reshape(layout.shape)
        if size is None or int((square >= cut).sum()) < max(1, int(least)):
            out.append(empty)
            continue
        out.append(rle.written(resized(square, *size) >= cut, layout.order, empty))
    return out
