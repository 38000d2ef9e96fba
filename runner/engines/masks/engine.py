"""The `Masks` engine: a segmentation U-Net (a timm encoder under a light decoder) that learns each image's
per-pixel masks, for `mask` submissions. Its folds fill their window (one core each on a CPU, sharing a card on a
GPU); planning lives in `planning` (pure), the cache in `images`, torch only in `network` and `training`."""
from __future__ import annotations

from pathlib import Path

from runner.engines.base import Engine, FoldData, replanned_at_pace
from runner.engines.masks.planning import NAME, MaskSettings, masks_member
from runner.planning.portfolio import Member, PlanContext


class Masks(Engine):
    name = NAME
    inputs = "image"
    learns = "pixels"  # a row's outputs are its masks, a probability per pixel: it takes mask submissions alone
    accelerated = True
    fills_window = True
    says_ready = True  # once its images are in memory and its net is built: training.train
    Settings = MaskSettings
    time_scaled = ("epochs", "epoch_seconds", "slowdown")
    # imported once by the fork server: a fold that imports torch and timm itself starts seconds later
    preload = ("torch", "timm", "runner.engines.masks.training")

    def plan(self, context: PlanContext) -> list[Member]:
        return [masks_member(context)]

    def replan(self, context: PlanContext, member: Member, step_seconds: float) -> Member | None:
        """Planned again for the window left, at the pace a real epoch showed."""
        return replanned_at_pace(masks_member, context, member, step_seconds)

    def weights(self) -> tuple[str, ...]:
        from runner.engines.masks.planning import ENCODER

        return tuple(dict.fromkeys(ENCODER.values()))

    def prepare_key(self, settings: MaskSettings) -> str:
        from runner.engines.masks.images import cache_name

        return cache_name(settings.mask_height, settings.mask_width)

    def prepare(self, settings: MaskSettings, dataset, work: Path, threads: int):
        from runner.engines.masks.images import prepare_masks

        return prepare_masks(dataset, settings.mask_height, settings.mask_width, work, threads)

    def train_fold(self, settings: MaskSettings, data: FoldData, out_dir: Path, deadline: float):
        from runner.engines.masks.training import train

        return train(settings, data, out_dir, deadline)
