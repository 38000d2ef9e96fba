"""Training one fold of a fine-tuned text model: the pretrained encoder, mean-pooled, into a new linear head.

AdamW with layer-wise rate decay (the head at the peak rate, each encoder layer below at `layer_decay` times the
one above, the embeddings lowest), a linear warm-up over the first tenth of the planned updates, then cosine.
Each fold fits its epochs to its first timed one and stops at an epoch boundary before its deadline, keeping the
best epoch on the validation rows; a first epoch the deadline cuts short is still scored and used, rather than
leave the fold with nothing. Out of memory, the batch halves (gradients accumulated to keep the effective batch)
and training goes on from the last finished epoch.
"""
from __future__ import annotations

import contextlib
import gc
import logging
import math
import os
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from runner.common import metrics
from runner.common.atomic import replacing
from runner.common.budget import past
from runner.engines.base import EPOCH_LOG, DeadlineReached, EngineResult, FoldData, say_ready
from runner.engines.finetune.models import model_folder
from runner.engines.finetune.settings import TextSettings
from runner.engines.finetune.tokens import bucketed, by_length, padded
from runner.engines.networks import (EpochStats, epoch_seconds, fold_share_of_card, log_epoch, probe_batch,
                                     smaller_batch, warm_peak_bytes)
from runner.engines.oneshot import log_space

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
MIN_LR_SHARE = 0.01  # where cosine ends, as a share of the peak rate
HEAD_DROPOUT = 0.1
PASS_LEFT = 0.05  # of an epoch: less than this left is not worth another pass and its validation
log = logging.getLogger("runner.finetune")


