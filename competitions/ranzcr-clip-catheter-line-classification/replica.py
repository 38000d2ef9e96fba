"""A synthetic ranzcr-clip-catheter-line-classification: grayscale JPEG chest X-rays with tubes and lines.

Each X-ray shows a body with dark lungs, a bright spine and heart, faint ribs and stray ECG leads. Devices are
thin bright lines with a radio-opaque tip, and each label has its own course: an endotracheal tube (ETT) down
the trachea, normal above the carina, borderline lower, abnormal bending into a bronchus; a nasogastric tube
(NGT) curling in the stomach (normal), stopping at the diaphragm (borderline), veering into a lung (abnormal) or
leaving the bottom edge (incompletely imaged); zero to two central venous catheters (CVC) from a shoulder,
reaching the midline (normal), stopping short (borderline) or turning up the neck (abnormal); and sometimes a
Swan Ganz catheter looping through the heart. Labels are multi-label (two CVCs can give two CVC labels).
train_annotations.csv holds the drawn line coordinates for most train studies that have devices. A small CNN
reaches a mean ROC AUC over the 9 scored labels of roughly 0.8-0.9; the sample submission's zeros score 0.5.

`sizes(scale)` says how many X-rays a scale writes and how large: 64x64 at a factor of the replica's own counts,
2532x3056 at REAL. The anatomy is drawn in the replica's 64-pixel units on a canvas at most DESIGN pixels long
and enlarged; the lines, leads and tips are drawn at full size, where the annotations' coordinates are. Chunks of
X-rays are drawn by worker processes when there are many pixels.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, design, folders, hex_ids, render, smooth_field

SIZE = 64  # the replica's X-rays are square, and the anatomy is drawn in units of its pixels at every size
# the real X-rays vary in size; many are this large, portrait as a detector plate
REAL_WIDTH, REAL_HEIGHT = 2532, 3056
TRAIN, TEST = 220, 60  # the replica's own counts
REAL_TRAIN, REAL_TEST = 27_074, 3_009  # 30,083 labelled X-rays, 10% of them the test split
LEAST = 20  # studies a split keeps at the smallest factors: fewer rarely give every label 2 positives and 2 negatives
LABELS = ("ETT - Abnormal", "ETT - Borderline", "ETT - Normal", "NGT - Abnormal", "NGT - Borderline",
          "NGT - Incompletely Imaged", "NGT - Normal", "CVC - Abnormal", "CVC - Borderline", "CVC - Normal",
          "Swan Ganz Catheter Present")
SCORED = LABELS[:9]  # the grader scores these 9; the sample submission has only them
ETT = {"ETT - Abnormal": 0.12, "ETT - Borderline": 0.15, "ETT - Normal": 0.28}  # the rest have no ETT
NGT = {"NGT - Abnormal": 0.12, "NGT - Borderline": 0.13, "NGT - Incompletely Imaged": 0.15, "NGT - Normal": 0.22}
CVC = {"CVC - Abnormal": 0.15, "CVC - Borderline": 0.30, "CVC - Normal": 0.55}  # per catheter
CVC_COUNT = (0.12, 0.63, 0.25)  # studies with 0, 1 or 2 CVCs
SWAN_GANZ = 0.12
LINE_WIDTH = 2  # pixels: a 1-pixel line at 64 px is lost to a small CNN's first stride
LINE_SHARE = 1 / 128  # a line's width on a larger X-ray: still about 2 pixels when a CNN shrinks it to 256
DESIGN = 512  # a larger X-ray's long side while its anatomy is drawn: the body is smooth at this size
# pixel noise at 64 px; an enlarged X-ray's canvas gets NOISE * 64 / its width: noise is what JPEG cannot shrink,
# and so a real-size X-ray's file is some 430 KB, 13 GB for the real counts as the real download's 13.1 GB
NOISE = 6
CHUNK = 8  # X-rays one task draws: a few seconds of work at the real size
ANNOTATED = 0.6  # share of train studies with devices that have line annotations
UID_ROOT = "1.2.826.0.1.3680043.8.498."
# each course as (offset from the midline, times the side it enters from; depth), in fractions of the image
COURSES = {
    "ETT - Normal": ((0, 0), (0, 0.30)),
    "ETT - Borderline": ((0, 0), (0, 0.44)),
    "ETT - Abnormal": ((0, 0), (0, 0.42), (-0.12, 0.55)),
    "NGT - Normal": ((-0.03, 0), (-0.03, 0.5), (0.05, 0.78), (0.18, 0.86), (0.16, 0.78)),
    "NGT - Borderline": ((-0.03, 0), (-0.03, 0.5), (0.0, 0.64)),
    "NGT - Abnormal": ((-0.03, 0), (-0.03, 0.3), (-0.2, 0.5), (-0.25, 0.62)),
    "NGT - Incompletely Imaged": ((-0.03, 0), (-0.03, 0.5), (0.0, 0.8), (0.02, 1.02)),
    "CVC - Normal": ((0.45, 0.12), (0.2, 0.2), (0.03, 0.3), (0.03, 0.42)),
    "CVC - Borderline": ((0.45, 0.12), (0.2, 0.2), (0.13, 0.25)),
    "CVC - Abnormal": ((0.45, 0.12), (0.2, 0.2), (0.1, 0.13), (0.1, -0.02)),
    "Swan Ganz Catheter Present": ((0.45, 0.12), (0.2, 0.2), (0.03, 0.4), (0.05, 0.56), (-0.08, 0.5), (-0.15, 0.42)),
}


def _pick(shares: dict[str, float], rng: np.random.Generator) -> str | None:
    names = list(shares) + [None]
    return names[rng.choice(len(names), p=[*shares.values(), 1 - sum(shares.values())])]


def _devices(rng: np.random.Generator) -> list[tuple[str, int]]:
    """(label, side) for each line in one study; side is the shoulder a line enters from."""
    devices = [(label, 1) for label in (_pick(ETT, rng), _pick(NGT, rng)) if label]
    sides = rng.permutation([-1, 1])
    devices += [(_pick(CVC, rng), int(sides[k])) for k in range(rng.choice(3, p=CVC_COUNT))]
    if rng.random() < SWAN_GANZ:
        devices.append(("Swan Ganz Catheter Present", int(rng.choice([-1, 1]))))
    return devices


def _studies(count: int, rng: np.random.Generator) -> list[list[tuple[str, int]]]:
    """Device lists for `count` studies, redrawn until every label has at least 2 positives and 2 negatives."""
    while True:
        studies = [_devices(rng) for _ in range(count)]
        positives = [sum(any(label == name for name, _ in study) for study in studies) for label in LABELS]
        if min(positives) >= 2 and max(positives) <= count - 2:
            return studies


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many X-rays `scale` writes (a factor of the replica's own counts, or REAL) and their pixel size."""
    scale = parse_scale(scale)
    shape = (REAL_WIDTH, REAL_HEIGHT) if is_real(scale) else (SIZE, SIZE)
    return Sizes(scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST), shape, shape)


