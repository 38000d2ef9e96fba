"""The segmentation engine: a real fold on synthetic masks (bright textured blobs on a layered background) learns
them well past the empty and the full mask, its cache keeps each image's pixels at the mask's size, and its plans
on a CPU say their size (and it takes mask competitions only)."""
import dataclasses
import json
import time

import numpy as np
import pytest
from PIL import Image

from pace import paced
from runner.competition.catalog import load_spec
from runner.data.dataset import Dataset
from runner.engines.base import EPOCH_LOG, READY_FILE
from runner.engines.masks.planning import MIN_EPOCHS, MaskSettings, masks_member
from runner.machine.profiles import profile
from runner.planning.portfolio import DataShape, Member, PlanContext
from runner.planning.registry import get_engine
from runner.units.epoch_lines import describe
from runner.units.worker import fold_data

SIDE = 48
TGS = load_spec("tgs-salt-identification-challenge")
SPEC = dataclasses.replace(TGS, mask=dataclasses.replace(TGS.mask, shape=(SIDE, SIDE)))
N_TRAIN, N_TEST = 40, 6


def _slice(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A grey slice of horizontal layers and noise with 0-2 bright textured discs; its mask is the discs."""
    rows, cols = np.mgrid[:SIDE, :SIDE]
    image = 90 + 30 * np.sin(rows / rng.uniform(2, 5) + rng.uniform(0, 6)) + rng.normal(0, 12, (SIDE, SIDE))
    mask = np.zeros((SIDE, SIDE), dtype=bool)
    for _ in range(rng.integers(0, 3)):
        r, c, radius = rng.uniform(8, SIDE - 8), rng.uniform(8, SIDE - 8), rng.uniform(4, 12)
        mask |= (rows - r) ** 2 + (cols - c) ** 2 < radius ** 2
    image = np.where(mask, 170 + rng.normal(0, 15, (SIDE, SIDE)), image)
    return np.clip(image, 0, 255).astype(np.uint8), mask


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The synthetic set, written as PNGs, read as a mask competition's Dataset and cached by the engine."""
    folder, rng = tmp_path_factory.mktemp("slices"), np.random.default_rng(0)
    paths, masks = [], []
    for k in range(N_TRAIN + N_TEST):
        image, mask = _slice(rng)
        Image.fromarray(image, mode="L").save(folder / f"{k}.png")
        paths.append(folder / f"{k}.png")
        masks.append(mask)
    y = np.stack(masks[:N_TRAIN]).reshape(N_TRAIN, -1).astype(np.float32)  # (n, 1 x H x W), row-major
    dataset = Dataset(SPEC, ["rle_mask"], None, y, {"image": (paths[:N_TRAIN], paths[N_TRAIN:])}, image_side=SIDE)
    settings = MaskSettings(mask_height=SIDE, mask_width=SIDE, epochs=30)
    work = tmp_path_factory.mktemp("work")
    ready = get_engine("masks").prepare(settings, dataset, work, 2)
    return ready, settings, np.stack(masks), paths


def _iou(pred: np.ndarray, truth: np.ndarray) -> float:
    """Mean per-image IoU; an empty prediction of an empty mask counts 1."""
    scores = []
    for p, t in zip(pred, truth):
        union = (p | t).sum()
        scores.append(1.0 if union == 0 else (p & t).sum() / union)
    return float(np.mean(scores))


def test_the_cache_holds_each_image_at_the_masks_size_and_the_view_its_rows(prepared):
    ready, settings, _, paths = prepared
    cache = np.load(ready.image_cache)
    assert cache.shape == (N_TRAIN + N_TEST, SIDE, SIDE, 3) and cache.dtype == np.uint8
    assert ready.views["image"] == (list(range(N_TRAIN)), list(range(N_TRAIN, N_TRAIN + N_TEST)))
    assert np.array_equal(cache[N_TRAIN + 1, :, :, 0], np.asarray(Image.open(paths[N_TRAIN + 1])))  # not resized
    assert not ready.untrainable.any()
    assert get_engine("masks").prepare_key(settings) == f"masks_{SIDE}x{SIDE}"


def test_a_fold_learns_masks_well_past_the_empty_and_the_full_mask(prepared, tmp_path):
    ready, settings, masks, _ = prepared
    folds = np.arange(N_TRAIN) % 4
    data = fold_data(ready, "image", folds, 0)
    started = time.monotonic()
    result = get_engine("masks").train_fold(settings, data, tmp_path, time.monotonic() + paced(15))
    assert time.monotonic() - started < paced(15) + 5
    n_val, pixels = int((folds == 0).sum()), SIDE * SIDE
    assert result.val_pred.shape == (n_val, pixels) and result.test_pred.shape == (N_TEST, pixels)
    for pred in (result.val_pred, result.test_pred):
        assert pred.dtype == np.float32 and pred.min() >= 0 and pred.max() <= 1
    truth = masks[:N_TRAIN][folds == 0]
    learned = _iou(result.val_pred.reshape(-1, SIDE, SIDE) > 0.5, truth)
    empty, full = _iou(np.zeros_like(truth), truth), _iou(np.ones_like(truth), truth)
    print(f"IoU {learned:.3f} against empty {empty:.3f}, full {full:.3f}; {result.epochs} epochs, best {result.best_epoch}, "
          f"{result.epoch_seconds:.2f} s each; {result.message}")
    assert learned > max(empty, full) + 0.25, (learned, empty, full, result.epochs, result.message)
    assert _iou(result.test_pred.reshape(-1, SIDE, SIDE) > 0.5, masks[N_TRAIN:]) > 0.5
    assert json.loads((tmp_path / READY_FILE).read_text())["at"] <= time.monotonic()
    lines = (tmp_path / EPOCH_LOG).read_text().splitlines()
    assert len(lines) == result.epochs >= result.best_epoch >= 1 and (tmp_path / "model.pt").exists()
    # its epochs keep the lowest validation loss, and the log says so rather than naming the competition's metric
    said = describe("masks", 0, json.loads(lines[0]), "iou")
    assert "validation loss" in said and " iou " not in said


def test_on_a_cpu_it_plans_one_core_a_fold_to_fill_the_window_and_says_its_size():
    cpu = profile("cpu")
    replica = DataShape(150, 50, inputs=frozenset({"image"}), image_side=101)
    context = PlanContext(TGS, cpu, 100.0, replica, None, 5, cpu.cpus)
    member = get_engine("masks").plan(context)[0]
    s = member.settings
    assert not member.left_out and member.slot == "cpu" and member.threads == s.threads == 1
    assert (s.mask_height, s.mask_width, s.classes, s.device) == (101, 101, 1, "cpu")
    assert s.epochs >= MIN_EPOCHS and member.folds == 5
    waves = -(-member.folds // cpu.cpus)
    assert waves * member.fold_seconds <= 100.0 + 1e-6 and waves * member.fold_seconds > 0.8 * 100.0
    assert any(f"{member.folds} folds x {s.epochs:g} epochs" in r and "101x101" in r for r in member.reasons)
    assert Member.model_validate_json(member.model_dump_json()) == member  # plan.json round-trips its settings
    slower = masks_member(context, slowdown=4.0)  # re-planned after an epoch four times slower
    assert slower.step_seconds == pytest.approx(4 * member.step_seconds, rel=0.01) or slower.folds < member.folds
    tiny = masks_member(PlanContext(TGS, cpu, 5.0, replica, None, 5, cpu.cpus))
    assert tiny.left_out.startswith("2 folds x")


def test_it_takes_mask_competitions_only():
    engine = get_engine("masks")
    assert engine.applies(TGS, frozenset({"image"}))
    assert not engine.applies(TGS, frozenset({"table"}))
    assert not engine.applies(load_spec("denoising-dirty-documents"), frozenset({"image", "table", "page"}))


def test_a_fold_that_runs_out_of_memory_starts_again_at_a_smaller_batch_and_other_faults_pass_through():
    """The U-Nets' back-off (runner.engines.optimising.from_start_on_oom), driven by an injected out-of-memory
    error: the second attempt runs at a smaller batch and says why; any other fault is not retried."""
    import torch

    from runner.engines.masks.planning import MaskSettings
    from runner.engines.optimising import from_start_on_oom

    batches = []

    def attempt(settings):
        batches.append(settings.batch_size)
        if len(batches) == 1:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return "trained"

    result, settings, notes = from_start_on_oom(MaskSettings(batch_size=32), attempt)
    assert result == "trained" and batches[0] == 32 and settings.batch_size == batches[1] < 32
    assert notes == [f"out of memory at batch 32: started again at batch {settings.batch_size}"]
    with pytest.raises(ValueError):
        from_start_on_oom(MaskSettings(batch_size=32), lambda s: (_ for _ in ()).throw(ValueError("a bug")))
