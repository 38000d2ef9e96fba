"""Slots of two kinds at once: GPU slots and CPU cores, filled by one scheduler from the portfolio.

Every unit of work (a member's prepare step, or one of its folds) runs in its own process, started in its own
session and killed as a group. A unit holds cores (its compute threads and loader workers) and, on a GPU slot,
a share of one GPU; the cores held never exceed the cores the run may use. GPU units are started first, so CPU
members only take the cores GPU folds leave; and while a running GPU fold waits on its loader for more than
DATA_WAIT_LIMIT of an epoch, no CPU unit starts. CPU members start in plan order.

A fold's deadline: members whose folds stretch to fill the time they get (a CNN's epochs, or boosters whose
rounds were not timed) get an equal share of the window left per wave of their folds (AutoGluon's "time left /
folds left"); the others get their planned longest fold, measured folds replacing the plan's estimate as they
arrive. A unit that cannot finish even with the whole window left is not started. When a lane runs out of
planned members, `more(lane)` may hand it another (a bag of the best member) until it says stop.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from runner import processes
from runner.budget import Budget
from runner.engines import get_engine
from runner.engines.base import EPOCH_LOG
from runner.folds import PREPARE, FoldResult, FoldTask
from runner.portfolio import Member, Plan

GRACE_SECONDS = 5.0  # past its deadline a unit gets this long to write its manifest before it is killed
FINAL_SECONDS = 1.0  # kept after the last kill for the supervisor's final writes
MIN_FOLD_SECONDS = 1.0  # below this no unit can load its data and fit anything (forked units start in ~0.1 s)
POLL_SECONDS = 0.05  # forked units of small tables end within a tenth of a second
DATA_WAIT_LIMIT = 0.2  # a GPU fold waiting on its loader longer than this share of an epoch gets no CPU rival
TOO_LATE = "needs about"  # how a unit skipped for want of time is reported
WINDOW_CLOSED = "the training window closed"
EVERY_MEMBER_FINISHED = "every member finished"


@dataclass(frozen=True)
class Unit:
    member: Member
    fold: int  # PREPARE for the member's prepare step

    @property
    def name(self) -> str:
        return f"{self.member.name}/{'prepare' if self.fold == PREPARE else self.fold}"

    @property
    def on_gpu(self) -> bool:
        return self.member.slot == "gpu" and self.fold != PREPARE

    @property
    def threads(self) -> int:
        return (self.member.prepare_threads or self.member.threads) if self.fold == PREPARE else self.member.threads


@dataclass
class Running:
    unit: Unit
    task: FoldTask
    process: processes.Child
    log: Path
    started: float
    lane: str  # "gpu 0", "cpu 1", "cpu 0,1": where the run's plot draws it


@dataclass(frozen=True)
class UnitRecord:
    """When and where a unit ran, for the report and the plot."""

    member: str
    fold: int
    lane: str
    start: float  # seconds from the run's start
    end: float
    status: str
    score: float | None
    threads: int

    def to_json(self) -> dict:
        return self.__dict__.copy()


def fold_deadline(now: float, training_deadline: float, pending: int, slots: int) -> float:
    """Equal share of the time left for the waves of folds still to run."""
    waves = max(1, math.ceil(pending / max(1, slots)))
    return now + (training_deadline - now) / waves


def least_seconds(results: list[FoldResult]) -> float | None:
    """Shortest time a fold needs, from the folds that produced something (None before the first)."""
    usable = [r.least_seconds for r in results if r.usable]
    return min(usable) if usable else None


def _last_line(log: Path) -> str:
    lines = [l for l in log.read_text(errors="replace").splitlines() if l.strip()] if log.exists() else []
    return lines[-1][-300:] if lines else "no output"


def last_epoch(folder: Path) -> dict | None:
    """The latest per-epoch line a running fold wrote (None before its first epoch)."""
    path = folder / EPOCH_LOG
    if not path.is_file():
        return None
    lines = [l for l in path.read_text().splitlines() if l.strip()]
    try:
        return json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:  # a line being written
        return None


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
    queue: list[Unit] = field(default_factory=list)
    running: list[Running] = field(default_factory=list)
    results: list[FoldResult] = field(default_factory=list)
    records: list[UnitRecord] = field(default_factory=list)
    prepared: dict[str, str] = field(default_factory=dict)  # prepare key -> "running" | "done" | "failed"
    closed: set[str] = field(default_factory=set)  # lanes `more` has nothing further for
    skipped: dict[str, str] = field(default_factory=dict)  # member -> why its remaining units did not start
    held_back: bool = False  # CPU units held back for a GPU fold's loader (logged once per episode)
    fork: bool = True  # units forked from a fork server with the engines' libraries imported (else started)
    reused: dict[str, set[int]] = field(default_factory=dict)  # member -> folds an earlier run already finished

    def __post_init__(self) -> None:
        self.preload = tuple(mod for m in self.plan.members for mod in get_engine(m.engine).preload)
        for member in self.plan.members:
            self.add(member)

    # --- the queue --------------------------------------------------------------------------------------------

    def _key(self, member: Member) -> str | None:
        return get_engine(member.engine).prepare_key(member.settings)

    def add(self, member: Member) -> None:
        """Queue a member's prepare step (unless its key is prepared or queued) and the folds not yet done."""
        folds = [k for k in range(member.folds) if k not in self.reused.get(member.name, set())]
        key = self._key(member)
        if folds and key is not None and key not in self.prepared:
            self.prepared[key] = "queued"
            self.queue.append(Unit(member, PREPARE))
        self.queue.extend(Unit(member, k) for k in folds)

    def stop(self, member: str) -> None:
        """Ask the member's running units to stop at their next epoch or round (SIGTERM); they write what they
        have and are collected as usual."""
        for item in self.running:
            if item.unit.member.name == member:
                processes.ask_to_stop(item.process)

    def revise(self, name: str, member: Member) -> int:
        """A member's units not yet started take its new version (settings the run learnt it should have);
        those running or finished keep theirs. Returns how many were revised."""
        revised = [i for i, u in enumerate(self.queue) if u.member.name == name]
        for i in revised:
            self.queue[i] = Unit(member, self.queue[i].fold)
        return len(revised)

    def _ready(self, unit: Unit) -> bool:
        key = self._key(unit.member)
        return unit.fold == PREPARE or key is None or self.prepared.get(key) == "done"

    def drop(self, member: str, why: str) -> None:
        """Skip the member's units that have not started."""
        for unit in [u for u in self.queue if u.member.name == member]:
            self.queue.remove(unit)
            if unit.fold != PREPARE:
                self._finish(FoldResult(unit.fold, "skipped", member, message=why), unit, "-", time.monotonic())
        self.skipped.setdefault(member, why)

    # --- resources --------------------------------------------------------------------------------------------

    def free_cores(self) -> int:
        return self.plan.cpus - sum(r.task.threads for r in self.running)

    def free_gpu(self, member: Member) -> int | None:
        """A GPU with room for one more fold of this member (its share: 1 / per_gpu), the least loaded first."""
        load = [0.0] * self.plan.gpus
        for r in self.running:
            if r.unit.on_gpu and r.task.gpu is not None:
                load[r.task.gpu] += 1 / max(1, r.unit.member.per_gpu)
        share = 1 / max(1, member.per_gpu)
        fits = [g for g in range(self.plan.gpus) if load[g] + share <= 1 + 1e-9]
        return min(fits, key=lambda g: load[g]) if fits else None

    def _cpu_lane(self, threads: int) -> str:
        """The cores a CPU unit is drawn on: the lowest free numbers ("cpu 0", "cpu 0,1")."""
        used = {int(c) for r in self.running if r.lane.startswith("cpu") for c in r.lane[4:].split(",")}
        free = [i for i in range(self.plan.cpus) if i not in used] or [0]
        return "cpu " + ",".join(str(i) for i in free[:max(1, threads)])

    def loader_starved(self) -> bool:
        """Whether a running GPU fold spent more than DATA_WAIT_LIMIT of its last epoch waiting for data."""
        for r in self.running:
            epoch = last_epoch(Path(r.task.out_dir)) if r.unit.on_gpu else None
            if epoch and epoch.get("data_wait", 0.0) > DATA_WAIT_LIMIT:
                if not self.held_back:
                    self.on_action(f"CPU units held back: {r.unit.name} waited on its loader for "
                                   f"{epoch['data_wait']:.0%} of epoch {epoch['epoch']}")
                self.held_back = True
                return True
        self.held_back = False
        return False

    # --- time -------------------------------------------------------------------------------------------------

    def _member_results(self, member: Member) -> list[FoldResult]:
        return [r for r in self.results if r.member == member.name and r.fold != PREPARE]

    def _capacity(self, member: Member) -> int:
        """Folds of this member that can run at once."""
        if member.slot == "gpu":
            return max(1, member.per_gpu) * max(1, self.plan.gpus)
        return max(1, self.plan.cpus // max(1, member.threads))

    def capacity_of(self, lane: str) -> int:
        """Folds that can run at once in a lane, for its planned members (the most of any)."""
        return max([self._capacity(m) for m in self.plan.members if m.slot == lane] or [1])

    def _deadline(self, unit: Unit, now: float) -> tuple[float, float]:
        """(deadline, least seconds it needs) for a unit starting now."""
        member, end = unit.member, self.budget.training_deadline
        if unit.fold == PREPARE:
            return end - member.min_fold_seconds, max(MIN_FOLD_SECONDS, member.prepare_seconds * 0.25)
        need = max(MIN_FOLD_SECONDS, least_seconds(self._member_results(member)) or member.min_fold_seconds)
        finished = [r.wall_seconds for r in self._member_results(member) if r.usable]
        stretches = get_engine(member.engine).fills_window or not member.max_fold_seconds
        if stretches:  # this unit is still in the queue: it counts itself
            pending = sum(1 for u in self.queue if u.member.name == member.name and u.fold != PREPARE)
            deadline = fold_deadline(now, end, pending, self._capacity(member))
            return (deadline if deadline - now >= need else end), need
        longest = max([member.max_fold_seconds, *(1.5 * w for w in finished)])
        return min(end, now + longest), need

    # --- the loop ---------------------------------------------------------------------------------------------

    def _start(self, unit: Unit, now: float, gpu: int | None, threads: int, lane: str) -> None:
        deadline, _ = self._deadline(unit, now)
        task = self.make_task(unit, deadline, gpu, threads)
        out = Path(task.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "manifest.json").unlink(missing_ok=True)
        (out / "task.json").write_text(json.dumps(task.to_json(), indent=2))
        log = out / "fold.log"
        self.queue.remove(unit)
        if unit.fold == PREPARE:
            self.prepared[self._key(unit.member)] = "running"
        child = processes.start(out / "task.json", log, threads, gpu, self.preload, self.fork)
        self.running.append(Running(unit, task, child, log, now, lane))

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
        for unit in [u for u in self.queue if u.on_gpu and self._ready(u)]:
            gpu = self.free_gpu(unit.member)
            if gpu is None or unit not in self.queue or not self._fits_in_time(unit, now):
                continue
            if self.free_cores() < unit.threads:
                waiting = True
                continue
            self._start(unit, now, gpu, unit.threads, f"gpu {gpu}")
        return waiting

    def _launch_cpu_units(self, now: float) -> None:
        for unit in [u for u in self.queue if not u.on_gpu]:
            if unit not in self.queue or not self._ready(unit):
                continue
            free = self.free_cores()
            # prepare takes what is free; a fold planned for more cores than the run now has (other processes took
            # some) runs on those it has rather than waiting for cores that may never come back
            threads = min(unit.threads, free if unit.fold == PREPARE else self.plan.cpus)
            if threads < 1 or free < threads:
                return  # in plan order: later members wait for this one
            if self._fits_in_time(unit, now):
                self._start(unit, now, None, threads, self._cpu_lane(threads))

    def _ask_for_more(self) -> None:
        for lane in ("gpu", "cpu"):
            if lane in self.closed or (lane == "gpu" and not self.plan.gpus):
                continue
            busy = any((u.on_gpu if lane == "gpu" else not u.on_gpu) for u in self.queue)
            room = self.free_cores() > 0 and (lane == "cpu" or any(self.free_gpu(m) is not None
                                                                   for m in self.plan.members if m.slot == "gpu"))
            if busy or not room:
                continue
            member = self.more(lane)
            if member is None:
                self.closed.add(lane)
            else:
                self.add(member)

    def _unstartable(self) -> None:
        """With nothing running, units that still cannot start never will (more cores or a GPU than the run has,
        a prepare step that never ran): drop them with the reason, so the run cannot spin."""
        launchable = [u for u in self.queue if self._ready(u) and (not u.on_gpu or (
            u.threads <= self.plan.cpus and self.free_gpu(u.member) is not None))]
        if launchable:
            return
        for unit in list(self.queue):
            if unit in self.queue:
                why = "no GPU in this run" if unit.on_gpu and not self.plan.gpus else \
                    f"needs {unit.threads} cores, the run has {self.plan.cpus}" if unit.on_gpu and \
                    unit.threads > self.plan.cpus \
                    else "what it needs was never prepared"
                self.drop(unit.member.name, why)

    def _collect(self) -> list[tuple[FoldResult, Unit]]:
        """Units that ended (or were killed at their deadline), recorded; their results are handed on later, so
        new units start before the supervisor's slower work on them."""
        ended = []
        for item in list(self.running):
            alive = item.process.poll() is None
            kill_at = min(item.task.deadline + GRACE_SECONDS, self.budget.deadline - FINAL_SECONDS)
            if alive and time.monotonic() <= kill_at:
                continue
            if alive:
                processes.kill(item.process)
            self.running.remove(item)
            result = self._read(item, killed=alive)
            if item.unit.fold == PREPARE:
                key = self._key(item.unit.member)
                self.prepared[key] = "done" if result.usable else "failed"
                if not result.usable:
                    for member in {u.member.name for u in self.queue if self._key(u.member) == key}:
                        self.drop(member, f"its prepare step failed: {result.message}")
            self._record(result, item.unit, item.lane, item.started, item.task.threads)
            ended.append(result)
        return ended

    def _read(self, running: Running, killed: bool) -> FoldResult:
        manifest = Path(running.task.out_dir) / "manifest.json"
        if manifest.exists():
            return FoldResult.load(manifest)
        why = "killed at its deadline" if killed else f"exited with code {running.process.returncode}"
        return FoldResult(running.unit.fold, "failed", running.unit.member.name,
                          message=f"{why}: {_last_line(running.log)}")

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
            while True:
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
            for item in self.running:
                processes.kill(item.process)
        return self.stop_reason()

    def stop_reason(self) -> str:
        """Why the loop ended: the window closed (something was left that did not fit), or the members' reasons."""
        out_of_time = [m for m, why in self.skipped.items() if why.startswith(TOO_LATE)]
        if self.queue or out_of_time or time.monotonic() >= self.budget.training_deadline - MIN_FOLD_SECONDS:
            return WINDOW_CLOSED
        return "; ".join(f"{m}: {why}" for m, why in self.skipped.items()) or EVERY_MEMBER_FINISHED