def _course(label: str, side: int, rng: np.random.Generator, shape: tuple[int, int]) -> list[list[int]]:
    """The line's points in the full-size X-ray's pixels, as the annotations give them."""
    jitter, (width, height) = rng.normal(0, 0.02, 2), shape
    return [[int(round((0.5 + side * dx + jitter[0]) * width)), int(round((y + jitter[1] * (y > 0)) * height))]
            for dx, y in COURSES[label]]


def _ellipse(y: np.ndarray, x: np.ndarray, cx: float, cy: float, rx: float, ry: float) -> np.ndarray:
    return ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 <= 1


def _chest(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """The body on a width x height canvas, drawn on a grid of the replica's 64-pixel units (at 64 px, its pixels)."""
    y = ((np.arange(height) + 0.5) * SIZE / height - 0.5)[:, None]
    x = ((np.arange(width) + 0.5) * SIZE / width - 0.5)[None, :]
    canvas = np.full((height, width), 25.0) + 80 * _ellipse(y, x, 32, 38, 29, 31)
    for cx in (19, 45):
        canvas[_ellipse(y, x, cx + rng.normal(0, 1), 33, 10, 17)] = 55 + rng.normal(0, 6)
    canvas += 30 * (np.abs(x - 32) < 4) * (y > 4) + 45 * _ellipse(y, x, 37, 46, 10, 8)
    canvas -= 45 * (np.abs(x - 32) < 2) * (y < 24)
    for k in range(5):
        canvas += 14 * (np.abs(y - (18 + 7 * k) - 0.02 * (x - 32) ** 2) < 1.0)
    noise = NOISE * min(1.0, SIZE / width)
    return canvas * (1 + 0.12 * smooth_field(rng, height, width)) + rng.normal(0, noise, (height, width))


def xray(lines: list[tuple[str, list[list[int]]]], rng: np.random.Generator,
         shape: tuple[int, int] = (SIZE, SIZE)) -> Image.Image:
    """One X-ray of `shape` (width, height) with the given lines, their points in its pixels."""
    canvas = design(shape, DESIGN)
    image = Image.fromarray(np.clip(_chest(rng, *canvas), 0, 255).astype(np.uint8))
    if canvas != tuple(shape):
        image = image.resize(tuple(shape), Image.BICUBIC)
    line, unit = max(LINE_WIDTH, round(shape[0] * LINE_SHARE)), np.asarray(shape) / SIZE
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(0, 4))):  # ECG leads: rings, some over the lungs
        (cx, cy), (rx, ry) = rng.uniform(4, SIZE - 4, 2) * unit, 2 * unit
        draw.ellipse((cx - rx, cy - ry, cx + rx, cy + ry), outline=200, width=max(1, line // 2))
    for _, points in lines:
        draw.line([tuple(p) for p in points], fill=int(rng.integers(215, 245)), width=line)
        tx, ty = points[-1]  # the radio-opaque tip: a square twice the line's width
        draw.rectangle((tx - line, ty - line, tx + line - 1, ty + line - 1), fill=255)
    return image


def _xrays(items: list[tuple[str, list]], seed: int, folder: Path, shape: tuple[int, int]) -> list:
    """Write folder/<uid>.jpg for each (uid, lines): one task's chunk, drawn from its own seed."""
    rng = np.random.default_rng(seed)
    for uid, lines in items:
        xray(lines, rng, shape).save(folder / f"{uid}.jpg", quality=int(rng.integers(85, 96)))
    return []


def _uid(rng: np.random.Generator) -> str:
    digits = rng.integers(0, 10, int(rng.integers(36, 39)))
    return UID_ROOT + str(int(rng.integers(1, 10))) + "".join(map(str, digits))


def _split(count: int, folder: Path, patients: list[str], size: Sizes, rng: np.random.Generator):
    """The train-format table of one split and the line annotations of its studies; the X-rays drawn last."""
    rows, annotations, items = [], [], []
    for devices in _studies(count, rng):
        uid = _uid(rng)
        lines = [(label, _course(label, side, rng, size.smallest)) for label, side in devices]
        items.append((uid, lines))
        present = {label for label, _ in devices}
        rows.append({"StudyInstanceUID": uid, **{name: int(name in present) for name in LABELS},
                     "PatientID": patients[int(rng.integers(len(patients)))]})
        if lines and rng.random() < ANNOTATED:
            annotations += [{"StudyInstanceUID": uid, "label": label, "data": str(points)} for label, points in lines]
    render(partial(_xrays, folder=folder, shape=size.smallest), items, rng, CHUNK, size.pixels(count))
    return pd.DataFrame(rows), pd.DataFrame(annotations, columns=["StudyInstanceUID", "label", "data"])


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, train_annotations.csv, sample_submission.csv, train/, test/) and
    prepared/private/test.csv, as many X-rays as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root, "train", "test")
    patients = hex_ids(rng, (size.train + size.test) * 2 // 3, 9)
    train, annotations = _split(size.train, public / "train", patients, size, rng)
    test, _ = _split(size.test, public / "test", patients, size, rng)
    train.to_csv(public / "train.csv", index=False)
    annotations.to_csv(public / "train_annotations.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    test[["StudyInstanceUID"]].assign(**{name: 0 for name in SCORED}).to_csv(
        public / "sample_submission.csv", index=False)
    describe(public, "RANZCR CLiP - Catheter and Line Position Challenge",
             "Predict, for each chest X-ray in test/, the probability of each tube/line label (ETT, NGT and CVC "
             "positions). Several labels can be present in one image.",
             "Submissions are evaluated on area under the ROC curve, computed for each label and averaged "
             "(mean column-wise ROC AUC).",
             "Submit `StudyInstanceUID` and one probability column per label in sample_submission.csv.")
