"""What the engines that train on pictures share (the timm CNN, the mask U-Net): every image decoded once into a
uint8 array on disk (n x height x width x 3, train rows then test rows), read by all of a member's folds from a
memory map, and the dataset's image view turned into rows of it. Unreadable images are found here, once: a
training one is marked untrainable (predicted, never fitted), a test one is predicted from a blank image."""
from __future__ import annotations

import dataclasses
from multiprocessing.pool import ThreadPool
from pathlib import Path
from typing import Callable

import numpy as np
from numpy.lib.format import open_memmap

from runner.data.dataset import Dataset


def write_cache(paths: list[Path | None], height: int, width: int, decode_one: Callable[[Path | None], object],
                out: Path, workers: int) -> np.ndarray:
    """Each path's `decode_one` (an array of height x width x 3, or None) written into `out`; returns a mask of
    those that decoded."""
    array = open_memmap(out, mode="w+", dtype=np.uint8, shape=(len(paths), height, width, 3))
    ok = np.zeros(len(paths), dtype=bool)
    # threads, not forked processes: Pillow decodes and resizes without the GIL, and a fork from a unit that
    # already runs threads can inherit a held lock and hang (seen under CPU load)
    with ThreadPool(max(1, workers)) as pool:
        for i, pixels in enumerate(pool.imap(decode_one, paths, chunksize=16)):
            if pixels is not None:
                array[i], ok[i] = pixels, True
    array.flush()
    return ok


def cached_dataset(dataset: Dataset, ok: np.ndarray, out: Path) -> Dataset:
    """The dataset read from the cache `out`: its rows as they are (every member's folds split the same rows), its
    image view as cache rows, the images that did not decode (`ok` false) said and the training ones untrainable."""
    train, test = dataset.views["image"]
    n_train, n_all = len(train), len(train) + len(test)
    bad_train = [str(p) for p, good in zip(train, ok[:n_train]) if p is not None and not good]
    bad_test = [str(p) for p, good in zip(test, ok[n_train:]) if p is not None and not good]
    warnings = list(dataset.warnings)
    if bad_train:
        warnings.append(f"skipped {len(bad_train)} unreadable training image(s) in training, e.g. {bad_train[0]}")
    if bad_test:
        warnings.append(f"{len(bad_test)} unreadable test image(s) predicted from a blank image, e.g. {bad_test[0]}")
    views = {**dataset.views, "image": (list(range(n_train)), list(range(n_train, n_all)))}
    untrainable = ~ok[:n_train] if dataset.untrainable is None else dataset.untrainable | ~ok[:n_train]
    return dataclasses.replace(dataset, views=views, warnings=warnings, image_cache=str(out), untrainable=untrainable)
