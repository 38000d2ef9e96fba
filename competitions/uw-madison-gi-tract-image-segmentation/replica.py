"""A synthetic uw-madison-gi-tract-image-segmentation: abdominal MRI scans as 16-bit PNG slices nested
`train/<case>/<case>_<day>/scans/slice_<nnnn>_<width>_<height>_<spacing>_<spacing>.png` (and under test/), the
training organs in train.csv (`id,class,segmentation`: three rows a slice, large_bowel, small_bowel and stomach,
row-major run-length strings, an empty cell where the organ is not in the slice), the test rows in test.csv
(`id,class`); the answers in private/test.csv (`id,class,predicted,image_width,image_height`), the sample marks
`1 1 5 2` on every row. As MLE-bench splits it, a tenth of the cases are tested whole, and the days after a
case's fourth are tested too.

A scan is a body's soft tissue in dark air; the stomach is a bright, smooth ellipsoid high in the scan on one side,
the small bowel a cluster of bright coils in the middle, the large bowel a grainy ring around them lower down; each
case-day places, sizes and tilts them its own way. A model of each pixel's brightness, grain and place in the scan
finds them; each organ's frequency by depth and place, as a constant blob, scores about 0.5.

`sizes(scale)`: cases (a tenth tested), with scans of SLICES slices of 39-60 pixels at a factor of the replica's
counts; the real 85 cases with 144-slice scans of 234-360 pixels at the real counts.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from runner.common import rle
from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, folders, smooth_fields

CASES, REAL_CASES = 10, 85  # cases: the replica's, the real ones
SLICES, REAL_SLICES = 20, 144  # slices a scan
LEAST = 4
# scanners: (width, height, spacing) of the real slices and their shares; the replica's are a sixth as large
SCANNERS = (((266, 266, "1.50"), 0.7), ((234, 234, "1.50"), 0.08), ((276, 276, "1.63"), 0.12),
            ((360, 310, "1.50"), 0.1))
SHRINK = 6
DAYS = (1, 6)  # scan days a case has, at least and at most
TESTED_DAYS = 4  # a training case's days past this many are tested (MLE-bench's rule)
CLASSES = ("large_bowel", "small_bowel", "stomach")
# each organ: centre (x, y) as a share of the slice, radii as shares, depth centre and half-extent as shares of the
# scan, and brightness (16-bit)
ORGANS = {"stomach": ((0.62, 0.36), (0.16, 0.12), 0.68, 0.2, 1500),
          "small_bowel": ((0.48, 0.55), (0.2, 0.14), 0.45, 0.25, 1250),
          "large_bowel": ((0.5, 0.52), (0.3, 0.24), 0.35, 0.25, 1100)}


def sizes(scale: float | str = 1.0) -> Sizes:
    """Cases at `scale` (a tenth of them tested, at least one) and their slices' (width, height) bounds."""
    scale = parse_scale(scale)
    cases = scaled(CASES, REAL_CASES, scale, LEAST)
    test = max(1, int(np.ceil(cases * 0.1)))
    shrink = 1 if is_real(scale) else SHRINK
    shapes = [(w // shrink, h // shrink) for (w, h, _), _ in SCANNERS]
    return Sizes(cases - test, test, min(shapes), max(shapes))


def _organ_masks(rng: np.random.Generator, depth: int, height: int, width: int) -> dict[str, np.ndarray]:
    """Each organ's (depth, height, width) mask in one scan: an ellipsoid (the large bowel a ring of one, the
    small bowel coils in one), placed, sized and tilted by the case-day."""
    z = ((np.arange(depth) + 0.5) / depth)[:, None, None]
    y = ((np.arange(height) + 0.5) / height)[None, :, None]
    x = ((np.arange(width) + 0.5) / width)[None, None, :]
    masks = {}
    for name, ((cx, cy), (rx, ry), cz, rz, _) in ORGANS.items():
        cx, cy, cz = cx + rng.normal(0, 0.04), cy + rng.normal(0, 0.04), cz + rng.normal(0, 0.05)
        rx, ry, rz = rx * rng.uniform(0.8, 1.2), ry * rng.uniform(0.8, 1.2), rz * rng.uniform(0.8, 1.2)
        tilt = rng.normal(0, 0.08)
        across = ((x - cx - tilt * (z - cz)) / rx) ** 2 + ((y - cy) / ry) ** 2
        reach = 1 - ((z - cz) / rz) ** 2
        inside = across <= reach
        if name == "large_bowel":  # a ring: the inner part belongs to the small bowel's space
            inside &= across >= 0.45 * reach
        elif name == "small_bowel":  # coils: a cluster of bright loops, half the ellipsoid
            coils = np.sin(x * 60 + rng.uniform(0, 6)) * np.sin(y * 55 + rng.uniform(0, 6)) > -0.2
            inside &= coils
        masks[name] = inside
    return masks


def scan(rng: np.random.Generator, depth: int, height: int, width: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """One scan's (depth, height, width) uint16 slices and its organs' masks."""
    masks = _organ_masks(rng, depth, height, width)
    y = ((np.arange(height) + 0.5) / height)[:, None]
    x = ((np.arange(width) + 0.5) / width)[None, :]
    body = ((x - 0.5) / 0.46) ** 2 + ((y - 0.52) / 0.4) ** 2 <= 1
    shade = smooth_fields(rng, depth, height, width, cells=4)
    image = np.where(body, 520 + 120 * shade, 30) + rng.normal(0, 45, (depth, height, width))
    grain = rng.normal(0, 1, (depth, height, width))
    for name, mask in masks.items():
        bright = ORGANS[name][4]
        texture = 200 * grain if name == "large_bowel" else 60 * grain
        image = np.where(mask, bright + texture + 80 * shade, image)
    return np.clip(image, 0, 65535).astype(np.uint16), masks


def _case_days(rng: np.random.Generator, cases: int) -> list[tuple[str, list[str]]]:
    numbers = rng.choice(np.arange(1, 160), cases, replace=False)
    out = []
    for number in numbers:
        days = sorted(rng.choice(np.arange(0, 40), int(rng.integers(DAYS[0], DAYS[1] + 1)), replace=False))
        out.append((f"case{number}", [f"day{d}" for d in days]))
    return out


def _write_scan(folder: Path, case: str, day: str, depth: int, scanner: tuple, shrink: int,
                rng: np.random.Generator) -> list[dict]:
    """Write one case-day's slices below `folder`; its rows (id, class, segmentation, width, height)."""
    (width, height, spacing) = scanner
    width, height = width // shrink, height // shrink
    scans = folder / case / f"{case}_{day}" / "scans"
    scans.mkdir(parents=True, exist_ok=True)
    slices, masks = scan(rng, depth, height, width)
    rows = []
    for k in range(depth):
        name = f"slice_{k + 1:04}"
        Image.fromarray(slices[k]).save(scans / f"{name}_{width}_{height}_{spacing}_{spacing}.png")
        for organ in CLASSES:
            rows.append({"id": f"{case}_{day}_{name}", "class": organ,
                         "segmentation": rle.encode(masks[organ][k], "row"), "image_width": float(width),
                         "image_height": float(height)})
    return rows


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, train/, test/, sample_submission.csv) and prepared/private/test.csv,
    as many cases as `sizes(scale)` says."""
    size = sizes(scale)
    real = is_real(parse_scale(scale))
    shrink, depth = (1, REAL_SLICES) if real else (SHRINK, SLICES)
    public, private = folders(root, "train", "test")
    cases = _case_days(rng, size.train + size.test)
    tested_cases = {case for case, _ in cases[:size.test]}
    scanners, shares = zip(*SCANNERS)
    train_rows, test_rows = [], []
    for case, days in sorted(cases, key=lambda _: rng.random()):  # the real train.csv's own order of cases
        scanner = scanners[rng.choice(len(scanners), p=np.asarray(shares) / sum(shares))]
        for k, day in enumerate(days):
            tested = case in tested_cases or k >= TESTED_DAYS
            rows = _write_scan(public / ("test" if tested else "train"), case, day, depth, scanner, shrink, rng)
            (test_rows if tested else train_rows).extend(rows)
    train, test = pd.DataFrame(train_rows), pd.DataFrame(test_rows)
    train[["id", "class", "segmentation"]].to_csv(public / "train.csv", index=False)
    answers = test.rename(columns={"segmentation": "predicted"})
    answers.to_csv(private / "test.csv", index=False)
    answers[["id", "class"]].to_csv(public / "test.csv", index=False)
    answers[["id", "class"]].assign(predicted="1 1 5 2").to_csv(public / "sample_submission.csv", index=False)
    describe(public, "UW-Madison GI Tract Image Segmentation",
             "Segment the large bowel, small bowel and stomach in each test slice (test/<case>/<case>_<day>/scans/).",
             "Submissions are evaluated on 0.4 x the mean Dice coefficient plus 0.6 x (1 - the mean 3D Hausdorff "
             "distance).",
             "Submit `id,class,predicted` for every row of test.csv, in its order: each organ's pixels run-length "
             "encoded, 1-indexed; an empty string where the organ is not in the slice.")
