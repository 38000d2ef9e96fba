"""A synthetic iwildcam-2020-fgvc7: camera-trap photos, as MLE-bench's prepare.py lays them out:
`iwildcam2020_train_annotations.json` (json.dump as it is: annotations with string ids naming each image's
category_id, images with their camera's location, sequence, frame and time, categories, info; a field an image
lacks is NaN, as a DataFrame's records write it) beside `train/<id>.jpg`; `iwildcam2020_test_information.json`
(images, categories, info) beside `test/<id>.jpg`; the MegaDetector results of every photo
(`iwildcam2020_megadetector_results.json`); `sample_submission.csv` (`Id,Category`, uniform random categories
from NumPy's seed 0); private/answers.csv, a row per test annotation in their order.

About a quarter of the cameras (locations) go to test, so train and test share none: each camera sees its own scene,
an animal is a blob of its species' hue and shape (runner.demo._specimens); the empty category (0) is the most
common, so the majority label scores about its share, the random sample about 0.

`sizes(scale)`: 30 cameras and 1,100 photos of 48x35 at the replica's own scale; 441 cameras and 217,959 photos of
2048x1536 at REAL.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._coco import dump
from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, folders, hex_ids, quota, render
from runner.demo._specimens import looks, specimen

PHOTOS, CAMERAS = 1_100, 30  # the replica's own
REAL_PHOTOS, REAL_CAMERAS = 217_959, 441  # 157,199 train and 60,760 test photos
WIDTH, HEIGHT = 48, 35
REAL_WIDTH, REAL_HEIGHT = 2048, 1536
# of all the photos the test cameras hold, about: prepare.py moves cameras until test / (all + test) is 0.22
TEST_SHARE = 0.28
# the replica's species (real ids) and their shares: empty the commonest
SPECIES = ((0, 40), (2, 8), (6, 7), (24, 9), (70, 8), (101, 10), (372, 8), (562, 10))
CATEGORIES = 676  # the sample's labels are drawn from 0 to this
CHUNK = 32


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many photos `scale` writes (test about 28%) and their pixel size."""
    scale = parse_scale(scale)
    shape = (REAL_WIDTH, REAL_HEIGHT) if is_real(scale) else (WIDTH, HEIGHT)
    photos = scaled(PHOTOS, REAL_PHOTOS, scale, least=40)
    test = round(TEST_SHARE * photos)
    return Sizes(photos - test, test, shape, shape)


def _uuid(hexes: str) -> str:
    return f"{hexes[:8]}-{hexes[8:12]}-{hexes[12:16]}-{hexes[16:20]}-{hexes[20:32]}"


def _photos(items: list[tuple[int, int, Path]], seed: int, palette: dict, scenes: dict, shape) -> list:
    rng = np.random.default_rng(seed)
    for category, camera, path in items:
        specimen(palette.get(category), rng, shape, scenes[camera], size=0.22, swing=45, noise=9).save(
            path, quality=85)
    return []


def _images(rng: np.random.Generator, photos: int, cameras: int, shape) -> pd.DataFrame:
    ids = [_uuid(h) for h in hex_ids(rng, photos, 32)]
    seconds = rng.integers(1_300_000_000, 1_530_000_000, photos)
    frame = pd.DataFrame({
        "seq_num_frames": rng.integers(1, 4, photos), "location": rng.integers(0, cameras, photos) * 2 + 3,
        "datetime": pd.to_datetime(seconds, unit="s").strftime("%Y-%m-%d %H:%M:%S.000"), "id": ids,
        "frame_num": rng.integers(0, 3, photos), "seq_id": [_uuid(h) for h in hex_ids(rng, photos, 32)],
        "width": shape[0], "height": shape[1], "file_name": [f"{i}.jpg" for i in ids]})
    frame["corrupt"] = np.where(rng.random(photos) < 0.02, True, np.nan)  # a field few records have
    return frame


def _detections(rng: np.random.Generator, ids: list[str], animals: set) -> dict:
    """MegaDetector's results: a box where an animal is, with its confidence, for every photo."""
    images = []
    for image_id in ids:
        found = [{"category": "1", "bbox": [round(float(v), 4) for v in rng.uniform(0, 0.5, 4)],
                  "conf": round(float(rng.uniform(0.6, 1.0)), 3)}] if image_id in animals else []
        images.append({"detections": found, "id": image_id,
                       "max_detection_conf": found[0]["conf"] if found else 0.0})
    return {"info": {"detector": "megadetector_v3"}, "detection_categories": {"1": "animal", "2": "person"},
            "images": images}


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (both JSON files, the detections, train/, test/, the sample) and the answers."""
    size = sizes(scale)
    real = is_real(parse_scale(scale))
    public, private = folders(root, "train", "test")
    images = _images(rng, size.train + size.test, REAL_CAMERAS if real else CAMERAS, size.smallest)
    labels = np.asarray([SPECIES[k][0] for k in quota(tuple(s for _, s in SPECIES), len(images), rng)])
    annotations = pd.DataFrame({"id": [_uuid(h) for h in hex_ids(rng, len(images), 32)],
                                "image_id": images["id"], "category_id": labels})
    locations = rng.permutation(images["location"].unique())
    held, share = [], 0.0
    for location in locations:  # cameras to test until they hold about TEST_SHARE of the photos
        if share >= TEST_SHARE:
            break
        held.append(location)
        share = images["location"].isin(held).mean()
    is_test = images["location"].isin(held).to_numpy()
    categories = [{"id": c, "name": "empty" if c == 0 else f"species {c}"} for c, _ in SPECIES]
    records = lambda frame: frame.to_dict(orient="records")  # a field a record lacks is NaN, as json writes it
    dump(public / "iwildcam2020_train_annotations.json",
         {"annotations": annotations[~is_test].to_dict(orient="records"), "images": records(images[~is_test]),
          "categories": categories, "info": {"version": "2020", "description": "iWildCam 2020 train"}},
         indent=None, sort_keys=False)
    dump(public / "iwildcam2020_test_information.json",
         {"images": records(images[is_test]), "categories": categories,
          "info": {"version": "2020", "description": "iWildCam 2020 test"}}, indent=None, sort_keys=False)
    dump(public / "iwildcam2020_megadetector_results.json",
         _detections(rng, images["id"].tolist(), set(images["id"][labels != 0])), indent=1, sort_keys=False)
    palette = dict(zip([s for s, _ in SPECIES[1:]], looks(len(SPECIES) - 1, rng)))
    scenes = {c: tuple(rng.uniform(40, 170, 3)) for c in locations.tolist()}
    jobs = [(c, loc, public / ("test" if t else "train") / name)
            for c, loc, t, name in zip(labels, images["location"], is_test, images["file_name"])]
    render(partial(_photos, palette=palette, scenes=scenes, shape=size.smallest), jobs, rng, CHUNK,
           size.pixels(len(jobs)))
    answers = annotations[is_test][["image_id", "category_id"]].set_axis(["Id", "Category"], axis=1)
    answers.to_csv(private / "answers.csv", index=False)
    sample = answers.assign(Category=np.random.RandomState(0).randint(0, CATEGORIES, size=len(answers)))
    sample.to_csv(public / "sample_submission.csv", index=False)
    describe(public, "iWildCam 2020 - FGVC7",
             "Classify the animal (or none: 0, empty) in each camera-trap photo of test/, listed by "
             "iwildcam2020_test_information.json; iwildcam2020_train_annotations.json gives each training photo's "
             "category_id. Test cameras are not in train.",
             "Submissions are evaluated on the categorization accuracy.", "Submit `Id,Category` for every test image.")
