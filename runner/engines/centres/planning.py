"""Sizing the detector member: a pure function of the hardware, the window and the images (no torch here).

An epoch is every training image of the fold once (mirrored at random), then the validation images predicted. On
a CPU each fold takes one core (small convolutions gain little from a second thread, so the lane's cores run as
many folds side by side) at a small side; the member plans the most folds (down to 2) whose waves hold MIN_EPOCHS
in the window. On a GPU the folds share each card (up to MOST_PER_GPU), each with the batch its share of the
target memory holds (estimated here; a fold that runs out of memory halves it and starts again), in bf16 where the
card has it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from runner.engines.base import TARGET_MEMORY_FRACTION
from runner.machine.card_memory import CUDA_RUNTIME_BYTES
from runner.machine.hardware import GiB, Gpu
from runner.engines.networks import EpochSettings, Sizing, network_member
from runner.planning.portfolio import Member, PlanContext

NAME = "centres"
# a CPU's encoder: resnet10t's first 4 levels (stride 16), the fastest of timm's small CNNs a core here (the mask
# engine's measure); a GPU affords resnet34's 5
ENCODER = {"cpu": "resnet10t", "cuda": "resnet34"}
LEVELS = {"cpu": 4, "cuda": 5}
DECODER_WIDTH = {"cpu": 32, "cuda": 64}  # the decoder's and heads' channels
# the detector's input side: on a CPU the replica's radiographs are 60-80 px and its smallest findings 3 px, so
# 64 keeps them; on a GPU the real radiographs (2,000-3,000 px, nodules of 1-2% of the side) want 512
SIDE = {"cpu": 64, "cuda": 512}
TRAIN_PIXELS_PER_CORE_SECOND = 300_000.0  # whole-net pixels a core-second, an epoch with its validation at
# 64 px, batch 16, fp32: 530k with one fold on this 2-core machine, 290k with two side by side (they share it)
INFER_SHARE = 0.4  # a predicted pixel's cost against a trained one: a forward pass, no backward
GPU_PIXELS_PER_SECOND = 40_000_000.0  # resnet34 under the decoder in bf16 on a card: an estimate, the first
# epoch re-times it
ACTIVATION_BYTES_PER_PIXEL = 2_000  # bytes a training pixel keeps for backward on a card: an estimate with room
PARAMETER_BYTES = 16 * 25_000_000  # resnet34 and its decoder: fp32 weight, gradient, two AdamW moments
MIN_EPOCHS = 3  # fewer leave a randomly initialised encoder barely past the heatmap's prior
MOST_EPOCHS = 200  # however small the set (the patience usually ends it sooner)
MOST_PER_GPU = 4  # folds sharing one card: small images leave a big card's compute idle with one fold
MIN_STEPS = 20  # an epoch makes at least this many optimiser steps (bounds a card's batch)
BATCH = 16  # a CPU's batch
MOST_BATCH = 128
STARTUP_SECONDS = {"cpu": 3.0, "cuda": 15.0}  # process start, imports, reading the cache (and a CUDA context)
DECODE_PER_CORE_SECOND = 500.0  # images decoded into the cache a core-second, where the data measured none
PRIOR_GAIN = 0.5  # a learner of boxes beside the regressions: what it adds is measured once its folds end
# what the plan says the detector is; its heads; what it writes (`reasons`)
DETECTOR = ("centre-point detector", "CenterNet's heatmap, size and offset heads and a no-finding logit",
            "mirrored at random, each slot its class's best peak on its side")


class CentreSettings(EpochSettings):
    encoder: str = ENCODER["cpu"]
    levels: int = LEVELS["cpu"]
    decoder_width: int = DECODER_WIDTH["cpu"]
    side: int = SIDE["cpu"]
    batch_size: int = BATCH
    max_epochs: int = MOST_EPOCHS
    size_weight: float = 0.1  # CenterNet's weight of the size's L1 (in cells) against the focal loss
    flips: bool = True  # mirror images left-right at random (each finding's side is learned from its place)


def input_side(context: PlanContext, device: str, sides: dict[str, int] = SIDE) -> int:
    """The detector's side: `sides`' for the device, never above the images' own shorter side (a larger one only
    interpolates), rounded up to the encoder's deepest stride (each level halves the side), which the network's
    input must be a multiple of."""
    own, stride = context.data.image_side, 2 ** LEVELS[device]
    return min(sides[device], max(stride, math.ceil(own / stride) * stride)) if own else sides[device]


def fold_bytes(batch: int, pixels: int) -> int:
    """A fold's estimated GPU peak: weights with gradients and moments, a batch's activations, the CUDA runtime."""
    return int(PARAMETER_BYTES + batch * pixels * ACTIVATION_BYTES_PER_PIXEL + CUDA_RUNTIME_BYTES)


def memory_batch(gpu: Gpu, per_gpu: int, pixels: int) -> int:
    """The batch that fills a fold's share of the card's target memory."""
    share = gpu.memory_target(TARGET_MEMORY_FRACTION) * gpu.memory_bytes / per_gpu
    return int((share - fold_bytes(0, pixels)) // (pixels * ACTIVATION_BYTES_PER_PIXEL))


def whole_waves(folds: int, parallel: int) -> int:
    """The most folds, up to `folds`, that fill every wave of `parallel` at once (`folds` where fewer than a wave):
    a last wave of fewer folds than slots leaves them idle while it runs (on 2 cores, 4 folds in 2 waves train
    each fold half as long again as 5 folds in 3)."""
    return folds if folds <= parallel else folds // parallel * parallel


def sizing(context: PlanContext, gpu: Gpu | None, pixels: int, per_pixel: float) -> Sizing:
    """Folds filling whole waves of the slots, and the epochs each fold's wave holds in the window."""
    data = context.data
    per_gpu = min(context.folds, MOST_PER_GPU, max(1, context.cores)) if gpu else 0
    parallel = per_gpu * len(context.hardware.gpus) if gpu else max(1, context.cores)
    folds = max(2, whole_waves(context.folds, parallel))
    train_rows = int(data.n_train * (1 - 1 / folds))
    batch = max(1, min(MOST_BATCH, memory_batch(gpu, per_gpu, pixels), max(BATCH, train_rows // MIN_STEPS))) \
        if gpu else BATCH
    step = (max(train_rows, MIN_STEPS * batch if gpu else 0) + data.n_train / folds * INFER_SHARE) * pixels \
        * per_pixel * max(1, per_gpu)
    predict = data.n_test * pixels * per_pixel * INFER_SHARE * max(1, per_gpu)
    waves = math.ceil(folds / parallel)
    epochs = min(MOST_EPOCHS, (context.window / waves - STARTUP_SECONDS["cuda" if gpu else "cpu"] - predict) / step)
    return Sizing(folds, round(epochs, 2), step, batch, fold_bytes(batch, pixels) if gpu else 0, predict)


def reasons(context: PlanContext, sized: Sizing, side: int, device: str, per_gpu: int,
            what: tuple[str, str, str] = DETECTOR) -> list[str]:
    """What the plan says of a centre-point member: `what` it is and does first, then its batch and memory."""
    data, gpu = context.data, context.hardware.tightest_gpu
    name, heads, writes = what
    said = [f"{name}: {ENCODER[device]} ({LEVELS[device]} levels, random init unless its weights are cached) under "
            f"a width-{DECODER_WIDTH[device]} FPN decoder to stride 4, {heads}; {sized.folds} folds x "
            f"{sized.epochs:g} epochs of ~{sized.step:.1f} s over {data.n_train} training images at {side} px; "
            f"{writes}"]
    if gpu:
        said.append(f"bf16; batch {sized.batch}, estimated peak {sized.memory / GiB:.1f} GiB a fold, {per_gpu} "
                    f"fold(s) a card: {per_gpu * sized.memory / gpu.memory_bytes:.0%} of "
                    f"{gpu.memory_bytes / GiB:.0f} GiB; speed estimated at {GPU_PIXELS_PER_SECOND:,.0f} "
                    f"pixels/s, the first epoch re-times it")
        if (fits := memory_batch(gpu, per_gpu, side * side)) > sized.batch:
            said.append(f"the batch is limited by the data or capped at {MOST_BATCH}, not by the card: its "
                        f"memory share would hold {fits:,}")
    else:
        said.append(f"one core a fold, {min(sized.folds, context.cores)} at once on the lane's {context.cores}, "
                    f"at ~{TRAIN_PIXELS_PER_CORE_SECOND:,.0f} training pixels a core-second (measured here); "
                    f"batch {BATCH}")
    if sized.folds < context.folds:
        said.append(f"{sized.folds} folds, not {context.folds}: whole waves of the "
                    f"{per_gpu * len(context.hardware.gpus) if gpu else context.cores} fold(s) that run at once")
    return said


@dataclass(frozen=True)
class Kind:
    """What a centre-point member is: its engine's name, settings, input sides by device, and what the plan says
    of it (`reasons`)."""

    name: str = NAME
    settings: type[CentreSettings] = CentreSettings
    sides: dict = field(default_factory=lambda: SIDE)
    what: tuple[str, str, str] = DETECTOR


def centres_member(context: PlanContext, slowdown: float = 1.0, kind: Kind = Kind()) -> Member:
    """The `kind` of member for this hardware, window and images; `slowdown`: real epochs against the estimate."""
    data, gpu = context.data, context.hardware.tightest_gpu
    device = "cuda" if gpu else "cpu"
    if not data.n_train:
        return _left_out(context, kind, "no training images")
    side = input_side(context, device, kind.sides)
    per_pixel = slowdown * (1 / GPU_PIXELS_PER_SECOND if gpu else 1 / TRAIN_PIXELS_PER_CORE_SECOND)
    sized = sizing(context, gpu, side * side, per_pixel)
    if sized.epochs < MIN_EPOCHS:
        return _left_out(context, kind, f"{sized.folds} folds x {MIN_EPOCHS} epochs of ~{sized.step:.0f} s do not "
                                        f"fit {context.window:.0f} s")
    per_gpu = min(context.folds, MOST_PER_GPU, max(1, context.cores)) if gpu else 0
    settings = kind.settings(encoder=ENCODER[device], levels=LEVELS[device], decoder_width=DECODER_WIDTH[device],
                             side=side, batch_size=sized.batch, device=device, threads=1,
                             precision=("bf16" if gpu.bf16 else "fp16") if gpu else "fp32", epochs=sized.epochs,
                             per_gpu=per_gpu, fold_memory_bytes=sized.memory,
                             memory_target=round(gpu.memory_target(TARGET_MEMORY_FRACTION), 3) if gpu
                             else TARGET_MEMORY_FRACTION, epoch_seconds=round(sized.step, 3),
                             slowdown=round(slowdown, 3),
                             reasons=tuple(reasons(context, sized, side, device, per_gpu, kind.what)))
    return network_member(kind.name, settings, sized, context, STARTUP_SECONDS[device], DECODE_PER_CORE_SECOND,
                          PRIOR_GAIN)


def _left_out(context: PlanContext, kind: Kind, why: str) -> Member:
    return Member(name=kind.name, engine=kind.name, slot="cpu", settings=kind.settings(), folds=context.folds,
                  left_out=why, reasons=(why,))
