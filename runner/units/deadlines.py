"""When a unit starting now must end, and the least time it needs (pure: the scheduler hands in what it knows).

Members whose folds stretch to fill the time they get (a CNN's epochs, or boosters whose rounds were not timed) get
an equal share of the window left per wave of their folds (AutoGluon's "time left / folds left"), a slot one of the
member's running folds holds counted free from that fold's deadline on: one wave's folds share one deadline, and a
fold starting as another of its wave ends is not held to half the time left (on 2 cores, a kuzushiji fold that
started 2 s before its wave's other fold ended got 9.6 s and 5 epochs, the last one 18.8 s); the others get their
planned longest fold, measured folds replacing the plan's estimate as they arrive, and never less than a fold's own
start on a busy machine needs.

Start-up (process, data, and on a card the CUDA context, weights and batch probe) is a cost of its own, apart from
an epoch's pace: each fold pays it, so each wave does, and folds starting on one card at once each pay more. A
fold's least time counts it, and where a wave's share of the window could not hold it, the window is cut into
fewer waves.
"""
from __future__ import annotations

from typing import Sequence

from runner.planning.registry import get_engine
from runner.units.tasks import FoldResult
from runner.planning.portfolio import Member, Plan

ROUNDING = 1e-9  # a share of the time left that fits k times counts k times, its division's rounding aside
MIN_FOLD_SECONDS = 1.0  # below this no unit can load its data and fit anything (forked units start in ~0.1 s)
MEASURED_SLACK = 1.5  # a fold that does not stretch may take this many times the longest measured one
# the least a fold that does not stretch is given from its start: its own start (a fork, its data read, a warm-up
# fit) is part of its time, and on cores other processes share it took seconds where the fit took one; at three
# times its 0.8 s plan, 2.5 s, two of five such folds were cut with their fits done (aptos' pixel member on a
# 2-core machine running three test workers), and the run kept the CNN that had learned least
MIN_FIXED_SECONDS = 4.0
# of one fold's start-up, the share that folds starting on one card at once pay one after another: the card's own
# work (its CUDA context, cuDNN's search running candidate kernels on it). Taken as all of it until a card says
# otherwise: on an H200 three folds starting at once each sat ~47 s in their first backward
STARTUP_SERIAL_SHARE = 1.0
# of the training window, the most a stretching member's folds leave to the fixed-time units queued behind them in
# their lane: plans of those are often far over what they take (the dog-breed demo's frozen features: 22 s of
# prepare and 15 s folds planned, 6 s in all taken), and at half the window the CNN lost more (test log loss 1.96)
# than at none (1.61, the features never ran) or at a fifth (1.53, both). A share of the whole window, not of what
# is left when each of the lead's folds starts: that shrank as they went (13 s at the third of three), and on a
# slower CPU, whose 18 s embedding step did not fit it, the demo's features never ran (CV 3.46, the CNN alone)
KEPT_SHARE = 0.2


def startup_on_card(alone: float, together: int) -> float:
    """A fold's start-up when `together` folds (it included) start on its card at once, from one's alone."""
    return alone * (1 + STARTUP_SERIAL_SHARE * (max(1, together) - 1))


