"""What the one-shot scikit-learn engines share (linear models, kNN, TF-IDF, the sentence encoder's head): timing
one fit on a sample, a member sized from it, and a fold that fits once, predicts, and saves its model.

A one-shot fit cannot stop halfway, so the deadline is kept by not starting a fold that would not finish (the
scheduler's job, from `min_fold_seconds`) and by discarding a fit that ended well past it; one that ended just past
it is predicted and kept, as a booster cut at its deadline predicts in its unit's grace. The boosted head (LightGBM)
can stop halfway: it stops before a round would cross the deadline and keeps the rounds it boosted.
"""
from __future__ import annotations

import pickle
import time
import warnings
from pathlib import Path
from typing import Callable, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from runner.common.atomic import replacing
from runner.data.dataset import rows_of
from runner.engines.base import DeadlineReached, Engine, EngineResult, FoldData
from runner.engines.boosting import MIN_ROUNDS, next_round_crosses
from runner.planning.portfolio import Member, PlanContext, Settings

BOOSTED_ROUNDS = 100  # LightGBM's default rounds at its default rate
# rows x columns x trees (one a class) x rounds LightGBM builds per second on one core here, 32 bins and 30% of
# the columns a tree: 1.4e8 on 1150 x 64 x 10 classes, 3.4e8 on 4000 x 1024 x 10 (noise: every tree grows full)
CELL_ROUNDS_PER_SECOND = 1.4e8
MAX_BOOSTED_SECONDS = 30.0  # a fold's fit beyond this is no longer a cheap member
STARTUP_SECONDS = 0.5  # a forked fold: ~0.1 s to start and read its data on 3000 rows here, more on larger ones
MEASURE_ROWS = 2000
UNMEASURED_FIT_SECONDS = 2.0  # a guess for tiny budgets that skip timing; the first fold's wall replaces it
SLACK = 3.0  # a one-shot fold may take this many times its estimate before it is cut (fits cannot stop halfway)
WARM_ROWS = 200  # a fold's untimed first fit: enough rows for any k of kNN, few enough to cost nothing
# rounds or iterations of that fit: its imports and set-up are the point, not its model. At the model's own 100
# rounds a boosted head of 120 classes took 2.1 s to warm up on 200 rows, a fold's whole fit on 1,000 rows about 3
WARM_STEPS = 2
# a fit that ended this little past its fold's deadline is still predicted and kept: the unit is killed only at the
# end of its grace (5 s past the deadline), its prediction takes a fraction of its fit, and a whole fold's fit is
# worth more than the seconds it holds its slot
LATE_FIT_SECONDS = 2.0
STEP_PARAMETERS = ("n_estimators", "max_iter")  # an estimator's parameters that count its rounds or iterations


class FitCost(BaseModel):
    """Seconds of one fit on `rows` training rows plus predicting `rows` rows, on this machine, and of the fit
    alone (None: not timed apart)."""

    model_config = ConfigDict(frozen=True)

    rows: int
    seconds: float
    fit_seconds: float | None = None


