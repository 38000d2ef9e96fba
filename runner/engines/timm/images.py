"""Decode every image once into a uint8 array on disk, shared read-only by all fold processes.

Decoding JPEGs is the slow part of small-image training (about 500 img/s per core here); folds and epochs then
read pixels from a memory map instead. Unreadable images are found here, once.
"""
from __future__ import annotations

import dataclasses
import logging
from multiprocessing.pool import ThreadPool
from pathlib import Path

import numpy as np
from numpy.lib.format import open_memmap

from runner.data.dataset import Dataset
from runner.data.dataset import decode_square as decode

log = logging.getLogger(__name__)

def cache_side(image_size: int, source_side: int = 0) -> int:
    """Side of the cached square: a little larger than the training crop, as in ImageNet's 0.875 eval crop, but
    never above the images' own side (`source_side`, 0: unknown) unless training is larger still: then the
    training size, as storing more pixels than either would only be upscaling."""
    side = int(round(image_size / 0.875))
    return max(image_size, min(side, source_side)) if source_side else side


def _decode_star(args):
    return decode(*args)


def build_cache(paths: list[Path | None], side: int, out: Path, workers: int) -> np.ndarray:
    """Write the images into `out` (.npy, n × side × side × 3); returns a mask of those that decoded."""
    array = open_memmap(out, mode="w+", dtype=np.uint8, shape=(len(paths), side, side, 3))
    ok = np.zeros(len(paths), dtype=bool)
    # threads, not forked processes: Pillow decodes and resizes without the GIL, and a fork from a unit that
    # already runs threads can inherit a held lock and hang (seen under CPU load)
    with ThreadPool(max(1, workers)) as pool:
        for i, pixels in enumerate(pool.imap(_decode_star, ((p, side) for p in paths), chunksize=16)):
            if pixels is not None:
                array[i], ok[i] = pixels, True
    array.flush()
    return ok


def prepare_images(dataset: Dataset, image_size: int, work_dir: Path, workers: int,
                   source_side: int = 0) -> Dataset:
    """The dataset with its images cached. Its rows stay as they are (every member's folds split the same rows):
    a corrupt training image is left black and marked untrainable, so no fold fits on it while its row is still
    predicted when validated, as a corrupt test image is. The cache's side comes from the plan's settings
    (`image_size`, `source_side`), as the engine's prepare key does."""
    train, test = dataset.views["image"]
    paths = list(train) + list(test)
    side = cache_side(image_size, source_side)
    out = work_dir / f"images_{side}.npy"
    ok = build_cache(paths, side, out, workers)
    n_train = len(train)
    bad_train = [str(p) for p, good in zip(train, ok[:n_train]) if p is not None and not good]
    bad_test = [str(p) for p, good in zip(test, ok[n_train:]) if p is not None and not good]
    warnings = list(dataset.warnings)
    if bad_train:
        warnings.append(f"skipped {len(bad_train)} unreadable training image(s) in training, e.g. {bad_train[0]}")
    if bad_test:
        warnings.append(f"{len(bad_test)} unreadable test image(s) predicted from a blank image, e.g. {bad_test[0]}")
    views = {**dataset.views, "image": (list(range(n_train)), list(range(n_train, len(paths))))}
    untrainable = ~ok[:n_train] if dataset.untrainable is None else dataset.untrainable | ~ok[:n_train]
    return dataclasses.replace(dataset, views=views, warnings=warnings, image_cache=str(out), untrainable=untrainable)
