"""Reading a competition's files within bounds: CSVs within the run's memory (large training tables sampled to
the budget), JSON records, and image archives checked for bombs before they are unpacked. Every failure names
the file at fault."""
from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from runner.common import archives
from runner.common.csvfiles import content_bytes, estimated_rows, read_csv_file, read_csv_sample
from runner.common.errors import InputError
from runner.common.sampling import Sampled
from runner.common.untrusted import inside, walk

log = logging.getLogger(__name__)


MEMORY_SHARE = 0.25  # of the machine's memory one CSV may fill once read (pandas needs several times its size)
MEMORY_PER_FILE_BYTE = 4  # bytes of memory a byte of CSV takes once parsed, roughly
LARGE_TABLE_BYTES = 256 * 2**20  # a training table beyond this is sampled to what the budget affords, not read whole
ROWS_PER_BUDGET_SECOND = 2_000  # rows a second of budget trains well: ~1 h buys 7M rows, as GBM folds on 8 cores
MIN_SAMPLED_ROWS = 100_000  # fewer rows than this are no saving worth the lost signal
READ_SHARE = 0.1  # of the budget that reading a large training table may take
MAX_ZIP_RATIO = 20  # images come compressed already: a zip that expands more than this is a bomb
MAX_ZIP_MEMBERS = 2_000_000


def located(path: Path, what: str, root: Path | None) -> Path:
    """The real path of an input file inside `root` (its folder by default), or an InputError naming it."""
    if not os.path.lexists(path):
        raise InputError(f"{path}: {what} not found")
    return inside(root or Path(path).parent, path)


def read_csv(path: Path, what: str, root: Path | None = None, warnings: list[str] | None = None,
             budget_seconds: float | None = None, literal: bool = False, memory: int | None = None) -> pd.DataFrame:
    """A CSV file inside `root` (its folder by default; links out of it are refused), or an InputError that says
    which file and why. A file larger than the run's memory (`memory` bytes, else this machine's) can hold is read
    only as far as it can; with a budget, a large one is sampled evenly instead, to the rows that budget affords
    (`sampled_rows`)."""
    real = located(path, what, root)
    try:  # a broken archive fails already when its content's size is read
        size = content_bytes(real)  # what parsing sees: a zipped CSV parses as its content, not its archive
        rows = affordable_rows(real, size, memory)
        sampled = budget_seconds is not None and (rows is not None or size > LARGE_TABLE_BYTES)
        if sampled:
            frame = read_csv_sample(real, sampled_rows(budget_seconds, rows), READ_SHARE * budget_seconds,
                                    warnings if warnings is not None else [])
        else:
            frame = read_csv_file(real, rows, warnings, literal)
    except Exception as exc:  # pandas raises ParserError, EmptyDataError, OSError, BadZipFile...
        raise InputError(f"{path}: cannot read {what}: {exc}") from exc
    if frame.empty:
        raise InputError(f"{path}: {what} has no rows")
    if rows is not None and not sampled:
        frame.attrs["sampled"] = Sampled(what="rows", kept=len(frame), of=estimated_rows(real), source=str(path),
                                         how="the file's first rows", why=f"{size / 2**30:.1f} GiB is "
                                         f"more than {MEMORY_SHARE:.0%} of the run's memory can parse")
        if warnings is not None:
            warnings.append(frame.attrs["sampled"].say())
    return frame


def sampled_rows(budget_seconds: float, memory_rows: int | None) -> int:
    """Training rows a budget affords: ROWS_PER_BUDGET_SECOND for each of its seconds, within memory."""
    return int(min(memory_rows or math.inf, max(MIN_SAMPLED_ROWS, budget_seconds * ROWS_PER_BUDGET_SECOND)))


def json_records(path: Path, what: str, root: Path | None = None) -> list[dict]:
    """The records of a JSON array in `path`, or in the one `.json` of an archive there (zip, 7z, tar)."""
    real = located(path, what, root)
    try:
        if archives.kind(real) is not None:
            names = [m.name for m in archives.members(real) if m.name.lower().endswith(".json")]
            if len(names) != 1:
                raise InputError(f"{path}: {what}: expected one .json inside, found {names[:5]}")
            records = json.loads(archives.read_member(real, names[0]))
        else:
            records = json.loads(real.read_bytes())
    except (ValueError, OSError) as exc:
        raise InputError(f"{path}: cannot read {what}: {exc}") from exc
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise InputError(f"{path}: {what} is not a JSON array of records")
    if not records:
        raise InputError(f"{path}: {what} has no records")
    return records


