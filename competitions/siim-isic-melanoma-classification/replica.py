"""A synthetic siim-isic-melanoma-classification: JPEG skin-lesion photos with the real metadata columns, 48x48 in
the replica's own size and camera-sized (640x480 up to 6000x4000) at the real scale.

Benign lesions are small, round and evenly brown; malignant ones (about 15% here, raised from the real 1.8% so a
small test set has enough positives for ROC AUC; the real share at the real scale) are larger, irregular and
multi-coloured (near-black core, blue-grey and reddish patches). As in the real data, the classes overlap: a
quarter of the benign lesions are atypical nevi (large, uneven, a dark core), about a third of the melanomas are
early ones (small and barely uneven, one extra colour at most), and a tenth look like a plain nevus. So a good
one-minute run reaches a ROC AUC of about 0.85-0.97, not 1. Hairs and skin tones vary in both classes. The metadata
carries a weak signal (malignant cases are older and more often on the torso or lower extremity). The sample
submission's constant 0 scores 0.5.

The jpeg/ folders hold the real images. The train/*.dcm and test/*.dcm files are small placeholders with a DICOM
preamble and magic only, and the tfrecords/*.tfrec files are placeholder text, not valid TFRecords: they exist so
the layout matches the real one (train shards 00 and 06 became test00 and test01, the others renumbered).

`sizes(scale)` says how many photos a scale writes and how large; large photos are drawn on a small canvas,
enlarged, several processes encoding them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import (Sizes, design, disc, folders, paint, quota, render, smooth_field, textured,
                                   to_image)

SIDE = 48  # the replica's own photos
# the real photos come from a few cameras: mostly 1872x1053 and 6000x4000 frames, some of other sizes
CAMERAS = (((1872, 1053), 0.35), ((6000, 4000), 0.30), ((4288, 2848), 0.10), ((3264, 2448), 0.05),
           ((1024, 768), 0.10), ((640, 480), 0.10))
DESIGN = 256  # the long side a large photo is drawn at before it is enlarged
SHARDS, PER_SHARD = 9, 30  # 270 images: 7 train shards and 2 test shards
# the real 33,126 images in 16 TFRecord shards of 2,070 or 2,071 (the test ones and train00 among the 2,071s)
REAL_SHARDS = tuple(2071 if shard in (0, 1, 2, 3, 4, 6) else 2070 for shard in range(16))
TEST_SHARDS = (0, 6)  # the real test set is original train shards 00 and 06
MALIGNANT, REAL_MALIGNANT = 0.15, 584 / 33_126  # raised so a small test set holds positives; the real share
ATYPICAL = 0.25  # share of benign lesions that are atypical nevi: large and uneven, like a melanoma
EARLY = 0.35  # share of melanomas caught early: small and barely uneven, like a nevus
FEATURELESS = 0.1  # share of each split's melanomas that look like a plain nevus: only the biopsy told them apart
REAL_PATIENTS = 2056  # the real images come from 2,056 patients; the replica's from a third as many as images
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
CHUNK = 16  # photos a worker draws and writes per task


def shards(scale: float | str = 1.0) -> tuple[int, ...]:
    """Images in each TFRecord shard at `scale`: the real 16 shards (each times the share of the real counts), or
    the replica's 9 of PER_SHARD times the factor."""
    scale = parse_scale(scale)  # a factor that is not positive, or a word other than REAL, is refused
    if is_real(scale):
        return tuple(scaled(count, count, scale, least=2) for count in REAL_SHARDS)
    return (scaled(PER_SHARD, max(REAL_SHARDS), scale, least=2),) * SHARDS


