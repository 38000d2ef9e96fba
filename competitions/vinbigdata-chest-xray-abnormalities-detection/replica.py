"""A synthetic vinbigdata-chest-xray-abnormalities-detection: chest radiographs as DICOM files in train/ and test/
(`<image_id>.dicom`, 32-hex ids), the training findings in train.csv (`image_id,class_name,class_id,rad_id,x_min,
y_min,x_max,y_max`: a row per box per radiologist, three radiologists an image, `No finding` rows with empty boxes);
the answers in private/answers.csv (a row per image and class, the first radiologist's box, the no-finding box
0 0 1 1) and private/gold_submission.csv; the sample says `14 1 0 0 1 1` (no finding) for every test image.

About 70% of the radiographs are normal. A finding is a bright (a pneumothorax: dark) patch of its class' size and
grain at its class' place (the aorta's knob, the heart's outline, a lung's base or apex), with the real classes'
shares; each radiologist boxes it a little differently and sometimes misses it. A detector finds them; a classifier
of normal against abnormal lifts the no-finding class; the no-finding box alone scores about 0.05.

`sizes(scale)`: radiographs of 60-72 x 72-80 pixels at a factor of the replica's counts, 2,000-3,000 pixels a side at
the real counts (drawn at DESIGN pixels and enlarged).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, folders, hex_ids, quota
from runner.demo._radiographs import blob, chest, write_dicom

TRAIN, TEST = 200, 100  # the replica's own counts
REAL_TRAIN, REAL_TEST = 13_500, 1_500  # MLE-bench's 90/10 split of the 15,000 labelled radiographs
LEAST = 10
SMALL, LARGE = (60, 72), (72, 80)  # (width, height) bounds of the replica's radiographs
REAL_SMALL, REAL_LARGE = (2_000, 2_200), (3_000, 3_000)
DESIGN = 256  # a larger radiograph is drawn this large, then enlarged
NORMAL = 0.7  # share of radiographs with no finding
NO_FINDING = 14
RADIOLOGISTS = 17
MISSED = 0.15  # a radiologist overlooks a finding this often
# class id: name, real count of boxes, centre (u, v) as shares (u mirrored to either lung where < 0.5), box size
# (w, h) as shares, brightness added, grain
CLASSES = {
    0: ("Aortic enlargement", 7162, (0.56, 0.3), (0.1, 0.1), 0.25, 0.02),
    1: ("Atelectasis", 279, (0.3, 0.68), (0.14, 0.06), 0.2, 0.05),
    2: ("Calcification", 960, (0.3, 0.45), (0.05, 0.05), 0.45, 0.02),
    3: ("Cardiomegaly", 5427, (0.56, 0.66), (0.42, 0.16), 0.18, 0.01),
    4: ("Consolidation", 556, (0.3, 0.5), (0.14, 0.14), 0.3, 0.06),
    5: ("ILD", 1000, (0.3, 0.52), (0.2, 0.3), 0.12, 0.12),
    6: ("Infiltration", 1247, (0.3, 0.48), (0.14, 0.14), 0.2, 0.08),
    7: ("Lung Opacity", 2483, (0.3, 0.45), (0.14, 0.14), 0.25, 0.04),
    8: ("Nodule/Mass", 2580, (0.3, 0.42), (0.07, 0.07), 0.4, 0.03),
    9: ("Other lesion", 2203, (0.3, 0.55), (0.1, 0.1), 0.22, 0.1),
    10: ("Pleural effusion", 2476, (0.2, 0.74), (0.15, 0.12), 0.35, 0.02),
    11: ("Pleural thickening", 4842, (0.2, 0.24), (0.12, 0.06), 0.3, 0.03),
    12: ("Pneumothorax", 226, (0.3, 0.3), (0.15, 0.2), -0.2, 0.01),
    13: ("Pulmonary fibrosis", 4655, (0.3, 0.34), (0.14, 0.12), 0.15, 0.1),
}
FINDINGS = (0.55, 0.3, 0.15)  # shares of abnormal radiographs with 1, 2 or 3 findings


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many radiographs `scale` writes (a factor of the replica's counts, or the real ones) and their sizes."""
    scale = parse_scale(scale)
    small, large = (REAL_SMALL, REAL_LARGE) if is_real(scale) else (SMALL, LARGE)
    return Sizes(scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST), small, large)


def _findings(rng: np.random.Generator, width: int, height: int) -> list[tuple[int, tuple[float, ...]]]:
    """An abnormal radiograph's findings: (class, its true box in pixels)."""
    weights = np.array([CLASSES[c][1] for c in CLASSES], dtype=float)
    count = 1 + int(rng.choice(len(FINDINGS), p=FINDINGS))
    chosen = rng.choice(len(CLASSES), count, replace=False, p=weights / weights.sum())
    out = []
    for label in chosen:
        _, _, (u, v), (w, h), _, _ = CLASSES[int(label)]
        if u < 0.5 and rng.random() < 0.5:
            u = 1 - u
        u, v = u + rng.normal(0, 0.03), v + rng.normal(0, 0.03)
        w, h = w * rng.uniform(0.8, 1.25), h * rng.uniform(0.8, 1.25)
        box = (max(0.0, (u - w / 2) * width), max(0.0, (v - h / 2) * height), min(width - 1.0, (u + w / 2) * width),
               min(height - 1.0, (v + h / 2) * height))
        out.append((int(label), box))
    return out


