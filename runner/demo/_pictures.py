"""Shared drawing and packing helpers for the synthetic image competitions."""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image


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
    """Zip a folder's files at the zip root, as the benchmark's own compress step does."""
    flat_zip(path, [(file.name, file.read_bytes()) for file in sorted(folder.iterdir()) if file.is_file()])