class Classifier(torch.nn.Module):
    """A pretrained encoder, its token states averaged over the text's tokens, into a linear head."""

    def __init__(self, folder: Path, outputs: int):
        super().__init__()
        from transformers import AutoModel
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a bar per load would fill the fold's log
        # fp32 master weights whatever the checkpoint stores (transformers' default "auto" would keep a bf16/fp16
        # checkpoint's dtype, and AdamW steps on half-precision weights lose the small updates); bf16 is autocast's
        self.encoder = AutoModel.from_pretrained(str(folder), dtype=torch.float32)
        self.dropout = torch.nn.Dropout(HEAD_DROPOUT)
        self.head = torch.nn.Linear(self.encoder.config.hidden_size, outputs)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        states = self.encoder(input_ids=tokens, attention_mask=mask).last_hidden_state
        weights = mask.unsqueeze(-1).to(states.dtype)
        pooled = (states * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        return self.head(self.dropout(pooled))


def layer_groups(model: Classifier, lr: float, decay: float) -> list[dict]:
    """Parameter groups by depth: the head at `lr`, encoder layer i of n at lr x decay^(n - i), the embeddings
    at lr x decay^(n + 1); no weight decay on biases and norms."""
    layers = model.encoder.config.num_hidden_layers
    groups: dict[tuple[int, bool], list] = {}
    for name, parameter in model.named_parameters():
        if name.startswith("head") or "pooler" in name:
            depth = layers + 1
        elif ".layer." in name:
            depth = int(name.split(".layer.")[1].split(".")[0]) + 1
        else:
            depth = 0  # embeddings, and anything below the first layer
        groups.setdefault((depth, parameter.ndim > 1), []).append(parameter)
    return [dict(params=params, lr=lr * decay ** (layers + 1 - depth), weight_decay=0.01 if matrix else 0.0)
            for (depth, matrix), params in groups.items()]


class Schedule:
    """Warm-up then cosine, as a share of each group's peak; `total` may change as the fold learns its pace."""

    def __init__(self, warmup: int, total: int):
        self.warmup, self.total = max(1, warmup), max(1, total)

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return (step + 1) / self.warmup
        progress = min(1.0, (step - self.warmup) / max(1, self.total - self.warmup))
        return MIN_LR_SHARE + (1 - MIN_LR_SHARE) * 0.5 * (1 + math.cos(math.pi * progress))


class Task:
    """The loss and the output transform for the competition's targets: classes (softmax), independent labels
    (sigmoid) or values (standardised, in log space for RMSLE)."""

    def __init__(self, data: FoldData):
        self.kind = "classes" if data.classes is not None else \
            "labels" if data.spec.learned_as == "labels" else "values"
        self.to_space, self.from_space = log_space(data.spec.metric)
        y = data.y_train
        if self.kind == "values":
            y = self.to_space(np.atleast_2d(y.T).T.astype(np.float64))
            self.mean, self.std = y.mean(0), y.std(0) + 1e-9
        self.outputs = data.n_outputs

    def targets(self, y: np.ndarray) -> torch.Tensor:
        if self.kind == "classes":
            return torch.as_tensor(y, dtype=torch.long)
        if self.kind == "labels":
            return torch.as_tensor(np.atleast_2d(y.T).T, dtype=torch.float32)
        y = self.to_space(np.atleast_2d(y.T).T.astype(np.float64))
        return torch.as_tensor((y - self.mean) / self.std, dtype=torch.float32)

    def loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = logits.float()
        if self.kind == "classes":
            return F.cross_entropy(logits, y)
        if self.kind == "labels":
            return F.binary_cross_entropy_with_logits(logits, y)
        return F.mse_loss(logits, y)

    def output(self, logits: torch.Tensor) -> np.ndarray:
        logits = logits.double()
        if self.kind == "classes":
            return torch.softmax(logits, 1).cpu().numpy()
        if self.kind == "labels":
            return torch.sigmoid(logits).cpu().numpy()
        return self.from_space(logits.cpu().numpy() * self.std + self.mean)


class TextTrainer:
    """One fold's model, optimiser, schedule and precision."""

    def __init__(self, settings: TextSettings, task: Task, updates: int):
        folder = model_folder(settings.model)
        if folder is None:
            raise RuntimeError(f"{settings.model}: no local files (`runner weights pull {settings.model}`)")
        self.settings, self.task = settings, task
        self.device = torch.device(settings.device)
        self.model = Classifier(folder, task.outputs).to(self.device)
        self.pad = self.model.encoder.config.pad_token_id or 0  # the model's own, as its tokenizer pads
        self.optimizer = torch.optim.AdamW(layer_groups(self.model, settings.lr, settings.layer_decay))
        planned = max(1, updates)  # optimiser steps the cosine spans (stretched once the fold knows its pace)
        self.schedule = Schedule(int(settings.warmup_share * planned), planned)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self.schedule)
        dtype = DTYPES.get(settings.precision)
        self.autocast = torch.autocast(self.device.type, dtype=dtype) if dtype else contextlib.nullcontext()
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=settings.precision == "fp16")

    def _batch(self, ids: list[np.ndarray], rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        tokens, mask = padded(ids, rows, self.pad)
        return (torch.from_numpy(tokens).to(self.device, non_blocking=True),
                torch.from_numpy(mask).to(self.device, non_blocking=True))

    def train_epoch(self, ids: list[np.ndarray], y: torch.Tensor, batches: list[np.ndarray],
                    stop_at: float) -> EpochStats:
        """One epoch over `batches` (row indices); `completed` is False when `stop_at` arrived first."""
        self.model.train()
        stats, accumulate, started = EpochStats(), self.settings.accumulation, time.monotonic()
        for step, rows in enumerate(batches, start=1):
            if past(stop_at):
                stats.completed = False
                break
            tokens, mask = self._batch(ids, rows)
            with self.autocast:
                loss = self.task.loss(self.model(tokens, mask), y[rows].to(self.device, non_blocking=True))
            self.scaler.scale(loss / accumulate).backward()
            if step % accumulate == 0 or step == len(batches):
                self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.scaler.step(self.optimizer)
                self.scaler.update()
                self.optimizer.zero_grad(set_to_none=True)
                self.scheduler.step()
            stats.loss += float(loss.detach()) * len(rows)
            stats.samples += len(rows)
        stats.seconds = time.monotonic() - started
        stats.loss /= max(1, stats.samples)
        return stats

    @torch.inference_mode()
    def predict(self, ids: list[np.ndarray]) -> np.ndarray:
        self.model.eval()
        lengths = np.array([len(t) for t in ids])
        out = np.zeros((len(ids), self.task.outputs))
        for rows in by_length(lengths, 2 * self.settings.batch_size):
            tokens, mask = self._batch(ids, rows)
            with self.autocast:
                out[rows] = self.task.output(self.model(tokens, mask))
        return out

    def stretch(self, total_steps: int) -> None:
        """The cosine to end after `total_steps` updates in all."""
        self.schedule.total = max(self.schedule.warmup + 1, total_steps)

    def save(self, path: Path) -> None:
        with replacing(path) as tmp:
            torch.save({"model": self.settings.model, "state_dict": self.model.state_dict()}, tmp)

    def load(self, path: Path) -> None:
        self.model.load_state_dict(torch.load(path, map_location=self.device, weights_only=True)["state_dict"])


def _warm_peak(settings: TextSettings, task: Task):
    """warm_peak(batch): bytes a fresh fold holds on the GPU in steps 3-4 at that batch of max-length texts."""
    def warm_peak(batch: int) -> int:
        gc.collect()
        torch.cuda.empty_cache()
        probe = TextTrainer(settings.model_copy(update=dict(batch_size=batch, accumulation=1)), task, 4)
        ids = [np.full(settings.max_length, 1000, dtype=np.int32)] * batch
        y = task.targets(np.zeros(batch, dtype=int) if task.kind == "classes" else np.zeros((batch, task.outputs)))
        try:
            return warm_peak_bytes(partial(probe.train_epoch, ids, y, [np.arange(batch)], stop_at=float("inf")))
        finally:
            del probe
            torch.cuda.empty_cache()

    return warm_peak


def confirm_batch(settings: TextSettings, task: Task) -> tuple[TextSettings, str]:
    """On a GPU, move the planned batch towards the target share of memory by real steps at max length."""
    if settings.device != "cuda":
        return settings, ""
    share = fold_share_of_card(settings.per_gpu, settings.memory_target)
    result = probe_batch(_warm_peak(settings, task), settings.batch_size, share,
                         target=settings.memory_target, max_batch=settings.batch_size * settings.accumulation)
    effective = settings.batch_size * settings.accumulation
    accumulation = max(1, math.ceil(effective / result.batch))
    return settings.model_copy(update=dict(batch_size=result.batch, accumulation=accumulation)), \
        f"batch {result.batch} probed: warm peak {result.fraction:.0%} of its share (tried {list(result.tried)})"


class FoldRun:
    """A fold's passes over its rows, with what survives running out of memory: the epochs done (a fraction after
    a last, partial pass), the best pass, their times. After the first pass the epochs are fitted to the time
    left, fractions included: a fold stops when its time is spent, not at the last whole epoch before it."""

    def __init__(self, settings: TextSettings, data: FoldData, out_dir: Path, deadline: float):
        self.settings, self.data, self.deadline, self.out_dir = settings, data, deadline, out_dir
        self.probe_seconds = 0.0  # what confirming the batch took of the start-up (train sets it)
        self.task = Task(data)
        self.y = self.task.targets(data.y_train)
        self.lengths = np.array([len(t) for t in data.x_train])
        self.best_path, self.last_path, self.epoch_log = out_dir / "model.pt", out_dir / "last.pt", out_dir / EPOCH_LOG
        self.passes, self.done, self.planned = 0, 0.0, float(settings.epochs)
        self.best, self.best_pass, self.best_val, self.times = None, 0, None, []
        # seconds kept for predicting the validation and test rows: a guess from the planned epoch until the
        # first validation pass is timed (inference costs about a third of training a row)
        rows = len(data.x_val) + len(data.x_test)
        self.reserve = settings.epoch_seconds * rows / max(1, len(data.x_train)) / 3 + 1.0
        self.rng = np.random.default_rng(settings.seed)

    def updates(self, settings: TextSettings, epochs: float) -> int:
        return round(epochs * math.ceil(len(self.lengths) / settings.batch_size) / settings.accumulation)

    def run(self, settings: TextSettings) -> tuple[TextTrainer, bool]:
        """Passes at `settings`' batch from the last finished one; (trainer, whether the deadline ended it)."""
        trainer = TextTrainer(settings, self.task, self.updates(settings, self.planned))
        say_ready(self.out_dir, self.probe_seconds)  # tokens, weights on the device, batch confirmed: training follows
        if self.passes:
            state = torch.load(self.last_path, map_location=trainer.device, weights_only=True)
            trainer.model.load_state_dict(state["model"])
            trainer.optimizer.load_state_dict(state["optimizer"])
            trainer.scheduler.last_epoch = self.updates(settings, self.done)
        while self.planned - self.done > PASS_LEFT:
            t0 = time.monotonic()
            share = min(1.0, self.planned - self.done)
            batches = bucketed(self.lengths, settings.batch_size, self.rng)
            batches = batches[:max(1, math.ceil(share * len(batches)))]
            stats = trainer.train_epoch(self.data.x_train, self.y, batches, self.deadline - self.reserve)
            if not stats.completed and self.best is not None:
                return trainer, True
            self._validate(trainer, stats, t0)
            self.done += share if stats.completed else stats.samples / len(self.lengths)
            if not stats.completed:  # a first pass cut short: scored and kept, nothing more fits
                return trainer, True
            self.times.append((time.monotonic() - t0) / share)  # what a whole epoch takes
            pace = epoch_seconds(self.times)
            left = self.deadline - time.monotonic() - self.reserve
            if self.passes == 1:  # fit the epochs, and the cosine, to the time left
                self.planned = min(float(settings.max_epochs), self.done + max(0.0, left) / pace)
                trainer.stretch(self.updates(settings, self.planned))
            with replacing(self.last_path) as tmp:
                torch.save({"model": trainer.model.state_dict(), "optimizer": trainer.optimizer.state_dict()}, tmp)
            if past(self.deadline - min(1.0, self.planned - self.done) * pace - self.reserve):
                return trainer, self.planned - self.done > PASS_LEFT
            if self.passes - self.best_pass >= settings.patience:
                return trainer, False
        return trainer, False

    def _validate(self, trainer: TextTrainer, stats: EpochStats, started: float) -> None:
        """Score the pass on the validation rows, log it, and keep it when it is the best."""
        t0 = time.monotonic()
        val = trainer.predict(self.data.x_val)
        self.reserve = 1.25 * (time.monotonic() - t0) * len(self.data.x_test) / max(1, len(self.data.x_val)) + 1
        metric = self.data.spec.metric
        score = metrics.score(metric, self.data.y_val, val)
        self.passes += 1
        log_epoch(self.epoch_log, self.passes, stats, score, trainer.device, time.monotonic() - started, unit="rows")
        if self.best is None or metrics.better(metric, score, self.best):
            self.best, self.best_pass, self.best_val = score, self.passes, val
            trainer.save(self.best_path)


def train(settings: TextSettings, data: FoldData, out_dir: Path, deadline: float) -> EngineResult:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is on disk: never reach for a hub
    torch.set_num_threads(settings.threads)
    torch.manual_seed(settings.seed)
    (out_dir / EPOCH_LOG).unlink(missing_ok=True)
    fold = FoldRun(settings, data, out_dir, deadline)
    probe_started = time.monotonic()
    settings, probed = confirm_batch(settings, fold.task)
    fold.probe_seconds = time.monotonic() - probe_started
    started, notes, planned_batch = time.monotonic(), [probed], settings.batch_size
    while True:
        trainer = None
        try:
            trainer, stopped = fold.run(settings)
            break
        except Exception as exc:  # out of memory: half the batch, twice the accumulation, from the last epoch
            batch = smaller_batch(exc, settings.batch_size)
            notes.append(f"out of memory at batch {settings.batch_size} in epoch {fold.passes + 1}: continued at "
                         f"batch {batch} from epoch {fold.passes}")
            settings = settings.model_copy(update=dict(
                batch_size=batch, accumulation=math.ceil(settings.batch_size * settings.accumulation / batch)))
            del trainer
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    if fold.best is None:
        raise DeadlineReached("no epoch finished before the fold's deadline")
    train_seconds = time.monotonic() - started
    t0 = time.monotonic()
    trainer.load(fold.best_path)
    test_pred = trainer.predict(data.x_test)
    mean_epoch = float(np.mean(fold.times)) if fold.times else train_seconds
    changes = {"batch_size": settings.batch_size, "accumulation": settings.accumulation} \
        if settings.batch_size < planned_batch else {}
    return EngineResult(fold.best_val, test_pred, fold.best_path, epochs=fold.passes, best_epoch=fold.best_pass,
                        epoch_seconds=mean_epoch, min_train_seconds=mean_epoch, train_seconds=train_seconds,
                        predict_seconds=time.monotonic() - t0, stopped_by_deadline=stopped,
                        message="; ".join(m for m in (f"{settings.model} fine-tuned", *notes) if m), changes=changes)
