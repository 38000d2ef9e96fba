"""Sizing the U-Net member: a pure function of the hardware, the window and the pages' pixels.

An epoch is as many random patches as the fold's training pages have pixels. On a GPU the folds share each card
(up to MOST_PER_GPU), each with the largest batch of patches that keeps MIN_STEPS an epoch (at most MOST_BATCH)
within its share of the target memory (estimated here, confirmed by the fold's probe, which only lowers it), and
their epochs fill the window. On a CPU a fold takes every core of the lane, and the member
is planned only when CPU_SHARE of the window holds MIN_EPOCHS for at least 2 folds; otherwise it is left out
with the reason (the per-pixel boosters then have the lane).
"""
from __future__ import annotations

import math

from runner.engines.base import TARGET_MEMORY_FRACTION
from runner.engines.networks import CUDA_RUNTIME_BYTES, EpochSettings, Sizing
from runner.engines.unet.shape import MULTIPLE, activation_floats, flops_per_pixel, parameters
from runner.machine.hardware import GiB, Gpu
from runner.planning.portfolio import Member, PlanContext

NAME = "unet"
WIDTH = {"cpu": 16, "cuda": 32}  # channels at full resolution: a GPU affords the wider net
PATCH = {"cpu": 64, "cuda": 128}  # a training patch's side (at most the pages' shorter side)
MIN_EPOCHS = 3  # fewer leave the correction barely learned: the residual starts as "copy the noisy page"
MOST_EPOCHS = 300  # however small the pages (the patience usually ends it sooner)
CPU_SHARE = 0.5  # on a CPU it shares the one lane with the per-pixel boosters, which lead there
# width-16 training pixels a core-second here (batch 16 of 44-64 px patches, fp32): 287k-327k on 1 and 2 threads;
# width 32 runs at 110k-118k, so a net of twice the width is counted four times the cost
TRAIN_PIXELS_PER_CORE_SECOND = 300_000.0
INFER_SHARE = 0.4  # an inference pixel's cost against a training one: 0.37-0.55 on whole 540x420 pages here
GPU_EFFICIENCY = 0.05  # of the bf16 spec-sheet rate small convolutions reach (not yet measured on a card)
FLOAT_BYTES = 4  # activations kept for backward: fp32 norms and outputs under autocast, counted at full width
PARAMETER_BYTES = 16  # fp32 weight and gradient, two fp32 AdamW moments
MOST_PER_GPU = 4  # folds sharing a card: a small net leaves a big card's compute idle with one fold
MOST_BATCH = 256
MIN_STEPS = 20  # an epoch makes at least this many optimiser steps
BATCH = 16  # a CPU's batch
STARTUP_SECONDS = {"cpu": 3.0, "cuda": 15.0}  # process start, imports, reading the pages (and a CUDA context)
PRIOR_GAIN = {"cuda": 0.3, "cpu": 0.03}  # the field's strongest model on a GPU; on a CPU behind the boosters


class RestoreSettings(EpochSettings):
    width: int = 16
    patch: int = 64
    batch_size: int = BATCH
    # AdamW from random init, warmed up over the first epoch, cosine to 1% of it. On 24 of the replica's pages
    # (1,500 steps of 16 40-px patches) the held-out RMSE was 0.027 at 1e-3, 0.022 at 2e-3 and 0.018 at 5e-3
    lr: float = 5e-3
    max_epochs: int = MOST_EPOCHS
    patience: int = 10


