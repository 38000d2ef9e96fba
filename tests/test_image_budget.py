"""Training images drawn to what a first decode of them affords: measured, bounded, said."""
import numpy as np

from runner.data import image_draw as image_budget
from runner.data.dataset import decode_square
from runner.data.loading import load_dataset
from runner.demo import write_demo
from runner.engines.timm.planning import _prepare_seconds
from runner.machine.hardware import GiB, Hardware
from runner.data.image_draw import affordable_train, decode_seconds
from runner.planning.portfolio import DataShape, PlanContext
from runner.competition.catalog import load_spec


def test_decoding_every_image_past_its_share_of_the_budget_draws_the_training_images(monkeypatch):
    monkeypatch.setattr(image_budget, "LEAST_TRAIN", 10)
    trainable = np.ones(2_000, dtype=bool)
    trainable[::7] = False  # unreadable: never drawn
    # 0.15 x 100 s x 2 cores / 0.01 s = 3,000 images: all fit
    assert affordable_train(trainable, 500, 0.01, 100, 2, "train")[1] is None
    kept, cut = affordable_train(trainable, 500, 0.02, 100, 2, "train")  # 1,500 images: 1,000 of them training
    assert kept.sum() == cut.kept == 1_000 and not (kept & ~trainable).any() and cut.of == trainable.sum()
    assert cut.what == "training images" and "every test image is decoded" in cut.why and "20 ms each" in cut.why
    slow, cut = affordable_train(trainable, 500, 1.0, 100, 2, "train")  # not even the test images fit
    assert slow.sum() == cut.kept == 10  # the least kept
    assert affordable_train(trainable, 500, 0.0, 100, 2, "train")[1] is None  # nothing measured: nothing cut


def test_a_dataset_whose_images_cost_more_than_the_budget_affords_keeps_a_drawn_share(tmp_path, monkeypatch):
    root = write_demo("aerial-cactus-identification", tmp_path)
    public, spec = root / "prepared" / "public", load_spec("aerial-cactus-identification")
    whole = load_dataset(spec, public, tmp_path / "whole", budget_seconds=600, cores=2)
    assert not whole.sampled and whole.decode_seconds > 0
    monkeypatch.setattr(image_budget, "LEAST_TRAIN", 20)
    monkeypatch.setattr(image_budget, "DECODE_SHARE", 30 * whole.decode_seconds / 600)  # ~60 images on 2 cores
    cut = load_dataset(spec, public, tmp_path / "cut", budget_seconds=600, cores=2)
    (said,) = cut.sampled
    assert said.kept == len(cut.y) < len(whole.y) and said.of == len(whole.y) and said.say() in cut.warnings
    names = [{p.name for p in paths} for paths in (*cut.views["image"], *whole.views["image"])]
    assert names[1] == names[3] and names[0] < names[2]  # every test image stays; training images drawn


def test_a_decodes_measured_cost_plans_the_prepare_step(tmp_path):
    root = write_demo("aerial-cactus-identification", tmp_path)
    spec = load_spec("aerial-cactus-identification")
    paths = load_dataset(spec, root / "prepared" / "public", tmp_path / "work").views["image"][0]
    assert 0 < decode_seconds(paths, decode_square) < 1 and decode_seconds([None], decode_square) == 0.0
    hardware = Hardware(gpus=(), cpus=4, ram_bytes=16 * GiB, shm_bytes=GiB, disk_free_bytes=100 * GiB)
    data = DataShape(900, 100, inputs=frozenset({"image"}), classes=2, image_side=32, decode_seconds=0.2)
    assert _prepare_seconds(PlanContext(spec, hardware, 600, data, None, 5, 4)) == 1000 * 0.2 / 4
