"""A timm CNN on images: the member that takes the GPU slots (or, without a GPU, every core).

Planning lives in `planning` (pure), the candidates in `ladder`, their measured and estimated costs in `measure`
and `estimates`; training in `training` (torch is imported only in fold and measuring processes). Its folds stretch
to the time they are given (`fills_window`): each fits its epochs to its first timed one.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from runner.engines.base import Engine, FoldData, replanned
from runner.engines.timm.costs import ImageCosts
from runner.engines.timm.ladder import image_candidates, ladder_models
from runner.engines.timm.planning import fitting_member, image_member, kept_member
from runner.engines.timm.settings import ImageSettings, useful_batch
from runner.planning.portfolio import Member, PlanContext

MEASURE_SHARE = 0.05  # of the budget, for timing candidates (at most 120 s)
GPU_MEASURE_FLOOR = 20.0  # seconds on a GPU: process start, imports and a CUDA context come before any timing,
GPU_MEASURE_MOST = 0.12  # and a 3-minute budget's 9 s left nothing timed; but never more than this of the budget
# seconds on a CPU we are on: starting the process and importing torch took 3 s on an idle 2-core machine, the first
# candidate's first step 2 s more (oneDNN's set-up), and 4 s (5% of 80 s) timed nothing on a busy one once the
# process's start counted against them; but never more than CPU_MEASURE_MOST of the budget
CPU_MEASURE_FLOOR = 8.0
CPU_MEASURE_MOST = 0.1
MEASURE_LEAST = 3.0  # seconds below which a measuring process cannot even import its libraries: none is started
# on a CPU, a window shorter than the floor times nothing: the process's start and imports (3 s on the reference
# machine, 6-9 s on a 2.4x slower one) and the first candidate's first step (2 s of oneDNN's set-up) fill it (a 60 s
# run's 6 s there ended inside the import), and the run waits for it: none is started, the smallest model planned
CPU_MEASURE_LEAST = CPU_MEASURE_FLOOR


class Timm(Engine):
    name = "timm"
    inputs = "image"
    accelerated = True
    Settings = ImageSettings
    fills_window = True
    says_ready = True  # once its model, loaders and (on a card) batch are in place: training.train
    measure_share = MEASURE_SHARE
    time_scaled = ("epochs", "epoch_seconds", "max_epochs")
    # imported once by the fork server: a fold that imports torch and timm itself starts 8 s later (an H200 machine)
    preload = ("torch", "timm", "runner.engines.timm.training")

    def measure_seconds(self, budget_seconds, hardware, here):
        """On the machine we are on, at least a floor of seconds where the budget can spare them (the measuring
        process's start and imports count against them): a plan from timed candidates beats one from FLOPs and the
        spec sheet, or on a CPU, from nothing."""
        share = super().measure_seconds(budget_seconds, hardware, here)
        if not here:
            return share
        floor, most = (GPU_MEASURE_FLOOR, GPU_MEASURE_MOST) if hardware.gpus else (CPU_MEASURE_FLOOR, CPU_MEASURE_MOST)
        return max(share, min(floor, most * budget_seconds))

    def prestart(self, spec, hardware, budget_seconds, work, until):
        """The measuring process, importing torch and timm (on a card, bringing CUDA up) while the data is read,
        where the run will measure here: a competition of this engine's inputs (images; sound clips, drawn as
        spectrograms) and a budget that spares the window."""
        if spec.task != self.inputs or self.measure_seconds(budget_seconds, hardware, True) < _least(hardware):
            return None
        from runner.engines.timm.measuring import prestart

        card = hardware.tightest_gpu.device if hardware.gpus else ""
        return prestart("cuda" if hardware.gpus else "cpu", work, until, card)

    def measure(self, dataset, hardware, seconds, work, here=True):
        """Image models timed for a few real steps each on this machine (in a measuring process: no torch in the
        supervisor); for a GPU we are not on, their memory and FLOPs are estimated instead."""
        from runner.engines.timm.measuring import estimated_costs, gather_costs
        from runner.machine.hardware import available_cpus

        seconds = min(120.0, seconds)
        candidates = image_candidates(hardware, self.pretrained(), dataset.image_side)
        if seconds < _least(hardware):  # a GPU plan from the ladder's estimates, a CPU one from the smallest model
            return estimated_costs(candidates, f"{seconds:.1f} s could not spare a measuring process's start") \
                if hardware.gpus else None
        device = "cuda" if hardware.gpus and here else "cpu"
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
        the same model or another, more or fewer folds and epochs. When no candidate's folds fit their minimum
        epochs in that window, the member itself at the real pace: its running folds go on (a replacement's folds
        could not train), and its later ones start only with time for an epoch and their test predictions."""
        costs = context.costs if isinstance(context.costs, ImageCosts) else ImageCosts()
        slowdown = step_seconds / member.step_seconds if member.step_seconds > 0 else 1.0
        costs = dataclasses.replace(costs, slowdown=costs.slowdown * slowdown)
        again = fitting_member(dataclasses.replace(context, costs=costs, folds=context.spec_folds)) or \
            kept_member(member, step_seconds, context.window)
        return replanned(again, step_seconds, member.step_seconds, context.window)

    def prepare_key(self, settings: ImageSettings) -> str:
        from runner.engines.timm.images import cache_side

        return f"images-{cache_side(settings.image_size, settings.source_side)}"

    def prepare(self, settings: ImageSettings, dataset, work: Path, threads: int):
        from runner.engines.timm.images import prepare_images

        return prepare_images(dataset, settings.image_size, work, threads, settings.source_side)

    def train_fold(self, settings: ImageSettings, data: FoldData, out_dir: Path, deadline: float):
        from runner.engines.timm.training import train

        return train(settings, data, out_dir, deadline)


def _least(hardware) -> float:
    """The shortest measuring window worth a measuring process on this hardware."""
    return MEASURE_LEAST if hardware.gpus else CPU_MEASURE_LEAST
