"""Image to image (denoising-dirty-documents): a table with a row per pixel, its noisy neighbourhood the features
and its clean intensity the target, the pixels of one page in one fold; the submission's rows are the test pixels
in the sample's order."""
import shutil

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from runner.common import metrics
from runner.data.loading import load_dataset
from runner.data.pages import pixel_features
from runner.demo import write_demo
from runner.common.errors import InputError
from runner.units.tasks import assign_folds
from runner.competition.catalog import load_spec

DENOISING = "denoising-dirty-documents"


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    return write_demo(DENOISING, tmp_path_factory.mktemp("pages"), seed=3) / "prepared" / "public"


def test_a_pixels_features_are_its_neighbourhood_the_papers_tone_and_its_place():
    image = np.random.default_rng(0).random((6, 9)).astype(np.float32)
    table = pixel_features(image)
    assert table.shape == (54, 30)
    assert np.allclose(table[:, 12], image.ravel())  # the 5 x 5 window's centre is the pixel itself
    assert np.all(table[:, 25] >= table[:, 12])  # the lightest of its 7 x 7 window
    assert np.allclose(table[:, 27], np.median(image))
    assert table[0, 28] == 0 and table[-1, 28] == 1 and table[8, 29] == 1  # row and column shares


def test_the_pages_become_a_pixel_table_aligned_with_the_samples_rows(pages, tmp_path):
    spec = load_spec(DENOISING)
    dataset = load_dataset(spec, pages, tmp_path)
    train, test = dataset.views["table"]
    sizes = [Image.open(p).size for p in sorted((pages / "train").iterdir())]
    assert len(train) == sum(w * h for w, h in sizes) == len(dataset.y) and dataset.y.shape[1] == 1
    assert 0 <= dataset.y.min() and dataset.y.max() <= 1
    assert len(np.unique(dataset.groups)) == len(sizes)
    sample = pd.read_csv(pages / "sampleSubmission.csv")
    assert len(test) == len(sample) and not test.isna().any().any()
    for k in (0, len(sample) // 2, len(sample) - 1):  # a row's centre pixel is the noisy pixel its id names
        stem, row, col = sample["id"][k].rsplit("_", 2)
        noisy = np.asarray(Image.open(pages / "test" / f"{stem}.png").convert("L")) / 255
        assert test["w22"][k] == pytest.approx(noisy[int(row) - 1, int(col) - 1], abs=1e-6)
    folds = assign_folds(dataset.y, False, 5, 0, groups=dataset.groups)
    assert all(len(np.unique(folds[dataset.groups == g])) == 1 for g in np.unique(dataset.groups))
    # copying the noisy pixel (the old rule baseline) is what a model of the neighbourhood must beat
    copied = metrics.score("rmse", dataset.y, train[["w22"]].to_numpy())
    assert 0.1 < copied < 0.4


def test_a_page_without_its_clean_twin_is_skipped_and_a_foreign_id_is_named(pages, tmp_path):
    copy = tmp_path / "public"
    shutil.copytree(pages, copy)
    first = sorted((copy / "train_cleaned").iterdir())[0]
    first.unlink()
    dataset = load_dataset(load_spec(DENOISING), copy, tmp_path / "work")
    assert any(first.name in w and "skipped" in w for w in dataset.warnings)
    sample = pd.read_csv(copy / "sampleSubmission.csv")
    sample.loc[3, "id"] = "not-a-pixel"
    sample.to_csv(copy / "sampleSubmission.csv", index=False)
    with pytest.raises(InputError, match="sampleSubmission.csv: ids must be <image>_<row>_<col>.*not-a-pixel"):
        load_dataset(load_spec(DENOISING), copy, tmp_path / "work2")


def test_an_unknown_competition_with_noisy_and_clean_page_folders_is_inferred_as_image_to_image(pages):
    spec = load_spec("some-new-competition", pages)
    assert (spec.task, spec.image_dir, spec.target_image_dir, spec.test_image_dir) == (
        "image_to_image", "train", "train_cleaned", "test")
    assert (spec.metric, spec.submission, spec.inferred) == ("rmse", "regression", True)
    assert any(line.startswith("image to image: the ids are <image>_<row>_<col>") for line in spec.evidence)


def test_pages_beyond_what_training_takes_keep_a_share_of_every_pages_pixels(pages, tmp_path, monkeypatch):
    """At most MAX_PIXEL_ROWS (or what the budget trains): sampled page by page before anything is stacked, each
    page keeping its own group; every test pixel is still a row."""
    from runner.data import pages as data

    spec = load_spec(DENOISING)
    whole = load_dataset(spec, pages, tmp_path / "whole")
    monkeypatch.setattr(data, "MAX_PIXEL_ROWS", 20_000)
    short = load_dataset(spec, pages, tmp_path / "short")
    assert 0.8 * 20_000 < len(short.y) < 1.2 * 20_000 < len(whole.y)
    assert set(np.unique(short.groups)) == set(np.unique(whole.groups))
    assert not whole.sampled
    (cut,) = short.sampled  # every training pixel counted, the kept ones those the engines learn from
    assert (cut.what, cut.kept, cut.of) == ("training pixels", len(short.y), len(whole.y)) and cut.say() in short.warnings
    assert len(short.views["table"][1]) == len(whole.views["table"][1])


def test_pixel_ids_without_clean_pages_still_get_the_noisy_pixels_rule(pages, tmp_path):
    """No paired folder to learn from: inference falls back to the noisy-pixels rule, which the run writes and
    which beats the sample's all-white page."""
    from runner.common.budget import Budget
    from runner.competition.grade import grade
    from runner.supervisor import run_competition

    copy = tmp_path / "public"
    shutil.copytree(pages, copy)
    shutil.rmtree(copy / "train_cleaned")
    spec = load_spec("some-pages", copy)
    assert (spec.task, spec.baseline) == ("unsupported", "noisy_pixels")
    report = run_competition("some-pages", copy, Budget.start(10), tmp_path / "out")
    assert report.status == "baseline"
    private = pages.parent / "private"
    noisy = grade(tmp_path / "out" / "submission.csv", load_spec(DENOISING), private).score
    sample = grade(copy / "sampleSubmission.csv", load_spec(DENOISING), private).score
    assert noisy < 0.7 * sample, (noisy, sample)