def patch_side(device: str, page_side: int) -> int:
    """PATCH, or the pages' shorter side where smaller, as a multiple of the net's poolings."""
    side = min(PATCH[device], page_side) if page_side else PATCH[device]
    return max(MULTIPLE, side // MULTIPLE * MULTIPLE)


def fold_bytes(width: int, batch: int, patch: int) -> int:
    """A fold's estimated GPU peak: weights with gradients and moments, a batch's activations, the CUDA runtime."""
    return int(parameters(width) * PARAMETER_BYTES + batch * patch * patch * activation_floats(width) * FLOAT_BYTES
               + CUDA_RUNTIME_BYTES)


def _pixel_seconds(context: PlanContext, device: str, width: int, gpu: Gpu | None) -> float:
    """Seconds one training pixel takes on the fold's device (alone on it)."""
    if gpu:
        return 3 * flops_per_pixel(width) / (max(gpu.bf16_tflops, 10.0) * 1e12 * GPU_EFFICIENCY)
    return (width / WIDTH["cpu"]) ** 2 / (TRAIN_PIXELS_PER_CORE_SECOND * max(1, context.cores))


def epoch_seconds(pixels: float, folds: int, per_pixel: float, sharing: int, batch_pixels: int) -> float:
    """Train on (1 - 1/folds) of the pages' pixels (at least MIN_STEPS batches of `batch_pixels`), restore the
    other pages once to validate."""
    train = max((1 - 1 / folds) * pixels, MIN_STEPS * batch_pixels)
    return (train + pixels * INFER_SHARE / folds) * per_pixel * max(1, sharing)


def _sizing(context: PlanContext, device: str, gpu: Gpu | None, per_pixel: float, patch: int) -> Sizing:
    """The most folds (down to 2) whose waves each hold MIN_EPOCHS in the member's window; with 2 that do not,
    the 2-fold sizing (which the caller leaves out)."""
    data, width = context.data, WIDTH[device]
    per_gpu = _per_gpu(context) if gpu else 0
    window = context.window if gpu else CPU_SHARE * context.window
    predict = data.n_test * per_pixel * INFER_SHARE * max(1, per_gpu)
    for folds in range(max(2, context.folds), 1, -1):
        batch, memory = _gpu_batch(gpu, width, patch, per_gpu, data.train_pixels, folds) if gpu else (BATCH, 0)
        step = epoch_seconds(data.train_pixels, folds, per_pixel, per_gpu, batch * patch * patch)
        waves = math.ceil(folds / (per_gpu * len(context.hardware.gpus))) if gpu else folds
        epochs = min(MOST_EPOCHS, (window / waves - STARTUP_SECONDS[device] - predict) / step)
        if epochs >= MIN_EPOCHS:
            break
    return Sizing(folds, round(epochs, 2), step, batch, memory, predict)


def _per_gpu(context: PlanContext) -> int:
    return min(context.folds, MOST_PER_GPU, max(1, context.cores))


def restore_member(context: PlanContext, slowdown: float = 1.0) -> Member:
    """The U-Net member for this hardware, window and pages; `slowdown`: real epochs against the estimate."""
    data, gpu = context.data, context.hardware.tightest_gpu
    device = "cuda" if gpu else "cpu"
    if not data.train_pixels:
        return _left_out(context, "no training pages to learn from")
    width, patch = WIDTH[device], patch_side(device, data.image_side)
    sized = _sizing(context, device, gpu, slowdown * _pixel_seconds(context, device, width, gpu), patch)
    if sized.epochs < MIN_EPOCHS:
        window = context.window if gpu else CPU_SHARE * context.window
        return _left_out(context, f"2 folds x {MIN_EPOCHS} epochs of ~{sized.step:.0f} s do not fit {window:.0f} s"
                         + ("" if gpu else f" ({CPU_SHARE:.0%} of the window: on a CPU the per-pixel boosters "
                                           "share the lane)"))
    per_gpu = _per_gpu(context) if gpu else 0
    reasons = [f"U-Net (width {width}, 3 levels) on random {patch}x{patch} patches, L2 loss, predicting each page "
               f"as the noisy one plus a learned correction: {sized.folds} folds x {sized.epochs:g} epochs of "
               f"~{sized.step:.1f} s over {data.train_pixels:,} training pixels; whole pages restored in tiles"]
    if gpu:
        reasons.append(f"bf16; batch {sized.batch}, estimated peak {sized.memory / GiB:.1f} GiB a fold, {per_gpu} "
                       f"fold(s) a card: {per_gpu * sized.memory / gpu.memory_bytes:.0%} of "
                       f"{gpu.memory_bytes / GiB:.0f} GiB; each fold probes its batch; speed estimated at "
                       f"{GPU_EFFICIENCY:.0%} of {gpu.bf16_tflops:.0f} TFLOPS, the first epoch re-times it")
    else:
        reasons.append(f"on {context.cores} core(s) at ~{TRAIN_PIXELS_PER_CORE_SECOND:,.0f} training pixels a "
                       f"core-second (measured here); at most {CPU_SHARE:.0%} of the window")
    threads = 1 if gpu else context.cores
    settings = RestoreSettings(width=width, patch=patch, batch_size=sized.batch, device=device, threads=threads,
                               precision=("bf16" if gpu.bf16 else "fp16") if gpu else "fp32",
                               epochs=sized.epochs, per_gpu=per_gpu, fold_memory_bytes=sized.memory,
                               memory_target=round(gpu.memory_target(TARGET_MEMORY_FRACTION), 3) if gpu
                               else TARGET_MEMORY_FRACTION, epoch_seconds=round(sized.step, 3),
                               slowdown=round(slowdown, 3), reasons=tuple(reasons))
    least = STARTUP_SECONDS[device] + sized.predict
    return Member(name=NAME, engine=NAME, slot="gpu" if gpu else "cpu", settings=settings, folds=sized.folds,
                  threads=threads, per_gpu=per_gpu, fold_seconds=round(least + sized.epochs * sized.step, 1),
                  min_fold_seconds=round(least + sized.step, 1), step_seconds=round(sized.step, 3),
                  startup_seconds=STARTUP_SECONDS[device], expected_gain=PRIOR_GAIN[device], reasons=tuple(reasons))


def _gpu_batch(gpu: Gpu, width: int, patch: int, per_gpu: int, pixels: int, folds: int) -> tuple[int, int]:
    """The batch of patches filling a fold's share of the target memory, no larger than keeps MIN_STEPS a
    epoch; and its estimated peak."""
    share = gpu.memory_target(TARGET_MEMORY_FRACTION) * gpu.memory_bytes / per_gpu
    per_patch = fold_bytes(width, 1, patch) - fold_bytes(width, 0, patch)
    fits = int((share - fold_bytes(width, 0, patch)) // per_patch)
    useful = int(pixels * (1 - 1 / folds) / (patch * patch) / MIN_STEPS)
    batch = max(1, min(MOST_BATCH, fits, max(BATCH, useful)))
    return batch, fold_bytes(width, batch, patch)


def _left_out(context: PlanContext, why: str) -> Member:
    return Member(name=NAME, engine=NAME, slot="cpu", settings=RestoreSettings(), folds=context.folds,
                  left_out=why, reasons=(why,))
