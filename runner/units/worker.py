"""One unit of work in its own process: `python -m runner.units.worker TASK.json`.

A unit is one fold of a member, or the member's prepare step (an image cache, text embeddings) whose dataset
its folds then read. Memory leaks and CUDA state die with the process; a killed unit loses only itself. The
manifest is written last and atomically, so its presence means the unit's outputs are complete.
"""
from __future__ import annotations

if __name__ == "__main__":  # a unit started as a process of its own: its stacks on the signal from here on
    from runner.common.stacks import register

    register()

import dataclasses
import json
import pickle
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from runner.common import metrics
from runner.common.atomic import replacing, write_json, write_npy
from runner.common.budget import process_start, stop_on_sigterm
from runner.common.leaving import leave
from runner.data.dataset import rows_of
from runner.planning.registry import get_engine
from runner.engines.base import DeadlineReached, FoldData, say_ready
from runner.units.epoch_lines import read_ready
from runner.units.tasks import PREPARE, FoldResult, FoldTask, assign_folds



def fold_data(dataset, view: str, fold_ids: np.ndarray, fold: int) -> FoldData:
    """The fold's train and validation rows of one view of the dataset, and that view's test rows. Rows whose
    input could not be read are validated (predicted like any row) but never trained on."""
    train, val = fold_ids != fold, fold_ids == fold
    if dataset.untrainable is not None:
        train &= ~dataset.untrainable
    inputs, test = dataset.views[view]
    return FoldData(dataset.spec, dataset.classes, rows_of(inputs, train), dataset.y[train], rows_of(inputs, val),
                    dataset.y[val], test, dataset.image_cache)


def as_predictions(pred: np.ndarray, classes: list | None) -> np.ndarray:
    """float64, 2-D; class probabilities clipped at 0 and rows summing to 1, whatever precision the engine used."""
    pred = np.atleast_2d(np.asarray(pred, dtype=np.float64).T).T
    if classes is None:
        return pred
    pred = np.clip(np.nan_to_num(pred, nan=0.0), 0.0, None)
    sums = pred.sum(axis=1, keepdims=True)
    return np.where(sums > 0, pred / np.where(sums > 0, sums, 1.0), 1.0 / pred.shape[1])


def _load(path: str):
    with open(path, "rb") as handle:
        return pickle.load(handle)


def prepare(task: FoldTask, started: float) -> FoldResult:
    member = task.member
    dataset = _load(task.dataset)
    prepared = get_engine(member.engine).prepare(member.settings, dataset, Path(task.prepared).parent, task.threads)
    with replacing(Path(task.prepared)) as tmp:
        tmp.write_bytes(pickle.dumps(prepared, protocol=pickle.HIGHEST_PROTOCOL))
    wall = time.monotonic() - started
    return FoldResult(PREPARE, "completed", member.name, train_seconds=round(wall, 2), wall_seconds=round(wall, 2),
                      message="\n".join(prepared.warnings[len(dataset.warnings):]))  # one warning a line


def train(task: FoldTask, started: float) -> FoldResult:
    member, out = task.member, Path(task.out_dir)
    engine = get_engine(member.engine)
    dataset = _load(task.dataset)
    fold_ids = assign_folds(dataset.y, dataset.spec.is_classification, member.folds, member.split_seed,
                            groups=dataset.groups)
    data = fold_data(dataset, engine.inputs, fold_ids, task.fold)
    if not engine.says_ready:
        say_ready(out)
    sizes = dict(n_train=len(data.y_train), n_val=len(data.y_val))
    # started on fewer cores than its member planned (other processes took some): use only those
    settings = member.settings if member.settings.threads <= task.threads else \
        member.settings.model_copy(update=dict(threads=task.threads))
    try:
        result = engine.train_fold(settings, data, out, task.deadline)
    except DeadlineReached as exc:
        return FoldResult(task.fold, "failed", member.name, message=str(exc), out_of_time=True,
                          wall_seconds=round(time.monotonic() - started, 2), **sizes, **startup(out, started))
    val_pred, test_pred = (as_predictions(p, dataset.classes) for p in (result.val_pred, result.test_pred))
    write_npy(out / "val.npy", val_pred)
    write_npy(out / "test.npy", test_pred)
    return FoldResult(
        task.fold, "stopped" if result.stopped_by_deadline else "completed", member.name,
        score=metrics.score(dataset.spec.metric, data.y_val, val_pred, _groups(dataset, fold_ids == task.fold)),
        epochs=result.epochs,
        best_epoch=result.best_epoch, epoch_seconds=round(result.epoch_seconds, 6),
        predicted_epoch_seconds=member.step_seconds,
        min_train_seconds=round(result.min_train_seconds, 3),
        train_seconds=round(result.train_seconds, 2), predict_seconds=round(result.predict_seconds, 2),
        wall_seconds=round(time.monotonic() - started, 2), checkpoint=str(result.checkpoint),
        message=result.message, changes=result.changes, **sizes, **startup(out, started))


def _groups(dataset, rows: np.ndarray) -> np.ndarray | None:
    """The metric's group of each of `rows` (None: the metric scores every row alike)."""
    return None if dataset.score_groups is None else dataset.score_groups[rows]


def startup(out: Path, started: float) -> dict:
    """The fold's start-up as it said it (process start to ready) and the batch probe's part of it; all it ran
    when it never said it was ready."""
    ready = read_ready(out)
    if ready is None:
        return dict(startup_seconds=round(time.monotonic() - started, 2))
    return dict(startup_seconds=round(ready["at"] - started, 2), probe_seconds=ready["probe_seconds"])


def main(argv: list[str], started: float | None = None) -> int:
    """Run the unit in TASK.json; `started` is when this process began (monotonic), its own start by default."""
    started = process_start() if started is None else started
    stop_on_sigterm()  # asked to stop, the fold ends its epoch or round and writes what it has
    task = FoldTask.from_json(json.loads(Path(argv[0]).read_text()))
    try:
        result = prepare(task, started) if task.fold == PREPARE else train(task, started)
    except Exception as exc:  # reported in the manifest; the supervisor carries on with the other units
        traceback.print_exc()
        result = FoldResult(task.fold, "failed", task.member.name, message=f"{type(exc).__name__}: {exc}")
    result = dataclasses.replace(result, fingerprint=task.fingerprint)
    write_json(Path(task.out_dir) / "manifest.json", result.to_json())
    print(json.dumps(result.to_json()), flush=True)
    return 0 if result.usable else 1


if __name__ == "__main__":
    leave(main(sys.argv[1:]))  # the manifest is written: as a forked unit does, no interpreter teardown
