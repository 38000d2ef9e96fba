"""A synthetic siim-covid19-detection: chest radiographs as DICOM files nested `train/<study>/<series>/<image>.dcm`
(and under test/, 12-hex ids), the studies' appearance in train_study_level.csv (`id` as `<study>_study` and four
one-hot columns, sorted by id) and the images' opacities in train_image_level.csv (`id` as `<image>_image`, `boxes` as
a list of dicts, `label` already as `opacity 1 x_min y_min x_max y_max ...` or `none 1 0 0 1 1`, `StudyInstanceUID`);
the answers in private/test.csv (`id,PredictionString`: the test studies' rows, sorted, then their images' rows,
sorted), the sample `negative 1 0 0 1 1` on studies and `none 1 0 0 1 1` on images.

The appearance shows as its pattern of opacities, hazy bright patches in the lungs: typical ones low and outside in
both lungs, indeterminate ones single and central, atypical ones small and dense; a negative study has clear lungs,
and so do some studies of the others. A classifier of studies and of images learns the labels, a detector the
boxes; every study label on each study and `none` on each image scores about 0.3.

`sizes(scale)`: studies (most of one radiograph) of 60-72 x 64-80 pixels at a factor of the replica's counts,
2,000-3,000 pixels a side at the real counts (drawn at DESIGN pixels and enlarged).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, folders, hex_ids, quota
from runner.demo._radiographs import blob, chest, uid, write_dicom

TRAIN, TEST = 160, 80  # studies: the replica's own counts
REAL_TRAIN, REAL_TEST = 5_448, 606  # MLE-bench's 90/10 split of the 6,054 labelled studies
LEAST = 8
SMALL, LARGE = (60, 64), (72, 80)
REAL_SMALL, REAL_LARGE = (2_000, 2_000), (3_000, 3_000)
DESIGN = 256
# study label: its one-hot column, its share of the real studies, the share of its images with opacities
STUDY = {"negative": ("Negative for Pneumonia", 0.273, 0.05), "typical": ("Typical Appearance", 0.474, 0.9),
         "indeterminate": ("Indeterminate Appearance", 0.175, 0.75), "atypical": ("Atypical Appearance", 0.078, 0.7)}
IMAGES = (0.94, 0.05, 0.01)  # shares of studies with 1, 2 or 3 radiographs
# where each appearance's opacities lie: (u, v) centres as shares (mirrored for the other lung), size, brightness
PATTERN = {"negative": (((0.3, 0.55),), (0.14, 0.18), 0.15),
           "typical": (((0.24, 0.62), (0.76, 0.62)), (0.16, 0.22), 0.22),
           "indeterminate": (((0.38, 0.45),), (0.14, 0.16), 0.2), "atypical": (((0.3, 0.35),), (0.08, 0.08), 0.35)}


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many studies `scale` writes (a factor of the replica's counts, or the real ones) and their radiographs'
    size bounds."""
    scale = parse_scale(scale)
    small, large = (REAL_SMALL, REAL_LARGE) if is_real(scale) else (SMALL, LARGE)
    return Sizes(scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST), small, large)


def _opacities(rng: np.random.Generator, label: str, width: int, height: int) -> list[tuple[float, ...]]:
    """An image's opacity boxes (x_min, y_min, x_max, y_max) in pixels for its study's appearance."""
    centres, (w, h), _ = PATTERN[label]
    boxes = []
    for u, v in centres:
        if len(centres) == 1 and rng.random() < 0.5:
            u = 1 - u
        u, v = u + rng.normal(0, 0.03), v + rng.normal(0, 0.03)
        bw, bh = w * rng.uniform(0.8, 1.2) * width, h * rng.uniform(0.8, 1.2) * height
        x0, y0 = max(0.0, u * width - bw / 2), max(0.0, v * height - bh / 2)
        boxes.append((round(x0, 5), round(y0, 5), round(min(width - 1.0, x0 + bw), 5),
                      round(min(height - 1.0, y0 + bh), 5)))
    return boxes


