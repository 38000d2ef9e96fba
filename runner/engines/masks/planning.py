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
from typing import Literal

from runner.engines.base import TARGET_MEMORY_FRACTION
from runner.machine.card_memory import CUDA_RUNTIME_BYTES
from runner.machine.hardware import GiB, Gpu
from runner.data.mask_targets import mask_columns
from runner.planning.portfolio import Member, PlanContext, Settings

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
MOST_BATCH = 128
STARTUP_SECONDS = {"cpu": 3.0, "cuda": 15.0}  # process start, imports, reading the cache (and a CUDA context)
DECODE_PER_CORE_SECOND = 500.0  # images decoded into the cache a core-second, where the data measured none
PRIOR_GAIN = 0.5  # the only engine that learns masks: anything it learns beats the empty-mask prior


class MaskSettings(Settings):
    encoder: str = ENCODER["cpu"]
    levels: int = LEVELS["cpu"]
    decoder_width: int = DECODER_WIDTH["cpu"]
    mask_height: int = 101  # the masks' (and the cached images') size: spec.mask.shape
    mask_width: int = 101
    classes: int = 1  # mask classes, each an output channel
    batch_size: int = BATCH
    # AdamW, warmed up over the first epoch, cosine to 1% of the peak: from random init a high rate learns fastest
    lr: float = 3e-3
    dice_weight: float = 1.0  # soft Dice beside BCE: small salt bodies count as much as the background's pixels
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    epochs: float = 10.0  # estimated epochs a fold fits; each fold refits this after its first
    max_epochs: int = MOST_EPOCHS
    patience: int = 8
    per_gpu: int = 0
    fold_memory_bytes: int = 0
    memory_target: float = TARGET_MEMORY_FRACTION
    epoch_seconds: float = 0.0  # estimated
    slowdown: float = 1.0  # real epochs against the estimate, once one was timed (re-plans carry it)


def mask_shape(context: PlanContext) -> tuple[int, int] | None:
    """(height, width) of every mask: the spec's, else the images' median side (square); None when unknown."""
    mask = context.spec.mask
    if mask is not None and mask.shape:
        return int(mask.shape[0]), int(mask.shape[1])
    side = context.data.image_side
    return (side, side) if side else None


def fold_bytes(batch: int, pixels: int) -> int:
    """A fold's estimated GPU peak: weights with gradients and moments, a batch's activations, the CUDA runtime."""
    return int(PARAMETER_BYTES + batch * pixels * ACTIVATION_BYTES_PER_PIXEL + CUDA_RUNTIME_BYTES)


@dataclass(frozen=True)
class Sizing:
    folds: int
    epochs: float
    step: float  # seconds an epoch
    batch: int
    memory: int  # a fold's estimated GPU peak (0 on a CPU)
    predict: float  # seconds predicting the test images


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


def _sizing(context: PlanContext, gpu: Gpu | None, pixels: int, per_pixel: float) -> Sizing:
    """The most folds (down to 2) whose waves each hold MIN_EPOCHS in the window; with 2 that do not, the 2-fold
    sizing (which the caller leaves out)."""
    data = context.data
    per_gpu = _per_gpu(context) if gpu else 0
    predict = data.n_test * pixels * per_pixel * INFER_SHARE * max(1, per_gpu)
    for folds in range(max(2, context.folds), 1, -1):
        train_rows = int(data.n_train * (1 - 1 / folds))
        batch, memory = _gpu_batch(gpu, per_gpu, pixels, train_rows) if gpu else (BATCH, 0)
        rows = max(train_rows, MIN_STEPS * batch if gpu else train_rows)
        step = (rows + data.n_train / folds * INFER_SHARE) * pixels * per_pixel * max(1, per_gpu)
        waves = math.ceil(folds / (per_gpu * len(context.hardware.gpus))) if gpu \
            else math.ceil(folds / max(1, context.cores))
        epochs = min(MOST_EPOCHS, (context.window / waves - STARTUP_SECONDS["cuda" if gpu else "cpu"] - predict)
                     / step)
        if epochs >= MIN_EPOCHS:
            break
    return Sizing(folds, round(epochs, 2), step, batch, memory, predict)


def masks_member(context: PlanContext, slowdown: float = 1.0) -> Member:
    """The mask member for this hardware, window and images; `slowdown`: real epochs against the estimate."""
    data, gpu = context.data, context.hardware.tightest_gpu
    device = "cuda" if gpu else "cpu"
    shape = mask_shape(context)
    if not data.n_train or shape is None:
        return _left_out(context, "no training images" if not data.n_train else "the masks' size is unknown")
    pixels = shape[0] * shape[1]
    per_pixel = slowdown * (1 / GPU_PIXELS_PER_SECOND if gpu else 1 / TRAIN_PIXELS_PER_CORE_SECOND)
    sized = _sizing(context, gpu, pixels, per_pixel)
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
    if gpu:
        reasons.append(f"bf16; batch {sized.batch}, estimated peak {sized.memory / GiB:.1f} GiB a fold, {per_gpu} "
                       f"fold(s) a card: {per_gpu * sized.memory / gpu.memory_bytes:.0%} of "
                       f"{gpu.memory_bytes / GiB:.0f} GiB; speed estimated at {GPU_PIXELS_PER_SECOND:,.0f} "
                       f"pixels/s, the first epoch re-times it")
        if (fits := memory_batch(gpu, per_gpu, pixels)) > sized.batch:
            bound = f"capped at {MOST_BATCH}" if sized.batch == MOST_BATCH else \
                f"{int(data.n_train * (1 - 1 / sized.folds)):,} training images a fold keep at least {MIN_STEPS} " \
                f"steps an epoch at {sized.batch}"
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
                            slowdown=round(slowdown, 3), reasons=tuple(reasons))
    least = STARTUP_SECONDS[device] + sized.predict
    prepare_threads = max(1, context.cores)
    prepare = (data.n_train + data.n_test) * data.decode_each(DECODE_PER_CORE_SECOND) / prepare_threads
    return Member(name=NAME, engine=NAME, slot="gpu" if gpu else "cpu", settings=settings, folds=sized.folds,
                  threads=1, per_gpu=per_gpu, fold_seconds=round(least + sized.epochs * sized.step, 1),
                  min_fold_seconds=round(least + sized.step, 1), step_seconds=round(sized.step, 3),
                  startup_seconds=STARTUP_SECONDS[device], prepare_threads=prepare_threads,
                  prepare_seconds=round(prepare, 2), expected_gain=PRIOR_GAIN, reasons=tuple(reasons))


def _left_out(context: PlanContext, why: str) -> Member:
    return Member(name=NAME, engine=NAME, slot="cpu", settings=MaskSettings(), folds=context.folds,
                  left_out=why, reasons=(why,))
