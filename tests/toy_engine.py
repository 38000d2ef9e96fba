"""An engine that lives outside the package, registered through $RUNNER_ENGINES ("toy=toy_engine:Toy"): it proves a
new engine needs one module and one registry entry, nothing in the supervisor, slots or fold worker.

Its model is a fixed logistic function of the table's first numeric column (no fitting), so every member and every
extra member predicts the same thing: extras add nothing to the blend. `sleep` stretches a fold and `data_wait`
makes it report a loader-bound epoch, for scheduling tests; `die_in_fold` kills one fold's process; `overrun` makes
a fold ignore its deadline and SIGTERM (it sleeps all of `sleep`), as a fold deep in a library call would; a test
can put it on a GPU slot while it computes on the CPU. A whole run (`runner run --engines toy`) plans it from the
environment: TOY_SLEEP, TOY_OVERRUN=1 and TOY_MAX_FOLD_SECONDS. `ToyEpochs` is the same model trained as a
network is: a start-up before it says it is ready (a card's cold start), then epochs of a fixed pace, each an epoch
line.
"""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np

from runner.common.atomic import write_json
from runner.common.budget import past, stop_requested
from runner.engines.base import EPOCH_LOG, DeadlineReached, Engine, EngineResult, say_ready
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


class ToyEpochsSettings(ToySettings):
    startup: float = 0.0  # seconds a fold waits before it says it is ready, as a card's cold start does
    startup_folds: tuple[int, ...] = ()  # the folds that wait so (none: every fold)
    epoch: float = 0.1  # seconds each epoch takes
    epochs: int = 5  # epochs planned for each fold


class ToyEpochs(Toy):
    """The toy trained as a network is ("toyepochs=toy_engine:ToyEpochs"): each fold starts up (a wait before
    `say_ready` that no deadline or signal shortens, as CUDA and cuDNN's search do not), then trains its epochs at
    a fixed pace, each written as an epoch line, stopping at its deadline. Its folds stretch to their window, and a
    re-plan fits its epochs to the window at the pace it was given, as the CNN's does. A whole run plans it from
    TOY_STARTUP, TOY_STARTUP_FOLDS (comma-separated), TOY_PLANNED_STARTUP, TOY_EPOCH, TOY_EPOCHS and TOY_FOLDS."""

    name = "toyepochs"
    Settings = ToyEpochsSettings
    fills_window = True
    says_ready = True
    time_scaled = ("epochs",)

    def plan(self, context) -> list[Member]:
        env = os.environ.get
        folds = [int(f) for f in env("TOY_STARTUP_FOLDS", "").split(",") if f.strip()]
        settings = ToyEpochsSettings(startup=float(env("TOY_STARTUP", "0")), startup_folds=tuple(folds),
                                     epoch=float(env("TOY_EPOCH", "0.1")), epochs=int(env("TOY_EPOCHS", "5")),
                                     reasons=("a toy network",))
        return [toy_network(settings, int(env("TOY_FOLDS", str(context.folds))),
                            float(env("TOY_PLANNED_STARTUP", "0.5")))]

    def replan(self, context, member: Member, step_seconds: float) -> Member:
        epochs = max(1, min(member.settings.epochs, int(context.window / member.folds / step_seconds)))
        return member.model_copy(update=dict(step_seconds=step_seconds, settings=member.settings.model_copy(
            update=dict(epochs=epochs))))

    def train_fold(self, settings: ToyEpochsSettings, data, out_dir: Path, deadline: float) -> EngineResult:
        started = time.monotonic()
        if settings.startup and (not settings.startup_folds or int(out_dir.name) in settings.startup_folds):
            time.sleep(settings.startup)
        say_ready(out_dir)
        trained = 0
        while trained < settings.epochs and not stop_requested() and not past(deadline - settings.epoch):
            t0 = time.monotonic()
            time.sleep(settings.epoch)
            trained += 1
            seconds = time.monotonic() - t0
            line = dict(epoch=trained, loss=1.0, score=0.5, seconds=round(seconds, 3), epoch_seconds=round(seconds, 3),
                        rows_per_second=0.0, data_wait=0.0)
            with open(out_dir / EPOCH_LOG, "a") as handle:
                handle.write(json.dumps(line) + "\n")
        if not trained:
            raise DeadlineReached("no epoch finished before the fold's deadline")
        write_json(out_dir / "toy.json", dict(seed=settings.seed, epochs=trained))
        seconds = time.monotonic() - started
        return EngineResult(predict(data.x_val, data.classes), predict(data.x_test, data.classes),
                            out_dir / "toy.json", epochs=trained, best_epoch=trained, epoch_seconds=settings.epoch,
                            min_train_seconds=settings.epoch, train_seconds=seconds, predict_seconds=0.0,
                            stopped_by_deadline=trained < settings.epochs)


def toy_network(settings: ToyEpochsSettings, folds: int, startup: float, threads: int = 1) -> Member:
    """A ToyEpochs member on the CPU lane planned with `startup` seconds of start-up and its settings' pace."""
    return Member(name="toyepochs", engine="toyepochs", slot="cpu", settings=settings, folds=folds, threads=threads,
                  fold_seconds=round(startup + settings.epochs * settings.epoch, 2),
                  min_fold_seconds=round(startup + settings.epoch, 2), step_seconds=settings.epoch,
                  startup_seconds=startup, expected_gain=0.01, reasons=("a toy network",))
