"""One fold in its own process: `python -m runner.fold_worker TASK.json`.

Memory leaks and CUDA state die with the process; a killed fold loses only itself. The manifest is written last
and atomically, so its presence means the fold's predictions and checkpoint are complete.
"""
from __future__ import annotations

import json
import pickle
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from runner import metrics
from runner.budget import process_start
from runner.atomic import write_json, write_npy
from runner.engines import DeadlineReached, FoldData, train_fold
from runner.folds import FoldResult, FoldTask

PROCESS_START = process_start()


def fold_data(dataset, fold_ids: np.ndarray, fold: int) -> FoldData:
    train, val = fold_ids != fold, fold_ids == fold

    def pick(inputs, mask):
        if hasattr(inputs, "iloc"):
            return inputs.loc[mask].reset_index(drop=True)
        return [x for x, m in zip(inputs, mask) if m]

    return FoldData(dataset.spec, dataset.classes, pick(dataset.train, train), dataset.y[train],
                    pick(dataset.train, val), dataset.y[val], dataset.test, dataset.image_cache)


def run(task: FoldTask) -> FoldResult:
    out = Path(task.out_dir)
    with open(task.dataset, "rb") as handle:
        dataset, fold_ids = pickle.load(handle)
    data = fold_data(dataset, fold_ids, task.fold)
    startup = time.monotonic() - PROCESS_START
    sizes = dict(n_train=len(data.y_train), n_val=len(data.y_val), startup_seconds=round(startup, 2))
    try:
        result = train_fold(task.plan, data, out, task.deadline)
    except DeadlineReached as exc:
        return FoldResult(task.fold, "failed", message=str(exc), **sizes)
    write_npy(out / "val.npy", result.val_pred)
    write_npy(out / "test.npy", result.test_pred)
    return FoldResult(
        task.fold, "stopped" if result.stopped_by_deadline else "completed",
        score=metrics.score(dataset.spec.metric, data.y_val, result.val_pred), epochs=result.epochs,
        best_epoch=result.best_epoch, epoch_seconds=round(result.epoch_seconds, 3),
        min_train_seconds=round(result.min_train_seconds, 3),
        train_seconds=round(result.train_seconds, 2), predict_seconds=round(result.predict_seconds, 2),
        wall_seconds=round(time.monotonic() - PROCESS_START, 2), checkpoint=str(result.checkpoint),
        message=result.message, **sizes)


def main(argv: list[str]) -> int:
    task = FoldTask.from_json(json.loads(Path(argv[0]).read_text()))
    try:
        result = run(task)
    except Exception as exc:  # reported in the manifest; the supervisor carries on with the other folds
        traceback.print_exc()
        result = FoldResult(task.fold, "failed", message=f"{type(exc).__name__}: {exc}")
    write_json(Path(task.out_dir) / "manifest.json", result.to_json())
    print(json.dumps(result.to_json()), flush=True)
    return 0 if result.usable else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
