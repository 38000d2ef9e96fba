"""The radiographs (and pages) cached once as squares of the network's side, shared read-only by all of a member's
folds.

Each image is stretched (never cropped: boxes are shares of the whole image) to `side` x `side` (uint8,
runner.engines.image_cache's layout, train rows then test rows; a gray radiograph the same in its three channels).
Unreadable training images are marked untrainable (predicted, never fitted), as the other picture engines' caches
do.
"""
from __future__ import annotations

from multiprocessing.pool import ThreadPool
from pathlib import Path

import numpy as np

from runner.common.box_rows import picture_size
from runner.data.dataset import Dataset, decode_square
from runner.engines.image_cache import cached_dataset, write_cache


def cache_name(side: int, what: str = "centres") -> str:
    return f"{what}_{side}"


def prepare_radiographs(dataset: Dataset, side: int, work_dir: Path, workers: int,
                        what: str = "centres") -> Dataset:
    """The dataset with its images cached at `side` and its image view as cache rows (runner.engines.image_cache)."""
    train, test = dataset.views["image"]
    out = work_dir / f"{cache_name(side, what)}.npy"
    ok = write_cache(list(train) + list(test), side, side, lambda path: decode_square(path, side, whole=True), out,
                     workers)
    return cached_dataset(dataset, ok, out)


def sizes_path(cache: str | Path) -> Path:
    """Where the pages' own sizes lie beside their cache."""
    return Path(cache).with_name(f"{Path(cache).stem}_sizes.npy")


def prepare_pages(dataset: Dataset, side: int, work_dir: Path, workers: int) -> Dataset:
    """The pages cached as the radiographs are (stretched to `side`) and each page's own (width, height) beside
    the cache (`sizes_path`): a character's place is learned in the cache's cells and written in the page's
    pixels."""
    cached = prepare_radiographs(dataset, side, work_dir, workers, "pages")
    train, test = dataset.views["image"]
    with ThreadPool(max(1, workers)) as pool:
        sizes = pool.map(picture_size, list(train) + list(test), chunksize=64)  # unreadable: 1 x 1
    np.save(sizes_path(cached.image_cache), np.array(sizes, dtype=np.float64).reshape(-1, 2))
    return cached
