"""A synthetic rsna-breast-cancer-detection: screening mammograms as DICOM (JPEG 2000, some MONOCHROME1), as
MLE-bench's 90/10 split of the real patients lays them out: train.csv (a row per image, its 14 columns),
test.csv (a row per test image, its 9 columns ending `prediction_id` = `<patient_id>_<laterality>`),
train_images/<patient_id>/<image_id>.dcm and test_images/... alike; the sample gives every test breast the train
mean of `cancer`, sorted by prediction_id, as are the answers (private/answers.csv, `prediction_id,cancer`).

Each breast has two views (CC and MLO; a few have a third): a bright half-oval of tissue against the chest wall,
on the left for L, the right for R. A breast with cancer shows a dense spiculated mass in each of its views; a
breast without one may show a benign calcification, small and round. A few cancers show no mass (dense tissue
hides them) and a few masses are benign. A sixth of the breasts have cancer (the real 2% would leave a test set
of this size too few to tell anything). Site 2's machines store their images inverted (MONOCHROME1), every one
carries a window. The best constant, every breast a yes, scores a probabilistic F1 of about 0.3; a CNN or a
pixel table of a breast's views finds the masses.

`sizes(scale)`: 48 x 32 mammograms at a factor of the replica's own patient counts; 4096 x 3328, at REAL.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._dicom import MAMMOGRAPHY, Series, uid, write_image
from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import disc, folders, smooth_field

TRAIN, TEST = 150, 100  # the replica's own patients
REAL_TRAIN, REAL_TEST = 10_722, 1_191  # MLE-bench's 90/10 split of the 11,913 patients
SHAPE, REAL_SHAPE = (48, 32), (4096, 3328)  # an image's (rows, columns)
CANCER_SHARE = 1 / 6  # of the breasts
THIRD_VIEW = 0.05  # breasts with a third image
MACHINES = (49, 48, 29, 21, 93, 216, 210, 170, 190, 197)
MONOCHROME1_SITE = 2
HIDDEN = 0.15  # cancers no view shows (dense tissue hides them), as screening misses some
LOOKALIKE = 0.04  # breasts without cancer that show a mass all the same (a benign one)
TISSUE, FAT, MASS, CALCIFICATION = 900.0, 300.0, 2600.0, 1900.0  # stored-value brightness (dense is bright)
WINDOW = (1500.0, 2600.0)
LEAST = 8


def sizes(scale: float | str = 1.0) -> tuple[int, int, tuple[int, int]]:
    """(train patients, test patients, an image's (rows, columns)) at `scale`."""
    scale = parse_scale(scale)
    return (scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST),
            REAL_SHAPE if is_real(scale) else SHAPE)


def _mammogram(laterality: str, mass: bool, where: tuple[float, float], shape, rng) -> np.ndarray:
    """One view: tissue against the chest wall, and a mass at `where` (a share of the rows and columns)."""
    rows, columns = shape
    wall = 0 if laterality == "L" else columns - 1
    breast = disc(rows, columns, wall, rows / 2, columns * rng.uniform(0.75, 0.9), rows * rng.uniform(0.42, 0.48))
    image = np.where(breast, FAT + (TISSUE - FAT) * (0.5 + 0.5 * smooth_field(rng, rows, columns, 6)), 0.0)
    depth = where[1] if laterality == "L" else 1 - where[1]
    cy, cx = where[0] * rows, depth * columns
    if mass:
        radius = max(rows, columns) * rng.uniform(0.06, 0.09)
        image[disc(rows, columns, cx, cy, radius) & breast] = MASS
        for angle in rng.uniform(0, np.pi, 4):  # spicules
            t = np.linspace(-2 * radius, 2 * radius, 4 * int(radius) + 2)
            ys, xs = (cy + t * np.sin(angle)).astype(int), (cx + t * np.cos(angle)).astype(int)
            inside = (ys >= 0) & (ys < rows) & (xs >= 0) & (xs < columns)
            image[ys[inside], xs[inside]] = MASS
    elif rng.random() < 0.3:
        image[disc(rows, columns, cx, cy, max(1.0, max(rows, columns) * 0.02)) & breast] = CALCIFICATION
    return np.clip(image + rng.normal(0, 40, shape), 0, None)


