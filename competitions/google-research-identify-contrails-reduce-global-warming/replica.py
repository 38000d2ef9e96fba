"""A synthetic google-research-identify-contrails-reduce-global-warming: a folder per record in train/, validation/
and test/, each with the nine infrared bands `band_08.npy` ... `band_16.npy` (float32 brightness temperatures,
height x width x 8 frames, the fifth labelled); train records add `human_individual_masks.npy` (height x width x 1 x
labellers) and `human_pixel_masks.npy` (height x width x 1, int32: the pixels most labellers marked), validation
records the latter alone. train_metadata.json lists the training records (its `record_id`s as strings, with their
projection's fields), validation_metadata.json the validation ones; the test records are only folders and the
sample's rows. The answers in private/answers.csv (`record_id,encoded_pixels,height,width`, column-major run-length
strings, "-" for none), the sample's masks are `1 3 10 5` or `-` at random.

A scene is a warm ground under smooth, colder cloud; each band reads it at its own temperature. A contrail is a thin
straight line of ice, colder than its surroundings in the longer waves: along it band_15 reads colder than band_14
and band_14 warmer than band_11 (the "ash" colours), and it drifts across the frames, so the labelled frame's
line is where the band differences say it is. About 45% of the records hold none. A model of each pixel's band
differences at the labelled frame finds the lines; marking every pixel scores a global Dice of about 0.06.

`sizes(scale)`: 16 x 16 records at a factor of the replica's counts, 256 x 256 (as the real ones) at the real counts.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from runner.common import rle
from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, folders, smooth_fields

SIDE, REAL_SIDE = 16, 256  # pixels a side: the replica's records, the real ones
FRAMES, LABELLED = 8, 4  # frames per band, the one labelled (4 before it, 3 after)
BANDS = tuple(range(8, 17))
TRAIN, VALIDATION, TEST = 32, 8, 32  # the replica's own counts: 72 records of 76 KB
REAL_TRAIN, REAL_VALIDATION, REAL_TEST = 18_673, 1_856, 1_856  # MLE-bench's test is as large as the validation set
LEAST = 4
NO_CONTRAIL = 0.45  # share of records without any contrail
BAND_OFFSET = {8: -35.0, 9: -28.0, 10: -20.0, 11: -6.0, 12: -18.0, 13: 0.0, 14: -1.0, 15: -2.5, 16: -9.0}  # kelvin
# a contrail's change to each band at its pixels (ice is colder in the longer waves): band_15 - band_14 falls,
# band_14 - band_11 rises
CONTRAIL = {11: -6.0, 13: -3.5, 14: -3.0, 15: -6.5, 16: -5.0}
DRIFT = 0.4  # pixels a contrail moves between frames (at the replica's size)
PROJECTION = 'PROJCS["unknown",GEOGCS["unknown",DATUM["WGS_1984",SPHEROID["WGS 84",6378137,298.257223563]],' \
             'PRIMEM["Greenwich",0],UNIT["degree",0.0174532925199433]],PROJECTION["Lambert_Conformal_Conic_2SP"]]'


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many train and test records `scale` writes (a factor of the replica's counts, or the real ones) and their
    side; the validation records are `validation_count(scale)`."""
    scale = parse_scale(scale)
    side = REAL_SIDE if is_real(scale) else SIDE
    return Sizes(scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST), (side, side),
                 (side, side))


def validation_count(scale: float | str = 1.0) -> int:
    return scaled(VALIDATION, REAL_VALIDATION, scale, LEAST)


def record_ids(rng: np.random.Generator, count: int) -> list[str]:
    """Distinct 19-digit record ids (the real ones are int64-sized decimal numbers)."""
    ids: set[str] = set()
    while len(ids) < count:
        ids.add(str(int(rng.integers(10 ** 18, 9 * 10 ** 18))))
    return sorted(ids, key=lambda _: rng.random())


def _lines(rng: np.random.Generator, side: int, frame: int, lines: np.ndarray) -> np.ndarray:
    """The pixels within half a pixel (of the replica's) of each line (a point, a direction, a drift) at `frame`."""
    y, x = np.mgrid[:side, :side].astype(np.float32) + 0.5
    unit = side / SIDE
    mask = np.zeros((side, side), bool)
    for px, py, angle, drift in lines:
        cx, cy = px * side + drift * (frame - LABELLED) * unit * np.sin(angle), py * side
        distance = np.abs((x - cx) * np.sin(angle) - (y - cy) * np.cos(angle))
        mask |= distance <= 0.55 * unit
    return mask


