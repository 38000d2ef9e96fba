"""The `Restore` engine: a U-Net that learns the whole map from a noisy page to a clean one (its folds fill their
window on a GPU slot, or on a CPU's one lane when half the window holds its minimum epochs). It reads the `page`
view: a row per pixel naming its page, row and column, the same rows the per-pixel table members learn from."""
from __future__ import annotations

from pathlib import Path

from runner.engines.base import Engine, FoldData, replanned_at_pace
from runner.engines.unet.planning import NAME, RestoreSettings, restore_member
from runner.planning.portfolio import Member, PlanContext


class Restore(Engine):
    name = NAME
    inputs = "page"
    accelerated = True
    fills_window = True
    says_ready = True  # once its pages (on a card), batch and net are in place: training.train
    Settings = RestoreSettings
    time_scaled = ("epochs", "epoch_seconds", "slowdown")
    preload = ("torch", "runner.engines.unet.training")

    def plan(self, context: PlanContext) -> list[Member]:
        return [restore_member(context)]

    def replan(self, context: PlanContext, member: Member, step_seconds: float) -> Member | None:
        """Planned again for the window left, at the pace a real epoch showed."""
        return replanned_at_pace(restore_member, context, member, step_seconds)

    def train_fold(self, settings: RestoreSettings, data: FoldData, out_dir: Path, deadline: float):
        from runner.engines.unet.training import train

        return train(settings, data, out_dir, deadline)
