"""Decode every image once into a uint8 array on disk, shared read-only by all fold processes.

Decoding JPEGs is the slow part of small-image training (about 500 img/s per core here); folds and epochs then
read pixels from a memory map instead. Unreadable images are found here, once.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from runner.data.dataset import Dataset
from runner.data.dataset import decode_square as decode
from runner.engines.image_cache import cached_dataset, write_cache


def cache_side(image_size: int, source_side: int = 0) -> int:
    """Side of the cached square: a little larger than the training crop, as in ImageNet's 0.875 eval crop, but
    never above the images' own side (`source_side`, 0: unknown) unless training is larger still: then the
    training size, as storing more pixels than either would only be upscaling."""
    side = int(round(image_size / 0.875))
    return max(image_size, min(side, source_side)) if source_side else side


def build_cache(paths: list[Path | None], side: int, out: Path, workers: int) -> np.ndarray:
    """Write the images into `out` (.npy, n × side × side × 3); returns a mask of those that decoded."""
    return write_cache(paths, side, side, lambda path: decode(path, side), out, workers)


def prepare_images(dataset: Dataset, image_size: int, work_dir: Path, workers: int,
                   source_side: int = 0) -> Dataset:
    """The dataset with its images cached (runner.engines.image_cache.cached_dataset). The cache's side comes from
    the plan's settings (`image_size`, `source_side`), as the engine's prepare key does."""
    train, test = dataset.views["image"]
    out = work_dir / f"images_{cache_side(image_size, source_side)}.npy"
    return cached_dataset(dataset, build_cache(list(train) + list(test), cache_side(image_size, source_side), out,
                                               workers), out)
