"""What the gradient-boosting engines (LightGBM, CatBoost, XGBoost) share: timing rounds on this machine,
sizing rounds and learning rate to a member's share of the window, stopping before the deadline, and one booster
per regression target (RMSLE fitted in log space).

Each engine supplies the library-specific parts: how to train with a per-round hook, and how to predict.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
from pydantic import BaseModel, ConfigDict

from runner.common.budget import past
from runner.engines.base import Engine, EngineResult, FoldData
from runner.planning.portfolio import DataShape, Member, PlanContext, Settings

MAX_ROUNDS = 5000
LEARNING_RATE = 0.05
FULL_RATE_ROUNDS = 1000  # rounds that LEARNING_RATE needs; fewer affordable rounds get a higher rate
MAX_LEARNING_RATE = 0.3
PATIENCE = 100  # rounds without improvement before a fold stops
# a validation loss that gets no further than this below its best within PATIENCE rounds has stopped improving: on
# data a booster separates perfectly (a text-normalization replica) the log loss fell by float dust for thousands of
# rounds, so patience never ran out and each fold boosted until its deadline
MIN_IMPROVEMENT = 1e-5
EXPECTED_ROUNDS = 400  # where early stopping usually ends at LEARNING_RATE on tables (for estimates only)
STARTUP_SECONDS = 0.5  # a forked fold: ~0.1 s to start and read its data on 3000 rows here, more on larger ones
MIN_ROUNDS = 20  # fewer rounds than this is not a model worth blending
BOOSTER_SHARE = 0.35  # of the CPU lane's window, the most one boosting member plans for
MEASURE_ROWS = 50_000  # larger tables are timed on a sample and scaled by rows
MEASURE_SECONDS = 0.3  # timing stops after this long (and after more than 5 rounds)
MEASURE_ROUNDS = 200  # at most
SMALL_TABLE_CELLS = 2_000_000  # unmeasured: below this, one thread per fold and folds side by side
PROBE_ROWS = 1_000  # validation rows predicted now and then while boosting: what predicting every row will take
# each probe timed this often, the shortest kept: a probe takes milliseconds, and one time slice lost to another
# process on a shared core made one 15x longer, a reserve of 3.3 s where 0.2 s was needed, and a fold stopped boosting
# after 6 rounds of a 6 s window
PROBE_TIMINGS = 2
PREDICT_SLACK = 1.5  # predicting every row after boosting may take this much longer than the probes say
ROUNDS_CLEAR = 2  # rounds' time kept before a deadline: the next round may take longer than the mean so far


class RoundCost(BaseModel):
    """Seconds per boosting round of each of `boosters` boosters trained at once with `threads` threads each,
    on `rows` rows, on this machine."""

    model_config = ConfigDict(frozen=True)

    threads: int
    boosters: int
    rows: int
    seconds_per_round: float


class BoostSettings(Settings):
    max_rounds: int = MAX_ROUNDS
    learning_rate: float = LEARNING_RATE
    patience: int = PATIENCE


class RoundClock:
    """Tells a booster to stop when the next round would cross the deadline (ROUNDS_CLEAR rounds' margin, and the time
    predicting its `predict_rows` validation and test rows will take with as many rounds), or after `patience`
    rounds without an improvement of more than MIN_IMPROVEMENT; remembers the best round. Predicting grows with the
    rounds: 640k rows through a 7-class model boosted for a minute outlasted its fold's deadline, which killed every
    fold of tabular-playground dec-2021 at its real size with nothing kept."""

    def __init__(self, deadline: float, patience: int, predict_rows: int = 0):
        self.deadline, self.patience, self.predict_rows = deadline, patience, predict_rows
        self.row_round_seconds = 0.0  # one row through one round's trees, as the latest probe timed it
        self.next_probe = 1  # probes at rounds 1, 2, 4, 8...: a few milliseconds each, a handful in all
        self.started = time.monotonic()
        self.first_round: float | None = None  # when the first round ended (the data was binned by then)
        self.last_round = self.started
        self.rounds, self.best_round, self.best_score = 0, 0, None
        self.hit_deadline = False

    @property
    def seconds_per_round(self) -> float:
        """Of the rounds after the first, as the planner times them (binning the data is not a round)."""
        if self.first_round is None or self.rounds < 2:
            return self.last_round - self.started
        return (self.last_round - self.first_round) / (self.rounds - 1)

    def predict_reserve(self) -> float:
        """Seconds to keep for predicting every validation and test row with one round more than now."""
        return PREDICT_SLACK * self.row_round_seconds * self.predict_rows * (self.rounds + 1)

    def tick(self, iteration: int, score: float, higher_better: bool, probe: Callable[[], object] | None = None) -> bool:
        """Record round `iteration` (0-based) and its validation score; True when boosting should stop. `probe`
        predicts PROBE_ROWS rows with the model as it stands (None: the library cannot while it trains)."""
        self.last_round = time.monotonic()
        self.first_round = self.first_round or self.last_round
        self.rounds = iteration + 1
        gain = None if self.best_score is None else (score - self.best_score) * (1 if higher_better else -1)
        if gain is None or gain > MIN_IMPROVEMENT:
            self.best_round, self.best_score = iteration, score
        if probe is not None and self.predict_rows and self.rounds >= self.next_probe:
            self.row_round_seconds = min(_timed(probe) for _ in range(PROBE_TIMINGS)) / (PROBE_ROWS * self.rounds)
            self.next_probe *= 2
        if next_round_crosses(self.deadline, self.started, self.rounds, self.predict_reserve()):
            self.hit_deadline = True
            return True
        return iteration - self.best_round >= self.patience


def next_round_crosses(deadline: float, started: float, rounds: int, reserve: float = 0.0) -> bool:
    """Whether ROUNDS_CLEAR more rounds at the mean pace of the `rounds` boosted since `started`, and `reserve`
    seconds after them, would cross `deadline` (or a stop was asked)."""
    per_round = (time.monotonic() - started) / max(1, rounds)
    return past(deadline - ROUNDS_CLEAR * per_round - reserve)


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def probe_rows(x):
    """The first PROBE_ROWS rows of a fold's validation inputs (a table or an array): what the probes predict."""
    return x.iloc[:PROBE_ROWS] if hasattr(x, "iloc") else x[:PROBE_ROWS]


