"""A downsampled pixel table: every image shrunk once to at most PIXEL_SIDE pixels a side (one gray channel where
the images are gray), into two heads that share it: standardised logistic regression (classes) or ridge (values),
and LightGBM on the pixels. The cheap image members a CPU can train beside the CNN: on small images they are real
baselines of their own, and their errors are not the network's, so the blend can use them.
"""
from __future__ import annotations

import dataclasses
import logging
from multiprocessing.pool import ThreadPool
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image

from runner.data.dataset import MAX_PIXELS
from runner.engines.oneshot import BOOSTED_ROUNDS, MAX_BOOSTED_SECONDS, STARTUP_SECONDS, HeadsOnATable, boosted_seconds
from runner.planning.portfolio import Member, PlanContext, Settings

log = logging.getLogger(__name__)

PIXEL_SIDE = 32  # at most this many pixels a side: 3,072 columns in colour, 1,024 in gray
PRIOR_GAIN = 0.005  # far weaker than a CNN alone; what it adds is errors unlike the network's
DECODES_PER_CORE_SECOND = 400.0  # opening and shrinking a small JPEG or PNG here: 0.5-3 ms; large photos draft
# rows x columns x classes a logistic regression fits per second on one core here: 4000 x 1024 x 10 classes took
# 5.0 s (8e6), 4000 x 3072 x 2 took 0.9 s (2.8e7); the slower, multi-class rate keeps a one-shot fit inside its cut
CELLS_PER_SECOND = 8e6
MAX_CELLS = 1e8  # rows x columns x classes: about 12 s of fit a fold here, the most that is still cheap
BOOSTED_PRIOR_GAIN = 0.01  # trees on pixels: on sklearn's digits LightGBM's defaults beat the linear head


class PixelSettings(Settings):
    C: float = 0.1  # strong regularisation: neighbouring pixels are nearly the same column
    side: int = PIXEL_SIDE
    head: Literal["linear", "boosted"] = "linear"


def table_side(image_side: int) -> int:
    """The pixel table's side: PIXEL_SIDE, or the images' own side when they are smaller (never upscaled)."""
    return min(PIXEL_SIDE, image_side) if image_side else PIXEL_SIDE


def shrink(path: Path | None, side: int) -> np.ndarray | None:
    """The whole image as an RGB square of `side` pixels (aspect not kept: the table wants every pixel of the
    picture, not a crop), or None when it cannot be read or is larger than MAX_PIXELS."""
    if path is None:
        return None
    try:
        with Image.open(path) as image:
            if image.width * image.height > MAX_PIXELS:  # from the header, before anything is decoded
                log.warning("%s: refused: %d x %d pixels, more than %d", path, image.width, image.height, MAX_PIXELS)
                return None
            image.draft("RGB", (side, side))  # JPEG: decode at a reduced scale
            small = image.convert("RGB").resize((side, side), Image.BILINEAR, reducing_gap=2.0)
            return np.asarray(small, dtype=np.uint8)
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        log.debug("cannot read %s: %s", path, exc)
        return None


def _shrink_star(args):
    return shrink(*args)


def pixel_table(paths: list[Path | None], side: int, workers: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows × columns float32 in [0, 1], a mask of the rows that decoded); one channel where every image that
    decoded is gray. Unreadable images are rows of 0.5."""
    cube = np.full((len(paths), side, side, 3), 128, dtype=np.uint8)
    ok = np.zeros(len(paths), dtype=bool)
    # threads: Pillow decodes and resizes without the GIL (as the image cache does)
    with ThreadPool(max(1, workers)) as pool:
        for i, pixels in enumerate(pool.imap(_shrink_star, ((p, side) for p in paths), chunksize=32)):
            if pixels is not None:
                cube[i], ok[i] = pixels, True
    gray = bool(ok.any()) and not np.any(cube[ok].max(axis=3) != cube[ok].min(axis=3))
    cube = cube[..., :1] if gray else cube
    return cube.reshape(len(paths), -1).astype(np.float32) / 255.0, ok


class Pixels(HeadsOnATable):
    name = "pixels"
    inputs = "image"
    preload = ("sklearn.linear_model", "sklearn.preprocessing", "lightgbm", "runner.engines.pixels")
    Settings = PixelSettings
    search_space = dict(C=(0.003, 0.01, 0.03, 0.1, 0.3, 1.0))
    prior_gain = PRIOR_GAIN
    linear_iterations = 300

    def plan(self, context: PlanContext) -> list[Member]:
        data = context.data
        side = table_side(data.image_side)
        columns = side * side * 3  # planned as colour: gray, found while preparing, only makes it cheaper
        rows = data.n_train * (context.folds - 1) / context.folds
        cells = rows * columns * max(1, data.classes if context.spec.is_classification else data.targets)
        if cells > MAX_CELLS:
            return []
        images = data.n_train + data.n_test
        prepare = STARTUP_SECONDS + images * data.decode_each(DECODES_PER_CORE_SECOND) / context.cores
        heads = [("", PixelSettings(side=side), cells / CELLS_PER_SECOND, self.prior_gain, self.describe(context))]
        trees = boosted_seconds(rows, columns, data.classes)
        if context.spec.is_classification and trees <= MAX_BOOSTED_SECONDS:
            heads.append(("-gbm", PixelSettings(side=side, head="boosted"), trees, BOOSTED_PRIOR_GAIN,
                          f"LightGBM ({BOOSTED_ROUNDS} rounds, 32 bins, 30% of the pixels a tree) on the same table"))
        return self.head_members(context, heads, prepare)

    def describe(self, context: PlanContext) -> str:
        side = table_side(context.data.image_side)
        head = "logistic regression" if context.spec.is_classification else "ridge"
        return (f"{head} on every image shrunk to {side}x{side} pixels (gray where the images are gray), "
                f"standardised; prepared once")

    def prepare_key(self, settings: PixelSettings) -> str:
        return f"pixels-{settings.side}"

    def prepare(self, settings: PixelSettings, dataset, work: Path, threads: int):
        train, test = dataset.views["image"]
        table, ok = pixel_table(list(train) + list(test), settings.side, threads)
        n = len(train)
        bad = ~ok[:n]
        untrainable = bad if dataset.untrainable is None else dataset.untrainable | bad
        views = {**dataset.views, "image": (table[:n], table[n:])}
        return dataclasses.replace(dataset, views=views, untrainable=untrainable)
