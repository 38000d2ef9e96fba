"""The image trainer's loop on CPU: gradient accumulation and the deadline check."""
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from runner.engines.timm.training import Trainer, confirm_batch
from runner.engines.base import FoldData
from runner.engines.timm.settings import ImageSettings
from runner.competition.catalog import load_spec

PLAN = ImageSettings(model="resnet18", image_size=32, batch_size=4, precision="fp32", max_epochs=1, patience=1)


def batches(n):
    return [(torch.randint(0, 255, (4, 3, 32, 32), dtype=torch.uint8), torch.randint(0, 3, (4,)))
            for _ in range(n)]


def trainer(plan):
    data = FoldData(load_spec("dog-breed"), ["a", "b", "c"], [], np.array([]), [], np.array([]), [])
    return Trainer(plan, data)


def counted_steps(trainer_):
    steps = []
    original = trainer_.optimizer.step
    trainer_.optimizer.step = lambda *a, **k: (steps.append(1), original(*a, **k))[1]
    return steps


def test_accumulation_steps_the_optimizer_every_k_batches_and_at_the_end():
    t = trainer(PLAN.model_copy(update=dict(accumulation=2)))
    steps = counted_steps(t)
    stats = t.train_epoch(batches(5), stop_at=float("inf"))
    assert stats.completed and stats.samples == 20 and stats.loss > 0
    assert len(steps) == 3  # after batches 2, 4 and the last one


def test_an_epoch_past_its_deadline_reports_it():
    t = trainer(PLAN)
    steps = counted_steps(t)
    assert not t.train_epoch(batches(3), stop_at=time.monotonic() - 1).completed
    assert steps == []


def test_an_epoch_measures_the_time_it_waited_for_data():
    t = trainer(PLAN)

    def slow_loader():
        for batch in batches(3):
            time.sleep(0.2)
            yield batch

    stats = t.train_epoch(list_like(slow_loader(), 3), stop_at=float("inf"))
    assert stats.wait_seconds >= 0.55 and stats.wait_seconds < stats.seconds and 0 < stats.data_wait < 1


class list_like:
    """A loader of known length that produces its batches lazily (as a DataLoader does)."""

    def __init__(self, items, length):
        self.items, self.length = items, length

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return self.length


def test_no_probe_on_cpu():
    plan, note = confirm_batch(PLAN, 3)
    assert plan == PLAN and note == ""


def small_fold(tmp_path, rows=48, side=40):
    """A fold of random images in a decoded-image cache, as runner.engines.timm.images writes it."""
    rng = np.random.default_rng(0)
    cache = tmp_path / "images.npy"
    np.save(cache, rng.integers(0, 255, (rows + 8, side, side, 3), dtype=np.uint8))
    y = rng.integers(0, 3, rows)
    train, val, test = list(range(rows - 16)), list(range(rows - 16, rows)), list(range(rows, rows + 8))
    return FoldData(load_spec("dog-breed"), ["a", "b", "c"], train, y[:-16], val, y[-16:], test, str(cache))


def inject(monkeypatch, error: str, at_call: int, batch: int):
    """Make the training epoch number `at_call` at this batch fail as a device would (once)."""
    original, calls = Trainer.train_epoch, []

    def failing(self, loader, stop_at):
        calls.append(self.settings.batch_size)
        if len(calls) == at_call and self.settings.batch_size == batch:
            raise RuntimeError(error)
        return original(self, loader, stop_at)

    monkeypatch.setattr(Trainer, "train_epoch", failing)
    return calls


def test_out_of_memory_mid_fold_continues_with_a_smaller_batch_from_the_last_epoch(tmp_path, monkeypatch):
    from runner.engines.timm.training import train

    calls = inject(monkeypatch, "CUDA out of memory. Tried to allocate 2.00 GiB", at_call=2, batch=8)
    settings = PLAN.model_copy(update=dict(batch_size=8, max_epochs=3, patience=10))
    result = train(settings, small_fold(tmp_path), tmp_path, time.monotonic() + 600)
    assert calls == [8, 8, 6, 6]  # epoch 1 at 8, epoch 2 ran out of memory, epochs 2-3 again at 6
    assert result.epochs == 3 and result.changes == {"batch_size": 6}
    assert "out of memory at batch 8 in epoch 2: continued at batch 6 from epoch 1" in result.message
    assert (tmp_path / "last.pt").is_file() and result.test_pred.shape == (8, 3)


