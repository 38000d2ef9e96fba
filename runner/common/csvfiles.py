"""Reading a competition's CSV files as they come: UTF-8 with or without a byte-order mark or another encoding,
commas or another delimiter, compressed or not, blank lines, and a row with the wrong number of fields skipped
and named by its line number, each a warning rather than a library's error; and finding the sample submission
under the names Kaggle competitions give it."""
from __future__ import annotations

import bz2
import codecs
import gzip
import lzma
import re
import time
import warnings as python_warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from runner.common import archives
from runner.common.sampling import SAMPLING_SEED, Sampled

ENCODING = "utf-8-sig"  # UTF-8, a byte-order mark dropped from the first column's name
FALLBACK_ENCODING = "latin-1"  # decodes any byte: a wrong guess gives odd letters, never a lost row
DELIMITERS = ",;\t|"
SNIFF_BYTES = 64 * 1024  # the file's head: enough lines to tell its encoding and delimiter
ROWS_HEAD_BYTES = 2**20  # the head whose rows' length sizes the whole file: a short one misses longer rows later
CHUNK_ROWS = 500_000  # rows parsed at a time from a table too large to read whole (a few hundred MB of memory)
MAGIC = ((b"\x1f\x8b", "gzip"), (b"PK\x03\x04", "zip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"))
OPENERS = {"gzip": gzip.open, "bz2": bz2.open, "xz": lzma.open}
STREAM_RATIO = 4  # bytes of CSV per byte of a bz2 or xz stream, which stores no size: text compresses ~3-6x
# what competitions name their sample submission, most common first (MLE-bench keeps Kaggle's names)
SAMPLE_NAMES = ("sample_submission.csv", "sampleSubmission.csv", "sample_submission_null.csv",
                "sample_submission.csv.zip", "sampleSubmission.csv.zip", "sample_submission.csv.gz",
                "sample_submission.csv.7z")
SAMPLE_PATTERN = re.compile(r"sample_?submission.*\.csv(\.(zip|gz|7z))?$", re.IGNORECASE)


def compression(path: Path) -> str | None:
    """The file's compression from its first bytes (a .csv that is really gzip is read as gzip), or None; an
    archive pandas cannot open ('7z', 'tar', compressed or not) is named as such: its one file is read in memory."""
    with open(path, "rb") as handle:
        start = handle.read(8)
    if start.startswith(archives.SEVEN_ZIP):
        return "7z"
    if start.startswith(archives.GZIP) and archives.kind(path) == "tar":
        return "tar"
    return next((method for magic, method in MAGIC if start.startswith(magic)), None)


IN_MEMORY = ("7z", "tar")  # archives whose one CSV is read into memory first (pandas reads the others itself)


def source(path: Path, method: str | None):
    """What pandas reads and the compression it is told: the file itself, or an in-memory archive's one file."""
    return (archives.open_member(path), None) if method in IN_MEMORY else (path, method)


def head(path: Path, method: str | None, size: int = SNIFF_BYTES) -> bytes:
    """The first `size` bytes of the file's content, decompressed."""
    if method in IN_MEMORY:
        return archives.read_member(path)[:size]
    if method == "zip":
        with zipfile.ZipFile(path) as archive:
            members = [m for m in archive.infolist() if not m.is_dir()]
            if not members:
                return b""
            with archive.open(members[0]) as handle:
                return handle.read(size)
    with OPENERS.get(method, open)(path, "rb") as handle:
        return handle.read(size)


