"""Training one mask fold: every training image once an epoch (mirrored at random; where the plan tiles them, as
many random crops as tile them, a share centred on objects), BCE + soft Dice, AdamW warmed up over the first epoch
then a cosine fitted to the epochs the deadline holds (runner.engines.optimising.fit_epochs); each epoch predicts
the validation images (with their mirror images; tiled, in overlapping tiles stitched) and keeps the model of the
lowest validation loss. It stops at an epoch boundary before the deadline, keeping time for the test images at the
validation images' pace.

A fold's rows are rows of the image cache (`FoldData.image_cache`); its targets, each image's mask classes
flattened (classes, height, width) in C order, as its predictions are.
"""
from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F

from runner.engines.base import EPOCH_LOG, EngineResult, FoldData, say_ready
from runner.engines.masks import tiles
from runner.engines.backbones import create_encoder
from runner.engines.masks.network import MaskNet, as_input, predict_masks
from runner.engines.masks.planning import MaskSettings, epoch_samples
from runner.engines.optimising import (Epochs, Optimised, Progress, epoch_steps, fit_epochs, fold_result,
                                       from_start_on_oom)

SMOOTH = 1.0  # soft Dice's smoothing: an empty batch's Dice is 1, not 0/0
PREDICT_BATCH = 64  # images a prediction pass holds at once: bounds memory, whatever the test set's size


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
        height, width = self.shape[1:]
        self.tile = settings.tile if 0 < settings.tile < max(height, width) else 0  # 0: whole images
        self.on_objects = settings.on_objects
        self.samples = settings.crops if self.tile and settings.crops else \
            epoch_samples(len(self.train), (height, width), self.tile, settings.batch_size)
        self.objects = tiles.object_pixels(self.masks.numpy()) if self.tile else []

    def batches(self, batch: int, device: torch.device):
        """One epoch: every training image once, each mirrored left-right with probability 1/2 (seismic slices
        are not symmetric top to bottom: no vertical flips)."""
        if self.tile:
            yield from self._crops(batch, device)
            return
        order = self.rng.permutation(len(self.train))
        for start in range(0, self.steps(batch) * batch, batch):
            rows = np.sort(order[start:start + batch])
            yield self._flipped(as_input(self.train[rows], device), self.masks[rows].to(device), device)

    def _crops(self, batch: int, device: torch.device):
        """One epoch of random crops (runner.engines.masks.tiles.crop_places), mirrored as whole images are."""
        height, width = self.shape[1:]
        places = tiles.crop_places(self.rng, self.objects, height, width, self.steps(batch) * batch, self.tile,
                                   self.on_objects)
        for start in range(0, len(places[0]), batch):
            chosen = list(zip(*(p[start:start + batch] for p in places)))
            pixels = np.stack([self.train[i, y:y + self.tile, x:x + self.tile] for i, y, x in chosen])
            masks = torch.stack([self.masks[i, :, y:y + self.tile, x:x + self.tile] for i, y, x in chosen])
            yield self._flipped(as_input(pixels, device), masks.to(device), device)

    def _flipped(self, images: torch.Tensor, masks: torch.Tensor, device: torch.device):
        """Each image and its mask mirrored left-right with probability 1/2."""
        flip = torch.from_numpy(self.rng.random(len(images)) < 0.5).to(device)
        images = torch.where(flip[:, None, None, None], images.flip(-1), images)
        masks = torch.where(flip[:, None, None, None], masks.flip(-1), masks)
        return images, masks

    def flat(self, probabilities: torch.Tensor) -> np.ndarray:
        """Predictions (n, classes, height, width) as the targets are laid out: (n, classes x height x width)."""
        return probabilities.reshape(len(probabilities), int(np.prod(self.shape))).numpy().astype(np.float32)

    def steps(self, batch: int) -> int:
        """Batches an epoch: its crops or images, a ragged last batch only where it is large enough."""
        return epoch_steps(self.samples, batch)


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

    def predict(self, images, tile: int = 0) -> torch.Tensor:
        """Probabilities (n, classes, height, width) of whole images, or of each image's overlapping tiles
        stitched (`tile` > 0: runner.engines.masks.tiles)."""
        if not tile:
            return predict_masks(self.model, images, PREDICT_BATCH, self.device, self.autocast)
        out = []
        for image in images:
            places = tiles.grid(image.shape[0], image.shape[1], tile)
            found = predict_masks(self.model, tiles.cut_tiles(np.asarray(image), places, tile), PREDICT_BATCH,
                                  self.device, self.autocast)
            out.append(torch.from_numpy(tiles.stitch(found.numpy(), places, *image.shape[:2])))
        return torch.stack(out) if out else torch.zeros(0)


def validation_loss(probabilities: torch.Tensor, masks: torch.Tensor, dice_weight: float) -> float:
    """The training loss on the validation images' probabilities (lower is better): what picks the best epoch."""
    p = probabilities.clamp(1e-6, 1 - 1e-6)
    return float(mask_loss(torch.log(p / (1 - p)), masks, dice_weight))


def _validated(net: Segmenter, images: Images) -> tuple[float, np.ndarray]:
    """(the validation loss, the validation images' flattened predictions) of the net as it is."""
    val = net.predict(images.val, images.tile)
    score = validation_loss(val, images.y_val, net.settings.dice_weight) if len(val) else 0.0
    return score, images.flat(val)


def train(settings: MaskSettings, data: FoldData, out_dir, deadline: float) -> EngineResult:
    torch.set_num_threads(settings.threads)
    torch.manual_seed(settings.seed)
    started = time.monotonic()
    images = Images(settings, data)
    (out_dir / EPOCH_LOG).unlink(missing_ok=True)

    def attempt(tried: MaskSettings):
        progress = Progress(tried.max_epochs)
        net = Segmenter(tried.model_copy(update=dict(classes=images.shape[0])))
        batch = min(tried.batch_size, max(1, images.samples))
        run = Epochs(lambda: images.batches(batch, net.device), images.steps(batch), lambda: _validated(net, images),
                     len(images.test) / max(1, len(images.val)))
        say_ready(out_dir)  # images in memory, net built: training follows
        return net, progress, fit_epochs(net, run, deadline, out_dir, progress)

    (net, progress, stopped), tried, notes = from_start_on_oom(settings, attempt)
    message = "; ".join((f"{tried.encoder} ({net.init}), {len(images.train)} training images", *notes))
    return fold_result(net, progress, stopped, lambda: images.flat(net.predict(images.test, images.tile)), out_dir,
                       started, message, settings.batch_size)
