"""What the one-shot scikit-learn engines share (linear models, kNN, TF-IDF, the sentence encoder's head): timing
one fit on a sample, a member sized from it, and a fold that fits once, predicts, and saves its model.

A one-shot fit cannot stop halfway, so the deadline is kept by not starting a fold that would not finish (the
scheduler's job, from `min_fold_seconds`) and by discarding a fit that ended past it.
"""
from __future__ import annotations

import pickle
import time
from pathlib import Path
from typing import Callable

import numpy as np
from pydantic import BaseModel, ConfigDict

from runner.atomic import replacing
from runner.engines import DeadlineReached, Engine, EngineResult, FoldData, Settings
from runner.portfolio import Member, PlanContext

STARTUP_SECONDS = 0.5  # a forked fold: ~0.1 s to start and read its data on 3000 rows here, more on larger ones
MEASURE_ROWS = 2000
UNMEASURED_FIT_SECONDS = 2.0  # a guess for tiny budgets that skip timing; the first fold's wall replaces it
SLACK = 3.0  # a one-shot fold may take this many times its estimate before it is cut (fits cannot stop halfway)


class FitCost(BaseModel):
    """Seconds of one fit on `rows` training rows plus predicting `rows` rows, on this machine."""

    model_config = ConfigDict(frozen=True)

    rows: int
    seconds: float


def time_fit(fit_predict: Callable[[np.ndarray], None], n: int, seed: int = 0) -> FitCost:
    """Time `fit_predict(rows)` on a sample of up to MEASURE_ROWS row indices (after one untimed warm-up on a
    tenth of them, so imports and first-call set-up do not count)."""
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(n, min(n, MEASURE_ROWS), replace=False))
    fit_predict(rows[: max(20, len(rows) // 10)])
    started = time.perf_counter()
    fit_predict(rows)
    return FitCost(rows=len(rows), seconds=time.perf_counter() - started)


def fold_seconds(cost: FitCost | None, context: PlanContext, power: float = 1.0) -> float:
    """Expected wall of one fold: start-up plus the timed fit scaled to a fold's rows (`power` 1: linear in rows;
    2: every prediction looks at every training row)."""
    if cost is None:
        return STARTUP_SECONDS + UNMEASURED_FIT_SECONDS
    fold_rows = context.data.n_train * (context.folds - 1) / context.folds
    return STARTUP_SECONDS + cost.seconds * max(1.0, fold_rows / cost.rows) ** power


def one_shot_member(context: PlanContext, engine: str, settings: Settings, seconds: float, expected_gain: float,
                    why: str) -> Member:
    reasons = (f"{engine}: {why}; about {seconds:.1f} s a fold", *settings.reasons)
    settings = settings.model_copy(update=dict(reasons=reasons))
    fit = 0.0 if context.costs is None else seconds - STARTUP_SECONDS  # unmeasured: a guess, not an estimate
    return Member(name=engine, engine=engine, slot="cpu", settings=settings, folds=context.folds, threads=1,
                  fold_seconds=round(seconds, 2), min_fold_seconds=round(seconds, 2),
                  max_fold_seconds=round(SLACK * seconds, 2), step_seconds=round(fit, 4),
                  expected_gain=expected_gain, reasons=reasons)


def predict(model, x, classes: list | None) -> np.ndarray:
    """Class probabilities over every class (a class absent from this fold's rows gets 0), or values (n, t)."""
    if classes is None:
        return np.atleast_2d(np.asarray(model.predict(x)).T).T
    proba = model.predict_proba(x)
    full = np.zeros((proba.shape[0], len(classes)))
    full[:, np.asarray(model.classes_).astype(int)] = proba
    return full


def train_one_shot(model, data: FoldData, out_dir: Path, deadline: float,
                   to_space: Callable[[np.ndarray], np.ndarray] = lambda y: y,
                   from_space: Callable[[np.ndarray], np.ndarray] = lambda p: p) -> EngineResult:
    """Fit once on the fold's rows (targets mapped by `to_space`, predictions back by `from_space`), predict the
    validation and test rows, save the model."""
    started = time.monotonic()
    y = data.y_train if data.classes is not None else to_space(data.y_train)
    model.fit(data.x_train, y if y.ndim == 1 or y.shape[1] > 1 else y[:, 0])
    train_seconds = time.monotonic() - started
    if time.monotonic() > deadline:
        raise DeadlineReached(f"fit took {train_seconds:.0f} s and ended past the fold's deadline")
    t0 = time.monotonic()
    val_pred, test_pred = (predict(model, x, data.classes) for x in (data.x_val, data.x_test))
    if data.classes is None:
        val_pred, test_pred = from_space(val_pred), from_space(test_pred)
    predict_seconds = time.monotonic() - t0
    checkpoint = out_dir / "model.pkl"
    with replacing(checkpoint) as tmp:
        tmp.write_bytes(pickle.dumps(model))
    return EngineResult(val_pred, test_pred, checkpoint, epochs=1, best_epoch=1, epoch_seconds=train_seconds,
                        min_train_seconds=train_seconds, train_seconds=train_seconds, predict_seconds=predict_seconds,
                        stopped_by_deadline=False)


def log_space(metric: str) -> tuple[Callable, Callable]:
    """RMSLE is RMSE in log1p space: fit there, predict back."""
    if metric == "rmsle":
        return (lambda y: np.log1p(np.clip(y, 0, None))), np.expm1
    return (lambda y: y), (lambda p: p)


class OneShotEngine(Engine):
    """An engine whose model is one scikit-learn estimator fitted once per fold: it times one fit on a sample of
    its input, plans one member from that, and fits, predicts and saves in each fold. A subclass gives `model`,
    `describe` and its class attributes."""

    steps = "fits"
    prior_gain: float = 0.0
    cost_power: float = 1.0  # how a fit's time grows with the rows (2: every prediction looks at every row)
    max_rows: int | None = None  # beyond this many training rows it is not cheap: no member
    min_measure_seconds: float = 0.3

    def model(self, settings: Settings, classification: bool, rows: int):
        raise NotImplementedError

    def describe(self, context: PlanContext) -> str:
        """What the member is, for its reasons."""
        raise NotImplementedError

    def measure(self, dataset, hardware, seconds, work, here=True):
        if not here or seconds < self.min_measure_seconds:
            return None
        inputs, _ = dataset.views[self.inputs]
        y = dataset.y if dataset.classes is not None else dataset.y[:, 0]
        classification = dataset.classes is not None

        def fit_predict(rows: np.ndarray) -> None:
            x = inputs.iloc[rows] if hasattr(inputs, "iloc") else [inputs[i] for i in rows]
            self.model(self.Settings(), classification, len(rows)).fit(x, y[rows]).predict(x)

        return time_fit(fit_predict, len(y))

    def plan(self, context: PlanContext) -> list[Member]:
        if self.max_rows is not None and context.data.n_train > self.max_rows:
            return []
        seconds = fold_seconds(context.costs, context, self.cost_power)
        return [one_shot_member(context, self.name, self.Settings(), seconds, self.prior_gain,
                                self.describe(context))]

    def train_fold(self, settings: Settings, data: FoldData, out_dir: Path, deadline: float) -> EngineResult:
        to_space, from_space = log_space(data.spec.metric)
        model = self.model(settings, data.classes is not None, len(data.y_train))
        return train_one_shot(model, data, out_dir, deadline, to_space, from_space)