def radiograph(rng: np.random.Generator, width: int, height: int, findings) -> np.ndarray:
    """The canvas ([0, 1]) of a radiograph with its findings, drawn at most DESIGN pixels long and enlarged."""
    factor = min(1.0, DESIGN / max(width, height))
    small_w, small_h = max(8, round(width * factor)), max(8, round(height * factor))
    canvas = chest(rng, small_h, small_w)
    for label, (x0, y0, x1, y1) in findings:
        _, _, _, _, strength, grain = CLASSES[label]
        blob(canvas, rng, (x0 * factor, y0 * factor, x1 * factor, y1 * factor), strength, grain)
    if factor < 1.0:
        canvas = np.asarray(Image.fromarray(canvas.astype(np.float32)).resize((width, height), Image.BILINEAR))
    return canvas


def _boxes_read(rng: np.random.Generator, image: str, findings, width: int, height: int) -> list[dict]:
    """Three radiologists' rows for one radiograph: each boxes each finding with a little jitter or misses it; one
    who boxes nothing says `No finding`."""
    rows = []
    for reader in rng.choice(np.arange(1, RADIOLOGISTS + 1), 3, replace=False):
        seen = [(label, box) for label, box in findings if rng.random() > MISSED]
        for label, (x0, y0, x1, y1) in seen:
            jitter = rng.normal(0, 0.04, 4) * [x1 - x0, y1 - y0, x1 - x0, y1 - y0]
            x0, y0, x1, y1 = np.round(np.array([x0, y0, x1, y1]) + jitter)
            rows.append({"image_id": image, "class_name": CLASSES[label][0], "class_id": label,
                         "rad_id": f"R{reader}", "x_min": float(max(0, x0)), "y_min": float(max(0, y0)),
                         "x_max": float(min(width - 1, x1)), "y_max": float(min(height - 1, y1))})
        if not seen:
            rows.append({"image_id": image, "class_name": "No finding", "class_id": NO_FINDING, "rad_id": f"R{reader}",
                         "x_min": np.nan, "y_min": np.nan, "x_max": np.nan, "y_max": np.nan})
    return rows


def _split(rng: np.random.Generator, folder: Path, images: list[str], size: Sizes) -> pd.DataFrame:
    """Write the radiographs of `images` into `folder`; their radiologists' rows."""
    normal = quota((NORMAL, 1 - NORMAL), len(images), rng) == 0
    rows = []
    for image, is_normal, (width, height) in zip(images, normal, size.shapes(len(images), rng)):
        findings = [] if is_normal else _findings(rng, int(width), int(height))
        write_dicom(folder / f"{image}.dicom", radiograph(rng, int(width), int(height), findings), rng,
                    inverted=bool(rng.random() < 0.1))
        rows.extend(_boxes_read(rng, image, findings, int(width), int(height)))
    return pd.DataFrame(rows)


def answers_of(rows: pd.DataFrame) -> pd.DataFrame:
    """A row per (image, class), the first radiologist's box; the no-finding box 0 0 1 1 (MLE-bench's answers)."""
    answers = rows.groupby(["image_id", "class_id"]).first().reset_index().fillna(0)
    answers.loc[answers["class_id"] == NO_FINDING, ["x_max", "y_max"]] = 1.0
    return answers


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, train/, test/, sample_submission.csv) and prepared/private (answers.csv,
    gold_submission.csv), as many radiographs as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root, "train", "test")
    images = hex_ids(rng, size.train + size.test, 32)
    train = _split(rng, public / "train", images[:size.train], size)
    train.sample(frac=1.0, random_state=int(rng.integers(2 ** 31))).to_csv(public / "train.csv", index=False)
    test_images = images[size.train:]
    answers = answers_of(_split(rng, public / "test", test_images, size))
    answers.to_csv(private / "answers.csv", index=False)
    gold = answers.assign(PredictionString=[f"{c} 1.0 {a} {b} {d} {e}" for c, a, b, d, e in
                                            answers[["class_id", "x_min", "y_min", "x_max", "y_max"]].itertuples(
                                                index=False)])
    gold.groupby("image_id")["PredictionString"].agg(" ".join).reset_index().to_csv(
        private / "gold_submission.csv", index=False)
    pd.DataFrame({"image_id": test_images, "PredictionString": "14 1 0 0 1 1"}).to_csv(
        public / "sample_submission.csv", index=False)
    describe(public, "VinBigData Chest X-ray Abnormalities Detection",
             "Find the abnormalities of each test radiograph (test/<image_id>.dicom): 14 classes, and 14 for none.",
             "Submissions are evaluated on the COCO mean average precision at IoU 0.4.",
             "Submit `image_id,PredictionString` for every test image: `class confidence x_min y_min x_max y_max` "
             "groups, `14 1 0 0 1 1` for no finding.")
