"""What the herbarium replicas (2020, 2021, 2022) share: a specimen sheet per image, and the layout 2020 and 2021
share (a COCO `metadata.json` in a train and a test folder, images nested by category), which 2020 writes below
`nybg2020/` with `regions` and 2021 at the root with `institutions`.

A sheet is pale paper with a few leaves of the species' look (its hue and shape, runner.demo._specimens) and, in
a corner, a collection label that says nothing of the species; the real sheets are scans of pressed plants of
32,093 (2020), 64,500 (2021) and 15,501 (2022) species, at most 1000 pixels a side.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from runner.demo._coco import category_counts, dump, split_category
from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, render
from runner.demo._specimens import Look, looks, specimen

WIDTH, HEIGHT = 44, 64  # the replica's sheets: portrait, as the real ones
REAL_WIDTH, REAL_HEIGHT = 676, 1000  # the real sheets' most common size
PAPER = (236, 230, 208)
LABEL = (250, 250, 245)
LEAVES = 3  # leaves of the species a sheet shows
CHUNK = 32  # sheets one task draws


def sheet(look: Look, rng: np.random.Generator, shape: tuple[int, int]) -> Image.Image:
    """One specimen sheet of `shape` (width, height): a few leaves of the look, a collection label in a corner."""
    image = specimen(look, rng, shape, PAPER, size=0.22, swing=10, noise=5, copies=LEAVES, shade=20)
    width, height = shape
    box = (int(width * 0.6), int(height * 0.84), width - 2, height - 2)
    ImageDraw.Draw(image).rectangle(box, fill=LABEL, outline=(90, 90, 90))
    return image


@dataclass(frozen=True)
class Herbarium:
    """A herbarium replica's counts: categories, images in all (train and test), and how each is drawn."""

    categories: int
    images: int
    shape: tuple[int, int]
    real_categories: int

    def sizes(self) -> Sizes:
        test = round(0.2 * self.images)
        return Sizes(self.images - test, test, self.shape, self.shape)


def herbarium_sizes(scale, categories: int, images: int, real_categories: int, real_images: int) -> Herbarium:
    """The replica's own categories and images times `scale`, or the real ones at a share of REAL (every category
    kept, at the real sheets' size)."""
    scale = parse_scale(scale)
    real = is_real(scale)
    kinds = real_categories if real else categories
    return Herbarium(kinds, scaled(images, real_images, scale, least=2 * kinds),
                     (REAL_WIDTH, REAL_HEIGHT) if real else (WIDTH, HEIGHT), real_categories)


def _sheets(items: list[tuple[int, Path]], seed: int, palette: dict, shape: tuple[int, int]) -> list:
    """Write each (category, path) sheet: one task's chunk, drawn from its own seed."""
    rng = np.random.default_rng(seed)
    for category, path in items:
        path.parent.mkdir(parents=True, exist_ok=True)
        sheet(palette[category], rng, shape).save(path, quality=int(rng.integers(85, 96)))
    return []


def draw_sheets(jobs: list[tuple[int, Path]], palette: dict, shape: tuple[int, int], rng: np.random.Generator) -> None:
    """Every (category, path) sheet, in worker processes when they are many."""
    render(partial(_sheets, palette=palette, shape=shape), jobs, rng, CHUNK, len(jobs) * shape[0] * shape[1])


def species(herbarium: Herbarium, rng: np.random.Generator) -> tuple[np.ndarray, dict, np.ndarray]:
    """(category ids, their looks by id, images per category): ids drawn from the real range, sorted."""
    ids = np.sort(rng.choice(herbarium.real_categories, herbarium.categories, replace=False))
    palette = dict(zip(ids.tolist(), looks(len(ids), rng)))
    return ids, palette, category_counts(len(ids), herbarium.images, rng, least=1)


def write_nybg(root: Path, rng: np.random.Generator, herbarium: Herbarium, prefix: str, group: str,
               category_fields: tuple[str, ...], title: str) -> None:
    """The 2020/2021 layout below public/`prefix`: train/metadata.json and train/images/<ccc>/<cc>/<id>.jpg;
    test/metadata.json (images only, ids '0'...) and test/images/<iii>/<idx>.jpg; sample_submission.csv at the
    root; private/answers.csv. `group` names the list of the annotations' own groups (regions, institutions)."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    private.mkdir(parents=True, exist_ok=True)
    base = public / prefix if prefix else public
    ids, palette, counts = species(herbarium, rng)
    groups = [{"id": k, "name": f"{group[:-1]} {k}"} for k in range(3)]
    image_id, records = 100_000, []
    for category, count in zip(ids.tolist(), counts.tolist()):
        members = []
        for _ in range(count):
            image_id += int(rng.integers(1, 40))
            folder = f"images/{category // 100:03d}/{category % 100:02d}"
            image = {"id": image_id, "file_name": f"{folder}/{image_id}.jpg", "width": herbarium.shape[0],
                     "height": herbarium.shape[1], "license": 0}
            annotation = {"id": image_id, "image_id": image_id, "category_id": category,
                          f"{group[:-1]}_id": int(rng.integers(0, len(groups)))}
            members.append((annotation, image))
        records.append((category, members))
    train, test = [], []
    for category, members in records:
        kept, held = split_category(members, 0.2, rng)
        train += [(category, m) for m in kept]
        test += [(category, m) for m in held]
    test = [test[k] for k in rng.permutation(len(test))]
    categories = [{"id": c, "name": f"Species {c}", **{f: f"{f.title()} {c // 50}" for f in category_fields}}
                  for c in ids.tolist()]
    info = {"year": 2020, "version": "1.0", "description": title}
    licenses = [{"id": 0, "name": "Public Domain Dedication", "url": "https://creativecommons.org/"}]
    dump(base / "train" / "metadata.json", {
        "annotations": [a for _, (a, _) in train], "categories": categories, "images": [i for _, (_, i) in train],
        "info": info, "licenses": licenses, group: groups})
    test_images = [{**image, "id": str(k), "file_name": f"images/{k // 1000:03d}/{k}.jpg"}
                   for k, (_, (_, image)) in enumerate(test)]
    dump(base / "test" / "metadata.json", {"images": test_images, "info": info, "licenses": licenses})
    jobs = [(c, base / "train" / i["file_name"]) for c, (_, i) in train] + \
        [(c, base / "test" / i["file_name"]) for (c, _), i in zip(test, test_images)]
    draw_sheets(jobs, palette, herbarium.shape, rng)
    answers = pd.DataFrame({"Id": range(len(test)), "Predicted": [c for c, _ in test]})
    answers.to_csv(private / "answers.csv", index=False)
    answers.assign(Predicted=0).to_csv(public / "sample_submission.csv", index=False)
    describe(public, title, f"Identify the species of each herbarium sheet in {prefix + '/' if prefix else ''}"
             "test/images/, listed by test/metadata.json; the training sheets' species are in train/metadata.json "
             "(annotations' category_id of each image).",
             "Submissions are evaluated on the macro F1 score.", "Submit `Id,Predicted` for every test image.")
