"""LightGBM folds: native categoricals, early stopping, and a stop at the deadline that keeps the best round."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import lightgbm as lgb
import numpy as np

from runner.atomic import replacing
from runner.engines import EngineResult, FoldData
from runner.measure import RoundCost
from runner.planner import GBM_LEARNING_RATE, Plan


class StopAtDeadline:
    """Stops boosting when the next round would cross the deadline, or after `patience` rounds without
    improvement; either way LightGBM keeps the best round (it is what EarlyStopException carries)."""

    order = 30

    def __init__(self, deadline: float, patience: int):
        self.deadline, self.patience = deadline, patience
        self.best_round, self.best_score, self.best_results = 0, None, None
        self.rounds = 0
        self.started = time.monotonic()
        self.hit_deadline = False

    def __call__(self, env: lgb.callback.CallbackEnv) -> None:
        _, _, value, higher_better = env.evaluation_result_list[0][:4]
        if self.best_score is None or (value > self.best_score if higher_better else value < self.best_score):
            self.best_round, self.best_score, self.best_results = env.iteration, value, env.evaluation_result_list
        self.rounds = env.iteration - env.begin_iteration + 1
        per_round = (time.monotonic() - self.started) / self.rounds
        if time.monotonic() + 2 * per_round > self.deadline:
            self.hit_deadline = True
            raise lgb.callback.EarlyStopException(self.best_round, self.best_results)
        if env.iteration - self.best_round >= self.patience:
            raise lgb.callback.EarlyStopException(self.best_round, self.best_results)


def _objective(classes: int) -> str:
    return "regression" if not classes else "binary" if classes == 2 else "multiclass"


def _params(objective: str, classes: int, rows: int, threads: int, learning_rate: float, seed: int) -> dict:
    params = dict(objective=objective, learning_rate=learning_rate, num_leaves=31,
                  min_data_in_leaf=max(2, min(20, rows // 100)), feature_fraction=0.8, bagging_fraction=0.8,
                  bagging_freq=1, lambda_l2=1.0, num_threads=threads, seed=seed, verbose=-1, max_cat_to_onehot=8)
    if objective == "multiclass":
        params["num_class"] = classes
    return params


def _fit(plan, data, objective, y_train, y_val, deadline):
    train_set = lgb.Dataset(data.x_train, y_train, categorical_feature="auto", free_raw_data=False)
    val_set = lgb.Dataset(data.x_val, y_val, reference=train_set)
    stopper = StopAtDeadline(deadline, plan.patience)
    rate = plan.learning_rate or GBM_LEARNING_RATE  # a plan written by hand may leave it out
    params = _params(objective, len(data.classes or ()), len(y_train), plan.threads, rate, plan.seed)
    booster = lgb.train(params, train_set, num_boost_round=plan.max_rounds, valid_sets=[val_set],
                        callbacks=[stopper])
    return booster, stopper


# --- measuring rounds ----------------------------------------------------------------------------------------

MEASURE_ROWS = 50_000  # larger tables are timed on a sample and scaled by rows (the planner does that)
MEASURE_ROUNDS = 200  # at most; timing stops after MEASURE_SECONDS
MEASURE_SECONDS = 0.3


def _time_boosters(x, y, classes: int, threads: int, boosters: int, seed: int) -> float:
    """Seconds per round of each of `boosters` boosters trained at once with `threads` threads each. They run in
    Python threads: LightGBM's C calls release the GIL, so they contend for cores as fold processes would."""
    objective = _objective(classes)
    params = _params(objective, classes, len(y), threads, GBM_LEARNING_RATE, seed)
    params.update(min_data_in_leaf=1, min_sum_hessian_in_leaf=0.0)  # full-size trees: time the worst case
    rates: list[float] = []
    errors: list[Exception] = []

    def one() -> None:
        stamps: list[float] = []

        def stamp(env: lgb.callback.CallbackEnv) -> None:
            stamps.append(time.perf_counter())
            if len(stamps) > 5 and stamps[-1] - stamps[0] > MEASURE_SECONDS:
                raise lgb.callback.EarlyStopException(env.iteration, env.evaluation_result_list or [])

        try:
            started = time.perf_counter()
            lgb.train(params, lgb.Dataset(x, y, categorical_feature="auto"), num_boost_round=MEASURE_ROUNDS,
                      callbacks=[stamp])
            # the first round also bins the data; a table too small to split stops after it: time it all
            rates.append((stamps[-1] - stamps[0]) / (len(stamps) - 1) if len(stamps) > 1
                         else time.perf_counter() - started)
        except Exception as exc:  # re-raised in the caller's thread
            errors.append(exc)

    workers = [threading.Thread(target=one) for _ in range(boosters)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if errors:
        raise errors[0]
    return max(rates)


def measure_rounds(x, y: np.ndarray, classes: int, cpus: int, deadline: float, seed: int = 0) -> tuple[RoundCost, ...]:
    """Seconds per boosting round on this machine for each way of splitting `cpus` cores between folds (t threads
    each, cpus // t folds at once), timed on up to MEASURE_ROWS rows; stops early at `deadline` (monotonic)."""
    rows = min(len(y), MEASURE_ROWS)
    pick = np.sort(np.random.default_rng(seed).choice(len(y), rows, replace=False))
    x_sample = x.iloc[pick].reset_index(drop=True)
    target = y[pick] if y.ndim == 1 else y[pick, 0]  # each regression target is its own booster of this size
    options = sorted({1, cpus} | {t for t in (2, 4, 8, 16) if t < cpus}, reverse=True)
    costs: list[RoundCost] = []
    spent = 0.0
    for threads in options:
        started = time.monotonic()
        if costs and started + spent > deadline:
            break
        boosters = cpus // threads
        seconds = _time_boosters(x_sample, target, classes, threads, boosters, seed)
        costs.append(RoundCost(threads, boosters, rows, seconds))
        spent = time.monotonic() - started
    return tuple(costs)


def _predict(booster: lgb.Booster, x, objective: str) -> np.ndarray:
    p = booster.predict(x, num_iteration=booster.best_iteration or None)
    return np.column_stack([1 - p, p]) if objective == "binary" else np.atleast_2d(p.T).T


def train(plan: Plan, data: FoldData, out_dir: Path, deadline: float) -> EngineResult:
    started = time.monotonic()
    if data.classes is not None:
        objective = _objective(len(data.classes))
        targets = [(data.y_train, data.y_val)]
    else:  # one booster per target; RMSLE is RMSE in log1p space
        objective = "regression"
        space = (lambda v: np.log1p(np.clip(v, 0, None))) if data.spec.metric == "rmsle" else (lambda v: v)
        targets = [(space(data.y_train[:, j]), space(data.y_val[:, j])) for j in range(data.y_train.shape[1])]
    boosters, stoppers = [], []
    for j, (y_train, y_val) in enumerate(targets):
        # later targets get an equal share of what is left
        share = started + (deadline - started) * (j + 1) / len(targets) if len(targets) > 1 else deadline
        booster, stopper = _fit(plan, data, objective, y_train, y_val, share)
        boosters.append(booster), stoppers.append(stopper)
    train_seconds = time.monotonic() - started
    t0 = time.monotonic()
    val_pred = np.hstack([_predict(b, data.x_val, objective) for b in boosters])
    test_pred = np.hstack([_predict(b, data.x_test, objective) for b in boosters])
    if objective == "regression" and data.spec.metric == "rmsle":
        val_pred, test_pred = np.expm1(val_pred), np.expm1(test_pred)
    predict_seconds = time.monotonic() - t0
    checkpoint = out_dir / "model.txt"
    with replacing(checkpoint) as tmp:
        tmp.write_text("\n".join(b.model_to_string(num_iteration=b.best_iteration or None) for b in boosters))
    rounds = sum(s.rounds for s in stoppers)  # the boosters themselves are cut back to their best round
    return EngineResult(val_pred, test_pred, checkpoint, epochs=rounds,
                        best_epoch=sum(s.best_round + 1 for s in stoppers),
                        epoch_seconds=train_seconds / max(1, rounds),
                        min_train_seconds=min(train_seconds, 20 * train_seconds / max(1, rounds)),
                        train_seconds=train_seconds,
                        predict_seconds=predict_seconds, stopped_by_deadline=any(s.hit_deadline for s in stoppers))