def patients(scale: float | str, images: int) -> int:
    """The patients `images` photos come from: at a share of the real counts the real 2,056 times that share (as
    many photos a patient as in reality), else a third as many as the photos."""
    return scaled(images // 3, REAL_PATIENTS, scale) if is_real(scale) else max(1, images // 3)


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many photos `scale` writes (a factor of the replica's own counts, or REAL) and their pixel sizes."""
    scale = parse_scale(scale)  # a factor that is not positive, or a word other than REAL, is refused
    counts = shards(scale)
    test = sum(counts[s] for s in TEST_SHARDS)
    if is_real(scale):
        return Sizes.of_cameras(sum(counts) - test, test, CAMERAS)
    return Sizes(sum(counts) - test, test, (SIDE, SIDE), (SIDE, SIDE))


def _lesion(canvas: np.ndarray, malignant: bool, rng: np.random.Generator) -> None:
    """A lesion on a canvas whose short side counts as SIDE: benign, atypical, early or plainly malignant."""
    height, width = canvas.shape[:2]
    unit = min(width, height) / SIDE
    cx, cy = np.array([width, height]) / 2 + rng.normal(0, 3 * unit, 2)
    atypical, early = not malignant and rng.random() < ATYPICAL, malignant and rng.random() < EARLY
    if not (malignant or atypical):
        r = rng.uniform(4, 8) * unit
        paint(canvas, disc(height, width, cx, cy, r, r * rng.uniform(0.8, 1.1)), (125, 80, 50) + rng.normal(0, 10, 3))
        return
    r = rng.uniform(6, 10) * unit if early else rng.uniform(7, 11) * unit if atypical else rng.uniform(9, 14) * unit
    y, x = np.ogrid[:height, :width]
    wobble = 1 + (0.15 if early or atypical else 0.35) * smooth_field(rng, height, width, cells=5)
    body = np.hypot(x - cx, y - cy) <= r * wobble
    paint(canvas, body, (110, 65, 40) + rng.normal(0, 12, 3))
    paint(canvas, body & disc(height, width, cx + rng.normal(0, 2 * unit), cy + rng.normal(0, 2 * unit), r * 0.45),
          (35, 20, 20) if not atypical else (80, 45, 30))
    colours = () if atypical else ((110, 115, 140), (170, 70, 60))[: 1 if early else 2]
    for colour in colours:
        px, py = cx + rng.normal(0, r / 2), cy + rng.normal(0, r / 2)
        paint(canvas, body & disc(height, width, px, py, r * rng.uniform(0.2, 0.35)), colour, alpha=0.8)


def photo(malignant: bool, shape: tuple[int, int], rng: np.random.Generator) -> Image.Image:
    """A photo of `shape` (width, height): drawn on a canvas of at most DESIGN pixels a side, then enlarged where
    the photo is larger (the enlarged skin texture alone makes a JPEG of about 1 MB for 6000x4000; a fine grain
    too would take longer to draw than the photo does to encode)."""
    width, height = design(shape, DESIGN)
    skin = np.asarray(SKINS[int(rng.integers(len(SKINS)))]) + rng.normal(0, 8, 3)
    canvas = textured(rng, height, width, skin, swing=12, noise=5)
    _lesion(canvas, malignant, rng)
    image = to_image(canvas)
    draw = ImageDraw.Draw(image)
    for _ in range(int(rng.integers(0, 4))):
        x0, x1 = rng.uniform(0, width, 2)
        y0, y1 = rng.uniform(0, height, 2)
        draw.line((x0, y0, x1, y1), fill=(40, 30, 25), width=max(1, round(min(width, height) / SIDE)))
    return image if image.size == tuple(shape) else image.resize(tuple(int(v) for v in shape), Image.BILINEAR)


def photos(items: list[tuple[Path, Path, int, int, int]], seed: int) -> list:
    """Write (jpeg path, dcm path, malignant, width, height) items: each photo and its DICOM placeholder."""
    rng = np.random.default_rng(seed)
    for jpeg, dcm, malignant, width, height in items:
        photo(bool(malignant), (width, height), rng).save(jpeg, quality=int(rng.integers(85, 96)))
        dcm.write_bytes(DICOM_PLACEHOLDER)
    return []


def _metadata(targets: np.ndarray, patients: int, rng: np.random.Generator) -> pd.DataFrame:
    n = len(targets)
    ids = [f"IP_{p:07d}" for p in rng.choice(10 ** 7, patients, replace=False)]
    age = np.clip(np.round((rng.normal(48, 14, n) + 12 * targets) / 5) * 5, 0, 90)
    site = np.where(targets == 1, rng.choice(len(SITES), n, p=MALIGNANT_SITES),
                    rng.choice(len(SITES), n, p=BENIGN_SITES))
    names, shares = list(BENIGN_DIAGNOSES), list(BENIGN_DIAGNOSES.values())
    benign = np.asarray(names, dtype=object)[rng.choice(len(names), n, p=shares)]
    frame = pd.DataFrame({
        "image_name": [f"ISIC_{i:07d}" for i in rng.choice(10 ** 7, n, replace=False)],
        "patient_id": np.asarray(ids, dtype=object)[rng.integers(len(ids), size=n)],
        "sex": rng.choice(["male", "female"], n, p=[0.52, 0.48]).astype(object),
        "age_approx": age, "anatom_site_general_challenge": np.asarray(SITES, dtype=object)[site],
        "diagnosis": np.where(targets == 1, "melanoma", benign),
        "benign_malignant": np.where(targets == 1, "malignant", "benign"), "target": targets,
    })
    for column in ("sex", "age_approx", "anatom_site_general_challenge"):
        frame.loc[rng.random(n) < MISSING, column] = None
    return frame


def _placeholders(public: Path, counts: tuple[int, ...]) -> None:
    test_count, train_count = 0, 0
    for shard, size in enumerate(counts):
        name = f"test{test_count:02d}" if shard in TEST_SHARDS else f"train{train_count:02d}"
        test_count, train_count = test_count + (shard in TEST_SHARDS), train_count + (shard not in TEST_SHARDS)
        (public / "tfrecords" / f"{name}-{size}.tfrec").write_text(
            f"placeholder for a TFRecord shard of {size} images; not a real TFRecord file\n")


def _looks(targets: np.ndarray, is_test: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Whether each photo shows a malignant-looking lesion: every melanoma but FEATURELESS of each split's."""
    looks = targets.copy()
    for part in (is_test, ~is_test):
        melanomas = np.flatnonzero(part & (targets == 1))
        looks[rng.choice(melanomas, round(FEATURELESS * len(melanomas)), replace=False)] = 0
    return looks


def _images(public: Path, frame: pd.DataFrame, looks: np.ndarray, is_test: np.ndarray, size: Sizes,
            rng: np.random.Generator) -> None:
    shapes = size.shapes(len(frame), rng)
    items = [(public / "jpeg" / split / f"{name}.jpg", public / split / f"{name}.dcm", int(malignant), int(w), int(h))
             for name, malignant, split, (w, h) in zip(frame["image_name"], looks, np.where(is_test, "test", "train"),
                                                       shapes)]
    render(photos, items, rng, CHUNK, size.pixels(len(items)))


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv, jpeg/{train,test}/*.jpg, placeholder
    train/ and test/ *.dcm and tfrecords/*.tfrec) and prepared/private/test.csv, as many photos as `sizes(scale)`
    says."""
    public, private = folders(root, "train", "test", "jpeg/train", "jpeg/test", "tfrecords")
    counts, size = shards(scale), sizes(scale)
    shard = rng.permutation(np.repeat(np.arange(len(counts)), counts))
    is_test = np.isin(shard, TEST_SHARDS)
    share = REAL_MALIGNANT if is_real(scale) else MALIGNANT
    targets = np.zeros(len(shard), dtype=int)
    for part in (is_test, ~is_test):
        targets[part] = quota((1 - share, share), int(part.sum()), rng)
    frame = _metadata(targets, patients(scale, len(shard)), rng)
    _images(public, frame, _looks(targets, is_test, rng), is_test, size, rng)
    _placeholders(public, counts)
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
