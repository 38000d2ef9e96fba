"""A synthetic iwildcam-2019-fgvc6: camera-trap photos, as MLE-bench's prepare.py lays them out: `train.csv`
(category_id, date_captured, file_name, frame_num, id, location, rights_holder, seq_id, seq_num_frames, width,
height) and `test.csv` (the same without category_id), the photos zipped flat as `<id>.jpg` in `train_images.zip`
and `test_images.zip`; a few photos listed twice, as in the real tables; `sample_submission.csv` written with its
index (a header `,Id,Category`: an unnamed column of the test rows' places in the whole table, every Category 0);
private/answers.csv (`Id,Category`) and private/test.csv (the test rows whole).

A tenth of the cameras (locations) go to test, so train and test share none: each camera sees its own scene (a
background colour and texture), and an animal is a blob of its species' hue and shape (runner.demo._specimens);
half the photos are empty (category 0), the real majority. The all-empty sample scores a macro-F1 of F1(empty)
over the species in the answers; a model that finds the animals across unseen scenes does far better.

`sizes(scale)`: 30 cameras and 1,500 photos of 48x35 at the replica's own scale; 138 cameras and 196,299 photos of
1024x747 at REAL.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, folders, hex_ids, quota, render, zip_folder_flat
from runner.demo._specimens import looks, specimen

PHOTOS, CAMERAS = 1_500, 30  # the replica's own
REAL_PHOTOS, REAL_CAMERAS = 196_299, 138  # 179,422 train and 16,877 test rows
WIDTH, HEIGHT = 48, 35
REAL_WIDTH, REAL_HEIGHT = 1024, 747
TEST_CAMERAS = 0.1  # the share of cameras whose photos are the test set
# the replica's species (the real ids) and their shares: empty the majority, as in the real tables
SPECIES = ((0, 50), (1, 8), (3, 6), (10, 6), (11, 7), (13, 9), (16, 4), (19, 10))
TWICE = 0.01  # the share of rows listed a second time
CHUNK = 32


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many photos `scale` writes (test about a tenth) and their pixel size."""
    scale = parse_scale(scale)
    shape = (REAL_WIDTH, REAL_HEIGHT) if is_real(scale) else (WIDTH, HEIGHT)
    photos = scaled(PHOTOS, REAL_PHOTOS, scale, least=40)
    test = round(TEST_CAMERAS * photos)
    return Sizes(photos - test, test, shape, shape)


def _uuid(hexes: str) -> str:
    return f"{hexes[:8]}-{hexes[8:12]}-{hexes[12:16]}-{hexes[16:20]}-{hexes[20:32]}"


def _photos(items: list[tuple[int, int, Path]], seed: int, palette: dict, scenes: dict, shape) -> list:
    rng = np.random.default_rng(seed)
    for category, camera, path in items:
        look = palette.get(category)  # None: an empty scene
        specimen(look, rng, shape, scenes[camera], size=0.22, swing=45, noise=9).save(path, quality=85)
    return []


def _table(rng: np.random.Generator, photos: int, cameras: int, shape) -> pd.DataFrame:
    """Every row of the whole table: a camera, a species, a sequence, the photo's id and its file's name."""
    ids = [_uuid(h) for h in hex_ids(rng, photos, 32)]
    sequences = [_uuid(h) for h in hex_ids(rng, photos // 3 + 1, 32)]
    seconds = rng.integers(1_300_000_000, 1_530_000_000, photos)
    frame = pd.DataFrame({
        "category_id": [SPECIES[k][0] for k in quota(tuple(s for _, s in SPECIES), photos, rng)],
        "date_captured": pd.to_datetime(seconds, unit="s").strftime("%Y-%m-%d %H:%M:%S"),
        "file_name": [f"{i}.jpg" for i in ids], "frame_num": rng.integers(1, 4, photos), "id": ids,
        "location": rng.integers(0, cameras, photos) * 3 + 1,
        "rights_holder": rng.choice(["Justin Brown", "Erin Boydston", "Unknown"], photos),
        "seq_id": rng.choice(sequences, photos), "seq_num_frames": 3, "width": shape[0], "height": shape[1]})
    twice = frame.iloc[rng.choice(photos, max(1, round(TWICE * photos)), replace=False)]
    return pd.concat([frame, twice]).sort_values("date_captured", kind="stable").reset_index(drop=True)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, both zips, the sample) and prepared/private (answers.csv and
    test.csv)."""
    size = sizes(scale)
    real = is_real(parse_scale(scale))
    public, private = folders(root, "train_images", "test_images")
    table = _table(rng, size.train + size.test, REAL_CAMERAS if real else CAMERAS, size.smallest)
    locations = table["location"].unique()
    held = set(rng.choice(locations, max(1, round(TEST_CAMERAS * len(locations))), replace=False).tolist())
    is_test = table["location"].isin(held)
    train, answers = table[~is_test], table[is_test]
    palette = dict(zip([s for s, _ in SPECIES[1:]], looks(len(SPECIES) - 1, rng)))
    scenes = {c: tuple(rng.uniform(40, 170, 3)) for c in locations.tolist()}
    jobs = [(r.category_id, r.location, public / folder / r.file_name)
            for folder, rows in (("train_images", train), ("test_images", answers))
            for r in rows.drop_duplicates("id").itertuples()]
    render(partial(_photos, palette=palette, scenes=scenes, shape=size.smallest), jobs, rng, CHUNK,
           size.pixels(len(jobs)))
    answers.to_csv(private / "test.csv", index=False)
    answers[["id", "category_id"]].set_axis(["Id", "Category"], axis=1).to_csv(private / "answers.csv", index=False)
    train.to_csv(public / "train.csv", index=False)
    answers.drop(columns="category_id").to_csv(public / "test.csv", index=False)
    answers[["id"]].assign(category_id=0).set_axis(["Id", "Category"], axis=1).to_csv(
        public / "sample_submission.csv", index=True)
    for folder in ("train_images", "test_images"):
        zip_folder_flat(public / folder, public / f"{folder}.zip")
        for file in (public / folder).iterdir():
            file.unlink()
        (public / folder).rmdir()
    describe(public, "iWildCam 2019 - FGVC6",
             "Classify the animal (or none: 0, empty) in each camera-trap photo of test_images.zip; train.csv "
             "gives each training photo's category_id. Test cameras are not in train.",
             "Submissions are evaluated on the macro F1 score.", "Submit `Id,Category` for every row of test.csv.")
