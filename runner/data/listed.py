"""Items listed in files (mlsp-2013-birds): the sample's stacked ids split into items and classes, labels from
the listing, and the ready-made features the competition ships when there are some."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from runner.common.errors import InputError
from runner.competition.id_parts import stacked_items
from runner.competition.spec import CompetitionSpec
from runner.data.dataset import SPECTROGRAM_SIDE, Dataset
from runner.data.reading import located, read_csv
from runner.data.targets import file_inputs

log = logging.getLogger(__name__)


def _listed_labels(spec: CompetitionSpec, data_dir: Path) -> dict[int, list[int]]:
    """Each training item's labels from the labels file (`id,label,...`; a test item's `id,?` is left out)."""
    path = data_dir / spec.labels_file
    known: dict[int, list[int]] = {}
    for number, line in enumerate(located(path, "labels file", data_dir).read_text().splitlines()[1:], start=2):
        fields = [f.strip() for f in line.split(",") if f.strip()]
        if not fields or "?" in fields[1:]:
            continue
        try:
            known[int(fields[0])] = [int(f) for f in fields[1:]]
        except ValueError as exc:
            raise InputError(f"{path}: line {number}: {exc}") from exc
    if not known:
        raise InputError(f"{path}: no training item (every line is `id,?`)")
    return known


def _file_names(spec: CompetitionSpec, data_dir: Path, items) -> pd.Series:
    """The file name (less its suffix) of each item: from the names file, else the item itself."""
    if not spec.names_file:
        return pd.Series([str(i) for i in items])
    path = data_dir / spec.names_file
    table = read_csv(path, "names file", data_dir)
    if table.shape[1] < 2:
        raise InputError(f"{path}: needs two columns, the id and the file name")
    names = dict(zip(pd.to_numeric(table.iloc[:, 0], errors="coerce"), table.iloc[:, 1].astype(str)))
    return pd.Series([names.get(i, f"<item {i} not in {spec.names_file}>") for i in items])


def _ready_features(spec: CompetitionSpec, data_dir: Path, train_items, test_items) -> tuple | None:
    """The feature files joined by item id (rows of one id averaged: a file may hold one per segment) as a
    (train, test) table; an item a file lacks gets empty values."""
    frames = []
    for name in spec.feature_files:
        path = data_dir / name
        try:
            table = pd.read_csv(located(path, "feature file", data_dir), header=None, skiprows=1)
        except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
            raise InputError(f"{path}: cannot read: {exc}") from exc
        table = table.apply(pd.to_numeric, errors="coerce").dropna(subset=[0]).dropna(axis=1, how="all")
        table = table.groupby(0).mean()
        table.columns = [f"{Path(name).stem}_{j}" for j in range(table.shape[1])]
        frames.append(table)
    if not frames:
        return None
    joined = pd.concat(frames, axis=1)
    return joined.reindex(train_items).reset_index(drop=True), joined.reindex(test_items).reset_index(drop=True)


def listed_dataset(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame,
                    columns: list[str]) -> Dataset:
    """A competition whose items, labels and files are listed in files (see the spec's `labels_file`): one row per
    item, a 0/1 column per label; test items in the sample's order, each of its rows a (test item, label)."""
    items, labels = stacked_items(spec, sample)
    test_items, k = pd.unique(items), int(labels.max()) + 1
    known = _listed_labels(spec, data_dir)
    y = np.zeros((len(known), k))
    for i, present in enumerate(known.values()):
        y[i, [label for label in present if 0 <= label < k]] = 1
    warnings: list[str] = []
    views: dict[str, tuple] = {}
    keep = np.ones(len(y), dtype=bool)
    if spec.task == "audio":
        keep, train_paths, test_paths = file_inputs(spec, _file_names(spec, data_dir, known),
                                                     _file_names(spec, data_dir, test_items), data_dir, work_dir,
                                                     warnings)
        views["audio"] = (train_paths, test_paths)
    if (table := _ready_features(spec, data_dir, list(known), test_items)) is not None:
        views["table"] = table
    if not views:
        raise InputError(f"spec {spec.id}: a {spec.task} competition listed in {spec.labels_file} needs files "
                         "(task audio) or feature_files")
    side = SPECTROGRAM_SIDE if spec.task == "audio" else 0
    return Dataset(spec, columns, None, y, views, warnings, image_side=side).subset(keep)
