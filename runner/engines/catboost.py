"""CatBoost on the table: ordered boosting on symmetric trees with its own categorical encoding, a different
inductive bias from LightGBM's leaf-wise trees. Chosen over XGBoost as the second booster by measurement: in
5-fold CV on five real tables (bench/gbm_choice.py) it was the better model alone on four and the better
complement of LightGBM on four."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from runner.common.atomic import replacing
from runner.engines.base import FoldData
from runner.engines.boosting import BoostingEngine, BoostSettings, RoundClock, fit_targets, objective, two_columns

PRIOR_GAIN = 0.04  # added to LightGBM it cut CV error by 2-8% on four of five tables (bench/gbm_choice.py)
# CatBoost builds each round's callback argument from the whole metric history, so with a metric every round a
# round's cost grows with its number (measured here: 1.0 ms a round at 200 rounds, 2.4 ms at 4000); every 10th
# keeps rounds near the timed cost, and the best round is chosen among those evaluated
METRIC_PERIOD = 10
DEPTH_COST = 1.6  # a round's time per level of depth, measured here: depth 4 to 8, 0.52 to 3.0 ms on 800 rows
LOSS = {"binary": "Logloss", "multiclass": "MultiClass", "regression": "RMSE"}


class CatBoostSettings(BoostSettings):
    learning_rate: float = 0.08  # CatBoost's trees are shallow and symmetric: it needs a larger step than LightGBM
    depth: int = 6
    l2_leaf_reg: float = 3.0


def catboost_frame(x: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Categorical columns as strings (CatBoost rejects NaN there), and their names."""
    cats = [c for c in x.columns if isinstance(x[c].dtype, pd.CategoricalDtype)]
    if not cats:
        return x, []
    x = x.copy()
    for c in cats:
        x[c] = x[c].astype(object).where(x[c].notna(), "nan").astype(str)
    return x, cats


def _model(settings: CatBoostSettings, kind: str, cats: list[str], rounds: int | None = None, classes: int = 0):
    import catboost

    cls = catboost.CatBoostRegressor if kind == "regression" else catboost.CatBoostClassifier
    # every class named: a fold's training rows may lack one its validation rows hold (a rare candidate of text
    # normalisation, a rare species), which CatBoost otherwise refuses, and the probabilities keep a column for each
    named = dict(class_names=list(range(classes))) if kind == "multiclass" and classes else {}
    return cls(iterations=rounds or settings.max_rounds, learning_rate=settings.learning_rate, depth=settings.depth,
               l2_leaf_reg=settings.l2_leaf_reg, loss_function=LOSS[kind], thread_count=settings.threads,
               random_seed=settings.seed, cat_features=cats, verbose=0, allow_writing_files=False,
               metric_period=METRIC_PERIOD, **named)


class _Hook:
    """CatBoost callback: `after_iteration` returns False to stop."""

    def __init__(self, on_round):
        self.on_round = on_round

    def after_iteration(self, info) -> bool:
        return not self.on_round(info)


class CatBoost(BoostingEngine):
    name = "catboost"
    library = "CatBoost"
    preload = ("catboost", "runner.engines.catboost")
    Settings = CatBoostSettings
    search_space = dict(depth=(3, 4, 5, 6, 7, 8), l2_leaf_reg=(1.0, 3.0, 10.0, 30.0, 100.0),
                        learning_rate=(0.03, 0.05, 0.08, 0.12))
    measure_share = 0.01
    prior_gain = PRIOR_GAIN

    def step_cost(self, settings: CatBoostSettings, rows: int) -> float:
        return DEPTH_COST ** settings.depth

    def round_timer(self, x, y, classes):
        x, cats = catboost_frame(x)
        kind = objective(classes)

        def train_one(threads: int, stamp) -> None:
            _model(CatBoostSettings(threads=threads), kind, cats, rounds=200).fit(
                x, y, callbacks=[_Hook(lambda info: stamp())])

        return train_one

    def train_fold(self, settings: CatBoostSettings, data: FoldData, out_dir: Path, deadline: float):
        x_train, cats = catboost_frame(data.x_train)
        data = dataclasses.replace(data, x_train=x_train, x_val=catboost_frame(data.x_val)[0],
                                   x_test=catboost_frame(data.x_test)[0])

        def fit(kind, y_train, y_val, stop_at):
            clock = RoundClock(stop_at, settings.patience)
            model = _model(settings, kind, cats, classes=len(data.classes or ()))

            def on_round(info) -> bool:
                validation = next(iter(info.metrics["validation"].values()))
                return clock.tick(info.iteration - 1, validation[-1], higher_better=False)

            model.fit(data.x_train, y_train, eval_set=(data.x_val, y_val), use_best_model=True,
                      callbacks=[_Hook(on_round)])
            return model, clock

        def predict(model, x, kind):  # on the fold's own threads, as LightGBM's (CatBoost's default: every core)
            threads = settings.threads
            return two_columns(model.predict(x, thread_count=threads) if kind == "regression" else
                               model.predict_proba(x, thread_count=threads)[:, 1] if kind == "binary" else
                               model.predict_proba(x, thread_count=threads), kind)

        def save(models) -> Path:
            for j, model in enumerate(models):  # one per regression target
                with replacing(out_dir / f"model-{j}.cbm") as tmp:
                    model.save_model(str(tmp))
            return out_dir / "model-0.cbm"

        return fit_targets(data, deadline, fit, predict, save)
