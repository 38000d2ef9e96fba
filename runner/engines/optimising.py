"""What a fold that trains a network from scratch in epochs holds beside its network (the U-Nets of restored pages
and of masks, the box detector): AdamW, autocast at the planned precision (a gradient scaler for fp16), and a
cosine schedule over the updates the fold fitted to its window, warmed up from a small share of the rate; the
epochs themselves until the plan, the patience or the deadline ends them, the best validation score's checkpoint
kept, and the fold's result from it. Imported by fold processes only: it imports torch."""
from __future__ import annotations

import contextlib
import gc
import operator
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, TypeVar

import numpy as np
import torch
from timm.scheduler import CosineLRScheduler

from runner.common.atomic import replacing
from runner.common.budget import past
from runner.engines.base import EPOCH_LOG, DeadlineReached, EngineResult
from runner.engines.networks import EpochStats, epoch_seconds, log_epoch, refitted_epochs, smaller_batch

T = TypeVar("T")

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
MIN_LR_SHARE = 0.01  # where the cosine ends, and where its warm-up starts, as a share of the peak rate
WEIGHT_DECAY = 1e-4  # AdamW's: light, the nets are small and their epochs few
RESERVE_MARGIN = 1.25  # the test rows' estimated seconds (at the validation rows' pace) are stretched by this
CHECKPOINT = "model.pt"
MIN_RAGGED = 4  # a last batch of fewer images is left out of its epoch: one image's batch norm is noise


def epoch_steps(samples: int, batch: int) -> int:
    """Batches an epoch of `samples`: a ragged last one only where it holds MIN_RAGGED images (batch norm's
    statistics), at least one."""
    whole, ragged = divmod(samples, batch)
    return max(1, whole + (ragged >= MIN_RAGGED))


class Optimised:
    """A network on its device with its optimiser, precision and schedule; `settings` gives device, lr, precision."""

    def __init__(self, model: torch.nn.Module, settings):
        self.settings, self.device = settings, torch.device(settings.device)
        self.model = model.to(self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=settings.lr, weight_decay=WEIGHT_DECAY)
        dtype = DTYPES.get(settings.precision)
        self.autocast = torch.autocast(self.device.type, dtype=dtype) if dtype else contextlib.nullcontext()
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=settings.precision == "fp16")
        self.scheduler, self.updates = None, 0

    def schedule(self, steps: int, warmup: int = 0) -> None:
        """Cosine decay over `steps` updates from now, after `warmup` rising from MIN_LR_SHARE of the rate."""
        low = self.settings.lr * MIN_LR_SHARE
        self.scheduler = CosineLRScheduler(self.optimizer, t_initial=max(1, steps), t_in_epochs=False, lr_min=low,
                                           warmup_t=warmup, warmup_lr_init=low, warmup_prefix=True)
        self.updates = 0

    def update(self, loss: torch.Tensor) -> float:
        """One optimiser step on `loss` (scaled under fp16), the schedule advanced; the loss as a number."""
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.scheduler is not None:
            self.updates += 1
            self.scheduler.step_update(self.updates)
        return float(loss.detach())


def from_start_on_oom(settings, attempt: Callable[[object], T]) -> tuple[T, object, list[str]]:
    """`attempt(settings)` (a fold's whole training), started again from the start at a smaller batch each time it
    runs out of memory (runner.engines.networks.smaller_batch re-raises anything else): its result, the settings
    it finished with, and what was said. For small nets whose epochs are cheap to redo: the planned batch is an
    estimate, not probed."""
    notes = []
    while True:
        try:
            return attempt(settings), settings, notes
        except Exception as exc:
            batch = smaller_batch(exc, settings.batch_size)
            notes.append(f"out of memory at batch {settings.batch_size}: started again at batch {batch}")
            settings = settings.model_copy(update=dict(batch_size=batch))
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()


@dataclass
class Progress:
    """A fold's epochs so far and its best one: the validation score, rows and epoch the checkpoint holds."""

    epochs_planned: int
    epoch: int = 0
    best: float | None = None
    best_epoch: int = 0
    best_val: np.ndarray | None = None
    times: list[float] = field(default_factory=list)
    reserve: float = 1.0  # seconds kept for the test rows, from the validation rows' pace


