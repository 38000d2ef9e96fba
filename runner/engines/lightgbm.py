"""LightGBM on the table: native categoricals, early stopping, and a stop before the deadline that keeps the best
round. It leads the portfolio on tables (fast, strong defaults), and its timed rounds choose how a run splits
its cores between folds."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from runner.common.atomic import replacing
from runner.engines.base import FoldData
from runner.engines.boosting import (BoostingEngine, BoostSettings, RoundClock, RoundCost, fit_targets,
                                     measure_splits, objective, probe_rows, sample_rows, two_columns)

PRIOR_GAIN = 0.05  # as a complement of another engine's model; it leads on tables anyway (highest prior there)
# a round's time grows with the leaves a tree can have, measured here: 7 to 127 leaves took 0.16 to 1.9 ms a round
# on 800 rows and 0.50 to 5.9 ms on 8000 (one thread)
LEAF_COST_POWER = 0.85


class LightGbmSettings(BoostSettings):
    num_leaves: int = 31
    min_data_in_leaf: int = 20  # small tables get fewer: at most rows / 50
    feature_fraction: float = 0.8
    bagging_fraction: float = 0.8
    lambda_l2: float = 1.0
    extra_trees: bool = False


def min_leaf_rows(settings: LightGbmSettings, rows: int) -> int:
    return max(2, min(settings.min_data_in_leaf, rows // 50))


def params(settings: LightGbmSettings, kind: str, classes: int, rows: int) -> dict:
    leaf = min_leaf_rows(settings, rows)
    out = dict(objective=kind, learning_rate=settings.learning_rate, num_leaves=settings.num_leaves,
               min_data_in_leaf=leaf, feature_fraction=settings.feature_fraction,
               bagging_fraction=settings.bagging_fraction, bagging_freq=1, lambda_l2=settings.lambda_l2,
               extra_trees=settings.extra_trees, num_threads=settings.threads, seed=settings.seed, verbose=-1,
               max_cat_to_onehot=8)
    if kind == "multiclass":
        out["num_class"] = classes
    return out


class _Deadline:
    """LightGBM callback around a RoundClock; raising EarlyStopException makes LightGBM keep the best round."""

    order = 30

    def __init__(self, clock: RoundClock, sample=None, threads: int = 1):
        self.clock, self.best, self.sample, self.threads = clock, None, sample, threads  # sample: what probes predict

    def __call__(self, env) -> None:
        import lightgbm as lgb

        _, _, value, higher_better = env.evaluation_result_list[0][:4]
        probe = None if self.sample is None else (lambda: env.model.predict(self.sample, num_threads=self.threads))
        stop = self.clock.tick(env.iteration, value, higher_better, probe)
        if self.clock.best_round == env.iteration:
            self.best = env.evaluation_result_list
        if stop:
            raise lgb.callback.EarlyStopException(self.clock.best_round, self.best)


def round_timer(x, y: np.ndarray, classes: int):
    """train_one(threads, stamp): LightGBM boosting full-size trees (the worst case) on (x, y)."""
    import lightgbm as lgb

    kind = objective(classes)

    def train_one(threads: int, stamp) -> None:
        settings = LightGbmSettings(threads=threads, min_data_in_leaf=1)
        # LightGBM's own least hessian: at 0, a leaf of rows the model is already sure of (hessians that underflow)
        # fails its check "best_split_info.left_count > 0" (LightGBM issue 4739), and measuring failed on real tables
        config = {**params(settings, kind, classes, len(y)), "min_sum_hessian_in_leaf": 1e-3}

        def hook(env) -> None:
            if stamp():
                raise lgb.callback.EarlyStopException(env.iteration, env.evaluation_result_list or [])

        lgb.train(config, lgb.Dataset(x, y, categorical_feature="auto"), num_boost_round=200, callbacks=[hook])

    return train_one


def measure_rounds(x, y: np.ndarray, classes: int, cpus: int, deadline: float, seed: int = 0) -> tuple[RoundCost, ...]:
    """Seconds per boosting round on this machine for each way of splitting `cpus` cores between folds, timed on
    up to 50,000 rows; stops early at `deadline` (monotonic)."""
    pick = sample_rows(len(y), seed)
    target = y[pick] if y.ndim == 1 else y[pick, 0]  # each regression target is its own booster of this size
    return measure_splits(round_timer(x.iloc[pick].reset_index(drop=True), target, classes), len(pick), cpus,
                          deadline)


class LightGbm(BoostingEngine):
    name = "lightgbm"
    library = "LightGBM"
    preload = ("lightgbm", "runner.engines.lightgbm")
    Settings = LightGbmSettings
    search_space = dict(num_leaves=(4, 7, 15, 31, 63, 127), min_data_in_leaf=(5, 10, 20, 40, 80, 160),
                        feature_fraction=(0.5, 0.7, 0.8, 0.9, 1.0), bagging_fraction=(0.6, 0.8, 1.0),
                        lambda_l2=(0.0, 0.1, 1.0, 5.0, 20.0, 100.0, 300.0), extra_trees=(False, True),
                        learning_rate=(0.01, 0.02, 0.03, 0.05, 0.1))
    measure_share = 0.02  # of the budget: timing rounds for each split of the cores (budgets under 50 s skip it)
    min_measure_seconds = 1.0
    prior_gain = PRIOR_GAIN

    def step_cost(self, settings: LightGbmSettings, rows: int) -> float:
        leaves = min(settings.num_leaves, max(2, rows // min_leaf_rows(settings, rows)))
        return leaves ** LEAF_COST_POWER

    def round_timer(self, x, y, classes):
        return round_timer(x, y, classes)

    def train_fold(self, settings: LightGbmSettings, data: FoldData, out_dir: Path, deadline: float):
        import lightgbm as lgb

        classes = len(data.classes or ())

        def fit(kind, y_train, y_val, stop_at):
            train_set = lgb.Dataset(data.x_train, y_train, categorical_feature="auto", free_raw_data=False)
            val_set = lgb.Dataset(data.x_val, y_val, reference=train_set)
            clock = RoundClock(stop_at, settings.patience, len(data.x_val) + len(data.x_test))
            booster = lgb.train(params(settings, kind, classes, len(y_train)), train_set,
                                num_boost_round=settings.max_rounds, valid_sets=[val_set],
                                callbacks=[_Deadline(clock, probe_rows(data.x_val), settings.threads)])
            return booster, clock

        def predict(booster, x, kind):
            # the fold's own threads: LightGBM predicts on every core by default, and OpenMP threads beyond the
            # cores the fold holds spin at their barriers for peers other folds keep busy (a 640k-row prediction
            # beside other folds outlasted its deadline)
            return two_columns(booster.predict(x, num_iteration=booster.best_iteration or None,
                                               num_threads=settings.threads), kind)

        def save(boosters) -> Path:
            checkpoint = out_dir / "model.txt"
            with replacing(checkpoint) as tmp:
                tmp.write_text("\n".join(b.model_to_string(num_iteration=b.best_iteration or None)
                                         for b in boosters))
            return checkpoint

        return fit_targets(data, deadline, fit, predict, save)
