"""Records whose fields hold a value per position (an RNA sequence's bases, its structure, a measurement at each
base), in JSON Lines or a JSON array, read as a table of one row per (record, position): a list field gives each
row its item (missing past the list's end), a string as long as the record has positions gives each row its
character, and every other field is the record's, repeated on each of its rows. A row's id is the record's key,
the separator and the position (`id_001f94081_0`), as melted sample submissions name them (the spec's
`positions`)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec, PositionRows
from runner.data.reading import located


def read_json_records(path, what: str, root=None) -> list[dict]:
    """The records of a JSON array or of JSON Lines (one object a line, blank lines skipped)."""
    real = located(path, what, root)
    try:
        text = real.read_text(encoding="utf-8")
        stripped = text.lstrip()
        records = json.loads(stripped) if stripped.startswith("[") else \
            [json.loads(line) for line in text.splitlines() if line.strip()]
    except (ValueError, OSError) as exc:
        raise InputError(f"{path}: cannot read {what} as JSON records: {exc}") from exc
    if not records or not all(isinstance(r, dict) for r in records):
        raise InputError(f"{path}: {what} holds no JSON records (objects)")
    return records


def _positions(record: dict, key: str) -> int:
    """How many positions a record has: its longest list or string (its key aside)."""
    lengths = [len(v) for name, v in record.items() if name != key and isinstance(v, (list, str))]
    return max(lengths, default=0)


def _per_position(records: list[dict], counts: list[int], key: str) -> set[str]:
    """The fields that hold a value per position in every record that has them: lists, and strings as long as
    their record's positions."""
    fields: dict[str, bool] = {}
    for record, count in zip(records, counts):
        for name, value in record.items():
            if name == key:
                continue
            per = isinstance(value, list) or (isinstance(value, str) and len(value) == count and count > 1)
            fields[name] = fields.get(name, True) and per
    return {name for name, per in fields.items() if per}


def _column(values, count: int) -> list:
    """A field's values over `count` positions: a string's characters, a list's items, missing past its end."""
    items = list(values)[:count]
    return items + [np.nan] * (count - len(items))


def position_rows(records: list[dict], rows: PositionRows, id_column: str, what: str) -> pd.DataFrame:
    """A row per position of every record, its id `<key><separator><position>` in `id_column`, its position in
    `rows.position`; the records' order, positions ascending."""
    missing = [i for i, r in enumerate(records) if rows.key not in r]
    if missing:
        raise InputError(f"{what}: record {missing[0]} has no field {rows.key!r} (the positions' key)")
    counts = [_positions(r, rows.key) for r in records]
    per_position = _per_position(records, counts, rows.key)
    parts = []
    for record, count in zip(records, counts):
        part = {name: _column(value, count) if name in per_position else [value] * count
                for name, value in record.items()}
        positions = np.arange(count)
        part[rows.position] = positions
        part[id_column] = [f"{record[rows.key]}{rows.separator}{p}" for p in positions]
        parts.append(pd.DataFrame(part))
    table = pd.concat(parts, ignore_index=True)
    if table.empty:
        raise InputError(f"{what}: no record has a field with a value per position")
    return table


def read_position_table(path, what: str, spec: CompetitionSpec, root=None) -> pd.DataFrame:
    """A file of records as a table of one row per position (the spec's `positions`)."""
    return position_rows(read_json_records(path, what, root), spec.positions, spec.id_column, f"{path}: {what}")
