"""Shared drawing, sizing and packing helpers for the synthetic image competitions."""
from __future__ import annotations

import io
import multiprocessing
import os
import zipfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from PIL import Image, ImageChops

from runner.units.fork_server import main_hidden

# fewer pixels than this in all are drawn in this process: a worker process takes about a second to start and
# import the package, more than it would save
PARALLEL_PIXELS = 40_000_000


def folders(root: Path, *subfolders: str) -> tuple[Path, Path]:
    """Create prepared/public (with the given subfolders) and prepared/private; return (public, private)."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    for folder in (public, private, *(public / name for name in subfolders)):
        folder.mkdir(parents=True, exist_ok=True)
    return public, private


def hex_ids(rng: np.random.Generator, count: int, length: int) -> list[str]:
    """Distinct lowercase hex strings of the given length."""
    ids: list[str] = []
    seen: set[str] = set()
    while len(ids) < count:
        candidate = rng.bytes((length + 1) // 2).hex()[:length]
        if candidate not in seen:
            seen.add(candidate)
            ids.append(candidate)
    return ids


def quota(shares: tuple[float, ...], count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` class indices in a random order, with class counts as close to `shares` as rounding allows."""
    exact = np.asarray(shares) / sum(shares) * count
    counts = np.floor(exact).astype(int)
    counts[np.argsort(counts - exact)[: count - counts.sum()]] += 1
    return rng.permutation(np.repeat(np.arange(len(shares)), counts))


def mislabelled(labels: np.ndarray, share: float, rng: np.random.Generator) -> np.ndarray:
    """The 0/1 class each image shows: `labels` with `share` of them (rounded) turned to the other class, so that,
    as in real data, some labels are wrong and no model ranks every image right."""
    shown = labels.copy()
    wrong = rng.choice(len(labels), round(share * len(labels)), replace=False)
    shown[wrong] = 1 - shown[wrong]
    return shown


def smooth_field(rng: np.random.Generator, height: int, width: int, cells: int = 4) -> np.ndarray:
    """A smooth random field in [-1, 1]: a coarse random grid upsampled bilinearly."""
    coarse = rng.uniform(-1, 1, (cells, cells)).astype(np.float32)
    return np.asarray(Image.fromarray(coarse).resize((width, height), Image.BILINEAR))


def textured(rng: np.random.Generator, height: int, width: int, colour, swing: float, noise: float) -> np.ndarray:
    """An RGB float canvas: a base colour, slow shading of +-swing and pixel noise."""
    shade = smooth_field(rng, height, width)[..., None] * swing
    return np.asarray(colour, dtype=float) + shade + rng.normal(0, noise, (height, width, 3))


def disc(height: int, width: int, cx: float, cy: float, rx: float, ry: float | None = None) -> np.ndarray:
    """Boolean mask of an axis-aligned ellipse."""
    y, x = np.ogrid[:height, :width]
    ry = rx if ry is None else ry
    return ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 <= 1


def paint(canvas: np.ndarray, mask: np.ndarray, colour, alpha: float = 1.0) -> None:
    canvas[mask] = (1 - alpha) * canvas[mask] + alpha * np.asarray(colour, dtype=float)


def to_image(canvas: np.ndarray) -> Image.Image:
    return Image.fromarray(np.clip(canvas, 0, 255).astype(np.uint8))


