"""A synthetic siim-isic-melanoma-classification: 48x48 JPEG skin-lesion photos with the real metadata columns.

Benign lesions are small, round and evenly brown; malignant ones (about 15% here, raised from the real ~1.8% so
a small test set has enough positives for ROC AUC) are larger, irregular and multi-coloured (near-black core,
blue-grey and reddish patches). Hairs and skin tones vary in both classes. The metadata carries a weak signal
(malignant cases are older and more often on the torso or lower extremity). A small CNN reaches a ROC AUC of
about 0.9-0.98; the sample submission's constant 0 scores 0.5.

The jpeg/ folders hold the real images. The train/*.dcm and test/*.dcm files are small placeholders with a DICOM
preamble and magic only, and the tfrecords/*.tfrec files are placeholder text, not valid TFRecords: they exist so
the layout matches the real one (train shards 00 and 06 became test00 and test01, the others renumbered).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import ImageDraw

from runner.demo._layout import describe
from runner.demo._pictures import disc, folders, paint, quota, smooth_field, textured, to_image

SIZE = 48
SHARDS, PER_SHARD = 9, 30  # 270 images: 7 train shards and 2 test shards
TEST_SHARDS = (0, 6)  # the real test set is original train shards 00 and 06
MALIGNANT = 0.15
TRAIN_COLUMNS = ("image_name", "patient_id", "sex", "age_approx", "anatom_site_general_challenge", "diagnosis",
                 "benign_malignant", "target")
SITES = ("torso", "lower extremity", "upper extremity", "head/neck", "palms/soles", "oral/genital")
BENIGN_SITES, MALIGNANT_SITES = (0.50, 0.25, 0.15, 0.06, 0.02, 0.02), (0.55, 0.30, 0.08, 0.05, 0.01, 0.01)
BENIGN_DIAGNOSES = {"unknown": 0.80, "nevus": 0.15, "seborrheic keratosis": 0.02, "lentigo NOS": 0.01,
                    "lichenoid keratosis": 0.01, "solar lentigo": 0.005, "cafe-au-lait macule": 0.0025,
                    "atypical melanocytic proliferation": 0.0025}
MISSING = 0.02  # share of blank sex, age and site values
SKINS = ((235, 195, 170), (215, 165, 130), (190, 135, 100), (150, 100, 70))
DICOM_PLACEHOLDER = bytes(128) + b"DICM" + b"placeholder: see jpeg/ for the image\n"


def _lesion(canvas: np.ndarray, malignant: bool, rng: np.random.Generator) -> None:
    cx, cy = SIZE / 2 + rng.normal(0, 3, 2)
    if not malignant:
        r = rng.uniform(4, 8)
        paint(canvas, disc(SIZE, SIZE, cx, cy, r, r * rng.uniform(0.8, 1.1)), (125, 80, 50) + rng.normal(0, 10, 3))
        return
    r = rng.uniform(9, 14)
    y, x = np.ogrid[:SIZE, :SIZE]
    wobble = 1 + 0.35 * smooth_field(rng, SIZE, SIZE, cells=5)
    body = np.hypot(x - cx, y - cy) <= r * wobble
    paint(canvas, body, (110, 65, 40) + rng.normal(0, 12, 3))
    paint(canvas, body & disc(SIZE, SIZE, cx + rng.normal(0, 2), cy + rng.normal(0, 2), r * 0.45), (35, 20, 20))
    for colour in ((110, 115, 140), (170, 70, 60)):
        px, py = cx + rng.normal(0, r / 2), cy + rng.normal(0, r / 2)
        paint(canvas, body & disc(SIZE, SIZE, px, py, r * rng.uniform(0.2, 0.35)), colour, alpha=0.8)


def photo(malignant: bool, rng: np.random.Generator):
    skin = np.asarray(SKINS[int(rng.integers(len(SKINS)))]) + rng.normal(0, 8, 3)
    canvas = textured(rng, SIZE, SIZE, skin, swing=12, noise=5)
    _lesion(canvas, malignant, rng)
    image = to_image(canvas)
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(0, 4))):
        x0, y0, x1, y1 = rng.uniform(0, SIZE, 4)
        draw.line((x0, y0, x1, y1), fill=(40, 30, 25), width=1)
    return image


def _metadata(targets: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
    n = len(targets)
    patients = [f"IP_{p:07d}" for p in rng.choice(10 ** 7, n // 3, replace=False)]
    age = np.clip(np.round((rng.normal(48, 14, n) + 12 * targets) / 5) * 5, 0, 90)
    site = [SITES[rng.choice(len(SITES), p=MALIGNANT_SITES if t else BENIGN_SITES)] for t in targets]
    names, shares = list(BENIGN_DIAGNOSES), list(BENIGN_DIAGNOSES.values())
    frame = pd.DataFrame({
        "image_name": [f"ISIC_{i:07d}" for i in rng.choice(10 ** 7, n, replace=False)],
        "patient_id": [patients[k] for k in rng.integers(len(patients), size=n)],
        "sex": rng.choice(["male", "female"], n, p=[0.52, 0.48]).astype(object),
        "age_approx": age, "anatom_site_general_challenge": np.array(site, dtype=object),
        "diagnosis": ["melanoma" if t else names[rng.choice(len(names), p=shares)] for t in targets],
        "benign_malignant": np.where(targets == 1, "malignant", "benign"), "target": targets,
    })
    for column in ("sex", "age_approx", "anatom_site_general_challenge"):
        frame.loc[rng.random(n) < MISSING, column] = None
    return frame


def _placeholders(public: Path, shards: np.ndarray) -> None:
    test_count, train_count = 0, 0
    for shard in range(SHARDS):
        name = f"test{test_count:02d}" if shard in TEST_SHARDS else f"train{train_count:02d}"
        test_count, train_count = test_count + (shard in TEST_SHARDS), train_count + (shard not in TEST_SHARDS)
        size = int((shards == shard).sum())
        (public / "tfrecords" / f"{name}-{size}.tfrec").write_text(
            f"placeholder for a TFRecord shard of {size} images; not a real TFRecord file\n")


def generate(root: Path, rng: np.random.Generator) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv, jpeg/{train,test}/*.jpg, placeholder
    train/ and test/ *.dcm and tfrecords/*.tfrec) and prepared/private/test.csv."""
    public, private = folders(root, "train", "test", "jpeg/train", "jpeg/test", "tfrecords")
    shards = rng.permutation(np.repeat(np.arange(SHARDS), PER_SHARD))
    is_test = np.isin(shards, TEST_SHARDS)
    targets = np.zeros(len(shards), dtype=int)
    for part in (is_test, ~is_test):
        targets[part] = quota((1 - MALIGNANT, MALIGNANT), int(part.sum()), rng)
    frame = _metadata(targets, rng)
    for name, target, test in zip(frame["image_name"], frame["target"], is_test):
        split = "test" if test else "train"
        photo(bool(target), rng).save(public / "jpeg" / split / f"{name}.jpg", quality=int(rng.integers(85, 96)))
        (public / split / f"{name}.dcm").write_bytes(DICOM_PLACEHOLDER)
    _placeholders(public, shards)
    train = frame[~is_test].sort_values("image_name")
    test = frame[is_test].sort_values("image_name")
    train[list(TRAIN_COLUMNS)].to_csv(public / "train.csv", index=False)
    test[list(TRAIN_COLUMNS[:5])].to_csv(public / "test.csv", index=False)
    test[["image_name", "target"]].to_csv(private / "test.csv", index=False)
    test[["image_name"]].assign(target=0).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "SIIM-ISIC Melanoma Classification",
             "Predict the probability that each skin lesion in test.csv is malignant (images in jpeg/test/, "
             "patient metadata in test.csv).",
             "Submissions are evaluated on area under the ROC curve between the predicted probability and the "
             "observed target.",
             "Submit `image_name,target` for every test image.")
