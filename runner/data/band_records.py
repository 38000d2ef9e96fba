"""Items that are folders of band arrays (`items: band_records`, contrails' records): each folder one item, named by
its id, holding a `height x width x frames` array per band and, for a labelled item, its mask as an array. The
reader lists the labelled folders of the training folders with each mask written as the competition writes masks (a
run-length string, so that masks are read one way: runner.data.mask_targets); the `band_composite` decoder
(runner.data.decoders) draws each folder's bands at the labelled frame as one colour picture."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.common import rle
from runner.common.errors import InputError
from runner.competition.spec import BandRecords, CompetitionSpec
from runner.data.reading import image_folder


def layout(spec: CompetitionSpec) -> BandRecords:
    if spec.bands is None:
        raise InputError(f"spec {spec.id}: items that are band records need `bands`, how their folders are read")
    return spec.bands


def item_mask(folder: Path, bands: BandRecords) -> np.ndarray:
    """A labelled item's 2-D mask: its mask file with any trailing axes of one dropped."""
    mask = np.load(folder / bands.mask_file, allow_pickle=False)
    while mask.ndim > 2 and mask.shape[-1] == 1:
        mask = mask[..., 0]
    if mask.ndim != 2:
        raise InputError(f"{folder / bands.mask_file}: a mask of shape {mask.shape}, not height x width")
    return mask


def band_records(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame):
    """(training rows: id and mask as a run-length string, their folders, the test rows' folders in the sample's
    order, what was read): every folder of image_dir and of the layout's train_dirs that holds a mask file."""
    bands = layout(spec)
    rows, folders = [], []
    for name in (spec.image_dir, *bands.train_dirs):
        root = image_folder(data_dir, name, work_dir)
        for folder in sorted(p for p in Path(root).iterdir() if p.is_dir() and (p / bands.mask_file).is_file()):
            rows.append((folder.name, rle.written(item_mask(folder, bands), spec.mask.order, spec.mask.empty or "")))
            folders.append(folder)
    if not rows:
        raise InputError(f"{data_dir / spec.image_dir}: no folder holds a mask file {bands.mask_file!r}")
    train = pd.DataFrame(rows, columns=[spec.id_column, spec.targets[0]])
    test_root = Path(image_folder(data_dir, spec.test_image_dir or spec.image_dir, work_dir))
    tests = [test_root / str(i) if (test_root / str(i)).is_dir() else None for i in sample[spec.id_column]]
    return train, folders, tests, str(data_dir / spec.image_dir)
