"""Training one image fold: a timm CNN on the cached pixels, stopping at an epoch boundary before the deadline.

Precision is decided once (autocast context + GradScaler enabled only for fp16), so the loop has no branches.
Every epoch appends a line to `epochs.jsonl` in the fold's folder (loss, score, images/s, data-wait, device
memory), which the supervisor reads while the fold runs.
"""
from __future__ import annotations

import contextlib
import gc
import logging
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import timm
import torch
import torch.nn.functional as F
from timm.optim import create_optimizer_v2
from timm.scheduler import CosineLRScheduler

from runner.common import metrics
from runner.common.atomic import replacing
from runner.common.budget import past
from runner.engines.base import EPOCH_LOG, DeadlineReached, EngineResult, FoldData, say_ready
from runner.engines.networks import (EpochStats, epoch_seconds, fold_share_of_card, log_epoch, probe_batch,
                                     refitted_epochs, smaller_batch, warm_peak_bytes)
from runner.engines.timm.augment import DeviceAugment
from runner.engines.timm.cudnn import apply_policy
from runner.engines.timm.images import cache_side
from runner.engines.timm.loading import loaders
from runner.engines.timm.settings import ImageSettings, useful_batch
from runner.common.weights import find_weights, timm_source

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
SCRATCH_LR = 2e-3  # AdamW peak rate from random init
# fine-tuning: the new head's AdamW peak rate by model family (layer decay lowers it block by block below the
# head). BatchNorm CNNs take a high one: efficientnet_lite0 on the dog-breed demo, one fold, 120 s, log loss 0.44
# at 2e-3 against 1.71 at 5e-4. ConvNeXt and ViT fine-tuning recipes run lower; those two are not measured here.
FINE_TUNE_LR = {"convnext": 2e-4, "eva": 1e-4, "vit": 1e-4}
FINE_TUNE_LR_OTHERS = 2e-3
LAYER_DECAY = 0.75  # fine-tuning: each block from the head down learns at this share of the rate above it
MIN_LR_SHARE = 0.01  # where warm-up starts and cosine ends, as a share of the peak rate
log = logging.getLogger("runner.vision")


def fine_tune_lr(model: str) -> float:
    return next((lr for family, lr in FINE_TUNE_LR.items() if model.startswith(family)), FINE_TUNE_LR_OTHERS)


def create_model(settings: ImageSettings, classes: int) -> tuple[torch.nn.Module, str]:
    """The model with its local pretrained weights when there are any (a plain file, or the HF cache read through
    timm's hub path, offline), else from random init; a missing or unreadable checkpoint says so in one line and
    the fold goes on from random init."""
    weights = find_weights(settings.model)
    if weights is None:
        if settings.init == "pretrained":
            log.warning("%s: no local pretrained weights (pull them with `runner weights pull %s`): random init",
                        settings.model, settings.model)
        return timm.create_model(settings.model, num_classes=classes), "random init"
    try:
        model = timm.create_model(settings.model, pretrained=True, num_classes=classes, **timm_source(weights))
    except Exception as exc:  # noqa: BLE001 - a corrupt or partial checkpoint fails in many ways; all mean the same
        log.warning("%s: pretrained weights in %s could not be loaded (%s: %s): random init", settings.model,
                    weights.label, type(exc).__name__, str(exc)[:200])
        return timm.create_model(settings.model, num_classes=classes), "random init (weights unreadable)"
    return model, f"pretrained: {weights.label}"


