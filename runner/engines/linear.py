"""A regularised linear model on a proper preprocessing pipeline: numbers imputed (with missing indicators),
mapped to a normal distribution by their quantiles and expanded into splines (a smooth non-linear response per
column), categories one-hot encoded. Logistic regression for classes, ridge (its alpha chosen by efficient
leave-one-out) for values. A different inductive bias from trees: smooth and additive."""
from __future__ import annotations

import numpy as np

from runner.engines.oneshot import OneShotEngine
from runner.engines.tables import table_preprocessing
from runner.planning.portfolio import Member, PlanContext, Settings

PRIOR_GAIN = 0.01  # trees and an additive model err differently; a small, cheap complement
MAX_CELLS = 50_000_000  # rows x columns after one-hot and splines: above this the fit is not cheap any more
RIDGE_ALPHAS = tuple(np.logspace(-3, 3, 13))


class LinearSettings(Settings):
    C: float = 1.0  # inverse regularisation of the logistic regression
    splines: bool = True


def linear_model(classification: bool, settings: LinearSettings):
    from sklearn.linear_model import LogisticRegression, RidgeCV
    from sklearn.pipeline import make_pipeline

    head = LogisticRegression(C=settings.C, max_iter=2000) if classification else RidgeCV(alphas=RIDGE_ALPHAS)
    return make_pipeline(table_preprocessing(settings.splines), head)


class Linear(OneShotEngine):
    name = "linear"
    inputs = "table"
    preload = ("sklearn.linear_model", "sklearn.compose", "sklearn.preprocessing", "runner.engines.linear")
    Settings = LinearSettings
    search_space = dict(C=(0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0), splines=(True, False))
    measure_share = 0.005
    prior_gain = PRIOR_GAIN

    def model(self, settings: LinearSettings, classification: bool, rows: int):
        return linear_model(classification, settings)

    def plan(self, context: PlanContext) -> list[Member]:
        cells = context.data.n_train * max(1, context.data.n_features) * 10  # one-hot and splines widen it
        return [] if cells > MAX_CELLS else super().plan(context)

    def describe(self, context: PlanContext) -> str:
        head = "logistic regression" if context.spec.is_classification else "ridge (alpha by leave-one-out)"
        return f"{head} on imputed, quantile-normalised, spline-expanded and one-hot columns"
