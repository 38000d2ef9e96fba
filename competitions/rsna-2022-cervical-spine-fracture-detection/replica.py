"""A synthetic rsna-2022-cervical-spine-fracture-detection: a folder of axial CT slices per study, as MLE-bench lays
out its split (whose quirk keeps a tenth of the real studies for training and the rest for test): train.csv
(`StudyInstanceUID,patient_overall,C1..C7`), train_bounding_boxes.csv (the fractures' boxes, slice by slice, of
some training studies), segmentations/<StudyInstanceUID>.nii (the vertebrae's labels of a few), test.csv melted
(`StudyInstanceUID,prediction_type,row_id`: every study's patient_overall row first, then every C1 row, ...),
train_images/<StudyInstanceUID>/<slice>.dcm and test_images/... alike; the sample says 0.5 for every row, the
answers (private/answers.csv) hold `StudyInstanceUID,prediction_type,fractured,row_id`.

Every study is a neck: soft tissue in air, and a column of seven vertebral bodies down the slices, two slices
each, C1 at the top. A fractured vertebra shows a dense fracture line across its body in its slices, so the
study's projections show it at that vertebra's height; patient_overall is whether any is fractured. Each level's
share of fractures is the real one (C7 most, C3 least). A prior of the shares scores about 0.55, as on the real
leaderboard's median; a CNN on the projections finds the lines.

`sizes(scale)`: 32-pixel slices, 14 a study, at a factor of the replica's own study counts; 512-pixel slices,
300 a study, at REAL.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._dicom import CT, Series, uid, write_image
from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import disc, folders

from .nifti import write_labels

TRAIN, TEST = 120, 100  # the replica's own studies
REAL_TRAIN, REAL_TEST = 202, 1817  # MLE-bench's split of the 2,019 studies: a tenth kept to train
SIDE, REAL_SIDE = 32, 512
SLICES, REAL_SLICES = 14, 300  # axial slices a study
LEVELS = ("C1", "C2", "C3", "C4", "C5", "C6", "C7")
SHARES = (0.07, 0.14, 0.04, 0.05, 0.08, 0.14, 0.19)  # each vertebra's share of fractured studies (the real ones)
BOXED, SEGMENTED = 24 / 202, 9 / 202  # the training studies with fracture boxes, with segmentations (the real)
AIR, TISSUE, BONE, FRACTURE = -1000.0, 40.0, 700.0, 1800.0  # Hounsfield units
WINDOW = (400.0, 1800.0)  # a bone window: centre, width
UID_ROOT = "1.2.826.0.1.3680043"  # the real studies' UIDs are this and one number
LEAST = 8


def sizes(scale: float | str = 1.0) -> tuple[int, int, int, int]:
    """(train studies, test studies, slice side, slices a study) at `scale`."""
    scale = parse_scale(scale)
    real = is_real(scale)
    return (scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST),
            REAL_SIDE if real else SIDE, REAL_SLICES if real else SLICES)


def _study(folder: Path, study: str, fractured: np.ndarray, side: int, slices: int, rng: np.random.Generator):
    """One study's slices; returns each fracture's box rows and the vertebrae's label volume (x, y, z)."""
    folder.mkdir(parents=True)
    series = Series(CT, f"{int(rng.integers(10**6))}", study, uid(rng), window=WINDOW, rescale=(1.0, -1024.0))
    cx, cy = side * rng.uniform(0.45, 0.55), side * rng.uniform(0.5, 0.6)
    neck = disc(side, side, side / 2, side / 2, side * 0.4, side * 0.45)
    boxes, labels = [], np.zeros((side, side, slices), dtype=np.uint8)
    for k in range(slices):
        level = min(len(LEVELS) - 1, k * len(LEVELS) // slices)
        body = disc(side, side, cx, cy, side * 0.16, side * 0.12)
        image = np.where(neck, TISSUE, AIR) + rng.normal(0, 20, (side, side))
        image[body] = BONE + rng.normal(0, 60, int(body.sum()))
        labels[..., k] = np.where(body.T, level + 1, 0)
        if fractured[level]:
            height = max(1, side // 16)
            y0 = int(cy + rng.uniform(-0.08, 0.04) * side)
            line = body & (np.arange(side)[:, None] >= y0) & (np.arange(side)[:, None] < y0 + height)
            image[line] = FRACTURE
            xs = np.flatnonzero(line.any(axis=0))
            if len(xs):
                boxes.append((float(xs[0]), float(y0), float(len(xs)), float(height), k + 1))
        write_image(folder / f"{k + 1}.dcm", image, series, k + 1, position=float(-k))  # head first: z falls
    return boxes, labels


def _split(studies: list[str], root: Path, side: int, slices: int, rng: np.random.Generator, kept: tuple = ()):
    """The studies' slices under root: their table, the fracture boxes and label volumes of the studies in `kept`."""
    fractured = rng.random((len(studies), len(LEVELS))) < np.asarray(SHARES)
    boxes, volumes = [], {}
    for k, study in enumerate(studies):
        found, labels = _study(root / study, study, fractured[k], side, slices, rng)
        if k in kept:
            boxes += [(study, *box) for box in found]
            volumes[study] = labels
    table = pd.DataFrame(fractured.astype(int), columns=list(LEVELS))
    table.insert(0, "patient_overall", fractured.any(axis=1).astype(int))
    table.insert(0, "StudyInstanceUID", studies)
    return table, boxes, volumes


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, train_bounding_boxes.csv, test.csv, sample_submission.csv,
    train_images/, test_images/, segmentations/) and prepared/private/answers.csv."""
    train_count, test_count, side, slices = sizes(scale)
    public, private = folders(root, "train_images", "test_images", "segmentations")
    studies = [f"{UID_ROOT}.{n}" for n in rng.choice(30_000, train_count + test_count, replace=False) + 1000]
    boxed = tuple(range(max(1, round(BOXED * train_count))))
    train, boxes, volumes = _split(studies[:train_count], public / "train_images", side, slices, rng, boxed)
    segmented = list(volumes)[: max(1, round(SEGMENTED * train_count))]
    for study in segmented:
        write_labels(public / "segmentations" / f"{study}.nii", volumes[study])
    test, _, _ = _split(studies[train_count:], public / "test_images", side, slices, rng)
    train.to_csv(public / "train.csv", index=False)
    box_columns = ["StudyInstanceUID", "x", "y", "width", "height", "slice_number"]
    pd.DataFrame(boxes, columns=box_columns).to_csv(public / "train_bounding_boxes.csv", index=False)
    answers = test.melt(id_vars="StudyInstanceUID", var_name="prediction_type", value_name="fractured")
    answers["row_id"] = answers["StudyInstanceUID"] + "_" + answers["prediction_type"]
    answers.to_csv(private / "answers.csv", index=False)
    answers[["row_id"]].assign(fractured=0.5).to_csv(public / "sample_submission.csv", index=False)
    answers.drop(columns=["fractured"]).to_csv(public / "test.csv", index=False)
    describe(public, "RSNA 2022 Cervical Spine Fracture Detection",
             "Predict, for each CT study in test_images/ (a folder of DICOM slices), the probability that each "
             "cervical vertebra C1-C7 is fractured and that any is (patient_overall); test.csv lists a row per "
             "study and prediction type.",
             "Submissions are evaluated on a weighted multi-label logarithmic loss: patient_overall weighs 7 and "
             "each vertebra 1 where the truth is negative, twice that where it is positive; each study's weighted "
             "mean, averaged over studies.",
             "Submit `row_id,fractured` for every row of test.csv.")
