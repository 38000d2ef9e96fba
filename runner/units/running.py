"""The units running now: each in a process of its own, the cores and GPU share it holds, and how it ends.

A unit ends on its own (its manifest says what it trained), or is killed: past its deadline's grace (or, near the
budget's end, past the last moment the run can spare), or when the run stops. Nothing here waits on a unit: the
stacks of every unit to be killed are taken at once into their logs (`runner.common.stacks`), each is sent SIGKILL
(`runner.units.processes`), and it is collected at once, its kill recorded with why, how, when and the function each of
its threads was in. A stopping run asks its units to stop all at once and kills what is left after STOP_SECONDS.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from runner.units import processes
from runner.common import stacks
from runner.common.budget import Budget
from runner.engines.base import EPOCH_LOG, READY_FILE
from runner.units.epoch_lines import ready_at
from runner.units.tasks import PREPARE, FoldResult, FoldTask
from runner.planning.portfolio import Plan
from runner.common.saved import Saved
from runner.units.unit_queue import Unit

GRACE_SECONDS = 5.0  # past its deadline a unit gets this long to write its manifest before it is killed
FINAL_SECONDS = 1.0  # kept after the last kill for the supervisor's final writes
STOP_SECONDS = 3.0  # a stopping run (SIGTERM) gives its units this long to write what they have, then kills them
POLL_SECONDS = 0.05  # forked units of small tables end within a tenth of a second
DATA_WAIT_LIMIT = 0.2  # a GPU fold waiting on its loader longer than this share of an epoch gets no CPU rival
# of its card, what a prepare step on a GPU books when its member names no share (embeddings: a frozen network in
# inference, no gradients, a batch of 64 images; the H200 ran one at 3-6% busy): the network folds keep the rest
PREPARE_GPU_SHARE = 0.25


@dataclass(frozen=True)
class KilledUnit(Saved):
    """A unit the run killed: why, how and when, and the function each of its threads was in."""

    member: str
    fold: int
    pid: int
    why: str  # "at its deadline", "as the run stopped"
    how: str  # the signal and what it reached: its process group, or processes by pid
    at: float  # seconds from the run's start
    stacks: tuple[str, ...]  # 'thread: function (file:line)', the innermost frame of each
    log: str  # its fold.log, with the whole stacks

    def describe(self) -> str:
        where = "; ".join(self.stacks[:3]) or "no stacks"
        return f"killed {self.member} fold {self.fold} (pid {self.pid}) {self.why} at {self.at:.1f} s: {self.how}; " \
               f"it was in {where} (stacks in {self.log})"


@dataclass
class Running:
    unit: Unit
    task: FoldTask
    process: processes.Child
    log: Path
    started: float
    lane: str  # "gpu 0", "cpu 1", "cpu 0,1": where the run's plot draws it
    killed: KilledUnit | None = None
    ready_at: float | None = None  # when it said its start-up was over (runner.units.epoch_lines.ready_at)
    startup: float | None = None  # the start-up it said then: from its process's start to ready


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
class Slots:
    """The units running now, each in its own process group, and the cores and GPU shares they hold."""

    preload: tuple[str, ...] = ()  # modules the fork server imports once
    fork: bool = True  # units forked from a fork server with the engines' libraries imported (else started)
    running: list[Running] = field(default_factory=list)
    killed: list[KilledUnit] = field(default_factory=list)  # units killed, each with its stacks, as collected
    said: str = ""  # the last note on how a unit was started (the fork server did not answer)
    starving: bool = False  # a GPU fold waits on its loader: CPU units are held back (said once an episode)

    def cores_held(self) -> int:
        return sum(r.task.threads for r in self.running)

    def memory_for_one_more(self, plan: Plan) -> bool:
        """Whether the run's memory holds one more unit beside those running (runner.planning.unit_memory); a unit alone
        always starts, however large: nothing else can be made smaller for it."""
        held = len(self.running) * plan.unit_bytes
        return not plan.memory_bytes or not self.running or held + plan.unit_bytes <= plan.memory_bytes

    def free_gpu(self, unit: Unit, gpus: int) -> int | None:
        """A GPU with room for one more unit like this one (its share: `gpu_share`), the least loaded first."""
        load = [0.0] * gpus
        for r in self.running:
            if r.unit.on_gpu and r.task.gpu is not None:
                load[r.task.gpu] += gpu_share(r.unit)
        share = gpu_share(unit)
        fits = [g for g in range(gpus) if load[g] + share <= 1 + 1e-9]
        return min(fits, key=lambda g: load[g]) if fits else None

    def cpu_lane(self, threads: int, cpus: int) -> str:
        """The cores a CPU unit is drawn on: the lowest free numbers ("cpu 0", "cpu 0,1")."""
        used = {int(c) for r in self.running if r.lane.startswith("cpu") for c in r.lane[4:].split(",")}
        free = [i for i in range(cpus) if i not in used] or [0]
        return "cpu " + ",".join(str(i) for i in free[:max(1, threads)])

    def starved(self) -> str | None:
        """The first GPU fold that waited on its loader for more than DATA_WAIT_LIMIT of its last epoch, said."""
        for r in self.running:
            epoch = last_epoch(Path(r.task.out_dir)) if r.unit.on_gpu else None
            if epoch and epoch.get("data_wait", 0.0) > DATA_WAIT_LIMIT:
                return f"{r.unit.name} waited on its loader for {epoch['data_wait']:.0%} of epoch {epoch['epoch']}"
        return None

    def held_back(self) -> tuple[bool, str]:
        """Whether CPU units are held back for a starved GPU fold now, and why when the episode is new."""
        why = self.starved()
        news = why if why and not self.starving else ""
        self.starving = why is not None
        return self.starving, news

    def start(self, unit: Unit, task: FoldTask, now: float, lane: str, budget: Budget,
              device: str | None = None) -> str:
        """The unit's process, started from its task file in its own folder; `device` is its GPU, if any. A fork
        server still importing gets as long as it makes progress (up to START_SECONDS, never past what the budget
        spares); one stopped, or idle, is given up on at once and the unit starts another way. Returns how it was
        started when that is news (once, not for every unit while no server is asked), else ''."""
        out = Path(task.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for stale in ("manifest.json", READY_FILE, EPOCH_LOG):  # an earlier run's, in a folder used again
            (out / stale).unlink(missing_ok=True)
        (out / "task.json").write_text(json.dumps(task.to_json(), indent=2))
        log = out / "fold.log"
        wait = min(processes.fork_server.START_SECONDS, max(1.0, budget.deadline - FINAL_SECONDS - now))
        child = processes.start(out / "task.json", log, task.threads, device, self.preload, self.fork, wait)
        self.running.append(Running(unit, task, child, log, now, lane))
        news = child.note if child.note != self.said else ""
        self.said = child.note
        return news

    @staticmethod
    def kill_at(item: Running, budget: Budget) -> float:
        """When an overdue unit is killed: its deadline's grace, or the last moment the budget can spare."""
        return min(item.task.deadline + GRACE_SECONDS, budget.deadline - FINAL_SECONDS - stacks.STACKS_WAIT)

    def ended(self, budget: Budget) -> list[tuple[Running, FoldResult]]:
        """Units that ended, with what each wrote; those past `kill_at` are killed first, all at once. Orphans the
        run adopted (a unit whose fork server died, a unit's process that outlived it) are waited on once ended."""
        processes.reap()
        now = time.monotonic()
        overdue = [r for r in self.running if r.killed is None and now > self.kill_at(r, budget) and r.process.alive()]
        if overdue:
            self.kill(overdue, "at its deadline", budget)
        ended = []
        for item in list(self.running):
            if item.killed is None and item.process.alive():
                continue
            self.running.remove(item)  # a killed unit is not waited for: one inside a driver call dies later
            ended.append(self._collected(item))
        return ended

    def _collected(self, item: Running) -> tuple[Running, FoldResult]:
        if item.killed:
            self.killed.append(item.killed)
        return item, _read_result(item)

    def kill(self, items: list[Running], why: str, budget: Budget) -> None:
        """The stacks of every unit in `items`, taken at once into their logs (within what the budget spares),
        then SIGKILL to each: its group, and by pid what left it (or all, when it leads no group yet)."""
        room = budget.deadline - FINAL_SECONDS - time.monotonic()
        found = stacks.take([(i.process.pid, i.log) for i in items], f"before it is killed {why}",
                            min(stacks.STACKS_WAIT, max(0.0, room)))
        for item in items:
            how = processes.kill(item.process)
            if how.endswith(processes.ENDED):  # it ended on its own meanwhile: collected as usual
                continue
            item.killed = KilledUnit(item.unit.member.name, item.unit.fold, item.process.pid, why, how,
                                     round(time.monotonic() - budget.started, 2), found.get(item.process.pid, ()),
                                     str(item.log))

    def stop(self, member: str) -> None:
        """Ask the member's running units to stop at their next epoch or round (SIGTERM); they write what they
        have and are collected as usual."""
        for item in self.running:
            if item.unit.member.name == member:
                processes.ask_to_stop(item.process)

    def stop_all(self, budget: Budget) -> list[tuple[Running, FoldResult]]:
        """Every running unit asked to stop at once (SIGTERM: it ends its epoch or round and writes what it has),
        given STOP_SECONDS (less near the budget's end), and what is left killed with its stacks taken."""
        for item in self.running:
            processes.ask_to_stop(item.process)
        until = min(time.monotonic() + STOP_SECONDS, budget.deadline - FINAL_SECONDS - stacks.STACKS_WAIT)
        while time.monotonic() < until and any(i.process.alive() for i in self.running):
            time.sleep(POLL_SECONDS)
        if left := [i for i in self.running if i.process.alive()]:
            self.kill(left, "as the run stopped", budget)
        ended = [self._collected(item) for item in self.running]
        self.running.clear()
        return ended