def _patient(folder: Path, patient: int, cancers: dict, shape, rng: np.random.Generator) -> list[dict]:
    """One patient's images under folder, and their rows."""
    folder.mkdir(parents=True)
    site, machine = int(rng.integers(1, 3)), int(rng.choice(MACHINES))
    age = float(rng.integers(38, 90)) if rng.random() > 0.02 else np.nan
    study, rows = uid(rng), []
    for laterality in ("L", "R"):
        where = (rng.uniform(0.3, 0.7), rng.uniform(0.2, 0.5))
        shown = rng.random() >= HIDDEN if cancers[laterality] else rng.random() < LOOKALIKE
        views = ["CC", "MLO"] + (["ML"] if rng.random() < THIRD_VIEW else [])
        for view in views:
            image_id = int(rng.integers(10**5, 2**31 - 1))
            series = Series(MAMMOGRAPHY, str(patient), study, uid(rng), window=WINDOW,
                            monochrome1=site == MONOCHROME1_SITE, jpeg2000=True)
            pixels = _mammogram(laterality, shown, where, shape, rng)
            write_image(folder / f"{image_id}.dcm", pixels, series, len(rows) + 1)
            rows.append(dict(site_id=site, patient_id=patient, image_id=image_id, laterality=laterality, view=view,
                             age=age, cancer=int(cancers[laterality]), implant=int(rng.random() < 0.03),
                             machine_id=machine))
    return rows


def _split(patients: np.ndarray, root: Path, shape, rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for patient in patients:
        cancers = {side: bool(rng.random() < CANCER_SHARE) for side in ("L", "R")}
        rows += _patient(root / str(patient), int(patient), cancers, shape, rng)
    return pd.DataFrame(rows)


def _train_columns(train: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """The columns only the training rows have, in the real train.csv's order."""
    n, cancer = len(train), train["cancer"].to_numpy()
    biopsy = np.where(cancer == 1, 1, (rng.random(n) < 0.04).astype(int))
    train = train.assign(biopsy=biopsy, invasive=np.where(cancer == 1, (rng.random(n) < 0.7).astype(int), 0),
                         BIRADS=np.where(rng.random(n) < 0.5, np.nan, rng.choice([0.0, 1.0, 2.0], n)),
                         density=np.where(rng.random(n) < 0.45, None, rng.choice(list("ABCD"), n)),
                         difficult_negative_case=(biopsy == 1) & (cancer == 0))
    return train[["site_id", "patient_id", "image_id", "laterality", "view", "age", "cancer", "biopsy", "invasive",
                  "BIRADS", "implant", "density", "machine_id", "difficult_negative_case"]]


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv, train_images/, test_images/) and
    prepared/private/answers.csv."""
    train_count, test_count, shape = sizes(scale)
    public, private = folders(root, "train_images", "test_images")
    patients = rng.choice(np.arange(10_000, 65_535), train_count + test_count, replace=False)
    train = _train_columns(_split(patients[:train_count], public / "train_images", shape, rng), rng)
    test = _split(patients[train_count:], public / "test_images", shape, rng)
    train.to_csv(public / "train.csv", index=False)
    test["prediction_id"] = test["patient_id"].astype(str) + "_" + test["laterality"]
    test.drop(columns=["cancer"]).to_csv(public / "test.csv", index=False)
    answers = test[["prediction_id", "cancer"]].groupby("prediction_id").first().reset_index()
    answers.to_csv(private / "answers.csv", index=False)
    answers.assign(cancer=train["cancer"].mean()).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "RSNA Screening Mammography Breast Cancer Detection",
             "Predict, for each breast of each test patient (prediction_id = `<patient_id>_<laterality>`), the "
             "probability of cancer from its mammograms in test_images/<patient_id>/<image_id>.dcm.",
             "Submissions are evaluated on the probabilistic F1 score (beta 1).",
             "Submit `prediction_id,cancer` for every test breast.")
