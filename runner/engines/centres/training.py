"""Training one detector fold: every training image once an epoch (mirrored at random, its boxes with it),
CenterNet's losses (the heatmaps' focal loss, L1 of each centre's size and offset) and the no-finding logit's
cross-entropy, AdamW warmed up over the first epoch then a cosine fitted to the epochs the deadline holds; each
epoch predicts the validation images and keeps the model of the lowest validation loss. It stops at an epoch
boundary before the deadline, keeping time for the test images at the validation images' pace.

A fold's rows are rows of the image cache (`FoldData.image_cache`); its targets and predictions rows of boxes
(runner.common.box_rows), encoded for the heads and decoded back by `heatmaps`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from runner.common import box_rows
from runner.engines.backbones import create_encoder
from runner.engines.base import EPOCH_LOG, EngineResult, FoldData, say_ready
from runner.engines.centres import heatmaps
from runner.engines.centres.network import STRIDE, CentreNet, as_input, outputs
from runner.engines.centres.planning import CentreSettings
from runner.engines.optimising import (Epochs, Optimised, Progress, epoch_steps, fit_epochs, fold_result,
                                       from_start_on_oom)

FOCAL_ALPHA, FOCAL_BETA = 2.0, 4.0  # CenterNet's: hard cells weigh more, cells near a centre less
PREDICT_BATCH = 64  # images a prediction pass holds at once: bounds memory, whatever the test set's size


@dataclass
class Targets:
    """The heads' targets for a batch of rows of boxes (heatmaps.encode), as tensors on the device."""

    heat: torch.Tensor
    regression: torch.Tensor
    centres: torch.Tensor
    no_finding: torch.Tensor

    @classmethod
    def of(cls, rows: np.ndarray, cells: int, device: torch.device) -> Targets:
        heat, regression, centres = heatmaps.encode(rows, cells)
        return cls(*(torch.from_numpy(a).to(device) for a in (heat, regression, centres)),
                   torch.from_numpy((rows[:, -1] >= box_rows.TRUE_FROM).astype(np.float32)).to(device))


def focal_loss(logits: torch.Tensor, targets: Targets) -> torch.Tensor:
    """CenterNet's focal loss over every cell, a sum over the images' centres' count."""
    p = torch.sigmoid(logits).clamp(1e-4, 1 - 1e-4)
    centres = targets.centres
    positive = torch.log(p) * (1 - p) ** FOCAL_ALPHA * centres
    negative = torch.log(1 - p) * p ** FOCAL_ALPHA * (1 - targets.heat) ** FOCAL_BETA * ~centres
    return -(positive.sum() + negative.sum()) / centres.sum().clamp(min=1)


def box_loss(regression: torch.Tensor, targets, size_weight: float) -> torch.Tensor:
    """The L1 of sizes (weighted) and offsets at the true centres, a sum over the centres' count."""
    at = targets.centres[:, :, None].expand_as(regression)
    error = (regression - targets.regression).abs() * at
    count = targets.centres.sum().clamp(min=1)
    return (size_weight * error[:, :, :2].sum() + error[:, :, 2:].sum()) / count


def detector_loss(heads, targets: Targets, size_weight: float) -> torch.Tensor:
    """The focal loss, the L1 of sizes and offsets at the true centres, the no-finding cross-entropy."""
    heat, regression, no_finding = (t.float() for t in heads)
    return (focal_loss(heat, targets) + box_loss(regression, targets, size_weight)
            + F.binary_cross_entropy_with_logits(no_finding, targets.no_finding))


class CacheRows:
    """Rows of the image cache's memory map, read a slice at a time: a fold holds a batch of them in memory, not
    its share of the cache (the real radiographs' cache at 512 px is 12 GB)."""

    def __init__(self, cache: np.ndarray, rows):
        self.cache, self.rows = cache, np.asarray(rows, dtype=int)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, which) -> np.ndarray:
        rows = self.rows[which]
        order = np.argsort(rows)  # a memory map reads sorted rows fastest
        out = np.empty((len(rows), *self.cache.shape[1:]), dtype=self.cache.dtype)
        out[order] = self.cache[rows[order]]
        return out