def fold_deadline(now: float, training_deadline: float, pending: int, slots: int, need: float = 0.0,
                  busy_until: Sequence[float] = ()) -> float:
    """The longest equal time each of the `pending` folds (this one included) can get, `slots` running at once:
    one slot free now, the others now or when a fold running in it must end (`busy_until`, those folds' deadlines).
    With every slot free, an equal share of the time left per wave; where start-up (`need`) would leave a fold
    too little, fewer and longer waves."""
    left = training_deadline - now
    starts = sorted([now] * max(1, slots - len(busy_until))
                    + [min(max(t, now), training_deadline) for t in busy_until])[:max(1, slots)]

    def held(share: float) -> int:  # folds of `share` seconds the slots hold one after another until the end
        return sum(int((training_deadline - start) / share + ROUNDING) for start in starts)

    shares = sorted({(training_deadline - start) / k for start in starts if start < training_deadline
                     for k in range(1, max(1, pending) + 1)}, reverse=True)
    share = next((s for s in shares if held(s) >= pending), left / max(1, pending))
    if 0 < share < need:
        share = left / max(1, int(left // need))
    return now + share


def stretches(member: Member) -> bool:
    """Whether the member's folds stretch to the time they are given (a CNN's epochs, boosters' untimed rounds)."""
    return get_engine(member.engine).fills_window or not member.max_fold_seconds


def kept_for_queued(member: Member, queued: list[tuple[Member, bool]], lane_folds: int, left: float,
                    window: float) -> float:
    """Seconds of the `left` window that a stretching member's folds leave to the fixed-time units queued in its
    lane (`queued`: each unit's member, and whether it is a prepare step): their planned seconds over the
    `lane_folds` the lane runs at once, at most KEPT_SHARE of the training `window` (and never more than is left).
    The lead going first fills the window otherwise, and on one core a random-init CNN leading had left the
    members that learn no time at all."""
    if not stretches(member):
        return 0.0
    planned = sum(m.prepare_seconds if prepare else m.fold_seconds for m, prepare in queued
                  if m.slot == member.slot and m.name != member.name and not stretches(m))
    return min(KEPT_SHARE * window, planned / max(1, lane_folds), max(0.0, left))


def least_seconds(results: list[FoldResult]) -> float | None:
    """Shortest time a fold needs, from the folds that produced something (None before the first)."""
    usable = [r.least_seconds for r in results if r.usable]
    return min(usable) if usable else None


def fold_need(member: Member, done: list[FoldResult], together: int = 1) -> float:
    """The least a fold of `member` needs to end usable: its start-up with `together` folds starting on its card
    at once, and the rest of its least fold (one epoch, or its fit, and test predictions) as measured on `done`,
    or as planned. A member planned without a start-up of its own keeps it inside its least fold."""
    alone = member.startup_seconds
    if not alone:
        return max(MIN_FOLD_SECONDS, least_seconds(done) or member.min_fold_seconds)
    usable = [r for r in done if r.usable]
    rest = min(r.least_seconds - r.startup_seconds for r in usable) if usable else member.min_fold_seconds - alone
    return max(MIN_FOLD_SECONDS, max(0.0, rest) + startup_on_card(alone, together))


def capacity(member: Member, plan: Plan) -> int:
    """Folds of this member that can run at once."""
    if member.slot == "gpu":
        return max(1, member.per_gpu) * max(1, plan.gpus)
    return max(1, plan.cpus // max(1, member.threads))


def lane_capacity(plan: Plan, lane: str) -> int:
    """Folds that can run at once in a lane, for its planned members (the most of any)."""
    return max([capacity(m, plan) for m in plan.members if m.slot == lane] or [1])


def starting_together(member: Member, pending: int, starting: int) -> int:
    """Folds of `member` expected to start on one card at once with the one starting now: as many as share a card
    and are still to start (`pending`, this one included) or still starting (`starting`); one on the CPU."""
    if member.slot != "gpu":
        return 1
    return max(1, min(max(1, member.per_gpu), pending + starting))


def prepare_deadline(member: Member, training_deadline: float) -> tuple[float, float]:
    """(deadline, least seconds it needs) for a member's prepare step: room is left for one shortest fold."""
    return training_deadline - member.min_fold_seconds, max(MIN_FOLD_SECONDS, member.prepare_seconds * 0.25)


def fold_window(member: Member, now: float, training_deadline: float, done: list[FoldResult], pending: int,
                slots: int, running: Sequence[float] = (), together: int = 1) -> tuple[float, float]:
    """(deadline, least seconds it needs) for one of the member's folds starting now; `done`: its folds that
    ended, `pending`: its folds still waiting (this one included), `slots`: how many run at once, `running`: the
    deadlines of its folds running now (each one's slot is free again then), `together`: its folds starting
    on this one's card at once (starting_together)."""
    need = fold_need(member, done, together)
    if stretches(member):
        return fold_deadline(now, training_deadline, pending, slots, need, running), need
    longest = max([MIN_FIXED_SECONDS, member.max_fold_seconds,
                   *(MEASURED_SLACK * r.wall_seconds for r in done if r.usable)])
    return min(training_deadline, now + longest), need
