"""The unit of work handed to a fold process, and what it hands back."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runner.planning.portfolio import Member
from runner.common.saved import Saved

USABLE = ("completed", "stopped")  # statuses whose predictions go into the ensemble
PREPARE = -1  # the fold number of a member's prepare step


@dataclass(frozen=True)
class FoldTask(Saved):
    """One unit of work in its own process: a fold of a member, or (fold PREPARE) the member's prepare step."""

    member: Member
    fold: int
    dataset: str  # the pickled Dataset to read
    out_dir: str
    deadline: float  # time.monotonic() by which training AND test prediction are done
    threads: int = 1  # cores this unit holds
    gpu: int | None = None  # the GPU slot this fold runs on (its card is the plan's `devices[gpu]`)
    prepared: str | None = None  # a prepare step writes the Dataset its member's folds read here
    fingerprint: str = ""  # what produced it (runner.results.resume): a later run reuses the result only if it matches



@dataclass(frozen=True)
class FoldResult(Saved):
    fold: int
    status: str  # completed | stopped (cut at its deadline, best checkpoint kept) | failed | skipped
    member: str = ""
    score: float | None = None
    epochs: int = 0  # epochs (timm) or boosting rounds (LightGBM) done
    best_epoch: int = 0
    n_train: int = 0
    n_val: int = 0
    # process start to ready: data read, and for an engine that says so itself its device, weights and batch (on a
    # card the CUDA context and cuDNN's first search): a cost of its own, never an epoch's; a unit killed before
    # it was ready, all it ran
    startup_seconds: float = 0.0
    probe_seconds: float = 0.0  # of the start-up, what the batch probe took (0: no probe)
    epoch_seconds: float = 0.0  # mean seconds per epoch (or per whole fit for one-shot engines)
    predicted_epoch_seconds: float = 0.0  # what the plan expected for one (0: not estimated)
    min_train_seconds: float = 0.0  # the least training that gives a usable model
    train_seconds: float = 0.0
    predict_seconds: float = 0.0
    wall_seconds: float = 0.0
    checkpoint: str | None = None
    message: str = ""
    changes: dict = dataclasses.field(default_factory=dict)  # settings its member's later folds should take
    fingerprint: str = ""  # its task's (runner.results.resume)
    out_of_time: bool = False  # failed for its deadline: nothing usable trained in the time it was given

    @property
    def usable(self) -> bool:
        return self.status in USABLE

    @property
    def least_seconds(self) -> float:
        """Shortest time a fold like this one needs to end with something usable: all it spent outside training
        (process start, imports, model, test prediction) plus the least training."""
        overhead = max(self.wall_seconds - self.train_seconds, self.startup_seconds + self.predict_seconds)
        return overhead + self.min_train_seconds

    @classmethod
    def load(cls, path: Path) -> "FoldResult":
        return cls.from_json(json.loads(Path(path).read_text()))


def assign_folds(y: np.ndarray, classification: bool, folds: int, seed: int,
                 groups: np.ndarray | None = None) -> np.ndarray:
    """Fold id per train row: stratified for classification when every class has enough rows; with `groups`,
    the rows of a group share a fold (a page's pixels: its neighbours would otherwise validate a pixel)."""
    from sklearn.model_selection import GroupKFold, KFold, StratifiedKFold  # here: a run ending before folds skips it

    ids = np.zeros(len(y), dtype=np.int64)
    if groups is not None and len(np.unique(groups)) >= folds:
        for k, (_, val) in enumerate(GroupKFold(folds, shuffle=True, random_state=seed).split(y, groups=groups)):
            ids[val] = k
        return ids
    counts = np.bincount(y.astype(int)) if classification else np.array([])
    stratify = classification and counts[counts > 0].min() >= folds
    splitter = StratifiedKFold(folds, shuffle=True, random_state=seed) if stratify \
        else KFold(folds, shuffle=True, random_state=seed)
    for k, (_, val) in enumerate(splitter.split(np.zeros(len(y)), y if stratify else None)):
        ids[val] = k
    return ids
