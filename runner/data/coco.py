"""Labels from COCO-style JSON (the spec's `items: coco`): the training file (`items_file`) lists `images` (an id
and a `file_name`) and `annotations` (an `image_id` and a `category_id`), joined by the image's id; the test file
(`test_items_file`) lists the test images, as `{"images": [...]}` or a bare list, each matched to the sample's
row of the same id (ids compared as text: the sample's 0 is the JSON's "0"). herbarium 2020-2022, inaturalist-2019
and iwildcam-2020 lay their images out so.

A `file_name` is found below the spec's image folder (or where its archive was extracted) by its longest tail that
names a file there (runner.data.item_files): `images/156/72/354106.jpg` as it is, inaturalist's
`train_val2019/Plants/400/x.jpg` as `Plants/400/x.jpg` inside a tar whose members lack that first folder. Without
a test file, a test image is the one named by its id plus the spec's suffix.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec
from runner.data.item_files import FileIndex
from runner.data.reading import located

IMAGE_ID_KEYS = ("id", "image_id")  # what an image record calls its id (herbarium-2022's says image_id)


def read_json(path: Path, what: str, data_dir: Path):
    """A JSON file inside the public folder, or an InputError naming it."""
    real = located(path, what, data_dir)
    try:
        return json.loads(real.read_bytes())
    except (ValueError, OSError) as exc:
        raise InputError(f"{path}: cannot read {what}: {exc}") from exc


def image_records(document, path: Path) -> list[dict]:
    """The image records of a COCO document: its `images` list, or the document itself when it is a list."""
    records = document.get("images") if isinstance(document, dict) else document
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise InputError(f"{path}: no list of image records (neither a JSON list nor an 'images' key)")
    return records


def _image_id(record: dict, path: Path):
    for key in IMAGE_ID_KEYS:
        if key in record:
            return record[key]
    raise InputError(f"{path}: an image record has no id ({' or '.join(IMAGE_ID_KEYS)}): {str(record)[:120]}")


def _file_name(record: dict, path: Path) -> str:
    if not isinstance(record.get("file_name"), str):
        raise InputError(f"{path}: an image record has no file_name: {str(record)[:120]}")
    return record["file_name"]


def training_rows(document, path: Path, id_column: str, target: str) -> pd.DataFrame:
    """One row per annotation: its image's id (the spec's id column), its category (the target) and the image's
    `file_name`; an annotation of an image the file does not list is left out."""
    if not isinstance(document, dict) or not isinstance(document.get("annotations"), list):
        raise InputError(f"{path}: no 'annotations' list: no training labels")
    names = {str(_image_id(r, path)): _file_name(r, path) for r in image_records(document, path)}
    rows = []
    for annotation in document["annotations"]:
        if not isinstance(annotation, dict) or "image_id" not in annotation or "category_id" not in annotation:
            raise InputError(f"{path}: an annotation lacks image_id or category_id: {str(annotation)[:120]}")
        name = names.get(str(annotation["image_id"]))
        if name is not None:
            rows.append((annotation["image_id"], annotation["category_id"], name))
    if not rows:
        raise InputError(f"{path}: no annotation names an image the file lists")
    return pd.DataFrame(rows, columns=[id_column, target, "file_name"])


def coco_items(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame) -> tuple:
    """The training rows of the spec's COCO file and each row's image; the test images by the test file's ids:
    runner.data.items.Items' fields, in order."""
    if not spec.items_file or not spec.image_dir:
        raise InputError(f"spec {spec.id}: items 'coco' needs items_file (the training JSON) and image_dir")
    path = data_dir / spec.items_file
    rows = training_rows(read_json(path, "training labels", data_dir), path, spec.id_column, spec.targets[0])
    train_index = FileIndex(data_dir, spec.image_dir, work_dir)
    train_files = [train_index.find(name) for name in rows["file_name"]]
    if all(f is None for f in train_files):
        raise InputError(f"{data_dir / spec.image_dir}: none of the images {spec.items_file} names was found "
                         f"(e.g. {rows['file_name'].iloc[0]!r})")
    test_folder = spec.test_image_dir or spec.image_dir
    test_index = train_index if test_folder == spec.image_dir else FileIndex(data_dir, test_folder, work_dir)
    if spec.test_items_file:
        test_path = data_dir / spec.test_items_file
        records = image_records(read_json(test_path, "test images", data_dir), test_path)
        by_id = {str(_image_id(r, test_path)): _file_name(r, test_path) for r in records}
        test_files = [test_index.find(by_id[i]) if i in by_id else None
                      for i in sample[spec.id_column].astype(str)]
    else:
        test_files = test_index.named(sample[spec.id_column], spec.test_suffix)
    return rows.drop(columns="file_name"), train_files, test_files, str(path)
