"""An engine that lives outside the package, registered through $RUNNER_ENGINES ("toy=toy_engine:Toy"): it proves a
new engine needs one module and one registry entry, nothing in the supervisor, slots or fold worker.

Its model is a fixed logistic function of the table's first numeric column (no fitting), so every member and every
extra member predicts the same thing: extras add nothing to the blend. `sleep` stretches a fold and `data_wait`
makes it report a loader-bound epoch, for scheduling tests; `die_in_fold` kills one fold's process; `overrun` makes
a fold ignore its deadline and SIGTERM (it sleeps all of `sleep`), as a fold deep in a library call would; a test
can put it on a GPU slot while it computes on the CPU. A whole run (`runner run --engines toy`) plans it from the
environment: TOY_SLEEP, TOY_OVERRUN=1 and TOY_MAX_FOLD_SECONDS.
"""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np

from runner.common.atomic import write_json
from runner.engines.base import EPOCH_LOG, Engine, EngineResult
from runner.planning.portfolio import Settings
from runner.planning.portfolio import Member


class ToySettings(Settings):
    sleep: float = 0.0
    data_wait: float = 0.0  # when set, a fold reports an epoch that waited this share of its time on its loader
    die_in_fold: int = -1  # this fold's process kills itself with SIGKILL (as the kernel's OOM killer would)
    overrun: bool = False  # sleeps all of `sleep` whatever its deadline, SIGTERM ignored


def predict(x, classes: list | None) -> np.ndarray:
    """A fixed function of each row alone: the same row gets the same prediction in every fold and split."""
    z = x.select_dtypes("number").iloc[:, 0].fillna(0).to_numpy(dtype=float)
    if classes is None:
        return z[:, None]
    p = 1 / (1 + np.exp(-np.clip(z, -30, 30)))
    return np.column_stack([1 - p, p] + [np.full_like(p, 1e-3)] * (len(classes) - 2))


class Toy(Engine):
    name = "toy"
    inputs = "table"
    Settings = ToySettings

    def plan(self, context) -> list[Member]:
        time.sleep(float(os.environ.get("TOY_PLAN_SECONDS", "0")))  # a stage that takes too long, for the watchdog
        settings = ToySettings(sleep=float(os.environ.get("TOY_SLEEP", "0")),
                               overrun=os.environ.get("TOY_OVERRUN") == "1", reasons=("a toy",))
        return [Member(name="toy", engine="toy", slot="cpu", settings=settings, folds=context.folds,
                       fold_seconds=1.0, min_fold_seconds=0.5,
                       max_fold_seconds=float(os.environ.get("TOY_MAX_FOLD_SECONDS", "10")), expected_gain=0.01,
                       reasons=("a toy",))]

    def train_fold(self, settings: ToySettings, data, out_dir: Path, deadline: float) -> EngineResult:
        started = time.monotonic()
        if out_dir.name == str(settings.die_in_fold):
            os.kill(os.getpid(), signal.SIGKILL)
        if settings.data_wait:
            (out_dir / EPOCH_LOG).write_text(json.dumps(dict(epoch=1, data_wait=settings.data_wait)) + "\n")
        if settings.overrun:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(settings.sleep if settings.overrun else min(settings.sleep, max(0.0, deadline - time.monotonic())))
        write_json(out_dir / "toy.json", dict(seed=settings.seed, threads=settings.threads))
        val, test = predict(data.x_val, data.classes), predict(data.x_test, data.classes)
        seconds = time.monotonic() - started
        return EngineResult(val, test, out_dir / "toy.json", epochs=1, best_epoch=1, epoch_seconds=seconds,
                            min_train_seconds=seconds, train_seconds=seconds, predict_seconds=0.0,
                            stopped_by_deadline=False)


class ToyPrepared(Toy):
    """The toy with a prepare step that records the devices it was given, as an engine that computes embeddings
    on a GPU once for all its folds would see them ("toyprep=toy_engine:ToyPrepared")."""

    name = "toyprep"

    def plan(self, context) -> list[Member]:
        return []

    def prepare_key(self, settings: ToySettings) -> str:
        return "toyprep"

    def prepare(self, settings: ToySettings, dataset, work: Path, threads: int):
        write_json(work / "prepare_devices.json", dict(cuda=os.environ.get("CUDA_VISIBLE_DEVICES")))
        return dataset
