"""Items whose labels no train table of the sample's names lists, read from their replicas: COCO-style JSON (nested
paths, string and int ids, a bare test list, a tar whose members lack the JSON's first folder), a table named apart
from the sample, BSON documents with the pictures inside (tiled into one picture per item, the training items drawn
beyond a bound and said), and label folders beside the test folder (its files left out of training, one file name's
versions in one fold, one label against the others)."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from runner.common.errors import InputError
from runner.competition.catalog import load_spec
from runner.data import bson_records
from runner.data.items import read_items
from runner.data.loading import load_dataset
from runner.data.targets import read_sample
from runner.demo import replica as replica_module, write_demo

SCALE = 0.25  # of each replica's own size: a few hundred pictures


def replica(competition: str, tmp_path: Path):
    """(spec, public folder, private folder) of a fresh replica."""
    root = write_demo(competition, tmp_path / "data", scale=SCALE)
    return load_spec(competition), root / "prepared" / "public", root / "prepared" / "private"


def items_of(competition: str, tmp_path: Path):
    spec, public, private = replica(competition, tmp_path)
    return spec, public, private, read_items(spec, public, tmp_path / "work", read_sample(spec, public))


def test_coco_labels_join_each_annotation_to_its_nested_image_and_the_test_json_lists_the_sample(tmp_path):
    spec, public, private, items = items_of("herbarium-2020", tmp_path)
    document = json.loads((public / "nybg2020/train/metadata.json").read_text())
    assert len(items.train) == len(document["annotations"]) and all(f is not None for f in items.train_files)
    first = items.train.iloc[0]
    category = first["Predicted"]
    assert items.train_files[0].parent.as_posix().endswith(f"images/{category // 100:03d}/{category % 100:02d}")
    answers = pd.read_csv(private / spec.answers_file)
    assert [f.name for f in items.test_files] == [f"{i}.jpg" for i in answers["Id"]]  # ids "0", "1"... by the JSON


def test_coco_finds_files_in_a_tar_named_tar_gz_whose_members_lack_the_first_folder(tmp_path):
    spec, public, private, items = items_of("inaturalist-2019", tmp_path)
    listed = {i["id"]: i["file_name"] for i in json.loads((public / "train2019.json").read_text())["images"]}
    found = items.train_files[0].as_posix()
    assert listed[items.train["id"].iloc[0]].endswith(found.split("/extracted/train_val2019/")[1])
    tests = {i["id"]: i["file_name"] for i in json.loads((public / "test2019.json").read_text())["images"]}
    sample = read_sample(spec, public)
    assert [f.name for f in items.test_files] == [tests[i].split("/")[-1] for i in sample["id"]]


def test_coco_reads_string_image_ids_and_a_bare_list_of_test_images(tmp_path):
    spec, public, _, items = items_of("herbarium-2022", tmp_path)
    assert items.train["Id"].iloc[0].count("__") == 1 and all(f is not None for f in items.train_files)
    assert items.test_files[0].name == "test-000000.jpg" and None not in items.test_files


def test_coco_without_annotations_is_an_error_naming_the_file(tmp_path):
    spec, public, _ = replica("herbarium-2022", tmp_path)
    (public / "train_metadata.json").write_text(json.dumps({"images": []}))
    with pytest.raises(InputError, match="train_metadata.json: no 'annotations'"):
        read_items(spec, public, tmp_path / "work", read_sample(spec, public))


def test_a_table_named_apart_from_the_sample_gives_its_ids_and_the_label_the_test_table_lacks(tmp_path):
    spec, public, _, items = items_of("iwildcam-2019", tmp_path)
    train = pd.read_csv(public / "train.csv")
    assert list(items.train.columns) == ["Id", "Category"] and len(items.train) == len(train)
    assert items.train["Category"].tolist() == train["category_id"].tolist()
    assert train["id"].duplicated().any()  # a photo listed twice is two rows with one file
    assert all(f is not None for f in items.train_files)
    sample = read_sample(spec, public)
    assert sample.columns[0] == "Unnamed: 0" and [f.stem for f in items.test_files] == sample["Id"].tolist()


def test_bson_items_are_one_row_each_their_pictures_tiled_into_one(tmp_path):
    spec, public, private, items = items_of("cdiscount", tmp_path)
    import bson

    with open(public / "train.bson", "rb") as handle:
        first = next(bson.decode_file_iter(handle))
    assert items.train.iloc[0].tolist() == [first["_id"], first["category_id"]]
    with Image.open(items.train_files[0]) as tiled, Image.open(__import__("io").BytesIO(
            first["imgs"][0]["picture"])) as picture:
        assert tiled.size == (2 * picture.width, 2 * picture.height)
    answers = pd.read_csv(private / spec.answers_file)
    assert [int(f.stem) for f in items.test_files] == answers["_id"].tolist()


def test_bson_training_items_beyond_the_bound_are_drawn_and_said(tmp_path, monkeypatch):
    spec, public, _ = replica("cdiscount", tmp_path)
    monkeypatch.setattr(bson_records, "MAX_TRAIN_ITEMS", 100)
    dataset = load_dataset(spec, public, tmp_path / "work")
    said = [s for s in dataset.sampled if s.what == "training items"]
    assert said and 50 < said[0].kept < 150 and said[0].of == replica_module("cdiscount").sizes(SCALE).train
    assert len(dataset.y) == said[0].kept  # the items without a picture do not train


def test_label_folders_beside_the_test_folder_train_one_against_the_others_a_name_in_one_fold(tmp_path):
    spec, public, _ = replica("alaska2", tmp_path)
    items = read_items(spec, public, tmp_path / "work", read_sample(spec, public))
    assert set(items.train["Label"]) == {"Cover", "JMiPOD", "JUNIWARD", "UERD"}  # nothing from Test/
    dataset = load_dataset(spec, public, tmp_path / "work")
    assert dataset.classes == [0, 1] and dataset.y.mean() == pytest.approx(0.75)  # three stego copies a cover
    names = np.asarray([Path(i).name for i in items.train["Id"]])
    assert (dataset.groups == names).all() and len(set(dataset.groups)) == len(dataset.y) // 4