class Radiographs:
    """The fold's images (rows of the cache) and rows of boxes, served as shuffled, mirrored batches."""

    def __init__(self, settings: CentreSettings, data: FoldData):
        cache = np.load(data.image_cache, mmap_mode="r")
        self.train, self.val, self.test = (CacheRows(cache, rows) for rows in (data.x_train, data.x_val, data.x_test))
        self.rows, self.val_rows = np.asarray(data.y_train, np.float64), np.asarray(data.y_val, np.float64)
        self.cells, self.flips = settings.side // STRIDE, settings.flips
        self.rng = np.random.default_rng(settings.seed)

    def batches(self, batch: int, device: torch.device):
        """One epoch: every training image once, mirrored left-right with probability 1/2 where flips are on."""
        order = self.rng.permutation(len(self.train))
        for start in range(0, self.steps(batch) * batch, batch):
            rows = np.sort(order[start:start + batch])
            images, boxes = self.train[rows], self.rows[rows]
            if self.flips:
                flip = self.rng.random(len(rows)) < 0.5
                images = np.where(flip[:, None, None, None], images[:, :, ::-1], images)
                boxes = np.where(flip[:, None], heatmaps.mirrored(boxes), boxes)
            yield as_input(images, device), Targets.of(boxes, self.cells, device)

    def steps(self, batch: int) -> int:
        """Batches an epoch: its images, a ragged last batch only where it is large enough."""
        return epoch_steps(len(self.train), batch)


class Detector(Optimised):
    """One fold's network, optimiser and precision."""

    def __init__(self, settings: CentreSettings, classes: int):
        encoder, self.init = create_encoder(settings.encoder, settings.levels)
        super().__init__(CentreNet(encoder, classes, settings.decoder_width), settings)

    def step(self, images: torch.Tensor, targets: Targets) -> float:
        self.model.train()
        with self.autocast:
            heads = self.model(images)
        return self.update(detector_loss(heads, targets, self.settings.size_weight))

    def heads(self, images):
        return outputs(self.model, images, PREDICT_BATCH, self.device, self.autocast)


def rows_of(heads, classes: int) -> np.ndarray:
    """Rows of boxes from the heads' outputs (heatmaps.decode); an empty set's zero rows."""
    if heads is None:
        return np.zeros((0, box_rows.row_width(classes)))
    heat, regression, no_finding = (t.numpy() for t in heads)
    return heatmaps.decode(1 / (1 + np.exp(-heat)), regression, 1 / (1 + np.exp(-no_finding)))


def _validated(net: Detector, images: Radiographs, classes: int) -> tuple[float, np.ndarray]:
    """(the validation loss, the validation rows of boxes) of the net as it is."""
    heads = net.heads(images.val)
    if heads is None:
        return 0.0, rows_of(None, classes)
    with torch.no_grad():
        loss = float(detector_loss(heads, Targets.of(images.val_rows, images.cells, torch.device("cpu")),
                                   net.settings.size_weight))
    return loss, rows_of(heads, classes)


def train(settings: CentreSettings, data: FoldData, out_dir, deadline: float) -> EngineResult:
    torch.set_num_threads(settings.threads)
    torch.manual_seed(settings.seed)
    started = time.monotonic()
    images = Radiographs(settings, data)
    classes = box_rows.finding_classes(images.rows.shape[1])
    (out_dir / EPOCH_LOG).unlink(missing_ok=True)

    def attempt(tried: CentreSettings):
        progress, net = Progress(tried.max_epochs), Detector(tried, classes)
        batch = min(tried.batch_size, max(1, len(images.train)))
        run = Epochs(lambda: images.batches(batch, net.device), images.steps(batch),
                     lambda: _validated(net, images, classes), len(images.test) / max(1, len(images.val)))
        say_ready(out_dir)  # images in memory, net built: training follows
        return net, progress, fit_epochs(net, run, deadline, out_dir, progress)

    (net, progress, stopped), tried, notes = from_start_on_oom(settings, attempt)
    message = "; ".join((f"{tried.encoder} ({net.init}), {len(images.train)} training images at {tried.side} px",
                         *notes))
    return fold_result(net, progress, stopped, lambda: rows_of(net.heads(images.test), classes), out_dir, started,
                       message, settings.batch_size)
