"""Fold processes in slots: start each fold with a deadline it can meet, collect what it writes, kill overruns.

A fold's deadline is an equal share of the training window left (AutoGluon's "time left / folds left"), so a fold
that finishes early hands its time to the next. A fold that cannot finish even with the whole window is not
started.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from runner.budget import Budget
from runner.folds import FoldResult, FoldTask
from runner.planner import Plan

GRACE_SECONDS = 5.0  # past its deadline a fold gets this long to write its manifest before it is killed
FINAL_SECONDS = 1.0  # kept after the last kill for the supervisor's final writes
MIN_FOLD_SECONDS = 2.0  # below this no fold process can even start up usefully
POLL_SECONDS = 0.2


@dataclass
class Running:
    task: FoldTask
    process: subprocess.Popen
    log: Path


def fold_deadline(now: float, training_deadline: float, pending: int, slots: int) -> float:
    """Equal share of the time left for the waves of folds still to run."""
    waves = max(1, math.ceil(pending / max(1, slots)))
    return now + (training_deadline - now) / waves


def least_seconds(results: list[FoldResult]) -> float | None:
    """Shortest time a fold needs, from the folds that produced something (None before the first)."""
    usable = [r.least_seconds for r in results if r.usable]
    return min(usable) if usable else None


def _launch(task: FoldTask) -> Running:
    out = Path(task.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)
    task_path, log = out / "task.json", out / "fold.log"
    task_path.write_text(json.dumps(task.to_json(), indent=2))
    threads = str(task.plan.threads)
    env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, "PYTHONUNBUFFERED": "1",
           "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}  # less fragmentation when batches vary
    if task.gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(task.gpu)
    with open(log, "w") as handle:
        # own session: the whole group (loader workers included) can be killed at once
        process = subprocess.Popen([sys.executable, "-m", "runner.fold_worker", str(task_path)], stdout=handle,
                                   stderr=subprocess.STDOUT, start_new_session=True, env=env)
    return Running(task, process, log)


def _kill(process: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _last_line(log: Path) -> str:
    lines = [l for l in log.read_text(errors="replace").splitlines() if l.strip()] if log.exists() else []
    return lines[-1][-300:] if lines else "no output"


def _collect(running: Running, killed: bool) -> FoldResult:
    manifest = Path(running.task.out_dir) / "manifest.json"
    if manifest.exists():
        return FoldResult.load(manifest)
    why = "killed at its deadline" if killed else f"exited with code {running.process.returncode}"
    return FoldResult(running.task.fold, "failed", message=f"{why}: {_last_line(running.log)}")


def free_gpu(plan: Plan, running: list[Running]) -> int | None:
    """The GPU running the fewest folds (None on CPU plans)."""
    if plan.device != "cuda" or not plan.slots_per_gpu:
        return None
    gpus = max(1, plan.slots // plan.slots_per_gpu)
    load = [sum(1 for r in running if r.task.gpu == g) for g in range(gpus)]
    return load.index(min(load))


def run_folds(plan: Plan, make_task: Callable[[int, float, int | None], FoldTask], budget: Budget,
              on_result: Callable[[FoldResult], None],
              on_status: Callable[[str], None] = lambda _: None) -> list[FoldResult]:
    """Run plan.folds folds, plan.slots at a time; `on_result` sees each result as it arrives."""
    pending, running, results = list(range(plan.folds)), [], []

    def finish(result: FoldResult) -> None:
        results.append(result)
        on_result(result)

    try:
        while pending or running:
            while pending and len(running) < max(1, plan.slots):
                now = time.monotonic()
                deadline = fold_deadline(now, budget.training_deadline, len(pending), plan.slots)
                need = max(MIN_FOLD_SECONDS, least_seconds(results) or 0.0)
                if deadline - now < need:
                    deadline = budget.training_deadline  # fewer folds: give this one the whole window left
                if deadline - now < need:
                    for fold in pending:
                        finish(FoldResult(fold, "skipped", message=f"needs about {need:.0f} s, "
                                                                  f"{max(0.0, deadline - now):.0f} s left"))
                    pending = []
                    break
                running.append(_launch(make_task(pending.pop(0), deadline, free_gpu(plan, running))))
            for item in list(running):
                alive = item.process.poll() is None
                kill_at = min(item.task.deadline + GRACE_SECONDS, budget.deadline - FINAL_SECONDS)
                if alive and time.monotonic() <= kill_at:
                    continue
                if alive:
                    _kill(item.process)
                running.remove(item)
                finish(_collect(item, killed=alive))
            on_status(", ".join(f"fold {r.task.fold}: {max(0, r.task.deadline - time.monotonic()):.0f} s left"
                                for r in running))
            time.sleep(POLL_SECONDS)
    finally:
        for item in running:
            _kill(item.process)
    return results
