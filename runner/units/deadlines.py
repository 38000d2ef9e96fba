"""When a unit starting now must end, and the least time it needs (pure: the scheduler hands in what it knows).

Members whose folds stretch to fill the time they get (a CNN's epochs, or boosters whose rounds were not timed) get
an equal share of the window left per wave of their folds (AutoGluon's "time left / folds left"); the others get
their planned longest fold, measured folds replacing the plan's estimate as they arrive.
"""
from __future__ import annotations

import math

from runner.engines import get_engine
from runner.units.tasks import FoldResult
from runner.planning.portfolio import Member, Plan

MIN_FOLD_SECONDS = 1.0  # below this no unit can load its data and fit anything (forked units start in ~0.1 s)
MEASURED_SLACK = 1.5  # a fold that does not stretch may take this many times the longest measured one


def fold_deadline(now: float, training_deadline: float, pending: int, slots: int) -> float:
    """Equal share of the time left for the waves of folds still to run."""
    waves = max(1, math.ceil(pending / max(1, slots)))
    return now + (training_deadline - now) / waves


def least_seconds(results: list[FoldResult]) -> float | None:
    """Shortest time a fold needs, from the folds that produced something (None before the first)."""
    usable = [r.least_seconds for r in results if r.usable]
    return min(usable) if usable else None


def capacity(member: Member, plan: Plan) -> int:
    """Folds of this member that can run at once."""
    if member.slot == "gpu":
        return max(1, member.per_gpu) * max(1, plan.gpus)
    return max(1, plan.cpus // max(1, member.threads))


def lane_capacity(plan: Plan, lane: str) -> int:
    """Folds that can run at once in a lane, for its planned members (the most of any)."""
    return max([capacity(m, plan) for m in plan.members if m.slot == lane] or [1])


def prepare_deadline(member: Member, training_deadline: float) -> tuple[float, float]:
    """(deadline, least seconds it needs) for a member's prepare step: room is left for one shortest fold."""
    return training_deadline - member.min_fold_seconds, max(MIN_FOLD_SECONDS, member.prepare_seconds * 0.25)


def fold_window(member: Member, now: float, training_deadline: float, done: list[FoldResult], pending: int,
                slots: int) -> tuple[float, float]:
    """(deadline, least seconds it needs) for one of the member's folds starting now; `done`: its folds that
    ended, `pending`: its folds still waiting (this one included), `slots`: how many run at once."""
    need = max(MIN_FOLD_SECONDS, least_seconds(done) or member.min_fold_seconds)
    if get_engine(member.engine).fills_window or not member.max_fold_seconds:
        deadline = fold_deadline(now, training_deadline, pending, slots)
        return (deadline if deadline - now >= need else training_deadline), need
    longest = max([member.max_fold_seconds, *(MEASURED_SLACK * r.wall_seconds for r in done if r.usable)])
    return min(training_deadline, now + longest), need
