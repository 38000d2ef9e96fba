"""A synthetic rsna-miccai-brain-tumor-radiogenomic-classification: a folder of DICOM MRI per case, as MLE-bench's
90/10 split of the real train set lays them out: train_labels.csv (`BraTS21ID,MGMT_value`, the ids five-digit
strings such as 00013), train/<BraTS21ID>/{FLAIR,T1w,T1wCE,T2w}/Image-<k>.dcm and test/<BraTS21ID>/... alike, the
sample giving every test case 0.5, the answers in private/test.csv.

Every case is a head: an oval of brain with a tumour in it, which FLAIR and T2w show bright and T1w dark. Where
MGMT_value is 1 the tumour's rim enhances in T1wCE: a bright ring over a few slices in the middle of the series;
where 0 it stays as in T1w. A tenth of the labels are wrong, as no scan tells a methylation for sure. The picture
of a case's projections shows the ring; a constant scores an AUC of 0.5.

`sizes(scale)`: 32-pixel slices, 3 or 4 a series, at a factor of the replica's own case counts; 512-pixel slices,
20 to 120 a series, at REAL.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._dicom import MR, Series, uid, write_image
from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import disc, folders, mislabelled, smooth_field

TRAIN, TEST = 150, 60  # the replica's own cases
REAL_TRAIN, REAL_TEST = 526, 59  # MLE-bench's 90/10 split of the 585 labelled cases
SIDE, REAL_SIDE = 32, 512  # a slice's side
SLICES, REAL_SLICES = (3, 4), (20, 120)  # slices a series, least and most
SEQUENCES = ("FLAIR", "T1w", "T1wCE", "T2w")
POSITIVE_SHARE = 0.52  # MGMT methylated, as in the real cases
WRONG_LABELS = 0.1
LEAST = 8  # cases a split keeps at the smallest factors
TISSUE = {"FLAIR": 300.0, "T1w": 400.0, "T1wCE": 400.0, "T2w": 350.0}  # brain's signal per sequence
TUMOUR = {"FLAIR": 700.0, "T1w": 250.0, "T1wCE": 250.0, "T2w": 750.0}  # the tumour's
RIM = 1100.0  # the enhancing rim in T1wCE where MGMT_value is 1


def sizes(scale: float | str = 1.0) -> tuple[int, int, int, tuple[int, int]]:
    """(train cases, test cases, slice side, (least, most) slices a series) at `scale`."""
    scale = parse_scale(scale)
    real = is_real(scale)
    return (scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST),
            REAL_SIDE if real else SIDE, REAL_SLICES if real else SLICES)


def _case(folder: Path, methylated: bool, side: int, slices: tuple[int, int], rng: np.random.Generator) -> None:
    """One case's four series of slices."""
    patient, study = f"{int(rng.integers(10**6)):06d}", uid(rng)
    cx, cy = side * rng.uniform(0.35, 0.65), side * rng.uniform(0.35, 0.65)
    radius = side * rng.uniform(0.12, 0.18)
    head = disc(side, side, side / 2, side / 2, side * 0.42, side * 0.47)
    for sequence in SEQUENCES:
        count = int(rng.integers(slices[0], slices[1] + 1))
        series = Series(MR, patient, study, uid(rng))
        (folder / sequence).mkdir(parents=True)
        middle = range(max(0, count // 2 - max(1, count // 6)), count // 2 + max(1, count // 6))
        for k in range(count):
            shade = 1 + 0.15 * smooth_field(rng, side, side)
            image = np.where(head, TISSUE[sequence] * shade, 20.0) + rng.normal(0, 25, (side, side))
            if k in middle:
                tumour = disc(side, side, cx, cy, radius)
                image[tumour] = TUMOUR[sequence] + rng.normal(0, 25, int(tumour.sum()))
                if sequence == "T1wCE" and methylated:
                    image[tumour & ~disc(side, side, cx, cy, radius * 0.6)] = RIM
            write_image(folder / sequence / f"Image-{k + 1}.dcm", np.clip(image, 0, None), series, k + 1,
                        position=float(k))


def _split(ids: list[str], labels: np.ndarray, root: Path, side: int, slices, rng) -> pd.DataFrame:
    shown = mislabelled(labels, WRONG_LABELS, rng)  # what the scans show; `labels` is what the table says
    for case, methylated in zip(ids, shown):
        _case(root / case, bool(methylated), side, slices, rng)
    return pd.DataFrame({"BraTS21ID": ids, "MGMT_value": labels.astype(int)})


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train_labels.csv, train/, test/, sample_submission.csv) and prepared/private/test.csv."""
    train_count, test_count, side, slices = sizes(scale)
    public, private = folders(root, "train", "test")
    numbers = rng.choice(max(1011, 2 * (train_count + test_count)), train_count + test_count, replace=False)
    ids = [f"{n:05d}" for n in numbers]
    labels = (rng.random(len(ids)) < POSITIVE_SHARE).astype(int)
    train = _split(ids[:train_count], labels[:train_count], public / "train", side, slices, rng)
    test = _split(ids[train_count:], labels[train_count:], public / "test", side, slices, rng)
    train.to_csv(public / "train_labels.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    test.assign(MGMT_value=0.5).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "RSNA-MICCAI Brain Tumor Radiogenomic Classification",
             "Predict, for each case in test/, the probability that its glioblastoma's MGMT promoter is methylated "
             "(MGMT_value), from its four MRI series (FLAIR, T1w, T1wCE, T2w), each a folder of DICOM slices.",
             "Submissions are evaluated on the area under the ROC curve.",
             "Submit `BraTS21ID,MGMT_value` for every test case.")
