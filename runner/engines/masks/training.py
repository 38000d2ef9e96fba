"""Training one mask fold: every training image once an epoch (mirrored at random), BCE + soft Dice, AdamW warmed
up over the first epoch then a cosine fitted to the epochs the deadline holds; each epoch predicts the validation
images (with their mirror images) and keeps the model of the lowest validation loss. It stops at an epoch boundary
before the deadline, keeping time for the test images at the validation images' pace.

A fold's rows are rows of the image cache (`FoldData.image_cache`); its targets, each image's mask classes
flattened (classes, height, width) in C order, as its predictions are.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from runner.common.atomic import replacing
from runner.common.budget import past
from runner.engines.base import EPOCH_LOG, DeadlineReached, EngineResult, FoldData, say_ready
from runner.engines.masks.network import MaskNet, as_input, create_encoder, predict_masks
from runner.engines.masks.planning import MaskSettings
from runner.engines.optimising import Optimised, from_start_on_oom
from runner.engines.networks import EpochStats, epoch_seconds, log_epoch, refitted_epochs

SMOOTH = 1.0  # soft Dice's smoothing: an empty batch's Dice is 1, not 0/0
PREDICT_BATCH = 64  # images a prediction pass holds at once: bounds memory, whatever the test set's size
MIN_RAGGED = 4  # a last batch of fewer images is left out of its epoch: one image's batch norm is noise
RESERVE_MARGIN = 1.25  # the test images' estimated seconds are stretched by this (and a second added)


def mask_loss(logits: torch.Tensor, masks: torch.Tensor, dice_weight: float) -> torch.Tensor:
    """BCE of every pixel plus soft Dice per class over the batch: Dice weighs a small salt body as much as the
    background's many pixels, where BCE alone learns to predict none."""
    bce = F.binary_cross_entropy_with_logits(logits, masks)
    probabilities = torch.sigmoid(logits)
    overlap = (probabilities * masks).sum(dim=(0, 2, 3))
    total = probabilities.sum(dim=(0, 2, 3)) + masks.sum(dim=(0, 2, 3))
    dice = 1 - ((2 * overlap + SMOOTH) / (total + SMOOTH)).mean()
    return bce + dice_weight * dice


