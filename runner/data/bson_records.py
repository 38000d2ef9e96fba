"""Items stored as BSON documents with their pictures inside (the spec's `items: bson`, cdiscount's `train.bson` and
`test.bson`): a document per item, its id under the spec's id column, its label (training file only) under the
spec's target, and its pictures as the bytes anywhere in it (cdiscount's `imgs: [{picture: <JPEG>}, ...]`).

An item with several pictures is one row, train and test alike: its pictures are tiled once into one JPEG in the
work folder, a MOSAIC x MOSAIC grid filled in turn (one picture four times, two twice each, ...), so every item
looks alike to a model and its prediction uses all its pictures; a fold never splits an item's pictures. Each
picture keeps its own resolution in its cell. The documents are streamed (pymongo's `bson`), never held whole.

Training mosaics are written up to MAX_TRAIN_ITEMS (cdiscount's 6.4 million products would take hours and
hundreds of GB), drawn at random beyond it and said as a `Sampled`; every test item is written.
"""
from __future__ import annotations

import logging
from multiprocessing.pool import ThreadPool
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd
from PIL import Image

from runner.common.errors import InputError
from runner.common.sampling import SAMPLING_SEED, Sampled
from runner.competition.spec import CompetitionSpec
from runner.data.reading import located

log = logging.getLogger(__name__)

MOSAIC = 2  # cells a side of an item's tiled picture: cdiscount's products have one to four
MAX_TRAIN_ITEMS = 1_000_000  # training mosaics written at most: ~30 GB of 360 px JPEGs, more than a day trains on
CHUNK = 256  # documents decoded and tiled at a time: bounded memory however large the file
QUALITY = 90  # JPEG quality of a mosaic: the pictures were JPEGs already
PROBE_DOCUMENTS = 200  # documents whose mean size estimates how many a file holds
FOLDER = "bson"  # the work folder's sub-folder of the mosaics


def pictures_of(value) -> list[bytes]:
    """Every bytes value in a document, depth first in its order (cdiscount: imgs[*].picture)."""
    if isinstance(value, (bytes, bytearray)):
        return [bytes(value)]
    if isinstance(value, dict):
        return [p for v in value.values() for p in pictures_of(v)]
    if isinstance(value, (list, tuple)):
        return [p for v in value for p in pictures_of(v)]
    return []


def mosaic(pictures: list[bytes]) -> Image.Image | None:
    """The pictures tiled MOSAIC x MOSAIC in turn, each cell the first picture's size; None when none decodes."""
    import io

    decoded = []
    for data in pictures:
        try:
            with Image.open(io.BytesIO(data)) as image:
                decoded.append(image.convert("RGB"))
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
            continue
    if not decoded:
        return None
    width, height = decoded[0].size
    tiled = Image.new("RGB", (MOSAIC * width, MOSAIC * height))
    for cell in range(MOSAIC * MOSAIC):
        picture = decoded[cell % len(decoded)]
        picture = picture if picture.size == (width, height) else picture.resize((width, height), Image.BILINEAR)
        tiled.paste(picture, ((cell % MOSAIC) * width, (cell // MOSAIC) * height))
    return tiled


def _write(job: tuple[list[bytes], Path]) -> Path | None:
    pictures, target = job
    if target.exists():  # an earlier run's
        return target
    image = mosaic(pictures)
    if image is None:
        return None
    partial = target.with_name(target.name + ".part")
    image.save(partial, format="JPEG", quality=QUALITY)
    partial.replace(target)
    return target


def documents(path: Path) -> Iterator[dict]:
    import bson

    with open(path, "rb") as handle:
        try:
            yield from bson.decode_file_iter(handle)
        except bson.errors.InvalidBSON as exc:
            raise InputError(f"{path}: not BSON documents: {exc}") from exc


def _estimated_count(path: Path) -> int:
    """How many documents the file holds, from the mean size of its first PROBE_DOCUMENTS."""
    import bson

    sizes = []
    for document in documents(path):
        sizes.append(len(bson.encode(document)))
        if len(sizes) >= PROBE_DOCUMENTS:
            break
    return int(path.stat().st_size / max(1.0, float(np.mean(sizes)))) if sizes else 0


def read_records(path: Path, spec: CompetitionSpec, out: Path, labelled: bool, keep_share: float,
                 threads: int) -> tuple[list, list, list[Path | None]]:
    """(ids, labels, mosaic paths) of a BSON file's documents; an item not drawn (a training item beyond
    `keep_share`) or without a readable picture has no path."""
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SAMPLING_SEED)
    ids, labels, files = [], [], []
    with ThreadPool(max(1, threads)) as pool:  # Pillow decodes and encodes without the GIL
        chunk: list = []
        for document in documents(path):
            if spec.id_column not in document or (labelled and spec.targets[0] not in document):
                raise InputError(f"{path}: a document lacks {spec.id_column!r}"
                                 f"{f' or {spec.targets[0]!r}' if labelled else ''}: {sorted(document)[:5]}")
            ids.append(document[spec.id_column])
            labels.append(document.get(spec.targets[0]) if labelled else None)
            drawn = keep_share >= 1.0 or rng.random() < keep_share
            chunk.append((pictures_of(document), out / f"{document[spec.id_column]}.jpg") if drawn else None)
            if len(chunk) >= CHUNK:
                files += _written(pool, chunk)
                chunk = []
        files += _written(pool, chunk)
    return ids, labels, files


def _written(pool: ThreadPool, chunk: list) -> list[Path | None]:
    done = iter(pool.map(_write, [job for job in chunk if job is not None]))
    return [next(done) if job is not None else None for job in chunk]


def bson_items(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame) -> tuple:
    """The training items (id, label) with their mosaics, then the sample's rows' mosaics by id:
    runner.data.items.Items' fields, in order."""
    import os

    if not (spec.items_file and spec.test_items_file):
        raise InputError(f"spec {spec.id}: items 'bson' needs items_file and test_items_file (the BSON files)")
    train_path = located(data_dir / spec.items_file, "training items", data_dir)
    test_path = located(data_dir / spec.test_items_file, "test items", data_dir)
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    folder = Path(work_dir) / FOLDER
    estimated = _estimated_count(train_path)
    share = min(1.0, MAX_TRAIN_ITEMS / estimated) if estimated else 1.0
    ids, labels, train_files = read_records(train_path, spec, folder / "train", True, share, threads)
    if not ids:
        raise InputError(f"{data_dir / spec.items_file}: no documents")
    test_ids, _, test_written = read_records(test_path, spec, folder / "test", False, 1.0, threads)
    by_id = {str(i): f for i, f in zip(test_ids, test_written)}
    test_files = [by_id.get(i) for i in sample[spec.id_column].astype(str)]
    train = pd.DataFrame({spec.id_column: ids, spec.targets[0]: labels})
    drawn = sum(f is not None for f in train_files)
    if share < 1.0:  # said where the run says what it trains on a part of (runner.data.loading reads it)
        train.attrs["sampled"] = Sampled(what="training items", kept=drawn, of=len(ids), how="drawn at random",
                                         source=str(data_dir / spec.items_file),
                                         why=f"a picture is written for at most {MAX_TRAIN_ITEMS} of them")
    return train, train_files, test_files, str(data_dir / spec.items_file)
