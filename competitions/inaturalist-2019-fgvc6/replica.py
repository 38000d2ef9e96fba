"""A synthetic inaturalist-2019-fgvc6: photos of species, as MLE-bench's prepare.py lays them out:
`train2019.json` (COCO-style, indent 4, sorted keys: images with int ids and file names
`train_val2019/<Iconic>/<category>/<32 hex>.jpg`, annotations naming each image's category_id, categories with
their taxonomy) beside `train_val2019.tar.gz`, an uncompressed tar despite its name whose members lack the
`train_val2019/` prefix (`Plants/400/<hex>.jpg`); the raw `val2019.json`, whose images are not shipped;
`test2019.json` (images, info, licenses; file names `test2019/<hex>.jpg`, in the shuffled test order) beside
`test2019.tar.gz` (flat `<hex>.jpg`); `kaggle_sample_submission.csv` (`id,predicted`, every row 654); private
answers.csv in the same order.

Each category gives 12% of its photos to test (a lone one trains, two to four give their last, five or more draw
at random), as MLE-bench's split does. Each species is a hue and a shape on a natural background
(runner.demo._specimens); the top-1 error of the commonest species is near 1.

`sizes(scale)`: 20 species and 1,300 photos of 56x42 at the replica's own scale; 1,010 species and 265,213 photos
of 800x600 at REAL.
"""
from __future__ import annotations

import random
import shutil
import tarfile
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._coco import category_counts, dump, split_category
from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, folders, hex_ids, render
from runner.demo._specimens import looks, specimen

CATEGORIES, IMAGES = 20, 1_300  # the replica's own
REAL_CATEGORIES, REAL_IMAGES = 1_010, 265_213  # 232,999 train and 32,214 test photos
WIDTH, HEIGHT = 56, 42
REAL_WIDTH, REAL_HEIGHT = 800, 600  # the real photos' longest side is 800
TEST_SHARE = 0.12
ICONIC = ("Plants", "Insects", "Birds", "Fungi", "Reptiles", "Amphibians", "Mammals", "Fish", "Mollusks",
          "Arachnids", "Animalia")
SAMPLE_LABEL = random.Random(42).randint(0, 1009)  # prepare.py draws every row's label from a fresh Random(42)
CHUNK = 32  # photos one task draws


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many photos `scale` writes (train, test about 12% of them) and their pixel size."""
    scale = parse_scale(scale)
    shape = (REAL_WIDTH, REAL_HEIGHT) if is_real(scale) else (WIDTH, HEIGHT)
    images = scaled(IMAGES, REAL_IMAGES, scale, least=2 * (REAL_CATEGORIES if is_real(scale) else CATEGORIES))
    test = round(TEST_SHARE * images)
    return Sizes(images - test, test, shape, shape)


def _photos(items: list[tuple[int, Path]], seed: int, palette: dict, shape: tuple[int, int]) -> list:
    rng = np.random.default_rng(seed)
    for category, path in items:
        path.parent.mkdir(parents=True, exist_ok=True)
        background = (80 + rng.normal(0, 25), 110 + rng.normal(0, 25), 70 + rng.normal(0, 20))
        specimen(palette[category], rng, shape, background, size=0.36, swing=25, noise=8).save(
            path, quality=int(rng.integers(85, 96)))
    return []


def _tar(folder: Path, path: Path) -> None:
    """An uncompressed tar of the folder's files, named by their path inside it, then the folder removed (as
    prepare.py's add_to_tar)."""
    with tarfile.open(path, "w") as archive:
        for file in sorted(p for p in folder.rglob("*") if p.is_file()):
            archive.add(file, arcname=file.relative_to(folder).as_posix())
    shutil.rmtree(folder)


def _taxonomy(category: int) -> dict:
    return {"id": category, "name": f"Species {category}", "kingdom": "Animalia" if category % 3 else "Plantae",
            "phylum": f"Phylum{category % 4}", "class": f"Class{category % 5}", "order": f"Order{category % 6}",
            "family": f"Family{category % 7}", "genus": f"Genus{category % 8}"}


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (the three JSON files, both tars, the sample) and prepared/private/answers.csv."""
    size = sizes(scale)
    real = is_real(parse_scale(scale))
    public, private = folders(root)
    categories = REAL_CATEGORIES if real else CATEGORIES
    ids = np.sort(rng.choice(REAL_CATEGORIES, categories, replace=False)).tolist()
    palette = dict(zip(ids, looks(categories, rng)))
    counts = category_counts(categories, size.train + size.test, rng)
    names = iter(hex_ids(rng, int(counts.sum()) + 3, 32))
    image_id = 1_000
    train, test = [], []
    for category, count in zip(ids, counts.tolist()):
        iconic = ICONIC[category % len(ICONIC)]
        members = []
        for _ in range(count):
            image_id += int(rng.integers(1, 9))
            members.append({"id": image_id, "file_name": f"train_val2019/{iconic}/{category}/{next(names)}.jpg",
                            "width": size.smallest[0], "height": size.smallest[1], "license": 1,
                            "rights_holder": "someone"})
        kept, held = split_category(members, TEST_SHARE, rng)
        train += [(category, m) for m in kept]
        test += [(category, m) for m in held]
    test = [test[k] for k in rng.permutation(len(test))]
    info = {"year": 2019, "version": "1.0", "description": "iNaturalist 2019"}
    licenses = [{"id": 1, "name": "Attribution-NonCommercial License", "url": "http://creativecommons.org/"}]
    annotation = lambda category, image: {"id": image["id"], "image_id": image["id"], "category_id": category}
    dump(public / "train2019.json", {"annotations": [annotation(c, i) for c, i in train],
                                     "categories": [_taxonomy(c) for c in ids], "images": [i for _, i in train],
                                     "info": info, "licenses": licenses})
    val = [(c, {**i, "id": i["id"] + 10_000_000, "file_name": f"train_val2019/val/{c}/{n}.jpg"})
           for (c, i), n in zip(train[:3], names)]  # raw val2019.json: its images are not shipped
    dump(public / "val2019.json", {"annotations": [annotation(c, i) for c, i in val],
                                   "categories": [_taxonomy(c) for c in ids], "images": [i for _, i in val],
                                   "info": info, "licenses": licenses}, indent=None, sort_keys=False)
    test_images = [{**i, "file_name": "test2019/" + i["file_name"].split("/")[-1]} for _, i in test]
    dump(public / "test2019.json", {"images": test_images, "info": info, "licenses": licenses})
    jobs = [(c, public / i["file_name"]) for c, i in train] + \
        [(c, public / i["file_name"]) for (c, _), i in zip(test, test_images)]
    render(partial(_photos, palette=palette, shape=size.smallest), jobs, rng, CHUNK, size.pixels(len(jobs)))
    _tar(public / "test2019", public / "test2019.tar.gz")
    _tar(public / "train_val2019", public / "train_val2019.tar.gz")
    answers = pd.DataFrame({"id": [i["id"] for _, i in test], "predicted": [c for c, _ in test]})
    answers.to_csv(private / "answers.csv", index=False)
    answers.assign(predicted=SAMPLE_LABEL).to_csv(public / "kaggle_sample_submission.csv", index=False)
    describe(public, "iNaturalist 2019 at FGVC6",
             "Identify the species of each photo in test2019.tar.gz, listed by test2019.json; the training photos "
             "(train_val2019.tar.gz) have their species in train2019.json (annotations' category_id).",
             "Submissions are evaluated on the top-1 classification error (a top-k string's first label counts).",
             "Submit `id,predicted` for every test image.")
