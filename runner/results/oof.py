"""Predictions from whatever finished: each member's out-of-fold and mean test predictions from its fold folders,
and the baseline's score on the rows a blend is scored on."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from runner.common import metrics
from runner.results.blend import MemberPredictions
from runner.units.tasks import PREPARE, FoldResult
from runner.planning.portfolio import Member


def unit_dir(out_dir: Path, member: str, fold: int) -> Path:
    return Path(out_dir) / "members" / member / ("prepare" if fold == PREPARE else str(fold))


def member_predictions(member: Member, results: list[FoldResult], out_dir: Path, ids: np.ndarray,
                       combined=lambda tests: np.mean(tests, axis=0)) -> MemberPredictions | None:
    """The member's validation predictions on the rows of its usable folds (`ids`: the fold of every train row in
    its split), and their test predictions `combined` (their mean; rows of points are fused instead), None before
    its first usable fold."""
    done = sorted(r.fold for r in results if r.member == member.name and r.usable and r.fold != PREPARE)
    if not done:
        return None
    vals = {k: np.load(unit_dir(out_dir, member.name, k) / "val.npy") for k in done}
    oof = np.zeros((len(ids), next(iter(vals.values())).shape[1]))
    for k, pred in vals.items():
        oof[ids == k] = pred
    test = combined([np.load(unit_dir(out_dir, member.name, k) / "test.npy") for k in done])
    return MemberPredictions(member.name, oof, np.isin(ids, done), test)


def baseline_score(metric: str, y: np.ndarray, prior: np.ndarray, rows: np.ndarray,
                   groups: np.ndarray | None = None) -> float:
    """The class prior (or mean) predicted for every row, scored on `rows` (`groups`: each row's group, for a
    metric that scores groups apart)."""
    return metrics.score(metric, y[rows], np.tile(prior, (int(rows.sum()), 1)),
                         None if groups is None else groups[rows])