class Images:
    """The fold's images (uint8, in memory: small sets) and masks, served as shuffled, mirrored batches."""

    def __init__(self, settings: MaskSettings, data: FoldData):
        cache = np.load(data.image_cache, mmap_mode="r")
        self.train = np.asarray(cache[np.asarray(data.x_train, dtype=int)])
        self.val = np.asarray(cache[np.asarray(data.x_val, dtype=int)])
        self.test = cache[np.asarray(data.x_test, dtype=int)] if len(data.x_test) else cache[:0]
        pixels = settings.mask_height * settings.mask_width  # the classes as the targets hold them, whatever planned
        self.shape = (max(1, data.y_train.shape[1] // pixels), settings.mask_height, settings.mask_width)
        self.masks = torch.from_numpy(np.asarray(data.y_train, dtype=np.float32).reshape(-1, *self.shape))
        self.y_val = torch.from_numpy(np.asarray(data.y_val, dtype=np.float32).reshape(-1, *self.shape))
        self.rng = np.random.default_rng(settings.seed)

    def batches(self, batch: int, device: torch.device):
        """One epoch: every training image once, each mirrored left-right with probability 1/2 (seismic slices
        are not symmetric top to bottom: no vertical flips)."""
        order = self.rng.permutation(len(self.train))
        for start in range(0, self.steps(batch) * batch, batch):
            rows = np.sort(order[start:start + batch])
            images, masks = as_input(self.train[rows], device), self.masks[rows].to(device)
            flip = torch.from_numpy(self.rng.random(len(rows)) < 0.5).to(device)
            images = torch.where(flip[:, None, None, None], images.flip(-1), images)
            masks = torch.where(flip[:, None, None, None], masks.flip(-1), masks)
            yield images, masks

    def flat(self, probabilities: torch.Tensor) -> np.ndarray:
        """Predictions (n, classes, height, width) as the targets are laid out: (n, classes x height x width)."""
        return probabilities.reshape(len(probabilities), int(np.prod(self.shape))).numpy().astype(np.float32)

    def steps(self, batch: int) -> int:
        """Batches an epoch: a ragged last one only where it holds MIN_RAGGED images (batch norm's statistics)."""
        whole, ragged = divmod(len(self.train), batch)
        return max(1, whole + (ragged >= MIN_RAGGED))


class Segmenter(Optimised):
    """One fold's network, optimiser and precision."""

    def __init__(self, settings: MaskSettings):
        encoder, self.init = create_encoder(settings.encoder, settings.levels)
        super().__init__(MaskNet(encoder, settings.classes, settings.decoder_width), settings)

    def step(self, images: torch.Tensor, masks: torch.Tensor) -> float:
        self.model.train()
        with self.autocast:
            logits = self.model(images)
        return self.update(mask_loss(logits.float(), masks, self.settings.dice_weight))

    def predict(self, images) -> torch.Tensor:
        return predict_masks(self.model, images, PREDICT_BATCH, self.device, self.autocast)


def validation_loss(probabilities: torch.Tensor, masks: torch.Tensor, dice_weight: float) -> float:
    """The training loss on the validation images' probabilities (lower is better): what picks the best epoch."""
    p = probabilities.clamp(1e-6, 1 - 1e-6)
    return float(mask_loss(torch.log(p / (1 - p)), masks, dice_weight))


@dataclass
class Progress:
    epochs_planned: int
    epoch: int = 0
    best: float | None = None
    best_epoch: int = 0
    best_val: np.ndarray | None = None
    times: list[float] = field(default_factory=list)
    reserve: float = 1.0  # seconds kept for the test images, from the validation images' pace


def _epochs(settings: MaskSettings, images: Images, net: Segmenter, deadline: float, out_dir,
            progress: Progress) -> bool:
    """Train until the planned epochs, the patience or the deadline; True when the deadline ended it."""
    p, batch = progress, min(settings.batch_size, max(1, len(images.train)))
    steps = images.steps(batch)
    if not p.epoch:  # the first epoch warms the rate up (from random init, at a high rate), then the planned decay
        net.schedule(max(0, round(settings.epochs) - 1) * steps, warmup=steps)
    while p.epoch < p.epochs_planned:
        t0, stats = time.monotonic(), EpochStats()
        for pair in images.batches(batch, net.device):
            if past(deadline - p.reserve):
                return True
            stats.loss += net.step(*pair)
            stats.samples += len(pair[0])
        stats.seconds, stats.loss = time.monotonic() - t0, stats.loss / steps
        v0 = time.monotonic()
        val = net.predict(images.val)
        p.reserve = RESERVE_MARGIN * (time.monotonic() - v0) * len(images.test) / max(1, len(images.val)) + 1.0
        score = validation_loss(val, images.y_val, settings.dice_weight) if len(val) else stats.loss
        p.epoch += 1
        p.times.append(time.monotonic() - t0)
        log_epoch(out_dir / EPOCH_LOG, p.epoch, stats, score, net.device, p.times[-1])
        if p.best is None or score < p.best:
            p.best, p.best_epoch, p.best_val = score, p.epoch, images.flat(val)
            with replacing(out_dir / "model.pt") as tmp:
                torch.save(net.model.state_dict(), tmp)
        left = deadline - time.monotonic() - p.reserve
        if p.epoch == 1:  # fit the cosine to the epochs the time left holds
            p.epochs_planned = max(1, min(settings.max_epochs, 1 + int(left // p.times[0])))
            net.schedule((p.epochs_planned - 1) * steps)
        elif p.epoch == 2:  # a first epoch slowed by warm-up (oneDNN's set-up) planned too few: the second's pace
            planned = refitted_epochs(p.times, p.epoch, p.epochs_planned, left, settings.max_epochs)
            if planned > p.epochs_planned:
                p.epochs_planned = planned
                net.schedule((planned - 2) * steps)
        if past(deadline - epoch_seconds(p.times) - p.reserve):
            return p.epoch < p.epochs_planned
        if p.epoch - p.best_epoch >= settings.patience:
            return False
    return False


def train(settings: MaskSettings, data: FoldData, out_dir, deadline: float) -> EngineResult:
    torch.set_num_threads(settings.threads)
    torch.manual_seed(settings.seed)
    started = time.monotonic()
    images = Images(settings, data)
    (out_dir / EPOCH_LOG).unlink(missing_ok=True)
    planned_batch = settings.batch_size

    def attempt(tried: MaskSettings):
        progress = Progress(tried.max_epochs)
        net = Segmenter(tried.model_copy(update=dict(classes=images.shape[0])))
        say_ready(out_dir)  # images in memory, net built: training follows
        return net, progress, _epochs(tried, images, net, deadline, out_dir, progress)

    (net, progress, stopped), settings, notes = from_start_on_oom(settings, attempt)
    if progress.best is None:
        raise DeadlineReached("no epoch finished before the fold's deadline")
    train_seconds, t0 = time.monotonic() - started, time.monotonic()
    net.model.load_state_dict(torch.load(out_dir / "model.pt", map_location=net.device, weights_only=True))
    test = images.flat(net.predict(images.test))
    mean_epoch = epoch_seconds(progress.times)
    return EngineResult(progress.best_val, test, out_dir / "model.pt",
                        epochs=progress.epoch, best_epoch=progress.best_epoch, epoch_seconds=mean_epoch,
                        min_train_seconds=mean_epoch, train_seconds=train_seconds,
                        predict_seconds=time.monotonic() - t0, stopped_by_deadline=stopped,
                        message="; ".join(n for n in (f"{settings.encoder} ({net.init}), {len(images.train)} "
                                                      f"training images", *notes) if n),
                        changes={"batch_size": settings.batch_size} if settings.batch_size < planned_batch else {})
