"""Rows whose ids are made of parts (a spec's `id_pattern`, runner.competition.id_parts): the test rows are the
sample's ids split into their parts (its items, where it is melted), the training rows a table's rows with the
same parts. A table's rows that share their parts are one id (a breast's images: its numbers averaged, its files
gathered); other tables add columns by the parts (`joins`: a player's tracking at a step, a patient's first
visit), and two rows joined from one table are compared (each column's difference or sameness, the distance
between their positions), as is a part with the joined column of its name (weeks since the first visit).

A part (text or whole numbers) whose test values no training row holds, or a text column of several such values,
names what the split keeps apart (a patient, a play, a study): no model can use it, so the test rows leave it out
and it is no feature; the training rows keep it (the folds' groups, the rows the grader's rule scores)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.common.errors import InputError
from runner.competition.id_parts import id_parts, item_columns, keys
from runner.competition.spec import CompetitionSpec, Join
from runner.data.items import Items, files_named
from runner.data.reading import read_table
from runner.data.targets import id_folders


def _text(values: pd.Series) -> pd.Series:
    """A part's values as text, a whole number written without its '.0' (a column with gaps reads as floats)."""
    present = values.dropna()
    if pd.api.types.is_float_dtype(values) and len(present) and (present == present.round()).all():
        values = values.astype("Int64")
    return values.astype(str)


def _test_parts(spec: CompetitionSpec, sample: pd.DataFrame) -> pd.DataFrame:
    """The test rows' parts: one row per sample row, or per item (first seen first) where the sample is melted."""
    parts = id_parts(spec, sample[spec.id_column], spec.sample_submission)[item_columns(spec)]
    if spec.melted_by_pattern:
        parts = parts.drop_duplicates().reset_index(drop=True)
    return parts


def _with_parts(spec: CompetitionSpec, table: pd.DataFrame, path: Path) -> pd.DataFrame:
    """The table with the part columns: its own, else split from its id column."""
    columns = item_columns(spec)
    missing = [c for c in columns if c not in table.columns]
    if missing and spec.id_column in table.columns:
        table = pd.concat([table.reset_index(drop=True), id_parts(spec, table[spec.id_column], str(path))[missing]],
                          axis=1)
    elif missing:
        raise InputError(f"{path}: no column(s) {missing} (the parts of {spec.id_column!r}) and no {spec.id_column!r}"
                         " to split into them")
    return table


def _one_per_key(table: pd.DataFrame, key: pd.Series, spec: CompetitionSpec,
                 keep_text: tuple[str, ...]) -> tuple[pd.DataFrame, pd.Series]:
    """The table's rows with one key made one row (numbers averaged, the rest its first row's), and each key's
    file names (the `file_column` of its rows) where the spec names them."""
    table = table.assign(**{spec.id_column: key.to_numpy()})
    names = table.groupby(spec.id_column, sort=False)[spec.file_column].agg(tuple) if spec.file_column else None
    if not key.duplicated().any():
        return table.reset_index(drop=True), names
    numeric = [c for c in table.columns if pd.api.types.is_numeric_dtype(table[c]) and c not in
               (*spec.targets, *keep_text, spec.file_column)]
    grouped = table.groupby(spec.id_column, sort=False)
    merged = grouped.first()
    merged[numeric] = grouped[numeric].mean()
    return merged.reset_index(), names


def _read(spec: CompetitionSpec, data_dir: Path, name: str, what: str, warnings: list[str],
          budget_seconds: float | None = None, memory: int | None = None) -> pd.DataFrame:
    return read_table(data_dir / name, what, data_dir, warnings, budget_seconds, memory)


def _join(frame: pd.DataFrame, table: pd.DataFrame, join: Join, path: Path) -> pd.DataFrame:
    """`frame` with the columns of `table`'s row whose `keys` columns equal its own (suffixed), in its row order."""
    missing = [c for c in join.keys if c not in table.columns] + \
        [c for c in join.keys.values() if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: cannot join by {join.keys}: no column(s) {missing}")
    if join.first_by:
        table = table.sort_values(join.first_by, kind="stable")
    table = table.drop_duplicates(list(join.keys))
    rest = [c for c in table.columns if c not in join.keys]
    right = table[rest].rename(columns={c: f"{c}{join.suffix}" for c in rest})
    right.index = keys(table[list(join.keys)].apply(_text), list(join.keys)).to_numpy()
    left = keys(frame[list(join.keys.values())].apply(_text), list(join.keys.values()))
    joined = right.reindex(left.to_numpy()).reset_index(drop=True)
    return pd.concat([frame.reset_index(drop=True), joined], axis=1)


def _compared(frame: pd.DataFrame, joined: list[tuple[Join, list[str]]], parts: list[str],
              dropped: tuple[str, ...]) -> pd.DataFrame:
    """Differences between two joins of one table (sameness for text, the distance between their positions), and
    between a part and the joined column of its name; none of a column the spec drops."""
    added = {}
    for i, (first, names) in enumerate(joined):
        for second, _ in joined[i + 1:]:
            if first.train_file != second.train_file:
                continue
            for c in (c for c in names if not {f"{c}{first.suffix}", f"{c}{second.suffix}"} & set(dropped)):
                a, b = frame[f"{c}{first.suffix}"], frame[f"{c}{second.suffix}"]
                if pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b):
                    added[f"{c}{first.suffix}-{c}{second.suffix}"] = a - b
                else:
                    added[f"{c}{first.suffix}={c}{second.suffix}"] = (a == b).astype(float).where(a.notna() & b.notna())
            if first.position:
                squares = sum((frame[f"{c}{first.suffix}"] - frame[f"{c}{second.suffix}"]) ** 2 for c in first.position)
                added[f"distance{first.suffix}{second.suffix}"] = np.sqrt(squares)
    for join, names in joined:
        for part in parts:
            if part in names and pd.api.types.is_numeric_dtype(frame[part]) \
                    and pd.api.types.is_numeric_dtype(frame[f"{part}{join.suffix}"]):
                added[f"{part}-{part}{join.suffix}"] = frame[part] - frame[f"{part}{join.suffix}"]
    return pd.concat([frame, pd.DataFrame(added, index=frame.index)], axis=1) if added else frame


