"""A synthetic histopathologic-cancer-detection: RGB TIFF patches of H&E-stained tissue, 40x40 in the replica's own
size and 96x96, as in reality, at the real scale.

Every patch is pink stroma with pale fibres and scattered small purple nuclei, its stain shade varying from slide
to slide. A patch is positive when its central region (the middle third, as in the real task's central 32x32 of
96x96) holds large, dark, crowded tumour nuclei; about 40% of patches are positive, as in the real data. As in
the real data, tumour outside the centre does not count: many negatives hold a tumour cluster in their border,
some positives hold only a few tumour nuclei, and a few patches are labelled wrongly, so a good one-minute run
reaches a ROC AUC of about 0.8-0.95, not 1; the sample submission's constant 0 scores 0.5.

`sizes(scale)` says how many patches a scale writes and how large; every chunk of them is drawn as one numpy batch
(each nucleus stamped by indexing its own pixels).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import (Sizes, folders, hex_ids, mislabelled, paint_batch, quota, render, smooth_fields,
                                   stamp, to_image)

SIDE, REAL_SIDE = 40, 96  # the replica's own patches are small; the real ones are 96x96
TRAIN, TEST = 180, 50  # the replica's own counts
# 220,025 labelled patches split with the original test set's share (57,458 of 277,483), 45,561 to test
REAL_TRAIN, REAL_TEST = 174_464, 45_561
TUMOUR_SHARE = 0.4  # about the real positive share
BORDER_TUMOUR = 0.35  # share of negatives with a tumour cluster outside the centre: it does not count
FEW_TUMOUR = 0.3  # share of positives with only a few tumour nuclei in the centre
MISLABELLED = 0.03  # share of each split whose patch shows the other class: pathologists' labels are not all right
NUCLEUS = (95, 45, 140)
TUMOUR_NUCLEUS = (60, 20, 95)
STROMA = (230, 170, 205)
FIBRE = (248, 225, 240)
CHUNK = 128  # patches drawn in one numpy batch


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many patches `scale` writes (a factor of the replica's own counts, or REAL) and their pixel size."""
    scale = parse_scale(scale)  # a factor that is not positive, or a word other than REAL, is refused
    side = REAL_SIDE if is_real(scale) else SIDE
    return Sizes(scaled(TRAIN, REAL_TRAIN, scale, least=4), scaled(TEST, REAL_TEST, scale, least=4),
                 (side, side), (side, side))


def _nuclei(canvas: np.ndarray, xy: np.ndarray, keep: np.ndarray, radii: tuple[float, float], colours,
            rng: np.random.Generator) -> None:
    """Paint nuclei at (n, k, 2) positions where `keep` (n, k) is set, each of one of three radii in `radii`."""
    n, side = len(canvas), canvas.shape[1]
    cells = np.clip(xy.astype(int), 0, side - 1)
    kinds = rng.integers(0, 3, keep.shape)
    for kind, radius in enumerate(np.linspace(*radii, 3)):
        image, slot = np.nonzero(keep & (kinds == kind))
        masks = stamp(n, side, image, cells[image, slot, 1], cells[image, slot, 0], radius)
        paint_batch(canvas, masks, colours, 0.85)


def _central(xy: np.ndarray, side: int) -> np.ndarray:
    return np.all((xy >= side / 3) & (xy < 2 * side / 3), axis=-1)


def _tumour(canvas: np.ndarray, central: np.ndarray, border: np.ndarray, rng: np.random.Generator) -> None:
    """Large dark nuclei: (n,) counts of them inside the central region, and a cluster outside it where `border`."""
    n, side = len(canvas), canvas.shape[1]
    most = int(14 * (side / SIDE) ** 2)  # as crowded at every patch size
    inner = rng.uniform(side / 3, 2 * side / 3, (n, most, 2))
    keep = np.arange(most)[None] < (central * (side / SIDE) ** 2).astype(int)[:, None]
    spot = rng.uniform(0, side, (n, 1, 2))
    spot[_central(spot, side)[:, 0], 0, 0] -= side / 3  # moved left, out of the centre
    outer = spot + rng.normal(0, side / 8, (n, most, 2))
    # a border cluster never strays into the centre: a nucleus there would make the patch positive
    away = border[:, None] & ~_central(outer, side) & np.all((outer >= 0) & (outer < side), axis=-1)
    colours = TUMOUR_NUCLEUS + rng.normal(0, 8, (n, 3))
    unit = side / SIDE
    _nuclei(canvas, np.concatenate([inner, outer], 1), np.concatenate([keep, away], 1), (1.4 * unit, 2.4 * unit),
            colours, rng)


