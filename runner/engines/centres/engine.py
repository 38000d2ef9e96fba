"""The `Centres` engine: a centre-point detector (CenterNet's heads on a timm encoder) that finds each image's
labelled boxes where they are, for `boxes` submissions: each slot of a row of boxes (runner.common.box_rows) its
class's highest heatmap peak on its side, and the no-finding confidence from a logit of its own. Its folds fill
their window (one core each on a CPU, sharing a card on a GPU); planning lives in `planning` (pure), the cache in
`images`, the targets' encoding and decoding in `heatmaps` (numpy), torch only in `network` and `training`."""
from __future__ import annotations

from pathlib import Path

from runner.engines.base import Engine, FoldData, replanned_at_pace
from runner.engines.centres.planning import NAME, CentreSettings, centres_member
from runner.planning.portfolio import Member, PlanContext


class Centres(Engine):
    name = NAME
    inputs = "image"
    learns = "boxes"  # a row's outputs are its boxes in fixed slots: it takes box submissions alone
    accelerated = True
    fills_window = True
    says_ready = True  # once its images are in memory and its net is built: training.train
    Settings = CentreSettings
    time_scaled = ("epochs", "epoch_seconds", "slowdown")
    # imported once by the fork server: a fold that imports torch and timm itself starts seconds later
    preload = ("torch", "timm", "runner.engines.centres.training")

    def plan(self, context: PlanContext) -> list[Member]:
        return [centres_member(context)]

    def replan(self, context: PlanContext, member: Member, step_seconds: float) -> Member | None:
        """Planned again for the window left, at the pace a real epoch showed."""
        return replanned_at_pace(centres_member, context, member, step_seconds)

    def weights(self) -> tuple[str, ...]:
        from runner.engines.centres.planning import ENCODER

        return tuple(dict.fromkeys(ENCODER.values()))

    def prepare_key(self, settings: CentreSettings) -> str:
        from runner.engines.centres.images import cache_name

        return cache_name(settings.side)

    def prepare(self, settings: CentreSettings, dataset, work: Path, threads: int):
        from runner.engines.centres.images import prepare_radiographs

        return prepare_radiographs(dataset, settings.side, work, threads)

    def train_fold(self, settings: CentreSettings, data: FoldData, out_dir: Path, deadline: float):
        from runner.engines.centres.training import train

        return train(settings, data, out_dir, deadline)
