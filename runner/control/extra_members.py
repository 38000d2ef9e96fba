"""More members while they pay: once a lane has run its planned members, it gets extra ones built from the
members the blend relies on, as long as one fits the time left and they still improve the blend's CV.

Two kinds alternate, for the member with the largest blend weight per extra member it already has, and both are
new candidates for the blend:
- a *repeat*: its settings on another split of the rows (AutoGluon's repeated bagging): blended with it, its model
  is averaged over more fits;
- a *bag*: another seed and a configuration next to the best one its engine has found so far (by the members' own
  CV), one or two settings a step away in the engine's search space: a local search, as FLAML's, whose every
  result the blend can still use. Every WIDE_EVERY-th bag of an engine draws its whole configuration afresh
  instead (a global restart), so the search is not held to the neighbourhood of the defaults it started from.
An extra member whose folds take a fixed time (a booster's rounds, a fit) starts only while each of its folds can
still get half the time its base's folds took. One whose folds stretch to their time (a CNN's epochs) starts while
one of its folds can still finish at its base's measured pace: its start-up (with the folds starting on its card at
once), an epoch and its predictions; a lane that had nothing is asked again as units end, so the card does not
idle at the end of the window while a fold could still train on it.

Each member's gain is measured when it ends: how much it lowers the best convex blend's loss on the out-of-fold
rows (runner.results.blend.pool_gain), which is never negative and is 0 for a member that adds nothing. While one of the
last STALE extra members gained at least MIN_GAIN or beat its engine's best own CV, and another fits, the lane
goes on (the budget is there to be used); when none of them did, CV is no longer improving and the lane stops.
"""
from __future__ import annotations

import logging

import numpy as np

from runner.planning.registry import get_engine
from runner.units.tasks import PREPARE, FoldResult
from runner.planning.portfolio import MAX_MEMBERS, Member
from runner.results.ensemble import Ensemble
from runner.results.member_state import MemberState
from runner.units.deadlines import MIN_FOLD_SECONDS, fold_need, lane_capacity, starting_together
from runner.units.scheduler import EVERY_MEMBER_FINISHED, WINDOW_CLOSED, Scheduler

log = logging.getLogger("runner")

FAIR_SHARE = 0.5  # of its base's typical fold time that an extra member's fold must still be able to get
STALE = 5  # extra members in a row that did not improve the blend: CV is no longer improving
MIN_GAIN = 1e-6  # relative fall of the pool's loss below which a member added nothing (beyond rounding)
PRIOR_SHARE = 0.3  # before any extra member is measured, one is expected to add this share of its base's prior
# every other bag of an engine is a global restart: on a small noisy table (credit, 3,600 rows) FLAML's best was a
# LightGBM with L2 119 and 9 leaves, several settings at once away from the defaults a local search starts from
WIDE_EVERY = 2


def fold_walls(state: MemberState, results: list[FoldResult]) -> tuple[float, float, float]:
    """(typical, least, longest) wall of a member's folds: measured when it has some, else planned; the least is
    one fold's starting alone (runner.units.deadlines.fold_need)."""
    done = [r for r in results if r.member == state.member.name and r.usable and r.fold != PREPARE]
    member = state.member
    if not done:
        return member.fold_seconds, member.min_fold_seconds, member.max_fold_seconds
    walls = [r.wall_seconds for r in done]
    longest = max(member.max_fold_seconds, 1.5 * max(walls)) if member.max_fold_seconds else 0.0
    return float(np.mean(walls)), fold_need(member, done), longest


def step_seconds(state: MemberState, results: list[FoldResult]) -> float:
    """Mean seconds per epoch, round or fit of a member's finished folds (its plan's estimate before any)."""
    steps = [r.epoch_seconds for r in results if r.member == state.member.name and r.usable and r.fold != PREPARE]
    return float(np.mean(steps)) if steps else state.member.step_seconds


def cost_ratio(base: Member, settings, results: list[FoldResult]) -> float:
    """How many times a step of `settings` takes one of `base`'s, by its engine's cost model on the rows its
    folds trained on."""
    rows = max((r.n_train or 0 for r in results if r.member == base.name), default=0)
    engine = get_engine(base.engine)
    return engine.step_cost(settings, rows) / engine.step_cost(base.settings, rows)


