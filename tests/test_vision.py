"""The image trainer's loop on CPU: gradient accumulation and the deadline check."""
import time

import numpy as np
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
