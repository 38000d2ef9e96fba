"""Sizing the mask member: a pure function of the hardware, the window and the images (no torch here).

An epoch is every training image of the fold once (flipped at random), then the validation images predicted with
their mirror images. On a CPU each fold takes one core (small convolutions gain little from a second thread, so
the lane's cores run as many folds side by side), and the member plans the most folds (down to 2) whose waves hold
MIN_EPOCHS in the window: it is the one engine that learns masks, so the window is its own. On a GPU the folds
share each card (up to MOST_PER_GPU), each with the batch its share of the target memory holds (estimated here; a
fold that runs out of memory halves it and starts again), in bf16 where the card has it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from runner.engines.base import TARGET_MEMORY_FRACTION
from runner.machine.card_memory import CUDA_RUNTIME_BYTES
from runner.machine.hardware import GiB, Gpu
from runner.data.mask_targets import mask_columns
from runner.engines.masks import tiles
from runner.engines.networks import EpochSettings, Sizing, network_member
from runner.planning.portfolio import Member, PlanContext

NAME = "masks"
# a CPU's encoder: resnet10t's first 4 levels (stride 16) trained at 830k px/s a core here against resnet18's 550k
# and efficientnet_lite0's 610k (encoder alone, batch 16, 112 px); mobilenetv3_small_050 ran 3.5M but its random
# init barely learns in an epoch or two. A GPU affords resnet34's 5 levels.
ENCODER = {"cpu": "resnet10t", "cuda": "resnet34"}
LEVELS = {"cpu": 4, "cuda": 5}
DECODER_WIDTH = {"cpu": 32, "cuda": 64}  # the decoder's channels at every level: a narrow one is most of the speed
# whole-net training pixels (of the mask's size, before padding) a core-second here: 101 x 101 slices, batch 16,
# fp32, resnet10t's 4 levels under a width-32 decoder: 280k in a timed loop on one core of this 2-core machine, 380k
# in a real fold on the tgs replica (120 slices an epoch in 3.2 s); two folds side by side share the memory bus
TRAIN_PIXELS_PER_CORE_SECOND = 300_000.0
# a predicted pixel's cost against a trained one: two forward passes (the mirror image), no backward; 490k predicted
# pixels a second against 280k trained in the same timed loop
INFER_SHARE = 0.6
GPU_PIXELS_PER_SECOND = 40_000_000.0  # resnet34 U-Net in bf16 on a card: an estimate, the first epoch re-times it
# bytes a training pixel keeps for backward on a card (activations of encoder and decoder at bf16/fp32, padded
# input): an estimate with room, the fold halves its batch on running out of memory
ACTIVATION_BYTES_PER_PIXEL = 3_000
PARAMETER_BYTES = 16 * 25_000_000  # resnet34 and its decoder: fp32 weight, gradient, two AdamW moments
MIN_EPOCHS = 3  # fewer leave a randomly initialised encoder barely past predicting the background
MOST_EPOCHS = 200  # however small the set (the patience usually ends it sooner)
MOST_PER_GPU = 4  # folds sharing one card: small images leave a big card's compute idle with one fold
MIN_STEPS = 20  # an epoch makes at least this many optimiser steps (bounds a card's batch)
BATCH = 16  # a CPU's batch
MOST_BATCH = 256  # a bound on the estimate: the rate (3e-3, from small batches) is not tuned for larger ones
# the largest tile a batch holds: a CPU's 256-pixel images train at its pace, a card's batch holds 512-pixel tiles;
# larger images (hubmap's slides, vesuvius' fragments on their canvas) are learned in random crops of it
MOST_TILE = {"cpu": 256, "cuda": 512}
LEAST_TILE = 64  # a smaller crop holds too little of an object and its surroundings
FEW_STEPS = 4  # whole images giving fewer steps an epoch than this (a dozen slides) are learned in crops instead
TILE_MULTIPLE = 32  # a tile's side: a multiple of a 5-level encoder's stride
ON_OBJECTS = 0.5  # crops centred on a mask's pixel: glomeruli are a few percent of a slide
# epochs a window holds at most where crops are drawn (their epoch is a number of crops, not the images once): more
# crops an epoch instead, so that validation, checkpoints and the cap of MOST_EPOCHS leave the window filled
TILED_EPOCHS = 50
STARTUP_SECONDS = {"cpu": 3.0, "cuda": 15.0}  # process start, imports, reading the cache (and a CUDA context)
DECODE_PER_CORE_SECOND = 500.0  # images decoded into the cache a core-second, where the data measured none
PRIOR_GAIN = 0.5  # the only engine that learns masks: anything it learns beats the empty-mask prior


class MaskSettings(EpochSettings):
    encoder: str = ENCODER["cpu"]
    levels: int = LEVELS["cpu"]
    decoder_width: int = DECODER_WIDTH["cpu"]
    mask_height: int = 101  # the masks' (and the cached images') size: spec.mask.shape
    mask_width: int = 101
    classes: int = 1  # mask classes, each an output channel
    batch_size: int = BATCH
    max_epochs: int = MOST_EPOCHS
    dice_weight: float = 1.0  # soft Dice beside BCE: small salt bodies count as much as the background's pixels
    tile: int = 0  # pixels a side of the crops trained on and the tiles predicted; 0: whole images
    crops: int = 0  # crops an epoch draws (tiled): planned to fill the window at about TILED_EPOCHS epochs
    on_objects: float = ON_OBJECTS  # the share of crops centred on an object


def mask_shape(context: PlanContext) -> tuple[int, int] | None:
    """(height, width) of every mask: the spec's, else the images' median side (square); None when unknown."""
    mask = context.spec.mask
    if mask is not None and mask.shape:
        return int(mask.shape[0]), int(mask.shape[1])
    side = context.data.image_side
    return (side, side) if side else None


def tile_side(shape: tuple[int, int], train_rows: int, device: str) -> int:
    """0 (whole images) where they fit MOST_TILE and give FEW_STEPS batches an epoch; else the largest tile (a
    multiple of TILE_MULTIPLE, at least LEAST_TILE, below the images' side), on a CPU the largest whose crops of
    the training images give MIN_STEPS batches."""
    side = max(shape)
    if side <= MOST_TILE[device] and train_rows >= FEW_STEPS * BATCH:
        return 0
    tile = min(MOST_TILE[device], (side - 1) // TILE_MULTIPLE * TILE_MULTIPLE)
    # a CPU's steps are slow: smaller crops give it more of them (a card keeps its large tiles, drawing more)
    while device == "cpu" and tile > LEAST_TILE and train_rows * crops_over(shape, tile) < MIN_STEPS * BATCH:
        tile -= TILE_MULTIPLE
    return tile if LEAST_TILE <= tile < side else 0


def crops_over(shape: tuple[int, int], tile: int) -> int:
    """Tiles of `tile` pixels that cover an image of `shape` side by side (1: whole images)."""
    return math.ceil(shape[0] / tile) * math.ceil(shape[1] / tile) if tile else 1


def epoch_samples(train_rows: int, shape: tuple[int, int], tile: int, batch: int) -> int:
    """Images (or crops) an epoch trains on: every training image once; tiled, as many crops as cover them once,
    and at least MIN_STEPS batches of them (two slides' crops would make an epoch of one step)."""
    if not tile:
        return train_rows
    return max(train_rows * crops_over(shape, tile), MIN_STEPS * batch)


def predicted_pixels(shape: tuple[int, int], tile: int) -> int:
    """Pixels a prediction of one image runs the network on: the image, or its overlapping tiles."""
    return len(tiles.grid(*shape, tile)) * tile * tile if tile else shape[0] * shape[1]


def fold_bytes(batch: int, pixels: int) -> int:
    """A fold's estimated GPU peak: weights with gradients and moments, a batch's activations, the CUDA runtime."""
    return int(PARAMETER_BYTES + batch * pixels * ACTIVATION_BYTES_PER_PIXEL + CUDA_RUNTIME_BYTES)


@dataclass(frozen=True)
class TiledSizing(Sizing):
    """A mask member's sizing with its tiles: their side (0: whole images) and the images or crops an epoch."""

    tile: int = 0
    samples: int = 0


def _per_gpu(context: PlanContext) -> int:
    return min(context.folds, MOST_PER_GPU, max(1, context.cores))


def memory_batch(gpu: Gpu, per_gpu: int, pixels: int) -> int:
    """The batch that fills a fold's share of the card's target memory."""
    share = gpu.memory_target(TARGET_MEMORY_FRACTION) * gpu.memory_bytes / per_gpu
    return int((share - fold_bytes(0, pixels)) // (pixels * ACTIVATION_BYTES_PER_PIXEL))


def _gpu_batch(gpu: Gpu, per_gpu: int, pixels: int, train_rows: int) -> tuple[int, int]:
    """The batch filling a fold's share of the target memory, no larger than keeps MIN_STEPS an epoch."""
    batch = max(1, min(MOST_BATCH, memory_batch(gpu, per_gpu, pixels), max(BATCH, train_rows // MIN_STEPS)))
    return batch, fold_bytes(batch, pixels)


def _sizing(context: PlanContext, gpu: Gpu | None, shape: tuple[int, int], per_pixel: float) -> TiledSizing:
    """The most folds (down to 2) whose waves each hold MIN_EPOCHS in the window; with 2 that do not, the 2-fold
    sizing (which the caller leaves out). Images too large or too few for whole batches are learned in crops."""
    data, device = context.data, "cuda" if gpu else "cpu"
    per_gpu = _per_gpu(context) if gpu else 0
    for folds in range(max(2, context.folds), 1, -1):
        train_rows = int(data.n_train * (1 - 1 / folds))
        tile = tile_side(shape, train_rows, device)
        pixels = tile * tile if tile else shape[0] * shape[1]  # a sample's: a crop's or an image's
        # drawn crops bound no batch: an epoch draws as many as its steps need
        crops = train_rows * crops_over(shape, tile) if not tile else MIN_STEPS * MOST_BATCH
        batch, memory = _gpu_batch(gpu, per_gpu, pixels, crops) if gpu else (BATCH, 0)
        samples = max(epoch_samples(train_rows, shape, tile, batch), MIN_STEPS * batch if gpu else 0)
        predict = data.n_test * predicted_pixels(shape, tile) * per_pixel * INFER_SHARE * max(1, per_gpu)
        step = (samples * pixels + data.n_train / folds * predicted_pixels(shape, tile) * INFER_SHARE) \
            * per_pixel * max(1, per_gpu)
        waves = math.ceil(folds / (per_gpu * len(context.hardware.gpus))) if gpu \
            else math.ceil(folds / max(1, context.cores))
        left = context.window / waves - STARTUP_SECONDS[device] - predict
        if tile and left / step > TILED_EPOCHS:  # crops are drawn: more an epoch, where the epochs would pass it
            per_crop = pixels * per_pixel * max(1, per_gpu)
            samples += int((left / TILED_EPOCHS - step) / per_crop)  # the epoch's validation unchanged
            step = left / TILED_EPOCHS
        epochs = min(MOST_EPOCHS, left / step)
        if epochs >= MIN_EPOCHS:
            break
    return TiledSizing(folds, round(epochs, 2), step, batch, memory, predict, tile, samples)


def masks_member(context: PlanContext, slowdown: float = 1.0) -> Member:
    """The mask member for this hardware, window and images; `slowdown`: real epochs against the estimate."""
    data, gpu = context.data, context.hardware.tightest_gpu
    device = "cuda" if gpu else "cpu"
    shape = mask_shape(context)
    if not data.n_train or shape is None:
        return _left_out(context, "no training images" if not data.n_train else "the masks' size is unknown")
    per_pixel = slowdown * (1 / GPU_PIXELS_PER_SECOND if gpu else 1 / TRAIN_PIXELS_PER_CORE_SECOND)
    sized = _sizing(context, gpu, shape, per_pixel)
    pixels = sized.tile ** 2 if sized.tile else shape[0] * shape[1]  # a sample's
    if sized.epochs < MIN_EPOCHS:
        return _left_out(context, f"2 folds x {MIN_EPOCHS} epochs of ~{sized.step:.0f} s do not fit "
                                  f"{context.window:.0f} s")
    per_gpu = _per_gpu(context) if gpu else 0
    classes = max(1, len(mask_columns(context.spec))) if context.spec.mask else 1  # one per mask column
    reasons = [f"U-Net of {ENCODER[device]} ({LEVELS[device]} levels, random init unless its weights are cached) "
               f"under a width-{DECODER_WIDTH[device]} decoder, BCE + soft Dice, horizontal flips; "
               f"{sized.folds} folds x {sized.epochs:g} epochs of ~{sized.step:.1f} s over {data.n_train} "
               f"{shape[0]}x{shape[1]} training images, {classes} mask class(es); predictions average each image "
               f"and its mirror image"]
    if sized.tile:
        reasons.append(tiled_reason(shape, sized, int(data.n_train * (1 - 1 / sized.folds))))
    if sized.epochs >= MOST_EPOCHS:
        reasons.append(capped_reason(context, sized, per_gpu))
    if gpu:
        reasons.append(f"bf16; batch {sized.batch}, estimated peak {sized.memory / GiB:.1f} GiB a fold, {per_gpu} "
                       f"fold(s) a card: {per_gpu * sized.memory / gpu.memory_bytes:.0%} of "
                       f"{gpu.memory_bytes / GiB:.0f} GiB; speed estimated at {GPU_PIXELS_PER_SECOND:,.0f} "
                       f"pixels/s, the first epoch re-times it")
        if (fits := memory_batch(gpu, per_gpu, pixels)) > sized.batch:
            bound = f"capped at {MOST_BATCH}" if sized.batch == MOST_BATCH else \
                f"{sized.samples:,} {'crops' if sized.tile else 'training images'} an epoch keep at least " \
                f"{MIN_STEPS} steps at {sized.batch}"
            reasons.append(f"the batch is limited by the data, not the card ({bound}); the memory share would "
                           f"hold {fits:,}")
    else:
        reasons.append(f"one core a fold, {min(sized.folds, context.cores)} at once on the lane's {context.cores}, "
                       f"at ~{TRAIN_PIXELS_PER_CORE_SECOND:,.0f} training pixels a core-second (measured here); "
                       f"batch {BATCH}")
    settings = MaskSettings(encoder=ENCODER[device], levels=LEVELS[device], decoder_width=DECODER_WIDTH[device],
                            mask_height=shape[0], mask_width=shape[1], classes=classes, batch_size=sized.batch,
                            device=device, threads=1, precision=("bf16" if gpu.bf16 else "fp16") if gpu else "fp32",
                            epochs=sized.epochs, per_gpu=per_gpu, fold_memory_bytes=sized.memory,
                            memory_target=round(gpu.memory_target(TARGET_MEMORY_FRACTION), 3) if gpu
                            else TARGET_MEMORY_FRACTION, epoch_seconds=round(sized.step, 3),
                            slowdown=round(slowdown, 3), tile=sized.tile, crops=sized.samples if sized.tile else 0,
                            reasons=tuple(reasons))
    return network_member(NAME, settings, sized, context, STARTUP_SECONDS[device], DECODE_PER_CORE_SECOND,
                          PRIOR_GAIN)


def capped_reason(context: PlanContext, sized: TiledSizing, per_gpu: int) -> str:
    """What the plan says where the epochs' cap, not the window, ends the folds: the share of the window they take,
    and who has the rest."""
    lanes = per_gpu * len(context.hardware.gpus) if per_gpu else max(1, context.cores)
    seconds = math.ceil(sized.folds / lanes) * (STARTUP_SECONDS["cuda" if per_gpu else "cpu"] + sized.predict
                                                + sized.epochs * sized.step)
    return (f"capped at {MOST_EPOCHS} epochs a fold (the patience usually ends one sooner): the folds take "
            f"~{seconds:,.0f} s of the {context.window:,.0f} s window; more seeds of the member (repeats, bags) "
            f"follow in the rest while they improve the out-of-fold score")


def tiled_reason(shape: tuple[int, int], sized: TiledSizing, train_rows: int) -> str:
    """What the plan says of tiles: their side, the crops an epoch draws and how, how images are predicted."""
    why = f"larger than a {MOST_TILE['cuda' if sized.memory else 'cpu']}-pixel tile" \
        if max(shape) > MOST_TILE["cuda" if sized.memory else "cpu"] else \
        f"{train_rows} training images a fold make fewer than {FEW_STEPS} batches an epoch"
    return (f"tiles: {shape[0]}x{shape[1]} images ({why}) learned in random {sized.tile}x{sized.tile} crops, "
            f"{sized.samples:,} an epoch (as many as cover the fold's images once, at least {MIN_STEPS} batches, more "
            f"where {TILED_EPOCHS} epochs would not fill the window), "
            f"{ON_OBJECTS:.0%} of them centred on a mask's pixel; predicted in "
            f"{len(tiles.grid(*shape, sized.tile))} tiles an image overlapping by {tiles.OVERLAP_SHARE:.0%}, "
            f"each pixel from the tile it lies deepest inside")


def _left_out(context: PlanContext, why: str) -> Member:
    return Member(name=NAME, engine=NAME, slot="cpu", settings=MaskSettings(), folds=context.folds,
                  left_out=why, reasons=(why,))
