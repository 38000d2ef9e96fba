"""The radiographs cached once as squares of the detector's side, shared read-only by all of a member's folds.

Each image is stretched (never cropped: boxes are shares of the whole image) to `side` x `side` (uint8,
runner.engines.image_cache's layout, train rows then test rows; a gray radiograph the same in its three channels).
Unreadable training images are marked untrainable (predicted, never fitted), as the other picture engines' caches
do.
"""
from __future__ import annotations

from pathlib import Path

from runner.data.dataset import Dataset, decode_square
from runner.engines.image_cache import cached_dataset, write_cache


def cache_name(side: int) -> str:
    return f"centres_{side}"


def prepare_radiographs(dataset: Dataset, side: int, work_dir: Path, workers: int) -> Dataset:
    """The dataset with its images cached at `side` and its image view as cache rows (runner.engines.image_cache)."""
    train, test = dataset.views["image"]
    out = work_dir / f"{cache_name(side)}.npy"
    ok = write_cache(list(train) + list(test), side, side, lambda path: decode_square(path, side, whole=True), out,
                     workers)
    return cached_dataset(dataset, ok, out)