def _as_numbers(train: pd.DataFrame, test: pd.DataFrame, columns: list[str]) -> None:
    """Part columns as numbers in both where every value of both reads as one (weeks, steps), in place."""
    for column in columns:
        both = pd.concat([train[column], test[column]]).dropna()
        numbers = pd.to_numeric(both, errors="coerce")
        if len(both) and numbers.notna().all():
            train[column] = pd.to_numeric(train[column])
            test[column] = pd.to_numeric(test[column])


def _identifiers(train: pd.DataFrame, test: pd.DataFrame, spec: CompetitionSpec, parts: list[str]) -> list[str]:
    """The test rows' parts (text or whole numbers) whose values no training row holds, and text columns of several
    such values (patients, plays, times): numbers that measure something are kept, however new their values, and
    so is a category the test rows alone have (every test patient a woman)."""
    found = []
    for column in test.columns:
        if column == spec.id_column or column not in train.columns:
            continue
        values = test[column].dropna()
        text = not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values)
        whole = not text and bool((values == values.round()).all())
        named = (column in parts and (text or whole)) or (text and values.nunique() > 1)
        if len(values) and named \
                and not values.astype(str).isin(set(train[column].dropna().astype(str))).any():
            found.append(column)
    return found


def _files(spec: CompetitionSpec, data_dir: Path, work_dir: Path, folder: str, row_keys: pd.Series,
           names: pd.Series | None, suffix: str) -> list:
    """Each row's files: the folder named by its key, or the files its rows name (a tuple), or None."""
    if spec.id_folders:
        return id_folders(data_dir, folder, work_dir, row_keys)
    if names is None:
        return [None] * len(row_keys)
    listed = names.reindex(row_keys.to_numpy())
    flat = pd.Series([n for group in listed.dropna() for n in group], dtype=object)
    found = dict(zip(flat.astype(str), files_named(data_dir, folder, work_dir, flat, suffix)))
    rows = [tuple(p for n in group if (p := found.get(str(n))) is not None) if isinstance(group, tuple) else ()
            for group in listed]
    return [row or None for row in rows]


def part_rows(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame, warnings: list[str],
              budget_seconds: float | None = None, memory: int | None = None) -> Items:
    """The training rows (the id column holding each one's key, the targets, features), the test rows (the
    sample's order, features only) and each one's files, where it has some, of a competition whose ids are made of
    parts (see the module's docstring)."""
    data_dir, parts = Path(data_dir), item_columns(spec)
    train_path = data_dir / spec.train_file
    train = _with_parts(spec, _read(spec, data_dir, spec.train_file, "train file", warnings, budget_seconds, memory),
                        train_path)
    train_keys = keys(train[parts].apply(_text), parts)
    train, train_names = _one_per_key(train.reset_index(drop=True), train_keys, spec, tuple(parts))
    test = _test_parts(spec, sample)
    test_keys = keys(test, parts)
    test_names = None
    if spec.test_file:  # a table of the test rows' own columns, several rows an id where the train file has them
        path = data_dir / spec.test_file
        table = _with_parts(spec, _read(spec, data_dir, spec.test_file, "test file", warnings), path)
        table, test_names = _one_per_key(table, keys(table[parts].apply(_text), parts), spec, tuple(parts))
        found = table.drop(columns=parts).drop_duplicates(spec.id_column).set_index(spec.id_column)
        if (missing := ~test_keys.isin(found.index)).any():
            raise InputError(f"{path}: no row for {int(missing.sum())} id(s) of the sample (e.g. "
                             f"{test_keys[missing].iloc[0]!r})")
        test = pd.concat([test, found.reindex(test_keys.to_numpy()).reset_index(drop=True)], axis=1)
    test[spec.id_column] = test_keys.to_numpy()
    _as_numbers(train, test, parts)
    joined: list[tuple[Join, list[str]]] = []
    for join in spec.joins:
        train_table = _read(spec, data_dir, join.train_file, "joined table", warnings, memory=memory)
        joined.append((join, [c for c in train_table.columns if c not in join.keys]))
        train = _join(train, train_table, join, data_dir / join.train_file)
        test = _join(test, _read(spec, data_dir, join.test_file, "joined table", warnings, memory=memory), join,
                     data_dir / join.test_file)
    train, test = (_compared(frame, joined, parts, spec.drop_columns) for frame in (train, test))
    test = test.drop(columns=[c for c in _identifiers(train, test, spec, parts) if c != spec.id_column])
    train_files, test_files = [None] * len(train), [None] * len(test)
    if spec.id_folders or spec.file_column:
        train_files = _files(spec, data_dir, work_dir, spec.image_dir, train[spec.id_column], train_names,
                             spec.image_suffix)
        test_files = _files(spec, data_dir, work_dir, spec.test_image_dir or spec.image_dir, test_keys,
                            test_names, spec.test_suffix)
    return Items(train, train_files, test_files, str(train_path), test=test)
