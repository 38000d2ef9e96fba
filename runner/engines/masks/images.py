"""The images cached once at the masks' own size, shared read-only by all of a member's folds.

Each image is decoded into a uint8 array (n, height, width, 3) on disk, train rows then test rows, resized (never
cropped) only where its size is not the mask's, so every cached pixel lines up with its mask's; a picture of
more than 8 bits a pixel is scaled between its own percentiles first. Unreadable training
images are marked untrainable (predicted, never fitted), as the timm engine's cache does.
"""
from __future__ import annotations

import dataclasses
import logging
from multiprocessing.pool import ThreadPool
from pathlib import Path

import numpy as np
from numpy.lib.format import open_memmap
from PIL import Image

from runner.data.dataset import MAX_PIXELS, Dataset
from runner.data.decoders import scaled

log = logging.getLogger(__name__)


def cache_name(height: int, width: int) -> str:
    return f"masks_{height}x{width}"


def _eight_bit(image: Image.Image) -> Image.Image:
    """A picture of more than 8 bits a pixel (uw-madison's 16-bit MRI slices) scaled between its own percentiles:
    converted as it is, every value past 255 would be white."""
    if not image.mode.startswith("I") and image.mode != "F":
        return image
    return Image.fromarray(scaled(np.asarray(image)))


def decode_at(path: Path | None, height: int, width: int) -> np.ndarray | None:
    """An RGB array of `height` x `width` (the image resized to it where it differs), or None when unreadable or
    larger than MAX_PIXELS."""
    if path is None:
        return None
    try:
        with Image.open(path) as image:
            if image.width * image.height > MAX_PIXELS:
                log.warning("%s: refused: %d x %d pixels, more than %d", path, image.width, image.height, MAX_PIXELS)
                return None
            image = _eight_bit(image).convert("RGB")
            if image.size != (width, height):
                image = image.resize((width, height), Image.BILINEAR)
            return np.asarray(image, dtype=np.uint8)
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        log.debug("cannot decode %s: %s", path, exc)
        return None


def build_cache(paths: list[Path | None], height: int, width: int, out: Path, workers: int) -> np.ndarray:
    """Write the images into `out` (.npy, n x height x width x 3); returns a mask of those that decoded."""
    array = open_memmap(out, mode="w+", dtype=np.uint8, shape=(len(paths), height, width, 3))
    ok = np.zeros(len(paths), dtype=bool)
    # threads, as the timm engine's cache: Pillow decodes without the GIL, and a fork from a threaded unit can hang
    with ThreadPool(max(1, workers)) as pool:
        for i, pixels in enumerate(pool.imap(lambda p: decode_at(p, height, width), paths, chunksize=16)):
            if pixels is not None:
                array[i], ok[i] = pixels, True
    array.flush()
    return ok


def prepare_masks(dataset: Dataset, height: int, width: int, work_dir: Path, workers: int) -> Dataset:
    """The dataset with its images cached and its image view as cache rows (train 0..n-1, test n..)."""
    train, test = dataset.views["image"]
    paths = list(train) + list(test)
    out = work_dir / f"{cache_name(height, width)}.npy"
    ok = build_cache(paths, height, width, out, workers)
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
