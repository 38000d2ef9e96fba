"""Blend weights chosen on out-of-fold predictions: greedy forward selection with replacement (Caruana et al.,
2004, "Ensemble selection from libraries of models").

A member's out-of-fold predictions cover the validation rows of the folds it finished, so a member with 2 of 5 folds
covers 40% of the rows. Selection starts from the best member among those covering the most rows of the ones that
beat the prior on their own rows (a member that ties the prior learned nothing: a CNN cut in its first epochs
predicting one grade for every photo, which as the widest start had kept the blend at the prior while a member of 3
folds with a kappa of 0.48 stood by), and the blend is scored on the start's rows: on each row, the members that
cover it are mixed with their weights renormalised (a member is left out of rows it has no prediction for, as it is
of nothing in the test set). Each step adds one more copy of the candidate that improves that mix most. Under a
metric that sums over rows, a partial member's weight then only moves its own rows' terms, so it is fitted on them
while the others' weights are fitted on all rows. A rank metric (ROC AUC) does not sum over rows: mixed on some rows
only, a partial member lifts or lowers those rows against the rest, which the metric reads as signal (a member
saying the same of every row it covers took 0.67 of a blend), so there each trial is judged on the rows every member
in it covers, where the mix is the one every test row gets. Steps are judged in a smooth metric where the
competition's is too coarse (accuracy moves in whole rows and is flat almost everywhere; the log loss of the same
probabilities is not; kappa's grades move in whole steps too, and its quadratic weights make the squared error of
the expected grade its smooth form), in the metric itself otherwise. The blend kept is the last step not worse than
the start member in the competition's metric on the same rows: never worse in CV than the member it started from,
and its CV is measured on as many rows as the start's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from runner.common import metrics

MAX_STEPS = 25  # copies added at most; weights are multiples of 1/steps
MIN_ROWS = 20  # rows two members must share before one is judged against the other
SELECTION_ROWS = 50_000  # larger tables choose weights on a fixed sample of rows (the blend is then scored on all)
# the squared error of the expected grade: kappa's quadratic weights as a sum over rows. Log loss, judged in before,
# read a member of kappa 0.48 on 3 folds as making a 0.32 member worse (1.433 to 1.469) where kappa rose to 0.40
GRADE_ERROR = "expected_grade_squared_error"
# what steps are judged in where the metric is too coarse: decisions cut where balanced accuracy peaks by their
# AUC, a span chosen among candidates by the error of the candidates' predicted Jaccards
SMOOTH = {"accuracy": "log_loss", "qwk": GRADE_ERROR, "bias_auc": "roc_auc", "word_jaccard": "rmse",
          "word_jaccard_samples": "rmse"}
LOWER_IS_BETTER = {**metrics.LOWER_IS_BETTER, GRADE_ERROR: True}
# judged on ranks (or a correlation) across rows: not a sum of one term per row
RANKED = {"roc_auc", "mean_column_roc_auc", "mean_column_spearman", "pearson"}
# rows whose slots hold no fixed thing (a page's points, likeliest first): a mix of two members' rows is no row of
# them, so the blend is its start member alone, and a pool's loss is its best member's (1 - its score, in [0, 1])
UNMIXED = {"point_in_box_f1"}


@dataclass(frozen=True)
class MemberPredictions:
    """One member's out-of-fold predictions (zeros outside `covered`) and its mean test predictions."""

    name: str
    oof: np.ndarray  # (n, k)
    covered: np.ndarray  # (n,) bool: validation rows of its finished folds
    test: np.ndarray  # (n_test, k)


@dataclass(frozen=True)
class Blend:
    weights: dict[str, float]
    cv: float  # the competition's metric of the blend on `rows`
    rows: int  # rows every selected member covers
    start: str  # the member selection started from
    member_cv: dict[str, float]  # each member on its own covered rows
    test: np.ndarray = field(repr=False)
    covered: np.ndarray = field(repr=False)  # the rows it is scored on: the start member's
    oof: np.ndarray = field(repr=False)  # its out-of-fold predictions on those rows (zeros elsewhere)

    def summary(self) -> dict:
        """What the report keeps of it (the arrays stay with the run)."""
        return dict(weights=self.weights, cv=self.cv, rows=self.rows, start=self.start, member_cv=self.member_cv)


