"""The `FineTune` engine: a pretrained text transformer fine-tuned end to end, on the GPU slots (or, without a
GPU, on every core when the window holds its minimum epochs). Its folds fill their window like the CNN's."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from runner.engines.base import Engine, FoldData, replanned_at_pace
from runner.engines.finetune.models import LADDER, local_models, model_folder
from runner.engines.finetune.planning import NAME, text_member
from runner.engines.finetune.settings import TextSettings
from runner.planning.portfolio import Member, PlanContext


class FineTune(Engine):
    name = NAME
    inputs = "text"
    accelerated = True
    Settings = TextSettings
    fills_window = True
    says_ready = True  # once its tokens, weights (on a card) and batch are in place: training.FoldRun.run
    time_scaled = ("epochs", "epoch_seconds", "max_epochs")
    preload = ("torch", "transformers", "runner.engines.finetune.training")  # once, in the fork server

    def plan(self, context: PlanContext) -> list[Member]:
        return [text_member(context)]

    def replan(self, context: PlanContext, member: Member, step_seconds: float) -> Member | None:
        """Planned again for the window left, at the pace a real epoch showed: the same model with other epochs,
        or a smaller one when the first was far slower than estimated."""
        return replanned_at_pace(text_member, context, member, step_seconds)

    def weights(self) -> tuple[str, ...]:
        return tuple(m.repo for m in LADDER)

    def pretrained(self) -> frozenset[str]:
        return local_models()

    def prepare_key(self, settings: TextSettings) -> str:
        return f"tokens-{settings.model.replace('/', '--')}-{settings.max_length}"

    def prepare(self, settings: TextSettings, dataset, work: Path, threads: int):
        """Every text's token ids, once for all folds (the tokenizer of the member's model, cut at its max length)."""
        import os

        from runner.engines.finetune.tokens import tokenise

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ["RAYON_NUM_THREADS"] = str(max(1, threads))  # the fast tokenizer's own thread pool
        train, test = dataset.views["text"]
        ids = tokenise(model_folder(settings.model), list(train) + list(test), settings.max_length)
        return dataclasses.replace(dataset, views={**dataset.views, "text": (ids[:len(train)], ids[len(train):])})

    def train_fold(self, settings: TextSettings, data: FoldData, out_dir: Path, deadline: float):
        from runner.engines.finetune.training import train

        return train(settings, data, out_dir, deadline)
