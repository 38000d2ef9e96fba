"""A synthetic osic-pulmonary-fibrosis-progression: patients' lung function over their visits, as MLE-bench's
90/10 split of the real patients lays it out: train.csv (`Patient,Weeks,FVC,Percent,Age,Sex,SmokingStatus`, every
visit of the training patients), test.csv (each test patient's first visit), a baseline chest CT per patient
(train/<Patient>/<n>.dcm, test/<Patient>/... alike), the sample a row per test patient and week from the test
visits' first week to their last (`Patient_Week,FVC,Confidence` = 2000, 100), and private/test.csv that grid with
the measured visits' columns (NaN elsewhere) and `Patient_Week,Confidence` after them.

A patient's FVC (ml) starts from what their sex and age give, and falls by a slope of their own each week, faster
for smokers, with a visit-to-visit noise of about 100 ml; Percent is FVC against the expected for their age and
sex. The first visit and the weeks since it tell most of a later FVC. The train mean with its best spread scores
a Laplace log-likelihood of about -8; a table model of the first visit and the weeks since it, about -7. The CT
slices are noise: the real ones add little.

`sizes(scale)`: 16-pixel CT slices, 2 a patient, at a factor of the replica's own patient counts; 512-pixel
slices, 12 to 400 a patient, at REAL.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._dicom import CT, Series, uid, write_image
from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import folders

TRAIN, TEST = 150, 40  # the replica's own patients
REAL_TRAIN, REAL_TEST = 158, 18  # MLE-bench's 90/10 split of the 176 patients
SIDE, REAL_SIDE = 16, 512
SLICES, REAL_SLICES = (2, 2), (12, 400)
VISITS = (6, 10)  # a patient's visits, least and most
SMOKING = (("Ex-smoker", 0.67), ("Never smoked", 0.28), ("Currently smokes", 0.05))
SLOPE = {"Ex-smoker": -4.0, "Never smoked": -2.5, "Currently smokes": -7.0}  # ml a week, on average
SLOPE_SPREAD = 3.0  # between patients, ml a week
NOISE = 100.0  # ml, visit to visit
LEAST = 8


def sizes(scale: float | str = 1.0) -> tuple[int, int, int, tuple[int, int]]:
    """(train patients, test patients, CT slice side, (least, most) slices a patient) at `scale`."""
    scale = parse_scale(scale)
    real = is_real(scale)
    return (scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST),
            REAL_SIDE if real else SIDE, REAL_SLICES if real else SLICES)


def _visits(patient: str, rng: np.random.Generator) -> pd.DataFrame:
    sex = "Male" if rng.random() < 0.79 else "Female"
    age = int(rng.integers(49, 89))
    smoking = str(rng.choice([s for s, _ in SMOKING], p=[p for _, p in SMOKING]))
    expected = (4500.0 if sex == "Male" else 3200.0) - 25.0 * (age - 50)
    start = expected * rng.uniform(0.45, 0.95)
    slope = SLOPE[smoking] + rng.normal(0, SLOPE_SPREAD)
    first = int(rng.integers(-5, 15))
    weeks = np.unique(first + np.concatenate([[0], np.cumsum(rng.integers(3, 16, int(rng.integers(*VISITS)) - 1))]))
    fvc = np.round(start + slope * (weeks - first) + rng.normal(0, NOISE, len(weeks))).astype(int)
    return pd.DataFrame({"Patient": patient, "Weeks": weeks, "FVC": fvc, "Percent": 100 * fvc / expected,
                         "Age": age, "Sex": sex, "SmokingStatus": smoking})


def _scan(folder: Path, patient: str, side: int, slices: tuple[int, int], rng: np.random.Generator) -> None:
    """A baseline CT: lungs (air) in a chest, a few slices."""
    folder.mkdir(parents=True)
    series = Series(CT, patient, uid(rng), uid(rng), window=(-600.0, 1500.0), rescale=(1.0, -1024.0))
    y, x = np.ogrid[:side, :side]
    chest = ((x - side / 2) / (side * 0.45)) ** 2 + ((y - side / 2) / (side * 0.35)) ** 2 <= 1
    for k in range(int(rng.integers(slices[0], slices[1] + 1))):
        image = np.where(chest, -800.0, -1000.0) + rng.normal(0, 30, (side, side))
        write_image(folder / f"{k + 1}.dcm", image, series, k + 1, position=float(k))


def _grid(test: pd.DataFrame) -> pd.DataFrame:
    """Every test patient at every week from the test visits' first to their last, the visits' columns where
    measured."""
    weeks = range(int(test["Weeks"].min()), int(test["Weeks"].max()) + 1)
    grid = pd.DataFrame([(p, w) for p in test["Patient"].unique() for w in weeks], columns=["Patient", "Weeks"])
    grid = grid.merge(test, on=["Patient", "Weeks"], how="left")
    grid["Patient_Week"] = grid["Patient"] + "_" + grid["Weeks"].astype(str)
    return grid.assign(Confidence=100)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv, train/, test/) and
    prepared/private/test.csv."""
    train_count, test_count, side, slices = sizes(scale)
    public, private = folders(root, "train", "test")
    count = train_count + test_count  # ids as the real ones: ID and 23 digits, the first few zeros
    patients = [f"ID{n:012d}{m:011d}" for n, m in zip(rng.choice(10**10, count, replace=False),
                                                      rng.integers(0, 10**11, count))]
    visits = [_visits(p, rng) for p in patients]
    for k, patient in enumerate(patients):
        _scan(public / ("train" if k < train_count else "test") / patient, patient, side, slices, rng)
    train, test = pd.concat(visits[:train_count]), pd.concat(visits[train_count:])
    train.to_csv(public / "train.csv", index=False)
    test.sort_values("Weeks").groupby("Patient").first().reset_index().to_csv(public / "test.csv", index=False)
    grid = _grid(test)
    grid.to_csv(private / "test.csv", index=False)
    grid[["Patient_Week"]].assign(FVC=2000, Confidence=100).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "OSIC Pulmonary Fibrosis Progression",
             "Predict each test patient's forced vital capacity (FVC, ml) at every week of the sample, and a "
             "Confidence (a standard deviation) for it, from their first visit in test.csv and their baseline CT.",
             "Submissions are evaluated on a modified Laplace log-likelihood over each patient's last three "
             "measured weeks: -sqrt(2) * min(|error|, 1000) / max(Confidence, 70) - ln(sqrt(2) * max(Confidence, 70)).",
             "Submit `Patient_Week,FVC,Confidence` for every row of the sample.")