def read_records(path: Path, what: str, root: Path | None = None) -> pd.DataFrame:
    """A JSON array of records (or an archive holding one .json) as a table; a field holding a list becomes its
    length (random-acts-of-pizza's subreddits), nested objects are flattened."""
    records = json_records(path, what, root)
    frame = pd.json_normalize(records)
    for column in frame.columns:
        if frame[column].map(lambda v: isinstance(v, list)).any():
            frame[column] = frame[column].map(lambda v: len(v) if isinstance(v, list) else np.nan)
    return frame


def read_parquet(path: Path, what: str, root: Path | None = None) -> pd.DataFrame:
    """A parquet table (pyarrow), or an InputError naming it."""
    real = located(path, what, root)
    try:
        frame = pd.read_parquet(real)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError...
        raise InputError(f"{path}: cannot read {what}: {exc}") from exc
    if frame.empty:
        raise InputError(f"{path}: {what} has no rows")
    return frame


def read_table(path: Path, what: str, root: Path | None = None, warnings: list[str] | None = None,
               budget_seconds: float | None = None, memory: int | None = None) -> pd.DataFrame:
    """A CSV, a JSON array of records (`.json`, or an archive of one: `.json.zip`, `.json.7z`) or a parquet
    table (`.parquet`), by the file's name."""
    if ".json" in Path(path).name.lower():
        return read_records(path, what, root)
    if Path(path).name.lower().endswith(".parquet"):
        return read_parquet(path, what, root)
    return read_csv(path, what, root, warnings, budget_seconds, memory=memory)


def affordable_rows(path: Path, size: int, memory: int | None = None) -> int | None:
    """How many rows of a CSV whose content is `size` bytes fit in MEMORY_SHARE of `memory` bytes (the run's; else
    this machine's), its rows' length measured on its first MiB (None: all of it)."""
    import psutil

    room = MEMORY_SHARE * (memory or psutil.virtual_memory().total) / MEMORY_PER_FILE_BYTE
    if size <= room:
        return None
    return int(estimated_rows(path) * room / size)


def image_folder(data_dir: Path, name: str, work_dir: Path) -> Path:
    """A folder of images (or clips, or any files one per item) inside the public folder: `name` itself, or where
    its archive (zip, 7z, tar) was extracted, once, under work_dir: images and clips only when it holds them, else
    every file, within the caps of runner.common.archives (files that expand more than MAX_ZIP_RATIO times are
    refused where they are pictures or sounds, which come compressed already)."""
    from runner.competition.spec import AUDIO_SUFFIXES, IMAGE_SUFFIXES

    source = data_dir / name
    if not os.path.lexists(source):  # a folder shipped as its archive (test/ as test.zip), or the other way round
        source = next((s for s in _twins(data_dir, name) if os.path.lexists(s)), source)
    if not os.path.lexists(source):
        raise InputError(f"{source}: image folder not found")
    real = inside(data_dir, source, "folder" if source.is_dir() else "file")
    if real.is_dir():
        return source
    media = IMAGE_SUFFIXES + AUDIO_SUFFIXES
    inside_it = archives.members(real)
    if len(inside_it) > MAX_ZIP_MEMBERS:
        raise InputError(f"{source}: refused: {len(inside_it)} images, more than {MAX_ZIP_MEMBERS}")
    is_media = any(Path(m.name).suffix.lower() in media for m in inside_it)
    wanted = (lambda member: Path(member).suffix.lower() in media) if is_media else (lambda member: True)
    target = work_dir / "extracted" / source.name.split(".")[0]
    return archives.extract(real, target, wanted, MAX_ZIP_RATIO if is_media else None)


ARCHIVE_SUFFIXES = (".zip", ".7z", ".tar", ".tar.gz", ".tgz")  # what a folder of files may be shipped as


def _twins(data_dir: Path, name: str) -> list[Path]:
    """Where a folder `name` may be instead: its archive (`name.zip`, ...), or, for an archive's name, its folder."""
    for suffix in ARCHIVE_SUFFIXES:
        if name.lower().endswith(suffix):
            return [data_dir / name[:-len(suffix)]]
    return [data_dir / f"{name}{suffix}" for suffix in ARCHIVE_SUFFIXES]


def image_files(data_dir: Path, name: str, work_dir: Path) -> list[Path]:
    """Every file of an image folder (or of where its zip was extracted), sub-folders included, none beyond it."""
    folder = image_folder(data_dir, name, work_dir)
    root = data_dir if Path(folder).resolve() == (data_dir / name).resolve() else folder  # extracted: its own
    return walk(folder, within=root)
