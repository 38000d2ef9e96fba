"""A synthetic hubmap-kidney-segmentation: RGB whole-slide TIFFs of kidney tissue in train/ and test/, each beside
its glomeruli's polygons (`<id>.json`) and its cortex and medulla (`<id>-anatomical-structure.json`), GeoJSON-like
feature lists as the real ones; train.csv (`id,encoding`) holds the training slides' glomerulus masks as
column-major run-length strings, HuBMAP-20-dataset_information.csv every slide's size and donor; the answers in
private/test.csv (`id,encoding,width_pixels,height_pixels`) and private/gold_submission.csv; the sample (also
in test/) leaves every mask empty. As MLE-bench splits it, 12 slides train and 3 test, and each test slide's
polygons are in test/ (its known leak: the answers, drawn).

A slide is pale glass around a pink, grainy kidney section; its outer band is the cortex, where the glomeruli lie:
round tufts of dark purple, each ringed by a thin pale space. A model of each pixel's colour and its surroundings
finds them; marking every pixel scores a mean Dice of about 0.1.

`sizes(scale)`: slides of 160-240 pixels a side at a factor of the replica's counts (at least the 15 slides),
some 25,000-40,000 pixels a side at the real counts, drawn at DESIGN pixels and enlarged tile by tile.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, folders, hex_ids, smooth_field

TRAIN, TEST = 12, 3  # MLE-bench's split of the 15 labelled slides, at every scale
SMALL, LARGE = (160, 160), (240, 240)  # the replica's slides: width and height drawn between these
REAL_SMALL, REAL_LARGE = (25_000, 25_000), (40_000, 38_000)  # the real slides span about these
DESIGN = 1024  # a real-size slide is drawn this large, then enlarged tile by tile
TILE = 1024  # pixels a side of a TIFF tile, and columns of a mask encoded at once
GLOMERULI = (14, 26)  # per slide
RADIUS = (5.0, 8.0)  # a glomerulus' radius on the replica's 200-pixel slides
CORTEX = 0.28  # the cortex' share of the tissue's half-width
DONORS = ("White", "Black or African American", "Asian")


def sizes(scale: float | str = 1.0) -> Sizes:
    """The slides `scale` writes: always MLE-bench's 12 and 3 (a factor above 1 repeats none), their sizes
    between `smallest` and `largest`."""
    scale = parse_scale(scale)
    small, large = (REAL_SMALL, REAL_LARGE) if is_real(scale) else (SMALL, LARGE)
    return Sizes(scaled(TRAIN, TRAIN, scale, TRAIN), scaled(TEST, TEST, scale, TEST), small, large)


def _outline(cx: float, cy: float, rx: float, ry: float, rng: np.random.Generator, points: int,
             jitter: float) -> list[tuple[float, float]]:
    angles = np.sort(rng.uniform(0, 2 * np.pi, points))
    wobble = 1 + rng.uniform(-jitter, jitter, points)
    return list(zip(cx + rx * wobble * np.cos(angles), cy + ry * wobble * np.sin(angles)))


def design_slide(rng: np.random.Generator, width: int, height: int, unit: float):
    """A slide drawn at (width, height): its RGB canvas (uint8), its glomeruli's outlines and its cortex' and
    medulla's outlines, all in its pixels; `unit` is its pixels per replica pixel."""
    cx, cy, rx, ry = width / 2, height / 2, width * 0.44, height * 0.42
    tissue, medulla = _outline(cx, cy, rx, ry, rng, 40, 0.05), _outline(cx, cy, rx * (1 - CORTEX * 2),
                                                                         ry * (1 - CORTEX * 2), rng, 30, 0.08)
    inside = Image.new("L", (width, height))
    ImageDraw.Draw(inside).polygon(tissue, fill=1)
    core = Image.new("L", (width, height))
    ImageDraw.Draw(core).polygon(medulla, fill=1)
    tissue_mask, medulla_mask = np.asarray(inside) > 0, np.asarray(core) > 0
    shade = smooth_field(rng, height, width, cells=6)[..., None]
    pink = np.array([228, 160, 190]) + shade * 18 + rng.normal(0, 9, (height, width, 3))
    pink[medulla_mask] += (8, 12, 4)
    canvas = np.where(tissue_mask[..., None], pink, np.array([243, 240, 244]) + rng.normal(0, 3, (height, width, 3)))
    cortex = tissue_mask & ~medulla_mask
    ys, xs = np.nonzero(cortex)
    glomeruli = []
    for k in rng.integers(0, len(xs), int(rng.integers(*GLOMERULI))):
        radius = rng.uniform(*RADIUS) * unit
        outline = _outline(xs[k], ys[k], radius, radius * rng.uniform(0.8, 1.1), rng, 18, 0.08)
        ring = Image.new("L", (width, height))
        draw = ImageDraw.Draw(ring)
        draw.polygon(_outline(xs[k], ys[k], radius * 1.35, radius * 1.35, rng, 18, 0.05), fill=1)
        draw.polygon(outline, fill=2)
        marks = np.asarray(ring)
        canvas[marks == 1] = np.array([246, 226, 236]) + rng.normal(0, 4, ((marks == 1).sum(), 3))
        canvas[marks == 2] = np.array([150, 70, 140]) + rng.normal(0, 14, ((marks == 2).sum(), 3))
        glomeruli.append(outline)
    return np.clip(canvas, 0, 255).astype(np.uint8), glomeruli, tissue, medulla


