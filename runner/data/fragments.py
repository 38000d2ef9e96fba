"""Items that are folders of depth slices (`items: fragments`, vesuvius' papyrus fragments: `<id>/surface_volume/
00.tif` ... `64.tif`, 16-bit TIFFs), each training folder holding its own labels as a run-length file
(`mask.item_labels`, `inklabels_rle.csv`: `Id,Predicted`); the test items are the folders the sample names.

The `volume_bands` decoder (runner.data.decoders) draws a fragment as one colour picture: the middle of its stack
(where the papyrus' surface lies, and the ink just above it) cut into three bands of slices, each averaged, the
three scaled together between their percentiles so that a band's brightness against its neighbours' (a sheet
thickened by ink) stays.
Slices are read one at a time and shrunk to the canvas the masks are learned on (runner.data.canvas) as they are
summed: a real fragment's 65 slices of 14,830 x 9,506 pixels are 18 GB as 16-bit values.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec
from runner.data.reading import image_folder, read_csv

SLICES_FOLDER = "surface_volume"  # a fragment's slices, named by their depth
MIDDLE_SHARE = 0.5  # of the stack's depth, centred: the papyrus lies about the middle slice, ink just above it
BANDS = 3  # bands of slices: a colour picture's channels


def slices_of(folder: Path) -> list[Path]:
    found = sorted((Path(folder) / SLICES_FOLDER).glob("*.tif*"))
    if not found:
        raise InputError(f"{Path(folder) / SLICES_FOLDER}: no slice (.tif) in the fragment's folder")
    return found


def band_slices(count: int) -> list[range]:
    """The slices of each band: the middle MIDDLE_SHARE of `count`, cut into BANDS runs of about one length."""
    first = int(round(count * (1 - MIDDLE_SHARE) / 2))
    last = max(first + BANDS, int(round(count * (1 + MIDDLE_SHARE) / 2)))
    edges = np.linspace(first, min(last, count), BANDS + 1).round().astype(int)
    return [range(a, max(a + 1, b)) for a, b in zip(edges[:-1], edges[1:])]


def shrunk_slice(path: Path, size: tuple[int, int] | None) -> np.ndarray:
    """One slice as float32, shrunk by area to `size` (height, width; None: as it is)."""
    import tifffile

    values = np.asarray(tifffile.imread(path), dtype=np.float32)
    if size is None or values.shape == size:
        return values
    return np.asarray(Image.fromarray(values).resize((size[1], size[0]), Image.BOX))


def band_means(folder: Path, size: tuple[int, int] | None) -> np.ndarray:
    """(height, width, BANDS): each band's slices averaged, read one slice at a time."""
    slices = slices_of(folder)
    bands = []
    for band in band_slices(len(slices)):
        total = None
        for k in band:
            layer = shrunk_slice(slices[min(k, len(slices) - 1)], size)
            total = layer if total is None else total + layer
        bands.append(total / len(band))
    return np.stack(bands, axis=-1)


def _labels(folder: Path, name: str, spec: CompetitionSpec) -> pd.DataFrame:
    """A training fragment's own run-length rows (its id, the mask), read from its labels file."""
    path = folder / name
    frame = read_csv(path, "a fragment's labels", folder, literal=True)
    column = spec.mask.train_column or spec.targets[0]
    for needed in (spec.id_column, column):
        if needed not in frame.columns:
            raise InputError(f"{path}: no column {needed!r}")
    return frame[[spec.id_column, column]].astype(str)


def fragments(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame):
    """(training items: each labelled folder's id and mask, their folders, the sample's test folders, what was
    read): a folder below image_dir with its labels file is a training item."""
    name = spec.mask.item_labels if spec.mask is not None else None
    if not name:
        raise InputError(f"spec {spec.id}: fragments need `mask.item_labels`, each training folder's labels file")
    root = image_folder(data_dir, spec.image_dir or "train", work_dir)
    folders = sorted(p for p in Path(root).iterdir() if (p / name).is_file())
    if not folders:
        raise InputError(f"{root}: no folder holding {name}: no labelled fragment")
    rows = [_labels(folder, name, spec) for folder in folders]
    train = pd.concat(rows, ignore_index=True)
    paths = [folder for folder, frame in zip(folders, rows) for _ in range(len(frame))]
    tests = Path(data_dir) / (spec.test_image_dir or "test")
    test_files = [tests / item if (tests / item).is_dir() else None for item in sample[spec.id_column].astype(str)]
    return train, paths, test_files, str(root)