class Trainer:
    """One fold's model, optimiser and precision settings."""

    def __init__(self, settings: ImageSettings, data: FoldData | None, classes: int | None = None):
        self.settings, self.data = settings, data
        # values (a regression): one linear output per target, fitted by MSE to the targets standardised on the
        # fold's training rows (a fixed scale whatever the targets' units), its outputs scaled back
        self.regression = data is not None and data.spec.learned_as == "values"
        # independent sigmoid outputs (a set of labels), not a softmax
        self.multilabel = data is not None and data.classes is None and not self.regression
        self.device = torch.device(settings.device)
        targets = np.asarray(data.y_train, dtype=np.float64).reshape(len(data.y_train), -1) if self.regression \
            else np.zeros((1, 1))
        self.centre = torch.as_tensor(targets.mean(axis=0), dtype=torch.float32, device=self.device)
        self.spread = torch.as_tensor(np.maximum(targets.std(axis=0), 1e-6), dtype=torch.float32, device=self.device)
        model, self.init = create_model(settings, classes or data.n_outputs)
        self.memory_format = torch.channels_last if settings.channels_last else torch.contiguous_format
        self.model = model.to(self.device, memory_format=self.memory_format)
        self.forward = torch.compile(self.model) if settings.compile else self.model
        config = timm.data.resolve_data_config({}, model=model)  # the model's own mean, std and interpolation
        self.augment = DeviceAugment(settings.image_size, config["mean"], config["std"],
                                     config.get("interpolation") or "bilinear", self.device, self.memory_format,
                                     sound=settings.augment == "spectrogram")
        pretrained = self.init.startswith("pretrained")
        self.lr = fine_tune_lr(settings.model) if pretrained else SCRATCH_LR
        # fine-tuning: each block deeper from the head learns at LAYER_DECAY times the rate of the one above, so
        # the new head moves fast and the pretrained stem barely (timm's layer-wise decay)
        self.optimizer = create_optimizer_v2(self.model, "adamw", lr=self.lr, weight_decay=0.05,
                                             layer_decay=LAYER_DECAY if pretrained else None)
        dtype = DTYPES.get(settings.precision)
        self.autocast = torch.autocast(self.device.type, dtype=dtype) if dtype else contextlib.nullcontext()
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=settings.precision == "fp16")
        self.scheduler, self.updates = None, 0
        if pretrained:  # warm up over the first epoch: the random head's first gradients would wreck the features
            steps = -(-len(data.x_train) // max(1, settings.batch_size * settings.accumulation)) if data else 1
            self._cosine(settings.epochs * steps, warmup=steps)

    def train_epoch(self, loader, stop_at: float) -> EpochStats:
        """One epoch; `completed` is False when `stop_at` arrived before it ended (the epoch then does not count)."""
        self.model.train()
        accumulate, stats = self.settings.accumulation, EpochStats()
        started = waited_from = time.monotonic()
        steps = len(loader)
        for step, (images, labels) in enumerate(loader, start=1):
            stats.wait_seconds += time.monotonic() - waited_from
            if past(stop_at):
                stats.completed = False
                break
            with self.autocast:
                logits, labels = self.forward(self.augment.train(images)), labels.to(self.device, non_blocking=True)
                loss = self.loss(logits, labels)
            self.scaler.scale(loss / accumulate).backward()
            if step % accumulate == 0 or step == steps:
                self.scaler.step(self.optimizer)
                self.scaler.update()
                self.optimizer.zero_grad(set_to_none=True)
                if self.scheduler is not None:
                    self.updates += 1
                    self.scheduler.step_update(self.updates)
            stats.loss += float(loss.detach()) * len(labels)
            stats.samples += len(labels)
            waited_from = time.monotonic()
        stats.seconds = time.monotonic() - started
        stats.loss /= max(1, stats.samples)
        return stats

    @torch.inference_mode()
    def predict(self, loader) -> np.ndarray:
        self.model.eval()
        out = []
        for images, _ in loader:
            with self.autocast:
                logits = self.forward(self.augment.eval(images))
            out.append(self.outputs(logits).cpu().numpy())
        return np.concatenate(out)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if self.regression:
            return F.mse_loss(logits.float(), (labels - self.centre) / self.spread)
        if self.multilabel:
            return F.binary_cross_entropy_with_logits(logits.float(), labels)
        return F.cross_entropy(logits, labels)

    def outputs(self, logits: torch.Tensor) -> torch.Tensor:
        """Values, independent label probabilities or class probabilities, by what the fold learns."""
        if self.regression:
            return logits.double() * self.spread + self.centre
        return torch.sigmoid(logits.double()) if self.multilabel else torch.softmax(logits.double(), dim=1)

    def _cosine(self, steps: int, warmup: int = 0) -> None:
        self.scheduler = CosineLRScheduler(self.optimizer, t_initial=max(1, steps), lr_min=self.lr * MIN_LR_SHARE,
                                           warmup_t=warmup, warmup_lr_init=self.lr * MIN_LR_SHARE,
                                           warmup_prefix=True, t_in_epochs=False)
        self.updates = 0

    def schedule(self, steps: int) -> None:
        """Cosine decay over the steps that fit before the deadline (known once the first epoch is timed)."""
        self._cosine(steps)

    def stretch(self, steps_left: int) -> None:
        """The cosine stretched to end `steps_left` updates from now, going on from where it is."""
        done = self.updates
        self._cosine(done + steps_left)
        self.updates = done

    def save(self, path: Path, epoch: int, score: float) -> None:
        with replacing(path) as tmp:
            torch.save({"model": self.settings.model, "state_dict": self.model.state_dict(), "epoch": epoch,
                        "score": score, "classes": self.data.classes}, tmp)

    def load(self, path: Path) -> None:
        self.model.load_state_dict(torch.load(path, map_location=self.device, weights_only=True)["state_dict"])


def _warm_peak(settings: ImageSettings, classes: int):
    """warm_peak(batch): bytes a fresh model holds on the GPU in training steps 3-4 at that batch (the first steps
    of cudnn.benchmark and compile peak far higher), plus the CUDA runtime the allocator never sees."""
    def warm_peak(batch: int) -> int:
        gc.collect()  # what an attempt that ran out of memory left cached must not count against this one
        torch.cuda.empty_cache()
        probe = Trainer(settings.model_copy(update=dict(batch_size=batch)), None, classes)
        # what the loader ships: whole cached squares, cropped on the GPU
        side = cache_side(settings.image_size, settings.source_side)
        x = torch.randint(0, 255, (batch, 3, side, side), dtype=torch.uint8)
        y = torch.randint(0, classes, (batch,))
        try:
            return warm_peak_bytes(partial(probe.train_epoch, [(x, y)], stop_at=float("inf")))
        finally:
            del probe
            torch.cuda.empty_cache()

    return warm_peak


def confirm_batch(settings: ImageSettings, classes: int, max_batch: int = 1024) -> tuple[ImageSettings, str]:
    """On a GPU, move the planned batch towards the target share of memory by real steps (backing off on OOM),
    never above `max_batch` (the largest batch the fold's rows make useful)."""
    if settings.device != "cuda":
        return settings, ""
    share = fold_share_of_card(settings.per_gpu, settings.memory_target)
    result = probe_batch(_warm_peak(settings.model_copy(update=dict(compile=False)), classes),
                         min(settings.batch_size, max_batch), share, target=settings.memory_target,
                         max_batch=max_batch)
    note = f"batch {result.batch} probed: warm peak {result.fraction:.0%} of its share of GPU memory " \
           f"(tried {list(result.tried)})"
    return settings.model_copy(update=dict(batch_size=result.batch)), note


@dataclass
class Progress:
    """How far a fold's training has come: what it continues from after running out of memory."""

    epochs_planned: int
    epoch: int = 0  # epochs completed
    best: float | None = None
    best_epoch: int = 0
    best_val: np.ndarray | None = None
    epoch_times: list[float] = field(default_factory=list)
    reserve: float = 0.0  # seconds kept for predicting the test rows, measured on the validation pass


class FoldTraining:
    """One fold's epochs at one batch size: the model and loaders, resumed from the last finished epoch's state
    (model, optimiser, learning rate) when `progress` has one."""

    def __init__(self, settings: ImageSettings, data: FoldData, out_dir: Path, deadline: float,
                 progress: Progress):
        self.settings, self.data, self.deadline, self.progress = settings, data, deadline, progress
        self.trainer = Trainer(settings, data)
        self.train_loader, self.val_loader, self.test_loader = loaders(settings, data, data.image_cache)
        self.best_path, self.last_path, self.epoch_log = out_dir / "model.pt", out_dir / "last.pt", out_dir / EPOCH_LOG
        if progress.epoch:
            state = torch.load(self.last_path, map_location=self.trainer.device, weights_only=True)
            self.trainer.model.load_state_dict(state["model"])
            self.trainer.optimizer.load_state_dict(state["optimizer"])
            self._schedule(progress.epochs_planned - progress.epoch)  # the steps left, at this batch size

    def _schedule(self, epochs: int) -> None:
        self.trainer.schedule(epochs * -(-len(self.train_loader) // self.settings.accumulation))

    def _save_last(self) -> None:
        with replacing(self.last_path) as tmp:
            torch.save({"model": self.trainer.model.state_dict(), "optimizer": self.trainer.optimizer.state_dict()},
                       tmp)

    def run(self) -> bool:
        """Train until the planned epochs, the patience or the deadline ends it; True when the deadline did."""
        p, metric = self.progress, self.data.spec.metric
        while p.epoch < p.epochs_planned:
            t0 = time.monotonic()
            stats = self.trainer.train_epoch(self.train_loader, stop_at=self.deadline - p.reserve)
            if not stats.completed:
                return True
            v0 = time.monotonic()
            val_pred = self.trainer.predict(self.val_loader)
            p.reserve = 1.25 * (time.monotonic() - v0) * len(self.data.x_test) / max(1, len(self.data.x_val)) + 1.0
            score = metrics.score(metric, self.data.y_val, val_pred)
            p.epoch += 1
            log_epoch(self.epoch_log, p.epoch, stats, score, self.trainer.device, time.monotonic() - t0)
            if p.best is None or metrics.better(metric, score, p.best):
                p.best, p.best_epoch, p.best_val = score, p.epoch, val_pred
                self.trainer.save(self.best_path, p.epoch, score)
            p.epoch_times.append(time.monotonic() - t0)
            mean_epoch = epoch_seconds(p.epoch_times)
            left = self.deadline - time.monotonic() - p.reserve
            if p.epoch == 1:  # fit the schedule to the time left
                p.epochs_planned = max(1, min(self.settings.max_epochs, 1 + int(left // mean_epoch)))
                self._schedule(p.epochs_planned - 1)
            elif p.epoch == 2:  # again, when the first epoch paid for warm-up and the second shows the pace
                planned = refitted_epochs(p.epoch_times, 2, p.epochs_planned, left, self.settings.max_epochs)
                if planned > p.epochs_planned:
                    log.info("epoch 1 took %.1f s, epoch 2 %.1f s (warm-up): %d epochs planned, not %d",
                             *p.epoch_times, planned, p.epochs_planned)
                    self.trainer.stretch((planned - 2) * -(-len(self.train_loader) // self.settings.accumulation))
                    p.epochs_planned = planned
            self._save_last()
            if past(self.deadline - mean_epoch - p.reserve):
                return p.epoch < p.epochs_planned
            if p.epoch - p.best_epoch >= self.settings.patience:
                return False
        return False

    def predict_test(self) -> np.ndarray:
        self.trainer.load(self.best_path)
        return self.trainer.predict(self.test_loader)

    def release(self) -> None:
        """Give its memory back before a smaller batch tries again."""
        del self.trainer, self.train_loader, self.val_loader, self.test_loader
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def train(settings: ImageSettings, data: FoldData, out_dir: Path, deadline: float) -> EngineResult:
    torch.set_num_threads(settings.threads)
    torch.manual_seed(settings.seed)
    apply_policy()  # fixed shapes: kernels chosen once, as the run's policy says
    torch.set_float32_matmul_precision("high")  # TF32 for an fp32 plan's matrix multiplies, as convolutions have
    probe_started = time.monotonic()
    settings, probed = confirm_batch(settings, data.n_outputs, max_batch=useful_batch(len(data.x_train)))
    probe_seconds = time.monotonic() - probe_started
    (out_dir / EPOCH_LOG).unlink(missing_ok=True)
    started, progress, notes = time.monotonic(), Progress(settings.max_epochs), [probed]
    planned_batch = settings.batch_size
    while True:
        fold = None
        try:  # out of memory building the fold or mid-fold: a smaller batch, from the last finished epoch
            fold = FoldTraining(settings, data, out_dir, deadline, progress)
            say_ready(out_dir, probe_seconds)  # device, weights, loaders and batch in place: start-up is over
            stopped = fold.run()
            break
        except Exception as exc:
            batch = smaller_batch(exc, settings.batch_size)
            notes.append(f"out of memory at batch {settings.batch_size} in epoch {progress.epoch + 1}: continued at "
                         f"batch {batch} from epoch {progress.epoch}")
            settings = settings.model_copy(update=dict(batch_size=batch))
            if fold is not None:
                fold.release()
    if progress.best is None:
        raise DeadlineReached("no epoch finished before the fold's deadline")
    train_seconds = time.monotonic() - started
    t0 = time.monotonic()
    test_pred = fold.predict_test()
    mean_epoch = float(np.mean(progress.epoch_times))
    changes = {"batch_size": settings.batch_size} if settings.batch_size < planned_batch else {}
    return EngineResult(progress.best_val, test_pred, fold.best_path, epochs=progress.epoch,
                        best_epoch=progress.best_epoch, epoch_seconds=mean_epoch, min_train_seconds=mean_epoch,
                        train_seconds=train_seconds, predict_seconds=time.monotonic() - t0,
                        stopped_by_deadline=stopped, message="; ".join(m for m in (fold.trainer.init, *notes) if m),
                        changes=changes)
