"""A timm CNN on images: the member that takes the GPU slots (or, without a GPU, every core).

Planning lives in `planning` (pure), the candidates in `ladder`, their measured and estimated costs in `measure`
and `estimates`; training in `training` (torch is imported only in fold and measuring processes). Its folds stretch
to the time they are given (`fills_window`): each fits its epochs to its first timed one.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from runner.engines.base import Engine, FoldData, replanned
from runner.engines.vision.costs import ImageCosts
from runner.engines.vision.ladder import image_candidates, ladder_models
from runner.engines.vision.planning import image_member
from runner.engines.vision.settings import ImageSettings, useful_batch
from runner.portfolio import Member, PlanContext

MEASURE_SHARE = 0.05  # of the budget, for timing candidates (at most 120 s)
GPU_MEASURE_FLOOR = 20.0  # seconds on a GPU: process start, imports and a CUDA context come before any timing,
GPU_MEASURE_MOST = 0.12  # and a 3-minute budget's 9 s left nothing timed; but never more than this of the budget


class Timm(Engine):
    name = "timm"
    inputs = "image"
    accelerated = True
    Settings = ImageSettings
    fills_window = True
    measure_share = MEASURE_SHARE
    time_scaled = ("epochs", "epoch_seconds", "max_epochs")
    # imported once by the fork server: a fold that imports torch and timm itself starts 8 s later (an H200 machine)
    preload = ("torch", "timm", "runner.engines.vision.training")

    def measure_seconds(self, budget_seconds, hardware, here):
        """On a GPU we are on, at least GPU_MEASURE_FLOOR seconds where the budget can spare them: a plan from
        timed candidates beats one from FLOPs and the spec sheet."""
        share = super().measure_seconds(budget_seconds, hardware, here)
        if hardware.gpus and here:
            return max(share, min(GPU_MEASURE_FLOOR, GPU_MEASURE_MOST * budget_seconds))
        return share

    def measure(self, dataset, hardware, seconds, work, here=True):
        """Image models timed for a few real steps each on this machine (in a measuring process: no torch in the
        supervisor); for a GPU we are not on, their memory and FLOPs are estimated instead."""
        from runner.engines.vision.measure import gather_costs
        from runner.hardware import available_cpus

        seconds = min(120.0, seconds)
        if seconds < 3.0:  # shorter budgets cannot spare even the imports: the smallest model
            return None
        device = "cuda" if hardware.gpus and here else "cpu"
        candidates = image_candidates(hardware, self.pretrained(), dataset.image_side)
        return gather_costs(candidates, device, max(2, len(dataset.classes or ())),
                            hardware.cpus if here else available_cpus(), seconds, here or not hardware.gpus, work,
                            card=hardware.tightest_gpu.device if device == "cuda" else "")

    def plan(self, context: PlanContext) -> list[Member]:
        return [image_member(context)]

    def weights(self) -> tuple[str, ...]:
        return ladder_models()

    def useful_batch(self, rows: int) -> int:
        return useful_batch(rows)

    def replan(self, context: PlanContext, member: Member, step_seconds: float) -> Member | None:
        """The CNN planned again for the window left, its candidates' speed corrected by the first real epoch;
        the same model or another, more or fewer folds and epochs."""
        costs = context.costs if isinstance(context.costs, ImageCosts) else ImageCosts()
        slowdown = step_seconds / member.step_seconds if member.step_seconds > 0 else 1.0
        costs = dataclasses.replace(costs, slowdown=costs.slowdown * slowdown)
        again = image_member(dataclasses.replace(context, costs=costs, folds=context.spec.folds))
        return replanned(again, step_seconds, member.step_seconds, context.window)

    def prepare_key(self, settings: ImageSettings) -> str:
        from runner.engines.vision.images import cache_side

        return f"images-{cache_side(settings.image_size, settings.source_side)}"

    def prepare(self, settings: ImageSettings, dataset, work: Path, threads: int):
        from runner.engines.vision.images import prepare_images

        return prepare_images(dataset, settings.image_size, work, threads, settings.source_side)

    def train_fold(self, settings: ImageSettings, data: FoldData, out_dir: Path, deadline: float):
        from runner.engines.vision.training import train

        return train(settings, data, out_dir, deadline)
