"""The images cached once at the masks' own size, shared read-only by all of a member's folds.

Each image is decoded into a uint8 array (n, height, width, 3) on disk, train rows then test rows, resized (never
cropped) only where its size is not the mask's, so every cached pixel lines up with its mask's; a picture of
more than 8 bits a pixel is scaled between its own percentiles first. Unreadable training
images are marked untrainable (predicted, never fitted), as the timm engine's cache does.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from PIL import Image

from runner.common.errors import InputError
from runner.data.canvas import TIFF_SUFFIXES, image_size
from runner.data.dataset import MAX_PIXELS, Dataset
from runner.data.decoders import scaled
from runner.engines.image_cache import cached_dataset, write_cache

log = logging.getLogger(__name__)


def cache_name(height: int, width: int) -> str:
    return f"masks_{height}x{width}"


def _eight_bit(image: Image.Image) -> Image.Image:
    """A picture of more than 8 bits a pixel (uw-madison's 16-bit MRI slices) scaled between its own percentiles:
    converted as it is, every value past 255 would be white."""
    if not image.mode.startswith("I") and image.mode != "F":
        return image
    return Image.fromarray(scaled(np.asarray(image)))


def _colour(array: np.ndarray) -> np.ndarray:
    """A TIFF page's pixels as (height, width, 3) uint8: channels moved last, gray repeated, beyond three dropped,
    more than 8 bits scaled between their percentiles."""
    array = np.squeeze(array)
    if array.ndim == 3 and array.shape[0] in (3, 4) and array.shape[-1] not in (3, 4):
        array = np.moveaxis(array, 0, -1)
    if array.ndim == 2:
        array = np.repeat(array[..., None], 3, axis=-1)
    array = array[..., :3]
    return array if array.dtype == np.uint8 else scaled(array)


def large_tiff(path: Path, height: int, width: int) -> np.ndarray:
    """A slide too large for Pillow (hubmap's 20,000-50,000 pixels a side) at `height` x `width`: its smallest
    pyramid level at least that large where the file has levels, else the whole page, shrunk by area."""
    import tifffile

    with tifffile.TiffFile(path) as tiff:
        levels = list(tiff.series[0].levels)
        large = [lv for lv in levels if min(sorted(lv.shape)[-2:]) >= min(height, width)]  # its shorter side
        array = _colour((large[-1] if large else levels[0]).asarray())
    return np.asarray(Image.fromarray(array).resize((width, height), Image.BOX), dtype=np.uint8)


def decode_at(path: Path | None, height: int, width: int) -> np.ndarray | None:
    """An RGB array of `height` x `width` (the image resized to it where it differs), or None when unreadable or
    larger than MAX_PIXELS (a TIFF read by tifffile instead: a whole slide, shrunk to a canvas)."""
    if path is None:
        return None
    try:
        if Path(path).suffix.lower() in TIFF_SUFFIXES and _pixels(path) > MAX_PIXELS:
            return large_tiff(Path(path), height, width)
        with Image.open(path) as image:
            if image.width * image.height > MAX_PIXELS:
                log.warning("%s: refused: %d x %d pixels, more than %d", path, image.width, image.height, MAX_PIXELS)
                return None
            image = _eight_bit(image).convert("RGB")
            if image.size != (width, height):
                image = image.resize((width, height), Image.BILINEAR)
            return np.asarray(image, dtype=np.uint8)
    except (OSError, SyntaxError, ValueError, InputError, Image.DecompressionBombError) as exc:
        log.debug("cannot decode %s: %s", path, exc)
        return None


def _pixels(path: Path) -> int:
    height, width = image_size(Path(path))
    return height * width


def prepare_masks(dataset: Dataset, height: int, width: int, work_dir: Path, workers: int) -> Dataset:
    """The dataset with its images cached at the masks' size and its image view as cache rows (train 0..n-1,
    test n..: runner.engines.image_cache)."""
    train, test = dataset.views["image"]
    out = work_dir / f"{cache_name(height, width)}.npy"
    ok = write_cache(list(train) + list(test), height, width, lambda path: decode_at(path, height, width), out,
                     workers)
    return cached_dataset(dataset, ok, out)