def encoded(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def flat_zip(path: Path, members: list[tuple[str, bytes]]) -> None:
    """A deflated zip with every member at its root, no folder prefix."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            archive.writestr(name, data)


def zip_folder_flat(folder: Path, path: Path) -> None:
    """Zip a folder's files at the zip root, as the benchmark's own compress step does; one file in memory at a
    time, so a real-size folder of photos zips as well."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(folder.iterdir()):
            if file.is_file():
                archive.write(file, file.name)


@dataclass(frozen=True)
class Sizes:
    """How many images a replica writes at a scale, and how large: each image's (width, height) is one of
    `cameras` (drawn with their shares) where there are some, else uniform between `smallest` and `largest`."""
    train: int
    test: int
    smallest: tuple[int, int]
    largest: tuple[int, int]
    cameras: tuple[tuple[tuple[int, int], float], ...] = ()

    @classmethod
    def of_cameras(cls, train: int, test: int, cameras: tuple[tuple[tuple[int, int], float], ...]) -> Sizes:
        pixels = [shape[0] * shape[1] for shape, _ in cameras]
        return cls(train, test, cameras[int(np.argmin(pixels))][0], cameras[int(np.argmax(pixels))][0], cameras)

    def shapes(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """(count, 2) widths and heights."""
        if self.cameras:
            shapes, shares = zip(*self.cameras)
            return np.asarray(shapes)[rng.choice(len(shapes), count, p=np.asarray(shares) / sum(shares))]
        low, high = np.asarray(self.smallest), np.asarray(self.largest) + 1
        return rng.integers(low, high, (count, 2))

    def pixels(self, count: int) -> int:
        """About how many pixels `count` images hold: what decides whether drawing them is worth workers."""
        if self.cameras:
            shapes, shares = zip(*self.cameras)
            mean = sum(w * h * s for (w, h), s in zip(shapes, shares)) / sum(shares)
        else:
            mean = np.prod((np.asarray(self.smallest) + self.largest) / 2)
        return int(count * mean)


def workers() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def render(task: Callable[[list, int], list], items: Sequence, rng: np.random.Generator, chunk: int,
           pixels: int) -> list:
    """`task(chunk_of_items, seed)` over `items` in chunks of `chunk`, the results joined in order. Each chunk has
    its own seed drawn here up front, so the pictures are the same however many processes draw them: this one
    below PARALLEL_PIXELS, else one worker a core (spawned, not forked: the caller may hold threads)."""
    chunks = [list(items[i:i + chunk]) for i in range(0, len(items), chunk)]
    seeds = [int(s) for s in rng.integers(0, 2 ** 63, len(chunks))]
    count = min(len(chunks), workers())
    if pixels < PARALLEL_PIXELS or count < 2:
        return [out for part, seed in zip(chunks, seeds) for out in task(part, seed)]
    with ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("spawn")) as pool:
        with main_hidden():  # map submits every chunk, and so starts every worker, before it returns
            results = pool.map(task, chunks, seeds)
        return [out for done in results for out in done]


def smooth_fields(rng: np.random.Generator, count: int, height: int, width: int, cells: int = 4) -> np.ndarray:
    """`count` smooth random fields in [-1, 1] at once, (count, height, width) float32: a coarse random grid each,
    interpolated linearly (the batch form of `smooth_field`)."""
    coarse = rng.uniform(-1, 1, (count, cells, cells)).astype(np.float32)
    return np.einsum("hi,nij,wj->nhw", _linear(height, cells), coarse, _linear(width, cells), optimize=True)


def _linear(size: int, cells: int) -> np.ndarray:
    """(size, cells) weights that interpolate `cells` evenly spread values linearly onto `size` pixel centres."""
    at = np.clip((np.arange(size) + 0.5) * cells / size - 0.5, 0, cells - 1)
    low = np.minimum(at.astype(int), cells - 2)
    weights = np.zeros((size, cells), np.float32)
    weights[np.arange(size), low] = 1 - (at - low)
    weights[np.arange(size), low + 1] = at - low
    return weights


def discs(height: int, width: int, cx, cy, rx, ry=None) -> np.ndarray:
    """(count, height, width) boolean masks of axis-aligned ellipses, one per entry of the (count,) arrays."""
    y, x = np.ogrid[:height, :width]
    rx = np.asarray(rx, np.float32)[:, None, None]
    ry = rx if ry is None else np.asarray(ry, np.float32)[:, None, None]
    return ((x - np.asarray(cx, np.float32)[:, None, None]) / rx) ** 2 + \
        ((y - np.asarray(cy, np.float32)[:, None, None]) / ry) ** 2 <= 1


def paint_batch(canvas: np.ndarray, masks: np.ndarray, colours, alpha) -> None:
    """Blend (count, 3) colours into a (count, height, width, 3) canvas where the (count, height, width) masks
    are set, with a per-image (count,) or shared alpha; only the masked pixels are touched."""
    image, y, x = np.nonzero(masks)
    weight = np.broadcast_to(np.asarray(alpha, np.float32), (len(canvas),))[image, None]
    canvas[image, y, x] += weight * (np.asarray(colours, np.float32)[image] - canvas[image, y, x])


def stamp(count: int, side: int, image: np.ndarray, y: np.ndarray, x: np.ndarray, radius: float) -> np.ndarray:
    """(count, side, side) masks of discs of `radius` pixels around the (image, y, x) points: each disc's own
    pixels indexed, not a whole canvas compared per disc (a patch can hold a hundred nuclei)."""
    reach = int(np.ceil(radius))
    dy, dx = np.nonzero(np.hypot(*np.ogrid[-reach:reach + 1, -reach:reach + 1]) <= radius)
    ys, xs = y[:, None] + dy - reach, x[:, None] + dx - reach
    inside = (ys >= 0) & (ys < side) & (xs >= 0) & (xs < side)
    masks = np.zeros((count, side, side), bool)
    masks[np.broadcast_to(image[:, None], ys.shape)[inside], ys[inside], xs[inside]] = True
    return masks


def grain(image: Image.Image, rng: np.random.Generator, levels: int) -> Image.Image:
    """A photo's fine sensor grain: every channel of every pixel moved by one of `levels` small steps around 0,
    computed in PIL's C loops (a large photo has tens of millions of values)."""
    noise = Image.frombytes(image.mode, image.size, rng.bytes(image.width * image.height * len(image.getbands())))
    table = [128 + v % levels - levels // 2 for v in range(256)] * len(image.getbands())
    return ImageChops.add(image, noise.point(table), 1.0, -128)


def design(shape: tuple[int, int], longest: int) -> tuple[int, int]:
    """The canvas a large photo is drawn on before it is enlarged to `shape`: its long side at most `longest`
    (drawing every pixel of a 24-megapixel photo in numpy would take seconds; its content is smooth anyway)."""
    width, height = shape
    factor = min(1.0, longest / max(width, height))
    return max(1, round(width * factor)), max(1, round(height * factor))