def _tiles(canvas: np.ndarray, width: int, height: int, rng: np.random.Generator):
    """The slide at (width, height), tile by tile in rows: each the canvas' part enlarged, with fresh grain (an edge
    tile padded, as TIFF tiles are)."""
    picture = Image.fromarray(canvas)
    fx, fy = canvas.shape[1] / width, canvas.shape[0] / height
    for top in range(0, height, TILE):
        for left in range(0, width, TILE):
            right, bottom = min(left + TILE, width), min(top + TILE, height)
            part = picture.resize((right - left, bottom - top), Image.BILINEAR,
                                  box=(left * fx, top * fy, right * fx, bottom * fy))
            tile = np.zeros((TILE, TILE, 3), np.uint8)
            grained = np.asarray(part, dtype=np.int16) + rng.integers(-3, 4, (bottom - top, right - left, 3))
            tile[:bottom - top, :right - left] = np.clip(grained, 0, 255)
            yield tile


def encode_polygons(outlines: list, width: int, height: int) -> str:
    """The column-major run-length string of the polygons filled, drawn TILE columns at a time (a slide's whole
    mask would be billions of pixels)."""
    runs: list[list[int]] = []
    for left in range(0, width, TILE):
        span = min(TILE, width - left)
        strip = Image.new("1", (span, height))
        draw = ImageDraw.Draw(strip)
        for outline in outlines:
            xs = [x for x, _ in outline]
            if max(xs) >= left and min(xs) < left + span:
                draw.polygon([(x - left, y) for x, y in outline], fill=1)
        flat = np.asarray(strip).T.ravel()
        edges = np.diff(np.concatenate([[0], flat.astype(np.int8), [0]]))
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        for start, end in zip(starts + left * height + 1, ends - starts):
            if runs and runs[-1][0] + runs[-1][1] == start:  # a run going on over the strips' seam
                runs[-1][1] += int(end)
            else:
                runs.append([int(start), int(end)])
    return " ".join(f"{s} {n}" for s, n in runs)


def _features(outlines: list, names: list[str], colour: int) -> list[dict]:
    return [{"type": "Feature", "id": "PathAnnotationObject",
             "geometry": {"type": "Polygon", "coordinates": [[[int(round(x)), int(round(y))] for x, y in outline]]},
             "properties": {"classification": {"name": name, "colorRGB": colour}, "isLocked": name != "glomerulus",
                            "measurements": []}}
            for outline, name in zip(outlines, names)]