def test_an_illegal_memory_access_is_never_retried(tmp_path, monkeypatch):
    from runner.engines.timm.training import train

    calls = inject(monkeypatch, "CUDA error: an illegal memory access was encountered", at_call=1, batch=8)
    settings = PLAN.model_copy(update=dict(batch_size=8, max_epochs=2))
    with pytest.raises(RuntimeError, match="illegal memory access"):
        train(settings, small_fold(tmp_path), tmp_path, time.monotonic() + 600)
    assert calls == [8]


def augment(size=16, batched=False):
    """The augmentation as a CPU fold runs it (crop by crop), or as a GPU fold does (`batched`, on the CPU here)."""
    from runner.engines.timm.augment import DeviceAugment

    return DeviceAugment(size, (0.0, 0.0, 0.0), (1 / 255, 1 / 255, 1 / 255), "bilinear", torch.device("cpu"),
                         torch.contiguous_format, batched=batched)


def quadrant_image(side=32):
    """One uint8 square whose top-left quadrant is 200 and the rest 0."""
    image = torch.zeros(1, 3, side, side, dtype=torch.uint8)
    image[..., : side // 2, : side // 2] = 200
    return image


@pytest.mark.parametrize("batched", [False, True])
def test_the_device_crop_takes_the_drawn_box_of_each_image(monkeypatch, batched):
    aug = augment(batched=batched)
    # the top-left quadrant's box: width and height half the square, centred at a quarter
    monkeypatch.setattr(aug, "crop_boxes", lambda n: torch.tensor([[0.5, 0.5, 0.25, 0.25]] * n))
    monkeypatch.setattr(torch, "rand", lambda n: torch.ones(n))  # no flip
    out = aug.train(quadrant_image())
    assert out.shape == (1, 3, 16, 16)
    assert torch.allclose(out[..., 1:-1, 1:-1], torch.tensor(200.0), atol=1)  # inside: only the bright quadrant
    # the bottom-right box sees none of it
    monkeypatch.setattr(aug, "crop_boxes", lambda n: torch.tensor([[0.5, 0.5, 0.75, 0.75]] * n))
    assert aug.train(quadrant_image()).abs().max() == 0


@pytest.mark.parametrize("batched", [False, True])
def test_the_device_flip_mirrors_about_half_the_images(batched):
    torch.manual_seed(0)
    aug = augment(batched=batched)
    image = torch.zeros(200, 3, 32, 32, dtype=torch.uint8)
    image[..., :16] = 200  # left half bright
    aug.crop_boxes = lambda n: torch.tensor([[1.0, 1.0, 0.5, 0.5]] * n)  # the whole square
    out = aug.train(image)
    mirrored = (out[..., 8:] > out[..., :8].mean()).float().mean(dim=(1, 2, 3)) > 0.5
    assert 70 < int(mirrored.sum()) < 130
    assert torch.equal(out[mirrored], out[mirrored][:1].expand_as(out[mirrored]))  # every flip the same mirror


def test_crop_boxes_lie_in_the_square_with_the_planned_areas():
    from runner.engines.timm.augment import CROP_SCALE

    torch.manual_seed(0)
    width, height, cx, cy = augment().crop_boxes(5000).T
    assert (cx - width / 2 >= -1e-6).all() and (cx + width / 2 <= 1 + 1e-6).all()
    assert (cy - height / 2 >= -1e-6).all() and (cy + height / 2 <= 1 + 1e-6).all()
    area = width * height
    assert area.max() <= 1 + 1e-6 and area.min() >= CROP_SCALE[0] * 0.75  # clipping only ever shrinks a box
    assert 0.5 < float(area.mean()) < 0.75


def test_evaluation_resizes_the_whole_square_and_keeps_an_image_already_at_size():
    aug = augment(16)
    image = quadrant_image(16)
    assert torch.equal(aug.eval(image), image.float())  # mean 0, std 1/255: the pixel values themselves
    out = aug.eval(quadrant_image(32))
    assert out.shape == (1, 3, 16, 16) and out[..., :8, :8].min() > 150 and out[..., 8:, 8:].max() < 50


def test_out_of_memory_while_building_the_fold_retries_at_a_smaller_batch(tmp_path, monkeypatch):
    from runner.engines.timm import training as cnn

    original, built = cnn.Trainer.__init__, []

    def building(self, settings, data, classes=None):
        built.append(settings.batch_size)
        if len(built) == 1:  # the model did not fit onto the device at the planned batch's settings
            raise RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")
        original(self, settings, data, classes)

    monkeypatch.setattr(cnn.Trainer, "__init__", building)
    result = cnn.train(PLAN.model_copy(update=dict(batch_size=8, max_epochs=1)), small_fold(tmp_path), tmp_path,
                       time.monotonic() + 600)
    assert built == [8, 6] and result.epochs == 1 and result.changes == {"batch_size": 6}


def test_the_loader_reads_whole_batches_in_channels_last_layout(tmp_path):
    from runner.engines.timm.loading import loaders

    data = small_fold(tmp_path)
    cache = np.load(data.image_cache)
    _, val, _ = loaders(PLAN.model_copy(update=dict(batch_size=8)), data, data.image_cache)
    images, labels = next(iter(val))
    assert images.shape == (8, 3, 40, 40) and images.dtype == torch.uint8
    assert images.is_contiguous(memory_format=torch.channels_last)  # the cache's HWC rows, not copied again
    assert torch.equal(images[3], torch.from_numpy(cache[data.x_val[3]]).permute(2, 0, 1))
    assert labels.tolist() == list(data.y_val[:8])


def _fold_with_loader_workers(folder: str, out) -> None:
    """A fold as units run: a fork-server child in its own process group. Its loader's processes after the first
    batch, then SIGTERM to the group (the supervisor's "stop at your next epoch"), the rest of the epoch and a
    validation pass."""
    import psutil

    from runner.common.budget import stop_on_sigterm, stop_requested
    from runner.engines.timm.loading import loaders

    os.setsid()
    stop_on_sigterm()
    data = small_fold(Path(folder))
    train, val, _ = loaders(PLAN.model_copy(update=dict(batch_size=4, num_workers=2, prefetch_factor=1)), data,
                            data.image_cache)
    batches = iter(train)
    next(batches)
    fold = psutil.Process()
    out.put((len(fold.children()), len(fold.children(recursive=True))))
    os.killpg(os.getpid(), signal.SIGTERM)
    time.sleep(0.5)
    try:
        out.put((stop_requested(), 1 + sum(1 for _ in batches), sum(len(labels) for _, labels in val)))
    except Exception as exc:  # noqa: BLE001 - what the test reports
        out.put(repr(exc))


def test_a_folds_loader_workers_are_its_forked_children_and_outlive_a_request_to_stop(tmp_path):
    """A fold is a fork-server child, so multiprocessing's default there is the fork server: each loader worker
    then imported torch afresh (7 s before the first batch on an H200 machine). And asking a fold to stop at its
    next epoch (SIGTERM to its process group) ended its workers, failing the fold on its next batch."""
    from runner.units import processes

    processes.warm_up(())  # the runner's own fork server: a plain one would stay up without the heap tunables
    context = processes.fork_context(())
    out = context.Queue()
    fold = context.Process(target=_fold_with_loader_workers, args=(str(tmp_path), out))
    fold.start()
    children, descendants = out.get(timeout=120)
    finished = out.get(timeout=60)
    fold.join(60)
    # forked, the two workers are the fold's children; through a fork server they are its grandchildren
    assert children == descendants == 2
    assert finished == (True, 8, 16)  # 32 training rows in batches of 4; 16 validation rows


def test_a_fold_with_fewer_rows_than_its_batch_still_steps(tmp_path):
    from runner.engines.timm.loading import loaders

    data = small_fold(tmp_path, rows=28)  # 12 training rows
    train, _, _ = loaders(PLAN.model_copy(update=dict(batch_size=32)), data, data.image_cache)
    assert len(train) == 1 and len(next(iter(train))[1]) == 12
    train, _, _ = loaders(PLAN.model_copy(update=dict(batch_size=5)), data, data.image_cache)
    assert len(train) == 2  # full batches only: the ragged two are dropped


def test_a_warm_up_epoch_does_not_set_the_folds_pace():
    """The first epoch pays for loader start, cuDNN tuning and compiling (on a GPU, several times a later one):
    after the second, the fold plans from the faster pace, never fewer epochs than before, and its cosine
    stretches from where it is rather than starting over."""
    from runner.engines.networks import epoch_seconds, refitted_epochs

    assert epoch_seconds([30.0, 10.0, 11.0]) == pytest.approx(10.5)  # the warm-up left out
    assert epoch_seconds([12.0, 10.0]) == pytest.approx(11.0)  # within WARMUP_SLOWER: all count
    # planned from the first (30 s) epoch: 1 + 180 // 30 = 7; the second took 10 s and 150 s are left
    assert refitted_epochs([30.0, 10.0], 2, 7, 150.0, 100) == 17
    assert refitted_epochs([30.0, 10.0], 2, 7, 150.0, 12) == 12  # the ceiling holds
    assert refitted_epochs([11.0, 10.0], 2, 7, 150.0, 100) == 7  # no warm-up: the plan stands
    assert refitted_epochs([30.0, 10.0], 2, 20, 50.0, 100) == 20  # never fewer: the deadline ends a late fold

    t = trainer(PLAN)
    t.schedule(10)
    for _ in range(5):
        t.updates += 1
        t.scheduler.step_update(t.updates)
    before = t.optimizer.param_groups[0]["lr"]
    t.stretch(20)  # 5 updates done, 20 to go: a 25-update cosine at update 5
    t.scheduler.step_update(t.updates)
    after = t.optimizer.param_groups[0]["lr"]
    assert t.updates == 5 and before < after < t.lr  # a little higher on the longer curve, not back at the peak


def test_the_typical_side_is_read_from_image_headers(tmp_path):
    from PIL import Image

    from runner.data.dataset import typical_side

    paths = []
    for k, size in enumerate([(28, 40), (28, 28), (60, 30), (90, 90)]):
        paths.append(tmp_path / f"{k}.png")
        Image.new("RGB", size).save(paths[-1])
    (tmp_path / "broken.png").write_bytes(b"not an image")
    assert typical_side([*paths, tmp_path / "broken.png", None]) == 29  # median of 28, 28, 30, 90
    assert typical_side([None, tmp_path / "broken.png"]) == 0


def test_a_28_pixel_set_is_planned_cached_and_trained_at_28_pixels_never_upscaled(tmp_path):
    """The dogs-vs-cats replica shrunk to 28 px: the plan and its cache stay at the images' own size, and a fold
    trains there. (A whole run through the command line showed the same by filling its window, 30 s stretched by
    the machine's pace for one fold to finish on a busy core: 58 s of CPU on the slower CPU for a plan, a cache and
    an epoch; the whole run through the command line is dog-breed's, in test_e2e.py.)"""
    from PIL import Image

    from pace import paced
    from runner.common.budget import Budget
    from runner.data.loading import load_dataset
    from runner.demo import write_demo
    from runner.planning.registry import get_engine
    from runner.engines.timm.ladder import SMALL_MODELS
    from runner.machine.hardware import Hardware
    from runner.planning.planner import plan_for
    from runner.units.tasks import assign_folds
    from runner.units.worker import fold_data

    # 40% of the replica's photos: an epoch in a second or two on one core
    public = write_demo("dogs-vs-cats-redux-kernels-edition", tmp_path, seed=4, scale=0.4) / "prepared" / "public"
    for path in [*public.glob("train/*.jpg"), *public.glob("test/*.jpg")]:
        with Image.open(path) as image:
            small = image.resize((28, 28), Image.BILINEAR)
        small.save(path)
    spec, work, out = load_spec("dogs-vs-cats"), tmp_path / "work", tmp_path / "fold"
    work.mkdir()
    out.mkdir()
    dataset = load_dataset(spec, public, work)
    one_core = Hardware(gpus=(), cpus=1, ram_bytes=8 * 2**30, shm_bytes=2**30, disk_free_bytes=50 * 2**30)
    plan, _ = plan_for(spec, dataset, one_core, Budget.start(30), tmp_path / "plan", engines=["timm"])
    settings = plan.members[0].settings
    assert settings.model in SMALL_MODELS and (settings.image_size, settings.source_side) == (28, 28)
    engine = get_engine("timm")
    prepared = engine.prepare(settings, dataset, work, 1)
    assert np.load(prepared.image_cache, mmap_mode="r").shape[1:] == (28, 28, 3)  # cached at 28, not above
    data = fold_data(prepared, engine.inputs, assign_folds(prepared.y, True, plan.folds, 0), 0)
    result = engine.train_fold(settings.model_copy(update=dict(max_epochs=1)), data, out,
                               time.monotonic() + paced(120))
    assert result.epochs == 1 and result.val_pred.shape == (len(data.y_val), 2)
