"""A synthetic statoil-iceberg-classifier-challenge: radar pictures of ships and icebergs as JSON records in 7z
archives, as MLE-bench's 80/20 split of the real train.json lays them out: train.json.7z and test.json.7z, each
one JSON array of records (`id`, `band_1`, `band_2`: two square bands of backscatter in dB, flattened row by row;
`inc_angle`: degrees or the string "na"; `is_iceberg` in train only), the sample only as sample_submission.csv.7z;
the answers in private/test.csv beside the sample's unzipped twin.

Each picture is sea clutter whose level falls with the incidence angle, with one bright target: a ship is a long
narrow streak, brighter in HH (band_1) than HV (band_2); an iceberg a compact, rounder blob with a stronger HV
return. Sizes and brightness overlap, so some cannot be told. As in the real data, only ships have an unknown
angle ("na"). A CNN on the two bands, or statistics of them, learns it; the sample's 0.5 scores a log loss of
0.693, the iceberg share about 0.69.

`sizes(scale)`: 25 x 25 bands at a factor of the replica's own counts; at REAL the 1,604 records of 75 x 75.
"""
from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import folders, hex_ids

SIDE, REAL_SIDE = 25, 75
TRAIN, TEST = 320, 180  # the replica's own counts
REAL_TRAIN, REAL_TEST = 1_283, 321  # MLE-bench's 80/20 split of the 1,604 labelled records
LEAST = 10
ICEBERG_SHARE = 0.47  # the real train's share
NA_SHARE = 0.15  # of the ships: an unknown incidence angle (all 133 "na" of the real train were ships)
ANGLE = (30.0, 46.0)  # degrees
DECIMALS = 3  # the bands' dB values as JSON writes them (the real ones carry six)
PRESET = 0  # LZMA2 at its fastest: seconds less per megabyte, and a 7z archive all the same


@dataclass(frozen=True)
class Records:
    train: int
    test: int
    side: int


def sizes(scale: float | str = 1.0) -> Records:
    """How many records `scale` writes (a factor of the replica's own counts, or REAL) and their bands' side."""
    scale = parse_scale(scale)
    return Records(scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST),
                   REAL_SIDE if is_real(scale) else SIDE)


def bands(iceberg: bool, angle: float, side: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(band_1, band_2) in dB: clutter falling with the angle, and one target near the middle."""
    unit = side / SIDE
    sea = -22.0 - 0.25 * (angle - ANGLE[0])
    rows, cols = np.mgrid[0:side, 0:side].astype(np.float64)
    cy, cx = side / 2 + rng.normal(0, 1.5 * unit, 2)
    theta = rng.uniform(0, np.pi)
    u = (cols - cx) * np.cos(theta) + (rows - cy) * np.sin(theta)
    v = -(cols - cx) * np.sin(theta) + (rows - cy) * np.cos(theta)
    if iceberg:  # compact and round, a strong cross-polarised return
        length = rng.uniform(1.5, 3.0) * unit
        width = length * rng.uniform(0.6, 1.0)
        gain_1, gain_2 = rng.uniform(8, 14), rng.uniform(8, 13)
    else:  # long and narrow, bright in HH
        length = rng.uniform(2.5, 5.0) * unit
        width = length * rng.uniform(0.2, 0.5)
        gain_1, gain_2 = rng.uniform(10, 18), rng.uniform(4, 10)
    target = np.exp(-0.5 * ((u / length) ** 2 + (v / width) ** 2))
    band_1 = sea + rng.normal(0, 2.0, (side, side)) + gain_1 * target
    band_2 = sea - 6.0 + rng.normal(0, 2.0, (side, side)) + gain_2 * target
    return np.round(band_1, DECIMALS), np.round(band_2, DECIMALS)


def records(count: int, side: int, rng: np.random.Generator, labelled: bool) -> tuple[list[dict], np.ndarray]:
    """`count` records (with `is_iceberg` when `labelled`) and their labels."""
    ids = hex_ids(rng, count, 8)
    iceberg = rng.random(count) < ICEBERG_SHARE
    out = []
    for name, label in zip(ids, iceberg):
        angle = float(np.round(rng.uniform(*ANGLE), 4))
        band_1, band_2 = bands(bool(label), angle, side, rng)
        unknown = not label and rng.random() < NA_SHARE
        record = {"id": name, "band_1": band_1.ravel().tolist(), "band_2": band_2.ravel().tolist(),
                  "inc_angle": "na" if unknown else angle}
        if labelled:
            record["is_iceberg"] = int(label)
        out.append(record)
    return out, iceberg.astype(int)


def _seven_zip(path: Path, name: str, content: bytes) -> None:
    """`path`: a 7z archive holding one member `name` at its root, as py7zr writes it."""
    import py7zr

    with tempfile.TemporaryDirectory() as scratch:
        member = Path(scratch) / name
        member.write_bytes(content)
        with py7zr.SevenZipFile(path, "w", filters=[{"id": py7zr.FILTER_LZMA2, "preset": PRESET}]) as archive:
            archive.write(member, arcname=name)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.json.7z, test.json.7z, sample_submission.csv.7z) and prepared/private
    (test.csv, sample_submission.csv), as many records as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root)
    train, _ = records(size.train, size.side, rng, labelled=True)
    test, truth = records(size.test, size.side, rng, labelled=False)
    _seven_zip(public / "train.json.7z", "train.json", json.dumps(train).encode())
    _seven_zip(public / "test.json.7z", "test.json", json.dumps(test).encode())
    answers = pd.DataFrame({"id": [r["id"] for r in test], "is_iceberg": truth})
    answers.to_csv(private / "test.csv", index=False)
    sample = answers.assign(is_iceberg=0.5)
    sample.to_csv(private / "sample_submission.csv", index=False)
    _seven_zip(public / "sample_submission.csv.7z", "sample_submission.csv", sample.to_csv(index=False).encode())
    describe(public, "Statoil/C-CORE Iceberg Classifier Challenge",
             "Predict, for each radar picture in test.json (two bands, HH and HV, flattened; the incidence angle, "
             "or \"na\"), the probability that it shows an iceberg rather than a ship.",
             "Submissions are evaluated on the log loss between the predicted values and the ground truth.",
             "Submit `id,is_iceberg` for every test record.")
