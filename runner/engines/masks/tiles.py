"""Tiles of images too large for a batch (hubmap's slides, vesuvius' fragments on their canvas): random crops to
train on, and a grid of overlapping tiles to predict, stitched so that every pixel is taken from exactly one tile,
the one it lies deepest inside (a tile's edge, where its convolutions saw padding, is never used where a
neighbour covers it). Pure NumPy: the network is the caller's."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OVERLAP_SHARE = 0.25  # of a tile's side shared with each neighbour: the outer eighth, seen half-blind, is dropped


@dataclass(frozen=True)
class Span:
    """A tile's place along one axis: where it starts, and the pixels [own_start, own_end) it gives the image."""

    start: int
    own_start: int
    own_end: int


def spans(length: int, tile: int, overlap: int) -> list[Span]:
    """Tiles of `tile` pixels along an axis of `length` (the last flush with the end), each `overlap` pixels over
    its neighbour at least; each owns the pixels from the middle of its overlap with the one before to the middle
    of its overlap with the one after, so that the tiles own every pixel once."""
    if length <= tile:
        return [Span(0, 0, length)]
    step = max(1, tile - overlap)
    count = int(np.ceil((length - tile) / step)) + 1
    starts = np.linspace(0, length - tile, count).round().astype(int)  # evenly spread: no sliver of a last tile
    bounds = [0] + [(int(a) + tile + int(b)) // 2 for a, b in zip(starts[:-1], starts[1:])] + [length]
    return [Span(int(s), bounds[k], bounds[k + 1]) for k, s in enumerate(starts)]


def grid(height: int, width: int, tile: int) -> list[tuple[Span, Span]]:
    """The (rows, columns) spans of every tile of an image, row by row."""
    overlap = int(tile * OVERLAP_SHARE)
    return [(rows, columns) for rows in spans(height, tile, overlap) for columns in spans(width, tile, overlap)]


def cut_tiles(image: np.ndarray, tiles: list[tuple[Span, Span]], tile: int) -> np.ndarray:
    """The tiles' pixels (n, tile, tile, ...) of one image (height, width, ...), as large as the image where it is
    smaller than a tile."""
    th, tw = min(tile, image.shape[0]), min(tile, image.shape[1])
    return np.stack([image[r.start:r.start + th, c.start:c.start + tw] for r, c in tiles])


def stitch(predicted: np.ndarray, tiles: list[tuple[Span, Span]], height: int, width: int) -> np.ndarray:
    """One image's (channels, height, width) from its tiles' predictions (n, channels, tile, tile): each pixel
    from the tile that owns it."""
    out = np.zeros((predicted.shape[1], height, width), dtype=predicted.dtype)
    for values, (r, c) in zip(predicted, tiles):
        out[:, r.own_start:r.own_end, c.own_start:c.own_end] = \
            values[:, r.own_start - r.start:r.own_end - r.start, c.own_start - c.start:c.own_end - c.start]
    return out


def object_pixels(masks: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each image's (rows, columns) of the pixels any of its masks (n, classes, height, width) holds: found once,
    where crops are drawn every epoch."""
    return [np.nonzero(np.asarray(m).max(axis=0)) for m in masks]


def crop_places(rng: np.random.Generator, objects: list[tuple[np.ndarray, np.ndarray]], height: int, width: int,
                count: int, tile: int, on_objects: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(image, top, left) of `count` random crops of `tile` pixels from images of (height, width) whose object
    pixels are `objects` (object_pixels): a share `on_objects` centred on a random object pixel of its image (the
    objects are a sliver of a slide: crops drawn evenly would mostly teach background), the rest anywhere."""
    images = rng.integers(0, len(objects), count)
    tops = rng.integers(0, max(1, height - tile + 1), count)
    lefts = rng.integers(0, max(1, width - tile + 1), count)
    for k in np.flatnonzero(rng.random(count) < on_objects):
        ys, xs = objects[images[k]]
        if len(ys):
            pick = rng.integers(len(ys))
            tops[k] = np.clip(ys[pick] - tile // 2, 0, max(0, height - tile))
            lefts[k] = np.clip(xs[pick] - tile // 2, 0, max(0, width - tile))
    return images, tops, lefts
