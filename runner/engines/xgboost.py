"""XGBoost on the table: depth-wise histogram trees, a third booster for the portfolio once LightGBM and
CatBoost are in (a weaker complement of LightGBM than CatBoost on four of five tables, bench/gbm_choice.py, but
the better one on the multi-class table there)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from runner.common.atomic import replacing
from runner.engines.base import FoldData
from runner.engines.boosting import (BoostingEngine, BoostSettings, RoundClock, fit_targets, objective, probe_rows,
                                     two_columns)

PRIOR_GAIN = 0.015  # added to LightGBM it cut CV error by 0-3% (bench/gbm_choice.py)
# a round's time grows with the nodes a tree can have, and stops growing once leaves are too small to split:
# measured here, depth 3 to 10 took 0.22 to 0.70 ms a round on 800 rows and 0.61 to 11.5 ms on 8000
ROWS_PER_LEAF = 16
NODE_COST_POWER = 0.6
OBJECTIVES = {"binary": ("binary:logistic", "logloss"), "multiclass": ("multi:softprob", "mlogloss"),
              "regression": ("reg:squarederror", "rmse")}


class XGBoostSettings(BoostSettings):
    max_depth: int = 6
    subsample: float = 0.8
    colsample_bytree: float = 0.8
    min_child_weight: float = 1.0
    reg_lambda: float = 1.0


def params(settings: XGBoostSettings, kind: str, classes: int) -> dict:
    name, metric = OBJECTIVES[kind]
    out = dict(objective=name, eval_metric=metric, eta=settings.learning_rate, max_depth=settings.max_depth,
               subsample=settings.subsample, colsample_bytree=settings.colsample_bytree,
               min_child_weight=settings.min_child_weight, reg_lambda=settings.reg_lambda, tree_method="hist",
               device=settings.device, nthread=settings.threads, seed=settings.seed, max_cat_to_onehot=8,
               verbosity=0)
    if kind == "multiclass":
        out["num_class"] = classes
    return out


def _callback(on_round):
    import xgboost as xgb

    class Hook(xgb.callback.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log) -> bool:  # True stops training
            return on_round(epoch, evals_log, model)

    return Hook()


def _matrix(x, y=None):
    import xgboost as xgb

    return xgb.DMatrix(x, label=y, enable_categorical=True)


class XGBoost(BoostingEngine):
    name = "xgboost"
    library = "XGBoost"
    preload = ("xgboost", "runner.engines.xgboost")
    Settings = XGBoostSettings
    search_space = dict(max_depth=(2, 3, 4, 6, 8, 10), min_child_weight=(1.0, 3.0, 10.0, 30.0),
                        subsample=(0.6, 0.8, 1.0), colsample_bytree=(0.5, 0.7, 0.8, 0.9, 1.0),
                        reg_lambda=(0.1, 1.0, 10.0, 100.0),
                        learning_rate=(0.01, 0.02, 0.03, 0.05, 0.1))
    measure_share = 0.005
    min_measure_seconds = 0.3
    timed_splits = (1,)  # one split only: the third booster is timed as cheaply as possible
    prior_gain = PRIOR_GAIN

    def step_cost(self, settings: XGBoostSettings, rows: int) -> float:
        return min(2 ** settings.max_depth, max(2, rows // ROWS_PER_LEAF)) ** NODE_COST_POWER

    def round_timer(self, x, y, classes):
        import xgboost as xgb

        matrix = _matrix(x, y)
        config = params(XGBoostSettings(), objective(classes), classes)

        def train_one(threads: int, stamp) -> None:
            xgb.train({**config, "nthread": threads}, matrix, num_boost_round=200,
                      callbacks=[_callback(lambda epoch, log, model: stamp())])

        return train_one

    def train_fold(self, settings: XGBoostSettings, data: FoldData, out_dir: Path, deadline: float):
        import xgboost as xgb

        classes = len(data.classes or ())
        frames = data
        data = dataclasses.replace(data, x_val=_matrix(frames.x_val), x_test=_matrix(frames.x_test))

        def fit(kind, y_train, y_val, stop_at):
            clock = RoundClock(stop_at, settings.patience, len(frames.x_val) + len(frames.x_test))
            train_set, val_set = _matrix(frames.x_train, y_train), _matrix(frames.x_val, y_val)
            sample = _matrix(probe_rows(frames.x_val))  # what the clock's probes predict

            def on_round(epoch, log, model) -> bool:
                return clock.tick(epoch, next(iter(log["val"].values()))[-1], higher_better=False,
                                  probe=lambda: model.predict(sample))

            booster = xgb.train(params(settings, kind, classes), train_set, num_boost_round=settings.max_rounds,
                                evals=[(val_set, "val")], callbacks=[_callback(on_round)], verbose_eval=False)
            booster.set_attr(best_round=str(clock.best_round))
            return booster, clock

        def predict(booster, x, kind):
            best = int(booster.attr("best_round"))
            return two_columns(booster.predict(x, iteration_range=(0, best + 1)), kind)

        def save(boosters) -> Path:
            for j, booster in enumerate(boosters):  # one per regression target
                with replacing(out_dir / f"model-{j}.json") as tmp:
                    tmp.write_bytes(booster.save_raw(raw_format="json"))
            return out_dir / "model-0.json"

        return fit_targets(data, deadline, fit, predict, save)