def time_fit(fit: Callable[[np.ndarray], object], predict: Callable[[object, np.ndarray], None], n: int,
             seed: int = 0) -> FitCost:
    """Time `fit(rows)` and then `predict(model, rows)` on a sample of up to MEASURE_ROWS row indices (after one
    untimed warm-up on a tenth of them, so imports and first-call set-up do not count)."""
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(n, min(n, MEASURE_ROWS), replace=False))
    warm = rows[: max(20, len(rows) // 10)]
    predict(fit(warm), warm)
    started = time.perf_counter()
    model = fit(rows)
    fitted = time.perf_counter()
    predict(model, rows)
    return FitCost(rows=len(rows), seconds=time.perf_counter() - started, fit_seconds=fitted - started)


def fold_seconds(cost: FitCost | None, context: PlanContext, power: float = 1.0) -> float:
    """Expected wall of one fold: start-up plus the timed fit and prediction scaled to a fold's rows (`power` 1:
    linear in rows; 2: every prediction looks at every training row)."""
    if cost is None:
        return STARTUP_SECONDS + UNMEASURED_FIT_SECONDS
    return STARTUP_SECONDS + cost.seconds * _scale(cost, context) ** power


def fit_seconds(cost: FitCost | None, context: PlanContext, power: float = 1.0) -> float:
    """Expected seconds of a fold's fit alone, what the fold reports as its step: the timed fit scaled to a
    fold's rows as `fold_seconds` scales it (0: not timed apart)."""
    if cost is None or cost.fit_seconds is None:
        return 0.0
    return cost.fit_seconds * _scale(cost, context) ** power


def _scale(cost: FitCost, context: PlanContext) -> float:
    return max(1.0, context.data.n_train * (context.folds - 1) / context.folds / cost.rows)


def one_shot_member(context: PlanContext, engine: str, settings: Settings, seconds: float, fit: float,
                    expected_gain: float, why: str) -> Member:
    """`seconds` of a whole fold, `fit` of its fit alone (0: not estimated)."""
    reasons = (f"{engine}: {why}; about {seconds:.1f} s a fold", *settings.reasons)
    settings = settings.model_copy(update=dict(reasons=reasons))
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


def take(x, rows: np.ndarray):
    """The given rows (sorted indices) of a view's inputs."""
    keep = np.zeros(len(x), dtype=bool)
    keep[rows] = True
    return rows_of(x, keep)


def warm_up(model, x, y: np.ndarray, classification: bool) -> None:
    """Fit a copy of `model` on a few rows that hold every class, for WARM_STEPS rounds or iterations, untimed: a
    worker's first fit also imports and sets up what the planner's timing had already warmed (timed there after a
    warm-up too), and a step that counted it would be a fold's start-up, not its fit."""
    from sklearn.base import clone

    first_of_each = np.unique(y, return_index=True)[1] if classification else np.array([], dtype=int)
    rows = np.union1d(np.arange(min(WARM_ROWS, len(y))), first_of_each)
    copy = clone(model)
    copy.set_params(**{name: min(value, WARM_STEPS) for name, value in copy.get_params().items()
                       if name.rpartition("__")[2] in STEP_PARAMETERS and isinstance(value, int)})
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # few rows: quantile and convergence warnings say nothing of the fold
            copy.fit(take(x, rows), y[rows])
    except Exception:  # noqa: BLE001 - the real fit below raises what is wrong with the fold's data
        pass


def train_one_shot(model, data: FoldData, out_dir: Path, deadline: float,
                   to_space: Callable[[np.ndarray], np.ndarray] = lambda y: y,
                   from_space: Callable[[np.ndarray], np.ndarray] = lambda p: p) -> EngineResult:
    """Fit once on the fold's rows (targets mapped by `to_space`, predictions back by `from_space`), predict the
    validation and test rows, save the model."""
    y = data.y_train if data.classes is not None else to_space(data.y_train)
    y = y if y.ndim == 1 or y.shape[1] > 1 else y[:, 0]
    warm_up(model, data.x_train, y, data.classes is not None)
    stop = RoundsBefore(deadline) if boosted(model) else None
    started = time.monotonic()
    model.fit(data.x_train, y, **({} if stop is None else dict(callbacks=[stop])))
    train_seconds = time.monotonic() - started
    if (late := time.monotonic() - deadline) > LATE_FIT_SECONDS:
        raise DeadlineReached(f"fit took {train_seconds:.0f} s and ended {late:.1f} s past the fold's deadline")
    stopped = stop is not None and stop.stopped
    if stopped and stop.rounds < MIN_ROUNDS:
        raise DeadlineReached(f"boosted {stop.rounds} of {stop.planned(model)} rounds in {train_seconds:.1f} s "
                              f"before the fold's deadline: fewer than {MIN_ROUNDS} is no model to blend")
    t0 = time.monotonic()
    val_pred, test_pred = (predict(model, x, data.classes) for x in (data.x_val, data.x_test))
    if data.classes is None:
        val_pred, test_pred = from_space(val_pred), from_space(test_pred)
    predict_seconds = time.monotonic() - t0
    checkpoint = out_dir / "model.pkl"
    with replacing(checkpoint) as tmp:
        tmp.write_bytes(pickle.dumps(model))
    said = f"its fit ended {late:.1f} s past the fold's deadline: predicted in the unit's grace" if late > 0 else ""
    whole, least = (train_seconds, train_seconds) if stop is None else stop.timings(model, train_seconds)
    if stopped:
        said = f"boosted {stop.rounds} of {stop.planned(model)} rounds: stopped before the fold's deadline"
    return EngineResult(val_pred, test_pred, checkpoint, epochs=1, best_epoch=1, epoch_seconds=whole,
                        min_train_seconds=least, train_seconds=train_seconds, predict_seconds=predict_seconds,
                        stopped_by_deadline=stopped, message=said)


class RoundsBefore:
    """LightGBM callback: stops boosting before the next round would cross `deadline` (a booster's rule, its
    predicting left to the unit's grace), keeping the rounds boosted; on a core another process kept busy a pixel
    table's 100 rounds took over four times their estimate and each fold was killed mid-round with nothing kept."""

    order = 30

    def __init__(self, deadline: float):
        self.deadline, self.started = deadline, time.monotonic()
        self.rounds, self.stopped = 0, False

    def __call__(self, env) -> None:
        import lightgbm as lgb

        self.rounds = env.iteration + 1
        if self.rounds < env.end_iteration and next_round_crosses(self.deadline, self.started, self.rounds):
            self.stopped = True
            raise lgb.callback.EarlyStopException(env.iteration, env.evaluation_result_list or [])

    @staticmethod
    def planned(model) -> int:
        return model.get_params()["n_estimators"]

    def timings(self, model, train_seconds: float) -> tuple[float, float]:
        """The fold's step, its whole fit at the pace it boosted (later folds are timed for every round), and the
        least training it needs, MIN_ROUNDS of those rounds (a later fold given less stops with a model)."""
        per_round = train_seconds / max(1, self.rounds)
        return per_round * self.planned(model), per_round * min(self.rounds, MIN_ROUNDS)


def boosted(model) -> bool:
    """A LightGBM estimator (or one derived from it): its fit takes a per-round callback."""
    return any(kind.__module__.startswith("lightgbm.") for kind in type(model).__mro__)


def cosine_neighbours(classification: bool, k: int, rows: int):
    """k nearest neighbours by cosine, distance-weighted: the head embeddings want (their length says little)."""
    from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

    neighbours = KNeighborsClassifier if classification else KNeighborsRegressor
    return neighbours(n_neighbors=max(1, min(k, rows - 1)), metric="cosine", weights="distance")


def standardised_linear(classification: bool, C: float, max_iter: int):
    """Standardised columns into a logistic regression (classes) or ridge with its alpha by leave-one-out."""
    from sklearn.linear_model import LogisticRegression, RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    head = LogisticRegression(C=C, max_iter=max_iter) if classification else \
        RidgeCV(alphas=tuple(np.logspace(-2, 4, 13)))
    return make_pipeline(StandardScaler(), head)


def boosted_seconds(rows: float, columns: int, classes: int) -> float:
    """Seconds LightGBM's BOOSTED_ROUNDS take on one core for a dense table (one tree a class past two)."""
    return rows * columns * (classes if classes > 2 else 1) * BOOSTED_ROUNDS / CELL_ROUNDS_PER_SECOND


def boosted_head(classification: bool, seed: int):
    """LightGBM for a dense matrix of like columns (pixels, embeddings): few bins, and a third of the columns a
    tree (neighbouring pixels, or embedding dimensions, say much the same)."""
    import lightgbm as lgb

    kind = lgb.LGBMClassifier if classification else lgb.LGBMRegressor
    return kind(n_estimators=BOOSTED_ROUNDS, max_bin=32, colsample_bytree=0.3, n_jobs=1, random_state=seed,
                verbose=-1)


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

        def fit(rows: np.ndarray):
            return self.model(self.Settings(), classification, len(rows)).fit(take(inputs, rows), y[rows])

        return time_fit(fit, lambda model, rows: model.predict(take(inputs, rows)), len(y))

    def plan(self, context: PlanContext) -> list[Member]:
        if self.max_rows is not None and context.data.n_train > self.max_rows:
            return []
        seconds = fold_seconds(context.costs, context, self.cost_power)
        return [one_shot_member(context, self.name, self.Settings(), seconds, fit_seconds(context.costs, context),
                                self.prior_gain, self.describe(context))]

    def train_fold(self, settings: Settings, data: FoldData, out_dir: Path, deadline: float) -> EngineResult:
        to_space, from_space = log_space(data.spec.metric)
        model = self.model(settings, data.classes is not None, len(data.y_train))
        return train_one_shot(model, data, out_dir, deadline, to_space, from_space)


class HeadsOnATable(OneShotEngine):
    """A one-shot engine whose prepare step derives one dense table for all its members (pixels, band statistics)
    and whose members are heads on it: a standardised linear model (`settings.C`) or LightGBM (`settings.head`
    "boosted"). Cheap members that go first: nothing to time before the table exists, and the first fold's fit
    replaces the estimate."""

    cheap_first = True  # seconds of fitting; behind a CNN that fills a CPU's window it would never run
    linear_iterations: ClassVar[int] = 1000

    def measure(self, dataset, hardware, seconds, work, here=True):
        return None

    def model(self, settings: Settings, classification: bool, rows: int):
        if settings.head == "boosted":
            return boosted_head(classification, settings.seed)
        return standardised_linear(classification, settings.C, max_iter=self.linear_iterations)

    def head_members(self, context: PlanContext, heads: list[tuple], prepare_seconds: float) -> list[Member]:
        """A member per (name suffix, settings, fit seconds, expected gain, why), all from one prepare step."""
        members = []
        for suffix, settings, fit, gain, why in heads:
            member = one_shot_member(context, self.name, settings, STARTUP_SECONDS + fit, fit, gain, why)
            members.append(member.model_copy(update=dict(name=self.name + suffix, prepare_threads=context.cores,
                                                         prepare_seconds=round(prepare_seconds, 1))))
        return members
