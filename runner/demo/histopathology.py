"""A synthetic histopathologic-cancer-detection: 40x40 RGB TIFF patches of H&E-stained tissue (96x96 in reality).

Every patch is pink stroma with pale fibres and scattered small purple nuclei. A patch is positive when its
central region (the middle third, as in the real task's central 32x32 of 96x96) holds a cluster of large, dark,
crowded tumour nuclei; about 40% of patches are positive, as in the real data. A small CNN reaches a ROC AUC of
about 0.95-1.0; the sample submission's constant 0 scores 0.5.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe
from runner.demo._pictures import disc, folders, hex_ids, paint, quota, textured, to_image

SIZE = 40  # the real patches are 96x96; kept small here
CENTRE = (SIZE / 3, 2 * SIZE / 3)  # the labelled central region, a third of the side as in 32 of 96
TRAIN, TEST = 180, 50
TUMOUR_SHARE = 0.4  # about the real positive share
NUCLEUS = (95, 45, 140)
TUMOUR_NUCLEUS = (60, 20, 95)


def _nuclei(canvas: np.ndarray, rng: np.random.Generator, count: int, span: tuple[float, float], radius, colour):
    for _ in range(count):
        x, y = rng.uniform(*span, 2)
        paint(canvas, disc(SIZE, SIZE, x, y, rng.uniform(*radius), rng.uniform(*radius)), colour, alpha=0.85)


def patch(tumour: bool, rng: np.random.Generator):
    canvas = textured(rng, SIZE, SIZE, (230 + rng.normal(0, 8), 170 + rng.normal(0, 12), 205), swing=20, noise=7)
    for _ in range(int(rng.integers(2, 5))):
        y = rng.uniform(0, SIZE)
        rows = slice(int(y), int(y) + 1)
        canvas[rows] = 0.6 * canvas[rows] + 0.4 * np.array([248, 225, 240])
    _nuclei(canvas, rng, int(rng.integers(10, 22)), (0, SIZE), (0.8, 1.4), NUCLEUS + rng.normal(0, 10, 3))
    if tumour:
        _nuclei(canvas, rng, int(rng.integers(8, 14)), CENTRE, (1.4, 2.4), TUMOUR_NUCLEUS + rng.normal(0, 8, 3))
    return to_image(canvas)


def _split(count: int, folder: Path, rng: np.random.Generator) -> pd.DataFrame:
    labels = quota((1 - TUMOUR_SHARE, TUMOUR_SHARE), count, rng)
    ids = hex_ids(rng, count, 40)
    for image_id, label in zip(ids, labels):
        patch(bool(label), rng).save(folder / f"{image_id}.tif", format="TIFF")
    return pd.DataFrame({"id": ids, "label": labels})


def generate(root: Path, rng: np.random.Generator) -> None:
    """Write prepared/public (train_labels.csv, sample_submission.csv, train/, test/) and private/answers.csv."""
    public, private = folders(root, "train", "test")
    _split(TRAIN, public / "train", rng).to_csv(public / "train_labels.csv", index=False)
    test = _split(TEST, public / "test", rng)
    test.to_csv(private / "answers.csv", index=False)
    test.assign(label=0).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Histopathologic Cancer Detection",
             "Predict the probability that the central region of each tissue patch contains tumour tissue.",
             "Submissions are evaluated on area under the ROC curve between the predicted probability and the "
             "observed target.",
             "Submit `id,label` for every image in test/, where `id` is the file name without `.tif`.")
