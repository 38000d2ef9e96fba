"""The image trainer's loop on CPU: gradient accumulation and the deadline check."""
import time

import numpy as np
import pytest
import torch

from runner.cnn import Trainer, confirm_batch
from runner.engines import FoldData
from runner.engines.vision import ImageSettings
from runner.spec import load_spec

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
    assert stats.completed and stats.images == 20 and stats.loss > 0
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
    """A fold of random images in a decoded-image cache, as runner.images writes it."""
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
    from runner.cnn import train

    calls = inject(monkeypatch, "CUDA out of memory. Tried to allocate 2.00 GiB", at_call=2, batch=8)
    settings = PLAN.model_copy(update=dict(batch_size=8, max_epochs=3, patience=10))
    result = train(settings, small_fold(tmp_path), tmp_path, time.monotonic() + 600)
    assert calls == [8, 8, 6, 6]  # epoch 1 at 8, epoch 2 ran out of memory, epochs 2-3 again at 6
    assert result.epochs == 3 and result.changes == {"batch_size": 6}
    assert "out of memory at batch 8 in epoch 2: continued at batch 6 from epoch 1" in result.message
    assert (tmp_path / "last.pt").is_file() and result.test_pred.shape == (8, 3)


def test_an_illegal_memory_access_is_never_retried(tmp_path, monkeypatch):
    from runner.cnn import train

    calls = inject(monkeypatch, "CUDA error: an illegal memory access was encountered", at_call=1, batch=8)
    settings = PLAN.model_copy(update=dict(batch_size=8, max_epochs=2))
    with pytest.raises(RuntimeError, match="illegal memory access"):
        train(settings, small_fold(tmp_path), tmp_path, time.monotonic() + 600)
    assert calls == [8]