# --- timing rounds -------------------------------------------------------------------------------------------

def sample_rows(n: int, seed: int = 0) -> np.ndarray:
    rows = min(n, MEASURE_ROWS)
    return np.sort(np.random.default_rng(seed).choice(n, rows, replace=False))


def time_boosters(train_one: Callable[[int, Callable[[], bool]], None], threads: int, boosters: int) -> float:
    """Seconds per round of each of `boosters` boosters trained at once with `threads` threads each.

    `train_one(threads, stamp)` trains one booster, calling `stamp()` after every round and stopping when it
    returns True. The boosters run in Python threads: the libraries' C calls release the GIL, so they contend
    for cores as fold processes would."""
    rates: list[float] = []
    errors: list[Exception] = []

    def one() -> None:
        stamps: list[float] = []

        def stamp() -> bool:
            stamps.append(time.perf_counter())
            return len(stamps) > 5 and stamps[-1] - stamps[0] > MEASURE_SECONDS

        try:
            started = time.perf_counter()
            train_one(threads, stamp)
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


def core_splits(cpus: int) -> list[int]:
    """Threads per booster worth timing: every core in one booster, ..., one thread each."""
    return sorted({1, cpus} | {t for t in (2, 4, 8, 16) if t < cpus}, reverse=True)


def measure_splits(train_one: Callable[[int, Callable[[], bool]], None], rows: int, cpus: int,
                   deadline: float, splits: list[int] | None = None) -> tuple[RoundCost, ...]:
    """RoundCosts for each way of splitting `cpus` cores between boosters (t threads each, cpus // t at once);
    stops early at `deadline` (monotonic), keeping what it has."""
    costs: list[RoundCost] = []
    spent = 0.0
    for threads in splits or core_splits(cpus):
        started = time.monotonic()
        if costs and started + spent > deadline:
            break
        boosters = max(1, cpus // threads)
        costs.append(RoundCost(threads=threads, boosters=boosters, rows=rows,
                               seconds_per_round=time_boosters(train_one, threads, boosters)))
        spent = time.monotonic() - started
    return tuple(costs)


# --- planning --------------------------------------------------------------------------------------------------

def round_seconds(cost: RoundCost, data: DataShape, folds: int) -> float:
    """Seconds per round of one fold's boosters (one per regression target), scaled from the timed rows to a
    fold's training rows (histogram building is linear in rows)."""
    fold_rows = data.n_train * (folds - 1) / folds
    return max(1e-6, cost.seconds_per_round) * max(1.0, fold_rows / cost.rows) * max(1, data.targets)


def best_split(costs: tuple[RoundCost, ...], data: DataShape, folds: int) -> RoundCost:
    """The split of cores that gets a round done in every fold soonest (waves of folds x seconds per round)."""
    return min(costs, key=lambda c: math.ceil(folds / min(folds, c.boosters)) * round_seconds(c, data, folds))


def unmeasured_threads(data: DataShape, cores: int) -> tuple[int, str]:
    """Threads per fold when nothing was timed: small tables fit one thread per fold, so folds run side by side;
    large ones take every core, one fold at a time."""
    if data.n_train * max(1, data.n_features) < SMALL_TABLE_CELLS:
        return 1, f"1 thread per fold, folds side by side: {data.n_train} rows are too few to split across threads"
    return cores, f"{cores} threads per fold, one fold at a time: {data.n_train} x {data.n_features} is large"


@dataclass(frozen=True)
class Sizing:
    threads: int
    max_rounds: int
    learning_rate: float
    fold_seconds: float  # expected, where early stopping usually ends
    min_fold_seconds: float
    max_fold_seconds: float  # every round it may take (0: not timed, a share of the window instead)
    round_seconds: float  # expected seconds per round of one fold (0: not timed)
    reasons: tuple[str, ...]


def size_rounds(context: PlanContext, cost: RoundCost | None, library: str) -> Sizing:
    """Threads per fold, rounds and learning rate for a boosting member given its lane's cores and the timing of
    its rounds: as many rounds as its share of the window holds (early stopping usually ends sooner)."""
    data, folds = context.data, context.folds
    if cost is None:
        threads, why = unmeasured_threads(data, context.cores)
        return Sizing(threads, MAX_ROUNDS, LEARNING_RATE, STARTUP_SECONDS + 2.0, STARTUP_SECONDS, 0.0, 0.0,
                      (f"{library}: {why}; rounds not timed: up to {MAX_ROUNDS} at learning rate {LEARNING_RATE}, "
                       "stopped early or by a callback before the deadline",))
    threads = min(cost.threads, context.cores)
    per_round = round_seconds(cost, data, folds)
    waves = context.waves(threads)
    fold_budget = BOOSTER_SHARE * context.window / waves - STARTUP_SECONDS
    affordable = int(max(0.0, fold_budget) / per_round)
    rounds = max(MIN_ROUNDS, min(MAX_ROUNDS, affordable))
    rate = LEARNING_RATE if rounds >= FULL_RATE_ROUNDS else \
        round(min(MAX_LEARNING_RATE, LEARNING_RATE * FULL_RATE_ROUNDS / rounds), 3)
    expected = min(rounds, EXPECTED_ROUNDS * LEARNING_RATE / rate)
    reasons = (f"{library}: {threads} thread{'s' * (threads > 1)} per fold ({cost.boosters} booster(s) at once "
               f"timed {cost.seconds_per_round * 1e3:.1f} ms per round on {cost.rows} rows)",
               f"{library}: up to {rounds} rounds at learning rate {rate}: {BOOSTER_SHARE:.0%} of the "
               f"{context.window:.0f} s window in {waves} wave(s) of folds holds {affordable} rounds of "
               f"{per_round * 1e3:.1f} ms" + ("" if rate == LEARNING_RATE else
                                            f" (fewer than {FULL_RATE_ROUNDS}, so a higher rate)")
               + f"; early stopping after {PATIENCE} rounds without improvement")
    return Sizing(threads, rounds, rate, STARTUP_SECONDS + expected * per_round,
                  STARTUP_SECONDS + MIN_ROUNDS * per_round, STARTUP_SECONDS + rounds * per_round, per_round, reasons)


def boosting_member(context: PlanContext, engine: str, settings: BoostSettings, sizing: Sizing,
                    expected_gain: float, extra_reasons: tuple[str, ...] = ()) -> Member:
    settings = settings.model_copy(update=dict(threads=sizing.threads, max_rounds=sizing.max_rounds,
                                               learning_rate=sizing.learning_rate,
                                               reasons=sizing.reasons + extra_reasons))
    return Member(name=engine, engine=engine, slot="cpu", settings=settings, folds=context.folds,
                  threads=sizing.threads, fold_seconds=round(sizing.fold_seconds, 2),
                  min_fold_seconds=round(sizing.min_fold_seconds, 2),
                  max_fold_seconds=round(sizing.max_fold_seconds, 2), step_seconds=round(sizing.round_seconds, 6),
                  expected_gain=expected_gain,
                  reasons=settings.reasons)


# --- training --------------------------------------------------------------------------------------------------

def objective(classes: int) -> str:
    return "regression" if not classes else "binary" if classes == 2 else "multiclass"


def fit_targets(data: FoldData, deadline: float,
                fit: Callable[[str, np.ndarray, np.ndarray, float], tuple[object, RoundClock]],
                predict: Callable[[object, object, str], np.ndarray],
                save: Callable[[list], object]) -> EngineResult:
    """Train one booster (classification) or one per regression target (RMSLE in log1p space), each stopping at
    its share of the deadline; predict validation and test rows with the best round."""
    started = time.monotonic()
    if data.classes is not None:
        kind = objective(len(data.classes))
        targets = [(data.y_train, data.y_val)]
    else:
        kind = "regression"
        space = (lambda v: np.log1p(np.clip(v, 0, None))) if data.spec.metric == "rmsle" else (lambda v: v)
        targets = [(space(data.y_train[:, j]), space(data.y_val[:, j])) for j in range(data.y_train.shape[1])]
    boosters, clocks = [], []
    for j, (y_train, y_val) in enumerate(targets):
        # later targets get an equal share of what is left
        share = started + (deadline - started) * (j + 1) / len(targets)
        booster, clock = fit(kind, y_train, y_val, share)
        boosters.append(booster), clocks.append(clock)
    train_seconds = time.monotonic() - started
    t0 = time.monotonic()
    val_pred = np.hstack([predict(b, data.x_val, kind) for b in boosters])
    test_pred = np.hstack([predict(b, data.x_test, kind) for b in boosters])
    if kind == "regression" and data.spec.metric == "rmsle":
        val_pred, test_pred = np.expm1(val_pred), np.expm1(test_pred)
    predict_seconds = time.monotonic() - t0
    checkpoint = save(boosters)
    rounds = sum(c.rounds for c in clocks)  # the boosters themselves predict with their best round
    return EngineResult(val_pred, test_pred, checkpoint, epochs=rounds,
                        best_epoch=sum(c.best_round + 1 for c in clocks),
                        epoch_seconds=float(np.mean([c.seconds_per_round for c in clocks])),
                        min_train_seconds=min(train_seconds, MIN_ROUNDS * train_seconds / max(1, rounds)),
                        train_seconds=train_seconds, predict_seconds=predict_seconds,
                        stopped_by_deadline=any(c.hit_deadline for c in clocks))


def two_columns(p: np.ndarray, kind: str) -> np.ndarray:
    """Binary probabilities as (1 - p, p); anything else as a 2-D array."""
    p = np.asarray(p, dtype=np.float64)  # float32 outputs (XGBoost) would not sum to 1 closely enough
    return np.column_stack([1 - p, p]) if kind == "binary" else np.atleast_2d(p.T).T


class BoostingEngine(Engine):
    """A gradient-boosting library behind the engine interface: it times its rounds on a sample of the table,
    plans one member sized from them, and in each fold boosts one model (one per regression target). A subclass
    gives `round_timer`, `train_fold` and its class attributes."""

    inputs = "table"
    steps = "rounds"
    time_scaled = ("max_rounds", "learning_rate")
    library: str = ""  # its name in the plan's reasons
    prior_gain: float = 0.0
    timed_splits: tuple[int, ...] | None = None  # threads per booster to time (None: every split of the cores)
    min_measure_seconds: float = 0.5

    def round_timer(self, x, y: np.ndarray, classes: int) -> Callable[[int, Callable[[], bool]], None]:
        """train_one(threads, stamp) for time_boosters: boosts on (x, y), calling stamp() after every round."""
        raise NotImplementedError

    def measure(self, dataset, hardware, seconds, work, here=True):
        if not here or seconds < self.min_measure_seconds:
            return None
        train, _ = dataset.views["table"]
        pick = sample_rows(len(dataset.y))
        y = dataset.y[pick] if dataset.y.ndim == 1 else dataset.y[pick, 0]  # each target boosts alike
        timer = self.round_timer(train.iloc[pick].reset_index(drop=True), y, len(dataset.classes or ()))
        return measure_splits(timer, len(pick), hardware.cpus, time.monotonic() + seconds, self.timed_splits)

    def plan(self, context: PlanContext) -> list[Member]:
        cost = best_split(context.costs, context.data, context.folds) if context.costs else None
        return [boosting_member(context, self.name, self.Settings(), size_rounds(context, cost, self.library),
                                self.prior_gain)]

    def replan(self, context: PlanContext, member: Member, step_seconds: float) -> Member | None:
        """Rounds and learning rate for its later folds from the seconds per round its first fold took."""
        fold_rows = max(1, int(context.data.n_train * (context.folds - 1) / context.folds))
        seen = RoundCost(threads=member.threads, boosters=max(1, context.cores // member.threads), rows=fold_rows,
                         seconds_per_round=step_seconds)
        sizing = size_rounds(context, seen, self.library)
        again = boosting_member(context, self.name, member.settings, sizing, member.expected_gain)
        return member.model_copy(update=dict(
            settings=member.settings.model_copy(update=dict(max_rounds=sizing.max_rounds,
                                                            learning_rate=sizing.learning_rate)),
            step_seconds=again.step_seconds, fold_seconds=again.fold_seconds,
            min_fold_seconds=again.min_fold_seconds, max_fold_seconds=again.max_fold_seconds))
