"""Slots of two kinds at once: GPU slots and CPU cores, filled by one scheduler from the portfolio.

Every unit of work (a member's prepare step, or one of its folds) runs in its own process, started in its own
session and killed as a group. A unit holds cores (its compute threads and loader workers) and, on a GPU slot,
a share of one GPU; the cores held never exceed the cores the run may use. GPU units are started first, so CPU
members only take the cores GPU folds leave; and while a running GPU fold waits on its loader for more than
DATA_WAIT_LIMIT of an epoch, no CPU unit starts. CPU members start in plan order.

A fold's deadline comes from `runner.units.deadlines` (its start-up counted, with the folds starting on its card at
once); a unit that cannot finish even with the whole window left is not started. The queue's bookkeeping is
`runner.units`. When a lane runs out of planned members, `more(lane)` may hand it another (a bag of the best
member); when it has none, the lane is asked again each time more units have ended (what they measured may show
that one fits after all), so a card does not idle while a fold could still finish on it.

Nothing a unit does can hold the run: the scheduler never waits on one (`runner.units.running` kills what overruns, all
at once, its stacks taken first), and each kill is named in the report with why, how, when and where it was.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from runner.common.budget import Budget, interrupts_between_steps, raise_if_interrupted
from runner.units.deadlines import (MIN_FOLD_SECONDS, capacity, fold_window, kept_for_queued, lane_capacity,
                                    prepare_deadline, starting_together)
from runner.planning.registry import get_engine
from runner.units.tasks import PREPARE, FoldResult, FoldTask
from runner.planning.portfolio import Member, Plan
from runner.common.saved import Saved
from runner.units.epoch_lines import ready_at
from runner.units.running import POLL_SECONDS, Running, Slots
from runner.units.unit_queue import Unit, UnitQueue

TOO_LATE = "needs about"  # how a unit skipped for want of time is reported
WINDOW_CLOSED = "the training window closed"
EVERY_MEMBER_FINISHED = "every member finished"
RUNNING = "running"  # a unit record's status while its unit runs (its end: when the record was written)


@dataclass(frozen=True)
class UnitRecord(Saved):
    """When and where a unit ran, for the report and the plot."""

    member: str
    fold: int
    lane: str
    start: float  # seconds from the run's start
    end: float
    status: str
    score: float | None
    threads: int



def card(plan: Plan, gpu: int | None) -> str | None:
    """The card a GPU slot's fold gets as its only GPU: the plan's UUID for that slot (an index where the plan has
    none); None for a CPU unit."""
    if gpu is None:
        return None
    return plan.devices[gpu] if gpu < len(plan.devices) else str(gpu)


def why_unstartable(unit: Unit, plan: Plan) -> str:
    """Why a unit that cannot start with nothing running never will."""
    if unit.on_gpu and not plan.gpus:
        return "no GPU in this run"
    if unit.on_gpu and unit.threads > plan.cpus:
        return f"needs {unit.threads} cores, the run has {plan.cpus}"
    return "what it needs was never prepared"


def stop_reason(pending: UnitQueue, budget: Budget) -> str:
    """Why the loop ended: the window closed (something was left that did not fit), or the members' reasons."""
    out_of_time = [m for m, why in pending.skipped.items() if why.startswith(TOO_LATE)]
    if pending.waiting or out_of_time or time.monotonic() >= budget.training_deadline - MIN_FOLD_SECONDS:
        return WINDOW_CLOSED
    return "; ".join(f"{m}: {why}" for m, why in pending.skipped.items()) or EVERY_MEMBER_FINISHED


@dataclass
class DryLanes:
    """The lanes `more` had nothing for, each with how many units had ended then: a lane is asked again only once
    more units have ended (what they measured may show that a member fits after all), and says so when it
    re-opens."""

    more: Callable[[str], Member | None]  # lane: "gpu" | "cpu"
    on_action: Callable[[str], None]
    closed: dict[str, int] = field(default_factory=dict)

    def ask(self, lane: str, ended: int, left: float) -> Member | None:
        """Another member for the lane, or None; `ended`: units that ran and ended so far; `left`: seconds of
        the window."""
        if self.closed.get(lane) == ended:
            return None
        member = self.more(lane)
        if member is None:
            self.closed[lane] = ended
        elif self.closed.pop(lane, None) is not None:
            self.on_action(f"the {lane} lane re-opened: {member.name} fits the {left:.0f} s left, by what the "
                           "units that ended measured")
        return member