def write_slide(folder: Path, slide: str, width: int, height: int, rng: np.random.Generator) -> str:
    """Write `<slide>.tiff` and its two JSON files into `folder`; its mask's run-length string."""
    import tifffile

    factor = min(1.0, DESIGN / max(width, height))
    design_width, design_height = max(1, round(width * factor)), max(1, round(height * factor))
    canvas, glomeruli, tissue, medulla = design_slide(rng, design_width, design_height,
                                                      design_width / ((SMALL[0] + LARGE[0]) / 2))
    scale = 1 / factor
    glomeruli = [[(x * scale, y * scale) for x, y in outline] for outline in glomeruli]
    if factor == 1.0:
        tifffile.imwrite(folder / f"{slide}.tiff", canvas, photometric="rgb")
    else:
        tifffile.imwrite(folder / f"{slide}.tiff", _tiles(canvas, width, height, rng), shape=(height, width, 3),
                         dtype=np.uint8, tile=(TILE, TILE), photometric="rgb")
    (folder / f"{slide}.json").write_text(json.dumps(_features(glomeruli, ["glomerulus"] * len(glomeruli),
                                                               -3140401)))
    structures = [[(x * scale, y * scale) for x, y in outline] for outline in (tissue, medulla)]
    (folder / f"{slide}-anatomical-structure.json").write_text(
        json.dumps(_features(structures, ["Cortex", "Medulla"], -16711936)))
    return encode_polygons(glomeruli, width, height)


def _information(rng: np.random.Generator, slides: list[str], shapes: np.ndarray) -> pd.DataFrame:
    count = len(slides)
    weight, height = rng.uniform(55, 110, count).round(1), rng.uniform(155, 190, count).round(1)
    cortex = rng.integers(40, 90, count)
    return pd.DataFrame({
        "image_file": [f"{s}.tiff" for s in slides], "width_pixels": shapes[:, 0], "height_pixels": shapes[:, 1],
        "anatomical_structures_segmention_file": [f"{s}-anatomical-structure.json" for s in slides],
        "glomerulus_segmentation_file": [f"{s}.json" for s in slides],
        "patient_number": rng.integers(60_000, 70_000, count), "race": rng.choice(DONORS, count),
        "ethnicity": "Not Hispanic or Latino", "sex": rng.choice(["Male", "Female"], count),
        "age": rng.integers(30, 78, count), "weight_kilograms": weight, "height_centimeters": height,
        "bmi_kg/m^2": (weight / (height / 100) ** 2).round(1), "laterality": rng.choice(["Left", "Right"], count),
        "percent_cortex": cortex, "percent_medulla": 100 - cortex})


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train/, test/, train.csv, HuBMAP-20-dataset_information.csv, sample_submission.csv)
    and prepared/private (test.csv, gold_submission.csv)."""
    size = sizes(scale)
    public, private = folders(root, "train", "test")
    slides = hex_ids(rng, size.train + size.test, 9)
    shapes = size.shapes(len(slides), rng)
    encodings = [write_slide(public / ("train" if i < size.train else "test"), slide, int(w), int(h), rng)
                 for i, (slide, (w, h)) in enumerate(zip(slides, shapes))]
    frame = pd.DataFrame({"id": slides, "encoding": encodings, "width_pixels": shapes[:, 0],
                          "height_pixels": shapes[:, 1]})
    frame[["id", "encoding"]][:size.train].to_csv(public / "train.csv", index=False)
    answers = frame[size.train:]
    answers.to_csv(private / "test.csv", index=False)
    order = rng.permutation(len(slides))  # the information file keeps the real download's own order
    _information(rng, [slides[i] for i in order], shapes[order]).to_csv(
        public / "HuBMAP-20-dataset_information.csv", index=False)
    sample = pd.DataFrame({"id": answers["id"], "predicted": ""})
    sample.to_csv(public / "sample_submission.csv", index=False)
    shutil.copy(public / "sample_submission.csv", public / "test" / "sample_submission.csv")
    answers[["id"]].assign(predicted=answers["encoding"]).to_csv(private / "gold_submission.csv", index=False)
    describe(public, "HuBMAP - Hacking the Kidney",
             "Segment the glomeruli of each test slide (test/<id>.tiff).",
             "Submissions are evaluated on the mean Dice coefficient over the test slides.",
             "Submit `id,predicted` for every test slide: run-length pairs numbered from top to bottom, then left "
             "to right, 1-indexed.")