def base_for(lane: str, states: dict[str, MemberState], weights: dict[str, float]) -> MemberState | None:
    """The member to extend: the largest blend weight per extra member it already has (so extras spread over the
    members the blend uses), among the lane's members (bags included, repeats not) that finished a fold."""
    done = [s for s in states.values() if s.member.slot == lane and s.folds_done and s.member.repeat_of is None]
    if not done:
        return None

    def value(state: MemberState) -> tuple[float, int]:
        extras = 1 + sum(1 for s in states.values() if state.member.name in (s.member.bag_of, s.member.repeat_of))
        return weights.get(state.member.name, 0.0) / extras, state.folds_done

    return max(done, key=value)


def why_stop(lane: str, states: dict[str, MemberState], weights: dict[str, float], results: list[FoldResult],
             left: float, least: float, capacity: int, most: int = MAX_MEMBERS) -> str | None:
    """Why this lane gets no more members (None: it may have one). `least`: the shortest unit the scheduler
    starts; `capacity`: folds of the base member that can run at once; `most`: members the run trains at most."""
    if len(states) >= most:
        asked = "" if most == MAX_MEMBERS else " (--max-members)"
        return f"{most} member{'s' if most > 1 else ''} is the most this run trains{asked}"
    base = base_for(lane, states, weights)
    if base is None:
        return "no member in this lane finished a fold to extend"
    recent = [s for s in states.values() if s.extra and s.ended][-STALE:]
    if len(recent) == STALE and not any((s.gain or 0.0) >= MIN_GAIN or s.record for s in recent):
        return (f"CV no longer improving: the last {STALE} extra members lowered the blend's loss by "
                f"{', '.join(f'{s.gain or 0.0:.4%}' for s in recent)} (each less than {MIN_GAIN:.0e} of it) and none "
                "beat its engine's best")
    typical, fewest, longest = fold_walls(base, results)
    if longest:  # folds of a fixed length: each needs a fair share of what its base's took
        need = max(least, fewest, FAIR_SHARE * typical)
    else:  # folds that stretch to their time (epochs): one that can finish at the measured pace keeps it open
        done = [r for r in results if r.member == base.member.name and r.fold != PREPARE]
        together = starting_together(base.member, min(base.member.folds, capacity), 0)
        need = max(least, fold_need(base.member, done, together))
    if need > left:
        return (f"another {base.member.name} ({base.member.folds} folds of about {typical:.0f} s) needs about "
                f"{need:.0f} s, {max(0.0, left):.0f} s are left")
    return None


def incumbent(engine: str, states: dict[str, MemberState], lower_is_better: bool) -> MemberState:
    """The engine's member with the best own CV among those that finished every fold (the first one when none
    has yet)."""
    done = [s for s in states.values() if s.member.engine == engine and s.cv is not None
            and s.folds_done == s.member.folds and s.member.repeat_of is None]
    if not done:
        return next(s for s in states.values() if s.member.engine == engine)
    return min(done, key=lambda s: s.cv) if lower_is_better else max(done, key=lambda s: s.cv)


