"""A synthetic herbarium-2022-fgvc9: specimen sheets of species, as MLE-bench's prepare.py lays them out:
`train_metadata.json` (COCO-style, indent 4, sorted keys: images with string ids `<category:05d>__<k:03d>` and
file names `<ccc>/<cc>/<image id>.jpg`, annotations naming each image's category_id, genus_id and institution_id,
categories, genera, distances between genera, institutions, licenses) beside `train_images/<ccc>/<cc>/`; the test
sheets in `test_images/<iii>/test-<idx:06d>.jpg`, listed by `test_metadata.json`, a bare JSON list of
`{file_name, image_id: "0", license}`; `sample_submission.csv` (`Id,Predicted`, all 42); private/answers.csv.

Every category gives a fifth of its sheets (at least one) to test, drawn at random. Each species is a hue and a shape
(runner.demo._herbarium), with a long tail of sheets; the majority species scores a macro-F1 near 0.

`sizes(scale)`: 24 species and 800 sheets of 44x64 at the replica's own scale; 15,501 species and 839,772 sheets
of 676x1000 at REAL.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._coco import dump, split_category
from runner.demo._herbarium import draw_sheets, herbarium_sizes, species
from runner.demo._layout import describe
from runner.demo._pictures import Sizes, folders

CATEGORIES, IMAGES = 24, 800  # the replica's own
REAL_CATEGORIES, REAL_IMAGES = 15_501, 839_772  # 665,720 train and 174,052 test sheets
GENERA = 6  # the replica's genera: each species belongs to one
LEAST = 2  # sheets a category has at least: one trains, one is tested


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many sheets `scale` writes (train, test about a fifth of them) and their pixel size."""
    return herbarium_sizes(scale, CATEGORIES, IMAGES, REAL_CATEGORIES, REAL_IMAGES).sizes()


def _reference(ids: list[int], rng: np.random.Generator) -> dict:
    """The metadata besides images and annotations: categories, genera, their distances, institutions, licenses."""
    genera = [{"genus_id": g, "genus": f"Genus{g}"} for g in range(GENERA)]
    return {
        "categories": [{"category_id": c, "scientificName": f"Genus{c % GENERA} species{c}", "authors": "L.",
                        "family": f"Family{c % 3}", "genus": f"Genus{c % GENERA}", "species": f"species{c}"}
                       for c in ids],
        "genera": genera,
        "distances": [{"genus_id_x": a, "genus_id_y": b, "distance": round(float(rng.uniform(0, 1)), 4)}
                      for a in range(GENERA) for b in range(a + 1, GENERA)],
        "institutions": [{"institution_id": k, "collectionCode": f"INST{k}"} for k in range(4)],
        "licenses": [{"id": 0, "name": "Public Domain Dedication", "url": "https://creativecommons.org/"}],
    }


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train_metadata.json, train_images/, test_metadata.json, test_images/, the sample)
    and prepared/private/answers.csv."""
    herbarium = herbarium_sizes(scale, CATEGORIES, IMAGES, REAL_CATEGORIES, REAL_IMAGES)
    public, private = folders(root, "train_images", "test_images")
    ids, palette, counts = species(herbarium, rng)
    train_images, annotations, test, jobs = [], [], [], []
    for category, count in zip(ids.tolist(), np.maximum(LEAST, counts).tolist()):
        kept, held = split_category(list(range(count)), 0.2, rng, few_rule=False)
        for k in range(1, len(kept) + 1):
            image_id = f"{category:05d}__{k:03d}"
            name = f"{category // 100:03d}/{category % 100:02d}/{image_id}.jpg"
            train_images.append({"image_id": image_id, "file_name": name, "license": 0})
            annotations.append({"category_id": category, "genus_id": category % GENERA,
                                "institution_id": int(rng.integers(0, 4)), "image_id": image_id})
            jobs.append((category, public / "train_images" / name))
        test += [category] * len(held)
    test = [test[k] for k in rng.permutation(len(test))]
    dump(public / "train_metadata.json", {"annotations": annotations, "images": train_images,
                                          **_reference(ids.tolist(), rng)})
    test_records = [{"file_name": f"{k // 1000:03d}/test-{k:06d}.jpg", "image_id": str(k), "license": 0}
                    for k in range(len(test))]
    dump(public / "test_metadata.json", test_records)
    jobs += [(c, public / "test_images" / r["file_name"]) for c, r in zip(test, test_records)]
    draw_sheets(jobs, palette, herbarium.shape, rng)
    answers = pd.DataFrame({"Id": range(len(test)), "Predicted": test})
    answers.to_csv(private / "answers.csv", index=False)
    answers.assign(Predicted=42).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Herbarium 2022 - FGVC9",
             "Identify the species of each herbarium sheet in test_images/, listed by test_metadata.json; the "
             "training sheets' species are in train_metadata.json (annotations' category_id of each image).",
             "Submissions are evaluated on the macro F1 score.", "Submit `Id,Predicted` for every test image.")
