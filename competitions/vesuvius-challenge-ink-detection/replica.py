"""A synthetic vesuvius-challenge-ink-detection: three papyrus fragments, as MLE-bench keeps the real training ones:
train/1 and train/2 each with its 65 depth slices `surface_volume/00.tif` ... `64.tif` (16-bit TIFFs), `mask.png`
(the papyrus), `inklabels.png` (the ink), `inklabels_rle.csv` (`Id,Predicted`: the ink, row-major run-length) and
`ir.png` (an infrared photo); the test fragment test/a with its slices and mask.png alone. The answers in
private/inklabels_rle.csv (`Id,Predicted,width,height`) and private/gold_submission.csv; the sample marks two
pixels of the top row (`1 1 5 1`).

The papyrus is a sheet lying at a slowly varying depth: slices near it read bright, the air around it dark. Ink is
lines of letters, carbon on carbon: invisible from above, it thickens the sheet, so a pixel with ink reads a little
brighter in the few slices just above the surface. A model of each pixel's depth profile finds it; marking the
whole papyrus scores an F0.5 of about 0.25.

`sizes(scale)`: the fragments are the real ones' 1/128 at any factor; at a share of the real counts (always the
three fragments) they have their real sizes, drawn at DESIGN pixels and enlarged slice by slice.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from runner.common import rle
from runner.demo._layout import describe, is_real, parse_scale
from runner.demo._pictures import folders, smooth_field

REAL_SHAPES = {"1": (8181, 6330), "2": (14830, 9506), "a": (7606, 5249)}  # (height, width); "a" is fragment 3
SHRINK = 128  # the replica's fragments: the real ones over this
SLICES = 65
DESIGN = 1024  # a real-size fragment is drawn with its long side this large, then enlarged
SURFACE = 30.0  # the sheet's mean depth (slice)
INK_LIFT = 5500  # what ink adds to the slices just above the sheet (16-bit units)
LINE_HEIGHT = 9.0  # rows of letters, in the replica's pixels


def shapes(scale: float | str = 1.0) -> dict[str, tuple[int, int]]:
    """Each fragment's (height, width) at `scale`."""
    if is_real(parse_scale(scale)):
        return dict(REAL_SHAPES)
    return {name: (h // SHRINK, w // SHRINK) for name, (h, w) in REAL_SHAPES.items()}


def papyrus(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """The fragment's outline: a rounded blob with ragged edges, most of the image."""
    field = smooth_field(rng, height, width, cells=5)
    y, x = np.ogrid[:height, :width]
    distance = np.hypot((y - height / 2) / (height / 2), (x - width / 2) / (width / 2))
    return distance + 0.25 * field < 0.92


def ink(rng: np.random.Generator, height: int, width: int, unit: float) -> np.ndarray:
    """Lines of letters: short strokes and hooks along rows, about 2 replica pixels thick."""
    picture = Image.new("L", (width, height))
    draw = ImageDraw.Draw(picture)
    stroke = max(1, round(1.6 * unit))
    for row in np.arange(LINE_HEIGHT / 2, height / unit - LINE_HEIGHT / 2, LINE_HEIGHT) * unit:
        x = rng.uniform(2, 6) * unit
        while x < width - 4 * unit:
            glyph = rng.integers(0, 4)
            w, h = rng.uniform(2.5, 4.5) * unit, rng.uniform(4, 6) * unit
            top, bottom = row - h / 2, row + h / 2
            if glyph == 0:
                draw.line([(x, top), (x, bottom)], fill=1, width=stroke)
            elif glyph == 1:
                draw.arc([x, top, x + w, bottom], 0, 300, fill=1, width=stroke)
            elif glyph == 2:
                draw.line([(x, bottom), (x + w / 2, top), (x + w, bottom)], fill=1, width=stroke)
            else:
                draw.line([(x, top), (x + w, top), (x + w / 2, bottom)], fill=1, width=stroke)
            x += w + rng.uniform(1.5, 4) * unit
    return np.asarray(picture) > 0


def volume(rng: np.random.Generator, region: np.ndarray, inked: np.ndarray) -> np.ndarray:
    """(SLICES, height, width) uint16: the sheet bright about its depth, the air dark, the ink a bump above it."""
    height, width = region.shape
    depth = SURFACE + 6 * smooth_field(rng, height, width, cells=3)
    z = np.arange(SLICES, dtype=np.float32)[:, None, None]
    sheet = 30000 * np.exp(-((z - depth) / 3.0) ** 2) * region
    lift = INK_LIFT * np.exp(-((z - (depth - 3.5)) / 2.0) ** 2) * inked
    noise = rng.normal(0, 1800, (SLICES, height, width))
    return np.clip(9000 + sheet + lift + noise, 0, 65535).astype(np.uint16)


def _enlarged(plane: np.ndarray, shape: tuple[int, int], mode: str) -> np.ndarray:
    """A design-size plane at the fragment's real (height, width)."""
    resample = Image.NEAREST if mode == "1" else Image.BILINEAR
    source = Image.fromarray(plane.astype(np.float32 if mode == "F" else np.uint8))
    return np.asarray(source.resize((shape[1], shape[0]), resample))


def write_fragment(folder: Path, name: str, shape: tuple[int, int], rng: np.random.Generator,
                   labelled: bool) -> np.ndarray:
    """Write one fragment's folder (its labels too where `labelled`); its ink mask at full size."""
    height, width = shape
    factor = min(1.0, DESIGN / max(shape))
    small = (max(1, round(height * factor)), max(1, round(width * factor)))
    unit = small[1] / (REAL_SHAPES["a"][1] / SHRINK)
    region = papyrus(rng, *small)
    inked = ink(rng, *small, unit) & region
    stack = volume(rng, region, inked)
    slices = folder / "surface_volume"
    slices.mkdir(parents=True, exist_ok=True)
    import tifffile

    for k, plane in enumerate(stack):
        full = plane if factor == 1.0 else _enlarged(plane, shape, "F").round().astype(np.uint16)
        tifffile.imwrite(slices / f"{k:02}.tif", full)
    if factor < 1.0:
        region = _enlarged(region.astype(np.uint8), shape, "1") > 0
        inked = _enlarged(inked.astype(np.uint8), shape, "1") > 0
    Image.fromarray(region).save(folder / "mask.png")
    if labelled:
        Image.fromarray(inked).save(folder / "inklabels.png")
        pd.DataFrame({"Id": [name], "Predicted": [rle.encode(inked, "row")]}).to_csv(folder / "inklabels_rle.csv",
                                                                                    index=False)
        infrared = np.where(region, 170 - 60 * inked, 20) + rng.normal(0, 6, region.shape)
        Image.fromarray(np.clip(infrared, 0, 255).astype(np.uint8), "L").save(folder / "ir.png")
    return inked


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train/1, train/2, test/a, sample_submission.csv) and prepared/private
    (inklabels_rle.csv, gold_submission.csv)."""
    public, private = folders(root, "train", "test")
    sizes = shapes(scale)
    for name in ("1", "2"):
        write_fragment(public / "train" / name, name, sizes[name], rng, labelled=True)
    inked = write_fragment(public / "test" / "a", "a", sizes["a"], rng, labelled=False)
    height, width = sizes["a"]
    answer = pd.DataFrame({"Id": ["a"], "Predicted": [rle.encode(inked, "row")], "width": [width],
                           "height": [height]})
    answer.to_csv(private / "inklabels_rle.csv", index=False)
    answer[["Id", "Predicted"]].to_csv(private / "gold_submission.csv", index=False)
    pd.DataFrame({"Id": ["a"], "Predicted": ["1 1 5 1"]}).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Vesuvius Challenge - Ink Detection",
             "Find the ink of the test fragment test/a from its 65 surface_volume slices.",
             "Submissions are evaluated on the F0.5 score of the fragment's pixels.",
             "Submit `Id,Predicted`: the ink's pixels run-length encoded, numbered from left to right, then top to "
             "bottom, 1-indexed.")