def _stroma(rng: np.random.Generator, n: int, side: int) -> np.ndarray:
    """(n, side, side, 3) pink stroma, its shade varying from slide to slide, crossed by pale fibres."""
    tone = np.stack([STROMA[0] + rng.normal(0, 8, n), STROMA[1] + rng.normal(0, 12, n),
                     STROMA[2] + rng.normal(0, 8, n)], axis=1).astype(np.float32)
    canvas = (tone[:, None, None, :] + 20 * smooth_fields(rng, n, side, side)[..., None]
              + 7 * rng.standard_normal((n, side, side, 3), np.float32))
    rows = rng.integers(0, side, (n, 4))[:, :, None] == np.arange(side)[None, None]
    rows &= (np.arange(4)[None] < rng.integers(2, 5, n)[:, None])[..., None]  # 2 to 4 fibres a patch
    paint_batch(canvas, np.broadcast_to(rows.any(1)[:, :, None], (n, side, side)), np.tile(FIBRE, (n, 1)), 0.4)
    return canvas


def patches(items: list[tuple[Path, int, int]], seed: int) -> list:
    """Write TIFF patches for (path, side, tumour in the centre) items, drawn as one batch; returns nothing."""
    rng = np.random.default_rng(seed)
    n, side = len(items), items[0][1]
    unit = side / SIDE  # nuclei as large, and as crowded, at every patch size
    tumour = np.array([t for _, _, t in items], bool)
    canvas = _stroma(rng, n, side)
    count = rng.integers(10, 22, n) * unit ** 2
    xy = rng.uniform(0, side, (n, int(count.max()), 2))
    keep = np.arange(xy.shape[1])[None] < count.astype(int)[:, None]
    _nuclei(canvas, xy, keep, (0.8 * unit, 1.4 * unit), NUCLEUS + rng.normal(0, 10, (n, 3)), rng)
    few = rng.random(n) < FEW_TUMOUR
    central = np.where(tumour, np.where(few, rng.integers(2, 5, n), rng.integers(8, 15, n)), 0)
    border = np.where(tumour, rng.random(n) < 0.5, rng.random(n) < BORDER_TUMOUR)  # real tumour spreads too
    _tumour(canvas, central, border, rng)
    for (path, _, _), pixels in zip(items, canvas):
        to_image(pixels).save(path, format="TIFF")
    return []


def _split(count: int, side: int, folder: Path, rng: np.random.Generator) -> pd.DataFrame:
    labels = quota((1 - TUMOUR_SHARE, TUMOUR_SHARE), count, rng)
    shown = mislabelled(labels, MISLABELLED, rng)
    ids = hex_ids(rng, count, 40)
    render(patches, [(folder / f"{i}.tif", side, int(t)) for i, t in zip(ids, shown)], rng, CHUNK,
           count * side * side)
    return pd.DataFrame({"id": ids, "label": labels})


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train_labels.csv, sample_submission.csv, train/, test/) and private/answers.csv, as
    many patches as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root, "train", "test")
    side = size.smallest[0]
    _split(size.train, side, public / "train", rng).to_csv(public / "train_labels.csv", index=False)
    test = _split(size.test, side, public / "test", rng)
    test.to_csv(private / "answers.csv", index=False)
    test.assign(label=0).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Histopathologic Cancer Detection",
             "Predict the probability that the central region of each tissue patch contains tumour tissue.",
             "Submissions are evaluated on area under the ROC curve between the predicted probability and the "
             "observed target.",
             "Submit `id,label` for every image in test/, where `id` is the file name without `.tif`.")
