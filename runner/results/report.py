"""report.json: what a run did, written after every change so a killed run still leaves one."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from runner.common.atomic import write_json
from runner.common.sampling import Sampled
from runner.common.saved import Saved
from runner.results.card_usage import CardUsage


@dataclass(frozen=True)
class RunReport(Saved):
    competition: str
    # running | trained | baseline (nothing trained) | error (bad input) | failed (a fault of the runner's, its
    # traceback in `traceback`) | interrupted | stopped (by the watchdog)
    status: str
    metric: str
    lower_is_better: bool
    budget_seconds: float
    wall_seconds: float
    submission: str
    submission_source: str
    cv_score: float | None = None
    baseline_cv_score: float | None = None  # the class prior / mean on the same out-of-fold rows
    timings: dict = field(default_factory=dict)  # seconds from the start: baseline_written, data_loaded, ...
    hardware: dict | None = None
    plan: dict | None = None
    spec: dict | None = None
    # every unit's FoldResult: member, fold, status, score; its start-up (`startup_seconds`, to ready) and the batch
    # probe's part of it (`probe_seconds`), epochs and their seconds, test prediction (`predict_seconds`), ...
    folds: tuple[dict, ...] = ()
    members: tuple[dict, ...] = ()  # name, engine, slot, folds, folds_done, cv, weight, seconds, gain, status
    blend: dict | None = None  # weights, cv, rows, start, member_cv
    # member, fold, lane, start, end, status, score, threads: when and where each ran (while it runs: status
    # "running", its end when the report was written)
    units: tuple[dict, ...] = ()
    killed: tuple[dict, ...] = ()  # member, fold, pid, why, how, at, stacks, log: each unit the run had to kill
    actions: tuple[dict, ...] = ()  # t, action: what the run changed while training, and why
    epochs: tuple[dict, ...] = ()  # member, fold, epoch, loss, score, images/s, data wait, GPU memory and busy %
    stop_reason: str | None = None  # why training ended when it did
    resumed: dict | None = None  # folds_reused, members: what an earlier run in this folder had finished
    sampled: tuple[Sampled, ...] = ()  # what the run trained on only a part of, of how much, and why
    # how the run used its cards: busy, held and training shares of its training window, each GPU member's speed
    # beside the bare loop's (runner.results.card_usage); None for a run without a card
    card_usage: CardUsage | None = None
    warnings: tuple[str, ...] = ()
    error: str | None = None
    traceback: str | None = None  # a failed run's: where the fault was

    @classmethod
    def load(cls, path: Path) -> "RunReport":
        return cls.from_json(json.loads(Path(path).read_text()))

    def save(self, path: Path) -> None:
        write_json(path, self.to_json())