def content_bytes(path: Path) -> int:
    """The CSV's size once decompressed: a zip member's recorded size, a gzip's (its trailer holds the size modulo
    4 GiB: taken as the least such size not below the file's), else the file's size times STREAM_RATIO; a plain
    file's own size."""
    size, method = path.stat().st_size, compression(path)
    if method in IN_MEMORY:
        return max((m.size for m in archives.members(path)), default=0)
    if method == "zip":
        with zipfile.ZipFile(path) as archive:
            return max((m.file_size for m in archive.infolist() if not m.is_dir()), default=0)
    if method == "gzip":
        with open(path, "rb") as handle:
            handle.seek(-4, 2)
            stored = int.from_bytes(handle.read(4), "little")
        return stored + -(-max(0, size - stored) // 2**32) * 2**32
    return size * STREAM_RATIO if method else size


def estimated_rows(path: Path) -> int:
    """About how many rows a CSV holds (compressed or not): its content's size over the bytes per row of its head."""
    raw = head(path, compression(path), ROWS_HEAD_BYTES)
    return int(content_bytes(path) / max(1.0, len(raw) / max(1, raw.count(b"\n"))))


def encoding_of(raw: bytes) -> str:
    """UTF-8 when the head decodes as UTF-8 (a character cut at its end is fine), else Latin-1."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(raw, final=False)
        return ENCODING
    except UnicodeDecodeError:
        return FALLBACK_ENCODING


def delimiter_of(text: str) -> str:
    """The delimiter of the header line: a comma when it has one, else the most frequent of DELIMITERS in it (a
    comma when none is: one column). The header, not the rows: csv.Sniffer gives up on a file with one bad row."""
    header = next((line for line in text.splitlines() if line.strip()), "")
    if "," in header:
        return ","
    counts = {d: header.count(d) for d in DELIMITERS}
    best = max(counts, key=counts.get)
    return best if counts[best] else ","


def _options(path: Path, notes: list[str]) -> tuple[str, dict]:
    """(encoding, pandas options) for the file, from its head; what is not plain UTF-8 CSV noted."""
    method = compression(path)
    raw = head(path, method)
    encoding = encoding_of(raw)
    delimiter = delimiter_of(raw.decode(encoding, errors="replace"))
    if encoding != ENCODING:
        notes.append(f"{path}: not UTF-8; read as {encoding}")
    if delimiter != ",":
        notes.append(f"{path}: fields separated by {delimiter!r}, not commas")
    return encoding, dict(sep=delimiter, compression=method, on_bad_lines="warn")


def _pandas_source(path: Path, options: dict):
    """The file (or its archive's one file in memory) and the options pandas reads it with."""
    readable, method = source(path, options["compression"])
    return readable, {**options, "compression": method}


def read_csv_sample(path: Path, rows: int, seconds: float, warnings: list[str],
                    seed: int = SAMPLING_SEED) -> pd.DataFrame:
    """About `rows` rows drawn evenly from a large file, read in chunks of CHUNK_ROWS; reading stops after
    `seconds` (the rows after are never seen). What was kept, of how much, is the frame's `attrs["sampled"]`
    (runner.common.sampling) and said in `warnings`."""
    encoding, options = _options(path, warnings)
    expected = max(rows, estimated_rows(path))
    share, rng, parts, seen = min(1.0, rows / expected), np.random.default_rng(seed), [], 0
    started, stopped = time.monotonic(), None
    readable, options = _pandas_source(path, options)
    with pd.read_csv(readable, encoding=encoding, chunksize=CHUNK_ROWS, **options) as chunks:
        for chunk in chunks:
            seen += len(chunk)
            parts.append(chunk[rng.random(len(chunk)) < share])
            if time.monotonic() - started > seconds:
                stopped = seconds
                break
    frame = pd.concat(parts, ignore_index=True)
    frame.attrs["sampled"] = Sampled(what="training rows", kept=len(frame), of=seen, source=str(path),
                                     how="drawn evenly through the file" if stopped is None else
                                     f"drawn evenly through the first {seen:,} rows: reading stopped after "
                                     f"{stopped:.0f} s", why="what the budget affords")
    warnings.append(frame.attrs["sampled"].say())
    return frame


# read as written: only an empty field is missing. pandas' default also reads "None", "NA", "null", "nan" and a
# dozen more as missing, which are tokens of text normalization's data (spoken "None" is "None")
LITERAL = dict(keep_default_na=False, na_values=[""])


def read_csv_file(path: Path, nrows: int | None = None, warnings: list[str] | None = None,
                  literal: bool = False) -> pd.DataFrame:
    """The table in `path`, with a warning in `warnings` for each thing that was not plain UTF-8 CSV (another
    encoding or delimiter, bad rows skipped). pandas' own errors propagate for what cannot be read at all.
    `literal`: every non-empty field as written (LITERAL)."""
    notes = warnings if warnings is not None else []
    encoding, options = _options(path, notes)
    options["nrows"] = nrows
    options.update(LITERAL if literal else {})
    with python_warnings.catch_warnings(record=True) as caught:
        python_warnings.simplefilter("always", pd.errors.ParserWarning)
        readable, options = _pandas_source(path, options)
        try:
            frame = pd.read_csv(readable, encoding=encoding, **options)
        except UnicodeDecodeError:  # a byte past the head that is not UTF-8
            notes.append(f"{path}: not UTF-8 past its first {SNIFF_BYTES // 1024} KiB; read as {FALLBACK_ENCODING}")
            if hasattr(readable, "seek"):
                readable.seek(0)
            frame = pd.read_csv(readable, encoding=FALLBACK_ENCODING, **options)
    for warning in caught:
        if issubclass(warning.category, pd.errors.ParserWarning):
            for line in str(warning.message).strip().splitlines():  # "Skipping line 3: expected 2 fields, saw 4"
                notes.append(f"{path}: {line.strip().replace('Skipping', 'skipped')}")
    return frame


def find_sample(data_dir: Path, named: str = SAMPLE_NAMES[0]) -> Path | None:
    """The sample submission: `named` (the spec's), one of SAMPLE_NAMES, or the one file whose name looks like
    one (any case, also zipped or gzipped); None when there is none."""
    for name in (named, *SAMPLE_NAMES):
        if (Path(data_dir) / name).is_file():
            return Path(data_dir) / name
    found = sorted(p for p in Path(data_dir).iterdir() if p.is_file() and SAMPLE_PATTERN.search(p.name)) \
        if Path(data_dir).is_dir() else []
    return found[0] if found else None