def gpu_share(unit: Unit) -> float:
    """What of its card a unit books: a fold 1 / its member's `per_gpu`; a prepare step the same where its member
    names a share, else PREPARE_GPU_SHARE (never the whole card: the H200 held three network folds back for 15 s
    behind a features member's embeddings booked as all of it)."""
    per_gpu = unit.member.per_gpu
    if unit.fold == PREPARE and not per_gpu:
        return PREPARE_GPU_SHARE
    return 1 / max(1, per_gpu)


def _read_result(running: Running) -> FoldResult:
    """What an ended unit wrote (its manifest), or a failure saying how it ended, where it was, and its start-up:
    as it said it, or all it ran when it never said it was ready."""
    manifest = Path(running.task.out_dir) / "manifest.json"
    if manifest.exists():
        return FoldResult.load(manifest)
    wall = time.monotonic() - running.started
    ready = ready_at(running) if running.unit.fold != PREPARE else None
    startup = wall if ready is None else running.startup
    if killed := running.killed:
        where = killed.stacks[0] if killed.stacks else "no stacks"
        why = f"killed {killed.why} at {killed.at:.1f} s ({killed.how}); it was in {where}"
    elif (code := running.process.returncode) is None:
        why = "ended, its exit code unknown (the fork server that started it had stopped)"
    else:
        why = f"exited with code {code}: {_last_line(running.log)}"
    if ready is None and running.unit.fold != PREPARE:
        why += f" (not ready after {wall:.0f} s of start-up)"
    return FoldResult(running.unit.fold, "failed", running.unit.member.name, message=why,
                      startup_seconds=round(startup, 2), wall_seconds=round(wall, 2))