@dataclass
class Scheduler:
    """Runs the plan's members, then whatever `more` adds, until nothing fits or the training window closes."""

    plan: Plan
    budget: Budget
    make_task: Callable[[Unit, float, int | None, int], FoldTask]  # (unit, deadline, gpu, threads)
    on_result: Callable[[FoldResult], None]
    on_status: Callable[[list[Running]], None] = lambda _: None
    more: Callable[[str], Member | None] = lambda lane: None  # lane: "gpu" | "cpu"
    on_action: Callable[[str], None] = lambda _: None
    results: list[FoldResult] = field(default_factory=list)
    records: list[UnitRecord] = field(default_factory=list)
    fork: bool = True  # units forked from a fork server with the engines' libraries imported (else started)
    reused: dict[str, set[int]] = field(default_factory=dict)  # member -> folds an earlier run already finished

    def __post_init__(self) -> None:
        self.slots = Slots(tuple(mod for m in self.plan.members for mod in get_engine(m.engine).preload), self.fork)
        self.pending = UnitQueue(self.reused)
        self.lanes = DryLanes(self.more, self.on_action)
        for member in self.plan.members:
            self.add(member)

    @property
    def queue(self) -> list[Unit]:
        """The units waiting to start, in order."""
        return self.pending.waiting

    @property
    def running(self) -> list[Running]:
        return self.slots.running

    def add(self, member: Member) -> None:
        self.pending.add(member)

    def stop(self, member: str) -> None:
        self.slots.stop(member)

    def revise(self, name: str, member: Member) -> int:
        return self.pending.revise(name, member)

    def drop(self, member: str, why: str) -> None:
        """Skip the member's units that have not started."""
        for unit in self.pending.drop(member, why):
            self._finish(FoldResult(unit.fold, "skipped", member, message=why), unit, "-", time.monotonic())

    def free_cores(self) -> int:
        return self.plan.cpus - self.slots.cores_held()

    def free_gpu(self, unit: Unit) -> int | None:
        return self.slots.free_gpu(unit, self.plan.gpus)

    def loader_starved(self) -> bool:
        """Whether a running GPU fold spent more than DATA_WAIT_LIMIT of its last epoch waiting for data (said
        once an episode)."""
        starved, news = self.slots.held_back()
        if news:
            self.on_action(f"CPU units held back: {news}")
        return starved

    def _deadline(self, unit: Unit, now: float) -> tuple[float, float]:
        """(deadline, least seconds it needs) for a unit starting now."""
        member, end = unit.member, self.budget.training_deadline
        if unit.fold == PREPARE:
            return prepare_deadline(member, end)
        done = [r for r in self.results if r.member == member.name and r.fold != PREPARE]
        mine = [r for r in self.running if r.unit.member.name == member.name and r.unit.fold != PREPARE]
        pending = self.pending.pending(member.name)
        together = starting_together(member, pending, sum(1 for r in mine if ready_at(r) is None))
        queued = [(u.member, u.fold == PREPARE) for u in self.pending.waiting]
        end -= kept_for_queued(member, queued, lane_capacity(self.plan, member.slot), end - now,
                               self.plan.window_seconds or end - now)
        return fold_window(member, now, end, done, pending, capacity(member, self.plan),
                           [r.task.deadline for r in mine], together)

    def _start(self, unit: Unit, now: float, gpu: int | None, threads: int, lane: str) -> None:
        deadline, _ = self._deadline(unit, now)
        task = self.make_task(unit, deadline, gpu, threads)
        self.pending.take(unit)
        if note := self.slots.start(unit, task, now, lane, self.budget, card(self.plan, gpu)):
            self.on_action(f"{unit.name}: {note}")  # the fork server did not answer: replaced, unit started anew

    def _fits_in_time(self, unit: Unit, now: float) -> bool:
        deadline, need = self._deadline(unit, now)
        if deadline - now >= need:
            return True
        self.drop(unit.member.name, f"{TOO_LATE} {need:.0f} s, {max(0.0, deadline - now):.0f} s left")
        return False

    def _launch_gpu_units(self, now: float) -> bool:
        """Start GPU folds that have a GPU and cores; True when one is waiting only for cores (CPU units then
        leave the cores to it)."""
        waiting = False
        for unit in [u for u in self.queue if u.on_gpu and self.pending.ready(u)]:
            gpu = self.free_gpu(unit)
            if gpu is None or unit not in self.queue or not self._fits_in_time(unit, now):
                continue
            if self.free_cores() < unit.threads or not self.slots.memory_for_one_more(self.plan):
                waiting = True
                continue
            self._start(unit, now, gpu, unit.threads, f"gpu {gpu}")
        return waiting

    def _launch_cpu_units(self, now: float) -> None:
        for unit in [u for u in self.queue if not u.on_gpu]:
            if unit not in self.queue or not self.pending.ready(unit):
                continue
            free = self.free_cores()
            # prepare takes what is free; a fold planned for more cores than the run now has (other processes took
            # some) runs on those it has rather than waiting for cores that may never come back
            threads = min(unit.threads, free if unit.fold == PREPARE else self.plan.cpus)
            if threads < 1 or free < threads or not self.slots.memory_for_one_more(self.plan):
                return  # in plan order: later members wait for this one
            if self._fits_in_time(unit, now):
                self._start(unit, now, None, threads, self.slots.cpu_lane(threads, self.plan.cpus))

    def _ask_for_more(self) -> None:
        """A lane with room and nothing queued asks for another member (see DryLanes)."""
        ended = sum(1 for r in self.results if r.status != "skipped")  # those skipped unstarted measure nothing
        for lane in ("gpu", "cpu") if self.plan.gpus else ("cpu",):
            busy = any((u.on_gpu if lane == "gpu" else not u.on_gpu) for u in self.queue)
            room = self.free_cores() > 0 and (lane == "cpu" or any(self.free_gpu(Unit(m, 0)) is not None
                                                                   for m in self.plan.members if m.slot == "gpu"))
            if not busy and room and (member := self.lanes.ask(lane, ended, self.budget.training_left())):
                self.add(member)

    def _unstartable(self) -> None:
        """With nothing running, units that still cannot start never will (more cores or a GPU than the run has,
        a prepare step that never ran): drop them with the reason, so the run cannot spin."""
        launchable = [u for u in self.queue if self.pending.ready(u) and (not u.on_gpu or (
            u.threads <= self.plan.cpus and self.free_gpu(u) is not None))]
        if launchable:
            return
        for unit in list(self.queue):
            if unit in self.queue:
                self.drop(unit.member.name, why_unstartable(unit, self.plan))

    def _collect(self) -> list[tuple[FoldResult, Unit]]:
        """Units that ended (or were killed at their deadline), recorded; their results are handed on later, so
        new units start before the supervisor's slower work on them."""
        ended = []
        for item, result in self.slots.ended(self.budget):
            if item.unit.fold == PREPARE:
                for member in self.pending.prepare_ended(item.unit, result.usable):
                    self.drop(member, f"its prepare step failed: {result.message}")
            self._ended(item, result)
            ended.append(result)
        return ended

    def _ended(self, item: Running, result: FoldResult) -> None:
        """A unit that ended recorded, and a kill said with its evidence."""
        self._record(result, item.unit, item.lane, item.started, item.task.threads)
        if item.killed:
            self.on_action(item.killed.describe())

    def _record(self, result: FoldResult, unit: Unit, lane: str, started: float, threads: int = 0) -> None:
        """`threads`: the cores the unit held (0: it never started)."""
        now = time.monotonic()
        self.results.append(result)
        self.records.append(UnitRecord(unit.member.name, unit.fold, lane, round(started - self.budget.started, 2),
                                       round(now - self.budget.started, 2), result.status, result.score,
                                       threads))

    def _finish(self, result: FoldResult, unit: Unit, lane: str, started: float) -> None:
        self._record(result, unit, lane, started)
        self.on_result(result)

    def _launch(self) -> None:
        now = time.monotonic()
        if now >= self.budget.training_deadline:
            return
        waiting_gpu = self._launch_gpu_units(now)
        if not waiting_gpu and not self.loader_starved():
            self._launch_cpu_units(now)
        if not self.running and self.queue:
            self._unstartable()

    def run(self) -> str:
        """Run until nothing is left to start or run; returns why training ended."""
        try:
            with interrupts_between_steps():  # a SIGTERM is raised here, between steps, not inside one
                while True:
                    raise_if_interrupted()
                    self._launch()
                    ended = self._collect()
                    self._launch()  # into the slots just freed, before the supervisor works on the results
                    for result in ended:
                        self.on_result(result)
                    if time.monotonic() < self.budget.training_deadline:
                        self._ask_for_more()
                        self._launch()
                    self.on_status(self.running)
                    if not self.running and (not self.queue or time.monotonic() >= self.budget.training_deadline):
                        break
                    if not ended:
                        time.sleep(POLL_SECONDS)
        finally:
            for item, result in self.slots.stop_all(self.budget):  # none, unless the run is stopping early
                self._ended(item, result)
        return stop_reason(self.pending, self.budget)


def unit_rows(scheduler: Scheduler | None) -> dict:
    """For the report: when and where each unit ran, those running as far as they got (status "running", the span
    up to now), and each the run killed (with its stacks)."""
    if scheduler is None:
        return {}
    started, now = scheduler.budget.started, round(time.monotonic() - scheduler.budget.started, 2)
    running = [UnitRecord(r.unit.member.name, r.unit.fold, r.lane, round(r.started - started, 2), now, RUNNING, None,
                          r.task.threads) for r in scheduler.running]
    return dict(units=tuple(r.to_json() for r in scheduler.records + running),
                killed=tuple(k.to_json() for k in scheduler.slots.killed))