def smooth_metric(metric: str) -> str:
    return SMOOTH.get(metric, metric)


def improvement(metric: str, before: float, after: float) -> float:
    """How much better `after` is than `before`, positive when better."""
    return before - after if LOWER_IS_BETTER[metric] else after - before


def _score(metric: str, y: np.ndarray, pred: np.ndarray, rows: np.ndarray, groups: np.ndarray | None = None) -> float:
    """The metric on `rows`; `groups`: each row's group, for a metric that scores groups apart."""
    if metric == GRADE_ERROR:
        return float(np.mean((pred[rows] @ np.arange(pred.shape[1]) - y[rows]) ** 2))
    return metrics.fast_score(metric, y[rows], pred[rows], None if groups is None else groups[rows])


def _selection_rows(n: int) -> np.ndarray:
    keep = np.zeros(n, dtype=bool)
    keep[np.random.default_rng(0).choice(n, min(n, SELECTION_ROWS), replace=False)] = True
    return keep


@dataclass
class _Step:
    """A weighting as copies per member, mixed on the start's rows: `total` over `weight`, row by row."""

    counts: dict[str, int]
    total: np.ndarray  # (n, k): sum of count * oof over the members covering each row
    weight: np.ndarray  # (n, 1): sum of count over the members covering each row
    covered: np.ndarray  # (n,) bool: rows every member in it covers

    def adding(self, member: MemberPredictions) -> _Step:
        cover = member.covered[:, None]
        return _Step({**self.counts, member.name: self.counts.get(member.name, 0) + 1},
                     self.total + np.where(cover, member.oof, 0.0), self.weight + cover,
                     self.covered & member.covered)

    @property
    def pred(self) -> np.ndarray:
        return self.total / np.maximum(self.weight, 1)


def _greedy(smooth: str, y: np.ndarray, members: list[MemberPredictions], start: MemberPredictions,
            groups: np.ndarray | None = None) -> list[_Step]:
    """Every step of forward selection with replacement, the start first."""
    rows = start.covered & _selection_rows(len(y))
    empty = _Step({}, np.zeros_like(start.oof, dtype=float), np.zeros((len(y), 1)), np.ones(len(y), dtype=bool))
    steps = [empty.adding(start)]
    ranked = smooth in RANKED  # judged only where every member of the trial predicts (the module's docstring)
    for _ in range(MAX_STEPS - 1):
        last = steps[-1]
        shared = rows & last.covered if ranked else rows
        before = _score(smooth, y, last.pred, shared, groups)  # for the candidates covering all of them (most)
        best, best_gain = None, 1e-12
        for member in members:
            overlap = shared & member.covered
            if overlap.sum() < MIN_ROWS:
                continue
            judged = overlap if ranked else shared
            trial = last.adding(member)
            then = before if judged.sum() == shared.sum() else _score(smooth, y, last.pred, judged, groups)
            gain = improvement(smooth, then, _score(smooth, y, trial.pred, judged, groups))
            if gain > best_gain:
                best, best_gain = trial, gain
        if best is None:
            break
        steps.append(best)
    return steps


def _learned(metric: str, y: np.ndarray, member: MemberPredictions, own: float, prior: np.ndarray | None,
             groups: np.ndarray | None = None) -> bool:
    """Whether the member beats the `prior` (the class prior or mean, one row) on its own rows; True without one."""
    if prior is None:
        return True
    rows = member.covered
    return metrics.better(metric, own, _score(metric, y, np.tile(prior, (len(y), 1)), rows, groups))


