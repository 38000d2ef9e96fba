"""Engines train one fold: LightGBM (tabular), a timm CNN (images), TF-IDF + a linear model (text).

Each takes a FoldData and a deadline, writes its best checkpoint atomically into the fold folder, and returns the
validation and test predictions of that checkpoint.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runner.planner import Plan
from runner.spec import CompetitionSpec


@dataclass
class FoldData:
    spec: CompetitionSpec
    classes: list | None
    x_train: object  # DataFrame, list of texts, or image rows (see each engine)
    y_train: np.ndarray
    x_val: object
    y_val: np.ndarray
    x_test: object
    image_cache: str | None = None

    @property
    def n_outputs(self) -> int:
        return len(self.classes) if self.classes is not None else self.y_train.shape[1]


@dataclass(frozen=True)
class EngineResult:
    val_pred: np.ndarray  # (n_val, k) probabilities or (n_val, t) values, from the best checkpoint
    test_pred: np.ndarray
    checkpoint: Path
    epochs: int  # epochs or boosting rounds done
    best_epoch: int
    epoch_seconds: float  # mean seconds per epoch (per round for LightGBM, the whole fit for one-shot engines)
    min_train_seconds: float  # the least training that still gives a usable model (one epoch, a few rounds)
    train_seconds: float
    predict_seconds: float
    stopped_by_deadline: bool
    message: str = ""


class DeadlineReached(Exception):
    """The fold's deadline arrived before anything usable was trained."""


MODULES = {"lightgbm": "gbm", "timm": "vision", "tfidf_linear": "text"}


def train_fold(plan: Plan, data: FoldData, out_dir: Path, deadline: float) -> EngineResult:
    module = importlib.import_module(f"runner.engines.{MODULES[plan.engine]}")
    return module.train(plan, data, out_dir, deadline)