def record(rng: np.random.Generator, side: int) -> tuple[dict[int, np.ndarray], np.ndarray]:
    """One record's bands {band: (side, side, FRAMES) float32} and its labelled frame's contrail mask."""
    count = 0 if rng.random() < NO_CONTRAIL else int(rng.integers(1, 4))
    lines = np.column_stack([rng.uniform(0.2, 0.8, (count, 2)), rng.uniform(0, np.pi, count),
                             rng.choice([-DRIFT, DRIFT], count)]) if count else np.zeros((0, 4))
    masks = np.stack([_lines(rng, side, t, lines) for t in range(FRAMES)], axis=-1)
    ground = 285 + 6 * smooth_fields(rng, 1, side, side)[0]
    cloud = np.clip(smooth_fields(rng, 1, side, side, cells=3)[0], 0, None) * rng.uniform(0, 35)
    scene = (ground - cloud)[..., None] + rng.normal(0, 0.3, (side, side, FRAMES))
    bands = {}
    for band in BANDS:
        values = scene + BAND_OFFSET[band] + rng.normal(0, 0.4, scene.shape)
        values += masks * CONTRAIL.get(band, 0.0)
        bands[band] = values.astype(np.float32)
    return bands, masks[..., LABELLED]


def _labellers(rng: np.random.Generator, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each labeller's mask (the contrail with some pixels missed, a few strays) and the pixels most marked."""
    count = int(rng.integers(4, 8))
    marks = np.stack([(mask & (rng.random(mask.shape) > 0.15)) | (rng.random(mask.shape) < 0.003)
                      for _ in range(count)], axis=-1)
    return marks[:, :, None, :].astype(np.int32), (marks.mean(axis=-1) > 0.5)[..., None].astype(np.int32)


def _metadata(rng: np.random.Generator, record_id: str) -> dict:
    return {"row_min": float(rng.uniform(-3e6, 1e6)), "row_size": 2000.0, "col_min": float(rng.uniform(-4e6, 2e6)),
            "col_size": 2000.0, "timestamp": float(rng.integers(1_555_000_000, 1_650_000_000)),
            "record_id": record_id, "projection_wkt": PROJECTION}


def _write(rng: np.random.Generator, folder: Path, ids: list[str], side: int, labels: str) -> list[np.ndarray]:
    """Write each record's folder: its bands and, by `labels` ("all", "pixel", "none"), its masks; the masks."""
    masks = []
    for record_id in ids:
        where = folder / record_id
        where.mkdir(parents=True, exist_ok=True)
        bands, contrail = record(rng, side)
        for band, values in bands.items():
            np.save(where / f"band_{band:02}.npy", values)
        individual, pixel = _labellers(rng, contrail)
        if labels == "all":
            np.save(where / "human_individual_masks.npy", individual)
        if labels in ("all", "pixel"):
            np.save(where / "human_pixel_masks.npy", pixel)
        masks.append(pixel[..., 0])
    return masks


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train/, validation/, test/, train_metadata.json, validation_metadata.json,
    sample_submission.csv) and prepared/private/answers.csv, as many records as `sizes(scale)` says."""
    size = sizes(scale)
    side = size.smallest[0]
    public, private = folders(root, "train", "validation", "test")
    ids = record_ids(rng, size.train + validation_count(scale) + size.test)
    train, validation, test = ids[:size.train], ids[size.train:-size.test], ids[-size.test:]
    _write(rng, public / "train", train, side, "all")
    _write(rng, public / "validation", validation, side, "pixel")
    masks = _write(rng, public / "test", test, side, "none")
    (public / "train_metadata.json").write_text(json.dumps([_metadata(rng, i) for i in train]))
    (public / "validation_metadata.json").write_text(json.dumps([_metadata(rng, i) for i in validation]))
    answers = pd.DataFrame({"record_id": test, "encoded_pixels": [rle.written(m, "column", "-") for m in masks],
                            "height": side, "width": side})
    answers.to_csv(private / "answers.csv", index=False)
    sample = answers.assign(encoded_pixels=rng.choice(["1 3 10 5", "-"], len(answers)))
    sample.to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Google Research - Identify Contrails to Reduce Global Warming",
             "Segment the contrails of each test record (test/<record_id>/band_XX.npy, the fifth frame labelled).",
             "Submissions are evaluated on the global Dice coefficient over every pixel of every test record.",
             "Submit `record_id,encoded_pixels` for every test record: run-length pairs numbered from top to "
             "bottom, then left to right, 1-indexed; `-` for a record without contrails.")
