"""Items that are the records of a JSON array (a file, or the one `.json` inside an archive: statoil's
train.json.7z): each record's lists of numbers (a radar picture's bands, flattened) become one NumPy array per
record, the lists as channels, each made a square when its length is one (5625 numbers: 75 x 75), written once
under the work folder for the spec's `decode` to picture (runner.data.decoders' `array_image`); the record's other
fields are a table's columns, a word for a missing value ("na") read as missing.

The items reader `array_records` (runner.data.items' READERS makes its `Items`): `items_file` holds the training records (their
targets among the fields), `test_items_file` the test records, ordered here as the sample lists their ids.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec
from runner.data.reading import json_records

MISSING_WORDS = {"", "na", "n/a", "nan", "none", "null", "-"}  # a field's words that say its value is missing
ARRAYS = "records"  # the work folder's sub-folder of the records' arrays


def _is_numbers(value) -> bool:
    return isinstance(value, list) and len(value) > 1 and all(isinstance(v, (int, float)) for v in value[:64])


def array_fields(record: dict) -> list[str]:
    """The fields of a record that hold lists of numbers as long as its first such list."""
    fields = [k for k, v in record.items() if _is_numbers(v)]
    return [k for k in fields if len(record[k]) == len(record[fields[0]])] if fields else []


def record_array(record: dict, fields: list[str]) -> np.ndarray:
    """(channels x side x side) float32 where a list's length is a square, else (channels x length)."""
    array = np.asarray([record[k] for k in fields], dtype=np.float32)
    side = math.isqrt(array.shape[1])
    return array.reshape(len(fields), side, side) if side * side == array.shape[1] else array


def scalar_table(records: list[dict], arrays: list[str]) -> pd.DataFrame:
    """The records' other fields as columns: a column of numbers and missing words becomes numbers with gaps."""
    table = pd.DataFrame([{k: v for k, v in r.items() if k not in arrays} for r in records])
    for column in table.columns:
        if table[column].dtype == object:
            numbers = pd.to_numeric(table[column], errors="coerce")
            words = table[column][numbers.isna() & table[column].notna()].astype(str).str.strip().str.lower()
            if numbers.notna().any() and words.isin(MISSING_WORDS).all():
                table[column] = numbers
    return table


def _write_arrays(records: list[dict], fields: list[str], folder: Path) -> list[Path | None]:
    """Each record's array as folder/<k>.npy (kept where an earlier run wrote it); None for a record that lacks a
    field or whose lists differ in length."""
    folder.mkdir(parents=True, exist_ok=True)
    paths: list[Path | None] = []
    for k, record in enumerate(records):
        target = folder / f"{k}.npy"
        if not target.exists():
            try:
                np.save(target, record_array(record, fields))
            except (KeyError, ValueError, TypeError):
                paths.append(None)
                continue
        paths.append(target)
    return paths


def array_records(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame) -> tuple:
    """(training table, training files, test files, where, test table): the fields of runner.data.items' `Items`."""
    if not spec.items_file or not spec.test_items_file:
        raise InputError(f"spec {spec.id}: array_records needs items_file and test_items_file (the JSON records)")
    train_path, test_path = data_dir / spec.items_file, data_dir / spec.test_items_file
    train_records = json_records(train_path, "training records", data_dir)
    test_records = json_records(test_path, "test records", data_dir)
    fields = array_fields(train_records[0])
    if not fields:
        raise InputError(f"{train_path}: its records hold no list of numbers to make an array of")
    train = scalar_table(train_records, fields)
    test = scalar_table(test_records, fields)
    for frame, path in ((train, train_path), (test, test_path)):
        if spec.id_column not in frame.columns:
            raise InputError(f"{path}: its records have no field {spec.id_column!r}")
    root = Path(work_dir) / ARRAYS
    train_files = _write_arrays(train_records, fields, root / "train")
    test_files = _write_arrays(test_records, fields, root / "test")
    order = pd.Index(test[spec.id_column].astype(str)).get_indexer(sample[spec.id_column].astype(str))
    if (order < 0).all():
        raise InputError(f"{test_path}: none of the sample submission's ids is a test record's")
    test_rows = test.reindex(order).reset_index(drop=True)  # a sample id without a record: an empty row
    test_rows[spec.id_column] = sample[spec.id_column].to_numpy()
    return train, train_files, [test_files[k] if k >= 0 else None for k in order], str(train_path), test_rows
