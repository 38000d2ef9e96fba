"""Labels in a training table whose columns are named apart from the sample's (the spec's `items: table`), as
iwildcam-2019's `train.csv` (`id`, ..., `category_id`) beside a sample of `Id,Category`: the id is the table's
column named as the sample's id column, case aside; the labels are the columns the test table
(`test_items_file`) lacks, as many as the spec has targets, taking the targets' names. A row's image is its id
plus the spec's suffix anywhere below `image_dir` (or its extracted archive), a test row's the sample's id plus the
test suffix below `test_image_dir`. A table may list an image twice: each listing is a row.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec
from runner.data.item_files import FileIndex
from runner.data.reading import read_csv


def _id_column(columns, wanted: str, path: Path) -> str:
    matches = [c for c in columns if str(c).lower() == wanted.lower()]
    if len(matches) != 1:
        raise InputError(f"{path}: {len(matches)} columns named {wanted!r} (case aside), not one: no id column")
    return matches[0]


def label_columns(train: pd.DataFrame, test_columns, spec: CompetitionSpec, path: Path) -> list[str]:
    """The training table's columns the test table lacks: its labels, one per target of the spec."""
    extra = [c for c in train.columns if c not in set(test_columns)]
    if len(extra) != len(spec.targets):
        raise InputError(f"{path}: {len(extra)} column(s) {extra[:5]} are not in the test table; the spec has "
                         f"{len(spec.targets)} target(s) {list(spec.targets)}")
    return extra


def table_items(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame) -> tuple:
    """The training rows (the sample's id and target names) and each row's image, then each test row's:
    runner.data.items.Items' fields, in order."""
    if not (spec.items_file and spec.test_items_file and spec.image_dir):
        raise InputError(f"spec {spec.id}: items 'table' needs items_file and test_items_file (the training and "
                         "test tables) and image_dir")
    path, test_path = data_dir / spec.items_file, data_dir / spec.test_items_file
    train = read_csv(path, "training table", data_dir)
    test_columns = read_csv(test_path, "test table", data_dir).columns
    ids = _id_column(train.columns, spec.id_column, path)
    labels = label_columns(train, test_columns, spec, path)
    rows = train[[ids, *labels]].set_axis([spec.id_column, *spec.targets], axis=1)
    train_files = FileIndex(data_dir, spec.image_dir, work_dir).named(rows[spec.id_column], spec.image_suffix)
    if all(f is None for f in train_files):
        raise InputError(f"{data_dir / spec.image_dir}: none of the images {spec.items_file} names was found "
                         f"(e.g. {rows[spec.id_column].iloc[0]}{spec.image_suffix})")
    test_files = FileIndex(data_dir, spec.test_image_dir or spec.image_dir, work_dir).named(sample[spec.id_column],
                                                                                            spec.test_suffix)
    return rows, train_files, test_files, str(path)
