"""k nearest neighbours on the linear engine's preprocessing (without splines): distance-weighted votes or means.
Local where trees and linear models are global; strong on small tables with many classes (leaf shapes)."""
from __future__ import annotations

from runner.engines.tables import table_preprocessing
from runner.engines.oneshot import OneShotEngine
from runner.planning.portfolio import PlanContext, Settings


class KnnSettings(Settings):
    k: int = 15


class Knn(OneShotEngine):
    name = "knn"
    inputs = "table"
    preload = ("sklearn.neighbors", "runner.engines.knn")
    Settings = KnnSettings
    search_space = dict(k=(3, 5, 10, 15, 25, 40, 60))
    measure_share = 0.005
    prior_gain = 0.005  # usually the weakest member alone; its errors are the least like the trees'
    cost_power = 2.0  # every prediction compares with every training row
    max_rows = 200_000  # beyond this that stops being cheap

    def model(self, settings: KnnSettings, classification: bool, rows: int):
        from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
        from sklearn.pipeline import make_pipeline

        head = KNeighborsClassifier if classification else KNeighborsRegressor
        k = max(1, min(settings.k, rows - 1))
        return make_pipeline(table_preprocessing(splines=False),
                             head(n_neighbors=k, weights="distance", n_jobs=settings.threads))

    def describe(self, context: PlanContext) -> str:
        return f"{KnnSettings().k} nearest neighbours, distance-weighted, on quantile-normalised and one-hot columns"