def extra_member(lane: str, states: dict[str, MemberState], weights: dict[str, float], results: list[FoldResult],
                 split_seed: int, lower_is_better: bool) -> Member:
    """The next extra member for this lane (call `why_stop` first): a repeat of the chosen base, or a bag next to
    its engine's best configuration."""
    chosen = base_for(lane, states, weights).member
    extras = [s for s in states.values() if chosen.name in (s.member.bag_of, s.member.repeat_of)]
    repeat = len(extras) % 2 == 0  # alternate, a repeat first: the surest gain is averaging the best member
    base = chosen if repeat else incumbent(chosen.engine, states, lower_is_better).member
    number = 1 + sum(1 for s in states.values() if s.member.engine == base.engine)
    measured = [s.gain for s in states.values() if s.extra and s.gain is not None][-STALE:]
    gain = float(np.mean(measured)) if measured else PRIOR_SHARE * base.expected_gain
    typical, least, longest = fold_walls(states[base.name], results)
    bags = sum(1 for s in states.values() if s.member.engine == base.engine and s.member.bag_of is not None)
    wide = not repeat and bags % WIDE_EVERY == WIDE_EVERY - 1
    settings = base.settings.model_copy(update=dict(seed=base.settings.seed + 100 * number)) if repeat else \
        get_engine(base.engine).variant(base.settings, number, wide=wide)
    kind = "repeat" if repeat else "bag"
    costlier = cost_ratio(base, settings, results)  # a deeper tree's rounds take longer, a shallower one's less
    how = "the same settings on another split" if repeat else \
        f"another seed, and a configuration drawn afresh from {base.engine}'s search space" if wide else \
        f"another seed, and a configuration next to {base.name}'s, the best {base.engine} so far"
    why = (f"{kind} of {base.name}: {how}"
           + f"; expected gain {gain:.4f} ({'measured on earlier extras' if measured else 'prior'}), folds of about "
             f"{typical:.1f} s as measured")
    return base.model_copy(update=dict(
        name=f"{base.engine}-{number}", settings=settings.model_copy(update=dict(reasons=(why,))),
        split_seed=split_seed, bag_of=None if repeat else base.name, repeat_of=base.name if repeat else None,
        fold_seconds=round(typical, 2), min_fold_seconds=round(least, 2),
        max_fold_seconds=round(longest * max(1.0, costlier), 2),
        step_seconds=round(step_seconds(states[base.name], results) * costlier, 6),
        expected_gain=round(gain, 6), prepare_seconds=0.0, reasons=(why,)))


def note_record(state: MemberState, states: dict[str, MemberState], lower_is_better: bool) -> None:
    """Mark a member that just ended whose own CV beats every earlier member of its engine (its search moved on)."""
    earlier = [s.cv for s in states.values() if s is not state and s.member.engine == state.member.engine
               and s.ended and s.cv is not None]
    if state.cv is not None and earlier:
        state.record = state.cv < min(earlier) if lower_is_better else state.cv > max(earlier)


def member_rows(states: dict[str, MemberState], results: list[FoldResult],
                weights: dict[str, float]) -> tuple[dict, ...]:
    """One report row per member: its own CV (on the rows its finished folds cover) and its blend weight."""
    return tuple(dict(name=name, engine=s.member.engine, slot=s.member.slot, folds=s.member.folds,
                      folds_done=s.folds_done, cv=s.cv, weight=weights.get(name, 0.0),
                      seconds=round(s.seconds, 1), gain=s.gain, status=s.status, bag_of=s.member.bag_of,
                      repeat_of=s.member.repeat_of, planned_step_seconds=s.member.step_seconds,
                      step_seconds=round(step_seconds(s, results), 6) if s.folds_done else None)
                 for name, s in states.items())

class ExtraMembers:
    """Extra members for lanes that ran dry, and why each lane took no more."""

    def __init__(self, states: dict[str, MemberState], results: list[FoldResult], ensemble: Ensemble, seed: int):
        self.states, self.results, self.ensemble, self.seed = states, results, ensemble, seed
        self.lane_closed: dict[str, str] = {}  # lane -> why no more members were added
        self.scheduler: Scheduler | None = None

    def more(self, lane: str) -> Member | None:
        """An extra member for this lane, or None (the reason kept for the report)."""
        budget, weights = self.ensemble.outputs.budget, self.ensemble.weights
        plan = self.scheduler.plan
        why = why_stop(lane, self.states, weights, self.results, budget.training_left(), MIN_FOLD_SECONDS,
                       lane_capacity(plan, lane), plan.max_members)
        if why:
            if lane not in self.lane_closed:  # said once; asked again as units end, it may re-open
                log.info("no more %s members: %s", lane, why)
            self.lane_closed[lane] = why
            return None
        self.lane_closed.pop(lane, None)
        member = extra_member(lane, self.states, weights, self.results, self.seed + len(self.states),
                              self.ensemble.outputs.spec.lower_is_better)
        self.states[member.name] = MemberState(member)
        log.info("adding %s: %s", member.name, member.reasons[0])
        return member

    def stop_reason(self, ended: str, cut: float) -> str:
        """The window closed, or why the lanes took no more members (and what was skipped)."""
        if ended == WINDOW_CLOSED:
            return f"the training window closed ({cut:.0%} of the budget)"
        parts = [f"{lane} lane: {why}" for lane, why in self.lane_closed.items()]
        return "; ".join(parts + ([ended] if ended != EVERY_MEMBER_FINISHED else [])) or EVERY_MEMBER_FINISHED