@dataclass
class Epochs:
    """What a fold's epochs run on: `batches()` one epoch's inputs for `net.step`, `steps` of them, and
    `validate()` (the validation score, the validation rows' predictions); `test_per_val` the test rows against the
    validation rows (the reserve kept for them); `better` whether a score beats another (lower by default: a loss);
    `score_name` what the score is, for the epoch log (empty: the competition's metric); `unit` what the epoch log
    counts a second."""

    batches: Callable[[], Iterable[tuple]]
    steps: int
    validate: Callable[[], tuple[float, np.ndarray]]
    test_per_val: float
    better: Callable[[float, float], bool] = operator.lt
    score_name: str = "validation loss"
    unit: str = "images"


def _save_best(net: Optimised, p: Progress, score: float, val: np.ndarray, run: Epochs, out_dir: Path) -> None:
    if p.best is None or run.better(score, p.best):
        p.best, p.best_epoch, p.best_val = score, p.epoch, val
        with replacing(out_dir / CHECKPOINT) as tmp:
            torch.save(net.model.state_dict(), tmp)


def _refit(net: Optimised, p: Progress, left: float, steps: int) -> None:
    """After the first epoch the cosine fitted to the epochs the time left holds; after the second, where the first
    was slowed by warm-up (oneDNN's set-up) and planned too few, to the second's pace."""
    most = net.settings.max_epochs
    if p.epoch == 1:
        p.epochs_planned = max(1, min(most, 1 + int(left // p.times[0])))
        net.schedule((p.epochs_planned - 1) * steps)
    elif p.epoch == 2 and (planned := refitted_epochs(p.times, p.epoch, p.epochs_planned, left, most)) \
            > p.epochs_planned:
        p.epochs_planned = planned
        net.schedule((planned - 2) * steps)


def fit_epochs(net: Optimised, run: Epochs, deadline: float, out_dir: Path, p: Progress) -> bool:
    """Train until the planned epochs, the patience or the deadline, the best epoch's model in CHECKPOINT; True
    when the deadline ended it. The first epoch warms the rate up (from random init, at a high rate)."""
    settings = net.settings
    if not p.epoch:
        net.schedule(max(0, round(settings.epochs) - 1) * run.steps, warmup=run.steps)
    while p.epoch < p.epochs_planned:
        t0, stats = time.monotonic(), EpochStats()
        for batch in run.batches():
            if past(deadline - p.reserve):
                return True
            stats.loss += net.step(*batch)
            stats.samples += len(batch[0])
        stats.seconds, stats.loss = time.monotonic() - t0, stats.loss / run.steps
        v0 = time.monotonic()
        score, val = run.validate()
        p.reserve = RESERVE_MARGIN * (time.monotonic() - v0) * run.test_per_val + 1.0
        p.epoch += 1
        p.times.append(time.monotonic() - t0)
        log_epoch(out_dir / EPOCH_LOG, p.epoch, stats, score, net.device, p.times[-1], run.unit, run.score_name)
        _save_best(net, p, score, val, run, out_dir)
        _refit(net, p, deadline - time.monotonic() - p.reserve, run.steps)
        if past(deadline - epoch_seconds(p.times) - p.reserve):
            return p.epoch < p.epochs_planned
        if p.epoch - p.best_epoch >= settings.patience:
            return False
    return False


def fold_result(net: Optimised, p: Progress, stopped: bool, predict_test: Callable[[], np.ndarray], out_dir: Path,
                started: float, message: str, planned_batch: int) -> EngineResult:
    """The fold's result from its best checkpoint: the validation rows it predicted, the test rows predicted now."""
    if p.best is None:
        raise DeadlineReached("no epoch finished before the fold's deadline")
    train_seconds, t0 = time.monotonic() - started, time.monotonic()
    net.model.load_state_dict(torch.load(out_dir / CHECKPOINT, map_location=net.device, weights_only=True))
    test = predict_test()
    mean_epoch = epoch_seconds(p.times)
    batch = net.settings.batch_size
    return EngineResult(p.best_val, test, out_dir / CHECKPOINT, epochs=p.epoch, best_epoch=p.best_epoch,
                        epoch_seconds=mean_epoch, min_train_seconds=mean_epoch, train_seconds=train_seconds,
                        predict_seconds=time.monotonic() - t0, stopped_by_deadline=stopped, message=message,
                        changes={"batch_size": batch} if batch < planned_batch else {})
