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
and its CV is measured on as many rows as the start's. Rows whose slots hold no fixed thing (a page's points) are
never mixed: members are fused as a member's folds are, chosen forward without repeats while fusing one more
scores better (`FUSED`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from runner.common import metrics, point_rows

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
# them, so members are fused as a member's folds are (their combiner), each pool judged by its score at its best cut
# (in [0, 1]) on at most FUSED_PAGES of the rows the start covers: fusing a real page takes about 10 ms
FUSED = {"point_in_box_f1": (point_rows.fused, lambda y, pred: point_rows.tune_cut(y, pred)[1])}
FUSED_PAGES = point_rows.TUNE_PAGES


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
    if metric in FUSED:
        return _fused_blend(metric, y, members, start, own)
    smooth = smooth_metric(metric)
    steps = _greedy(smooth, y, members, start, groups)
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


def _judged_pages(covered: np.ndarray) -> np.ndarray:
    """At most FUSED_PAGES of the `covered` rows, evenly spaced."""
    rows = np.flatnonzero(covered)
    return rows[np.unique(np.linspace(0, len(rows) - 1, min(len(rows), FUSED_PAGES)).astype(int))]


def _fused_choice(metric: str, y: np.ndarray, members: list[MemberPredictions],
                  start: MemberPredictions) -> list[MemberPredictions]:
    """Forward selection without repeats: the member whose rows, fused with the chosen ones', score best, while
    that beats the chosen alone; only members covering every row the start covers (a member cut before its last
    fold is fused once it has them)."""
    combine, judge = FUSED[metric]
    pages = _judged_pages(start.covered)
    chosen, best = [start], judge(y[pages], start.oof[pages])
    while True:
        names = {c.name for c in chosen}
        trials = {m.name: judge(y[pages], combine([c.oof[pages] for c in (*chosen, m)])) for m in members
                  if m.name not in names and m.covered[start.covered].all()}
        if not trials or max(trials.values()) <= best:
            return chosen
        name = max(trials, key=trials.get)
        chosen.append(next(m for m in members if m.name == name))
        best = trials[name]


def _fused_blend(metric: str, y: np.ndarray, members: list[MemberPredictions], start: MemberPredictions,
                 own: dict[str, float]) -> Blend:
    """The start member fused with those that make it better (`_fused_choice`), each weighed alike."""
    combine = FUSED[metric][0]
    chosen, rows = _fused_choice(metric, y, members, start), start.covered
    if len(chosen) == 1:
        oof, test = start.oof, start.test
    else:
        oof = np.zeros_like(start.oof)
        oof[rows] = combine([m.oof[rows] for m in chosen])
        test = combine([m.test for m in chosen])
    cv = metrics.score(metric, y[rows], oof[rows])
    return Blend({m.name: round(1 / len(chosen), 4) for m in chosen}, round(cv, 6), int(rows.sum()), start.name,
                 {k: round(v, 6) for k, v in own.items()}, test, rows, oof)


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
    if metric in FUSED:
        return _fused_gain(metric, y, members, new, rows)
    before = _pool_loss(metric, y[rows], others)
    after = _pool_loss(metric, y[rows], others + [m.oof[rows] for m in members if m.name == new])
    return (before - after) / before if before > 0 else 0.0


def _fused_pool_loss(metric: str, y: np.ndarray, preds: list[np.ndarray]) -> float:
    """1 - the best score at its best cut of any one of `preds` or of all of them fused."""
    combine, judge = FUSED[metric]
    scores = [judge(y, p) for p in preds] + ([judge(y, combine(preds))] if len(preds) > 1 else [])
    return 1.0 - max(scores)


def _fused_gain(metric: str, y: np.ndarray, members: list[MemberPredictions], new: str, rows: np.ndarray) -> float:
    """`pool_gain` of members whose rows are fused, on at most FUSED_PAGES of `rows` (never negative: fusing them
    all can score below a part of them)."""
    pages = _judged_pages(rows)
    before = _fused_pool_loss(metric, y[pages], [m.oof[pages] for m in members if m.name != new])
    after = _fused_pool_loss(metric, y[pages], [m.oof[pages] for m in members])
    return max(0.0, (before - after) / before) if before > 0 else 0.0