def choose_blend(metric: str, y: np.ndarray, members: list[MemberPredictions],
                 prior: np.ndarray | None = None, groups: np.ndarray | None = None) -> Blend | None:
    """Weights for the members (None when none covers a row); `prior`: the baseline's prediction for one row, which a
    member must beat on its rows to be the start (any may be when none does); `groups`: each row's group, for a
    metric that scores groups apart."""
    members = [m for m in members if m.covered.sum() >= 1]
    if not members:
        return None
    own = {m.name: _score(metric, y, m.oof, m.covered, groups) for m in members}
    starts = [m for m in members if _learned(metric, y, m, own[m.name], prior, groups)] or members
    widest = max(int(m.covered.sum()) for m in starts)
    start = max((m for m in starts if m.covered.sum() == widest),
                key=lambda m: -own[m.name] if metrics.LOWER_IS_BETTER[metric] else own[m.name])
    smooth = smooth_metric(metric)
    steps = _greedy(smooth, y, [start] if metric in UNMIXED else members, start, groups)
    rows = start.covered
    # the last step (the smoothest blend) that is not worse than the start in the competition's metric
    chosen = next(s for s in reversed(steps)
                  if improvement(metric, own[start.name], _score(metric, y, s.pred, rows, groups)) >= 0)
    total = sum(chosen.counts.values())
    weights = {name: count / total for name, count in chosen.counts.items()}
    by_name = {m.name: m for m in members}
    test = sum(w * by_name[name].test for name, w in weights.items())
    cv = metrics.score(metric, y[rows], chosen.pred[rows], None if groups is None else groups[rows])
    return Blend({k: round(v, 4) for k, v in weights.items()}, round(cv, 6), int(rows.sum()), start.name,
                 {k: round(v, 6) for k, v in own.items()}, test, rows, np.where(rows[:, None], chosen.pred, 0.0))


# --- what one more member adds to the pool ------------------------------------------------------------------------

POOL_ROWS = 20_000  # rows the pool's optimum is computed on (a fixed sample of larger tables)


def _pool_loss(metric: str, y: np.ndarray, preds: list[np.ndarray]) -> float:
    """The least convex loss any weighting of `preds` reaches (weights on the simplex): log loss of the true class
    for classes, squared error for values (in log1p space for RMSLE). It can only fall as predictions are added
    (a weight of 0 is allowed), so it measures what a new member brings without the path-dependence of greedy
    selection."""
    from scipy.optimize import minimize

    if metrics.LOWER_IS_BETTER.get(metric) is None:
        raise KeyError(metric)
    if y.ndim == 1 and metric not in ("rmse", "mae", "rmsle"):  # class indices
        truth = np.stack([p[np.arange(len(y)), y.astype(int)] for p in preds], axis=1).clip(1e-15, 1.0)

        def loss(w):
            mix = truth @ w
            return -np.mean(np.log(mix)), -(truth / mix[:, None]).mean(axis=0)
    else:
        space = np.log1p if metric == "rmsle" else (lambda v: v)
        stack = np.stack([space(np.clip(p, 0, None) if metric == "rmsle" else p) for p in preds], axis=-1)
        target = space(np.atleast_2d(y.T).T)

        def loss(w):
            residual = stack @ w - target
            return np.mean(residual ** 2), 2 * np.einsum("ntm,nt->m", stack, residual) / residual.size

    m = len(preds)
    result = minimize(loss, np.full(m, 1 / m), jac=True, method="SLSQP", bounds=[(0, 1)] * m,
                      constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1, "jac": lambda w: np.ones(m)}])
    return float(min(result.fun, min(loss(np.eye(m)[i])[0] for i in range(m))))


def pool_gain(metric: str, y: np.ndarray, members: list[MemberPredictions], new: str) -> float:
    """The relative fall of the pool's convex loss when member `new` joins the others, on the rows all of them
    cover (0 when `new` is the only one, or when they share too few rows)."""
    rows = np.logical_and.reduce([m.covered for m in members]) & _selection_rows(len(y))
    rows &= np.cumsum(rows) <= POOL_ROWS
    others = [m.oof[rows] for m in members if m.name != new]
    if rows.sum() < MIN_ROWS or not others or len(others) == len(members):
        return 0.0
    if metric in UNMIXED:  # the pool is as good as its best member alone
        loss = [1.0 - metrics.score(metric, y[rows], m.oof[rows]) for m in members]
        before = min(lost for lost, m in zip(loss, members) if m.name != new)
        return (before - min(loss)) / before if before > 0 else 0.0
    before = _pool_loss(metric, y[rows], others)
    after = _pool_loss(metric, y[rows], others + [m.oof[rows] for m in members if m.name == new])
    return (before - after) / before if before > 0 else 0.0