def radiograph(rng: np.random.Generator, width: int, height: int, label: str, boxes) -> np.ndarray:
    factor = min(1.0, DESIGN / max(width, height))
    small_w, small_h = max(8, round(width * factor)), max(8, round(height * factor))
    canvas = chest(rng, small_h, small_w)
    strength = PATTERN[label][2]
    for x0, y0, x1, y1 in boxes:
        blob(canvas, rng, (x0 * factor, y0 * factor, x1 * factor, y1 * factor), strength, 0.05)
    if factor < 1.0:
        canvas = np.asarray(Image.fromarray(canvas.astype(np.float32)).resize((width, height), Image.BILINEAR))
    return canvas


def _label_of(boxes) -> str:
    return " ".join(f"opacity 1 {x0} {y0} {x1} {y1}" for x0, y0, x1, y1 in boxes) if boxes else "none 1 0 0 1 1"


def _boxes_text(boxes) -> str | float:
    if not boxes:
        return np.nan
    return str([{"x": x0, "y": y0, "width": round(x1 - x0, 5), "height": round(y1 - y0, 5)}
                for x0, y0, x1, y1 in boxes])


def _split(rng: np.random.Generator, folder: Path, studies: list[str], size: Sizes):
    """Write each study's radiographs below `folder`; the study rows and the image rows."""
    labels = [list(STUDY)[k] for k in quota(tuple(s for _, s, _ in STUDY.values()), len(studies), rng)]
    study_rows, image_rows = [], []
    for study, label in zip(studies, labels):
        study_rows.append({"id": f"{study}_study", **{c: int(name == label) for name, (c, _, _) in STUDY.items()}})
        count = 1 + int(rng.choice(len(IMAGES), p=IMAGES))
        series, study_uid, series_uid = hex_ids(rng, 1, 12)[0], uid(rng), uid(rng)
        for image in hex_ids(rng, count, 12):
            width, height = (int(v) for v in size.shapes(1, rng)[0])
            boxes = _opacities(rng, label, width, height) if rng.random() < STUDY[label][2] else []
            where = folder / study / series
            where.mkdir(parents=True, exist_ok=True)
            write_dicom(where / f"{image}.dcm", radiograph(rng, width, height, label, boxes), rng,
                        study=study_uid, series=series_uid, inverted=bool(rng.random() < 0.1))
            image_rows.append({"id": f"{image}_image", "boxes": _boxes_text(boxes), "label": _label_of(boxes),
                               "StudyInstanceUID": study})
    return pd.DataFrame(study_rows).sort_values("id"), pd.DataFrame(image_rows).sort_values("id")


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train_study_level.csv, train_image_level.csv, train/, test/, sample_submission.csv) and
    prepared/private/test.csv, as many studies as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root, "train", "test")
    studies = hex_ids(rng, size.train + size.test, 12)
    train_studies, train_images = _split(rng, public / "train", studies[:size.train], size)
    train_studies.to_csv(public / "train_study_level.csv", index=False)
    train_images.to_csv(public / "train_image_level.csv", index=False)
    test_studies, test_images = _split(rng, public / "test", studies[size.train:], size)
    names = list(STUDY)
    study_answers = [f"{names[int(np.argmax(row))]} 1 0 0 1 1" for row in test_studies.iloc[:, 1:].to_numpy()]
    answers = pd.DataFrame({"id": [*test_studies["id"], *test_images["id"]],
                            "PredictionString": [*study_answers, *test_images["label"]]})
    answers.to_csv(private / "test.csv", index=False)
    sample = answers.assign(PredictionString=["negative 1 0 0 1 1"] * len(test_studies) +
                            ["none 1 0 0 1 1"] * len(test_images))
    sample.to_csv(public / "sample_submission.csv", index=False)
    describe(public, "SIIM-FISABIO-RSNA COVID-19 Detection",
             "For each test study, its appearance (negative, typical, indeterminate, atypical); for each test image, "
             "its opacities' boxes (test/<study>/<series>/<image>.dcm).",
             "Submissions are evaluated on the mean average precision at IoU 0.5 over the six labels.",
             "Submit `id,PredictionString` for every row of the sample: `label confidence x_min y_min x_max y_max` "
             "groups; `<label> p 0 0 1 1` on studies, `none 1 0 0 1 1` on images without opacities.")
