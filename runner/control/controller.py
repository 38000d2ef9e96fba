"""The controller: acts on what running folds show (runner.control's pure rules applied to a live run).

It reads each running fold's epoch lines, holds a member's first timed step against its plan (re-timing it, or
having its engine plan it again for the window left), keeps each fold's start-up (until it says it is ready) apart
from its epochs (runner.control.startup_watch), applies the monitor's rules to GPU folds, and samples the cores
again when a step is far slower than planned. Every change reaches the units not yet started through the
scheduler, and every action is logged with its evidence.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import time
from pathlib import Path

from runner.common import stacks
from runner.results.member_state import MemberState
from runner.common.budget import Budget
from runner.control.rules import (
    FIRST_CHECK_SECONDS, REPROBE_SECONDS, TIMED_EPOCH, Change, close_enough, combine, monitor_rules, needs_replan,
    stalled, with_startup)
from runner.control.startup_watch import STALL_STACKS_SECONDS, StartupWatch
from runner.data.dataset import Dataset
from runner.planning.registry import get_engine, pretrained_models
from runner.units.tasks import PREPARE, FoldResult
from runner.machine.hardware import Hardware, busy_elsewhere
from runner.machine.monitor import Monitor
from runner.results.run_folder import RunOutputs
from runner.planning.planner import data_shape, replan_context
from runner.planning.portfolio import Member, Plan
from runner.units.running import Running
from runner.units.scheduler import Scheduler
from runner.units.epoch_lines import EpochReader, describe, ready_at, utilisation

log = logging.getLogger("runner")


class Controller:
    """The plan as the run learns it: measured steps, the cores there are, what the monitor saw."""

    def __init__(self, outputs: RunOutputs, states: dict[str, MemberState], plan: Plan, hardware: Hardware,
                 costs: dict, dataset: Dataset, probed: bool):
        self.outputs, self.states, self.plan, self.hardware = outputs, states, plan, hardware
        self.costs, self.dataset = costs, dataset
        self.probed = probed  # the hardware is this machine's, sampled at the start (not a profile): sample again
        self.budget: Budget = outputs.budget
        self.scheduler: Scheduler | None = None
        self.monitor: Monitor | None = None
        self.timed: set[str] = set()  # members whose first real step has been held against the plan
        self.checked: set[str] = set()  # GPU units checked from the monitor's samples before their first epoch
        self.last_epoch: dict[str, float] = {}  # unit -> when its latest epoch line was read
        self.epochs = EpochReader()
        self.reprobed_at = -math.inf
        self.planned_lanes: dict[str, int] | None = None  # the plan's lane cores before other processes took some
        self.given_up: set[str] = set()  # members whose later folds were skipped after one trained nothing in time
        self.startup = StartupWatch(self.apply)  # folds still starting, read against their member's start-up

    # --- what running folds show ----------------------------------------------------------------------------

    def watch(self, running: list[Running]) -> None:
        """The epochs running folds finished since the last look: logged, kept, and acted on; then the cores
        sampled again now and then while other processes hold some, so the run grows back into them."""
        samples = list(self.monitor.samples) if self.monitor else []
        folds = [item for item in running if item.unit.fold != PREPARE]
        self.startup.count_starting(folds)
        for item in folds:
            self._watch_unit(item, samples)
        if self.planned_lanes is not None and self.hardware.busy_cpus and \
                time.monotonic() - self.reprobed_at > REPROBE_SECONDS:
            self.reprobe("again while cores were taken")

    def _watch_unit(self, item: Running, samples: list[dict]) -> None:
        lines = self.epochs.new_lines(Path(item.task.out_dir))
        for line in lines:
            self.on_epoch(item, line, samples)
            self.last_epoch[item.unit.name] = time.monotonic()
        member = self.states[item.unit.member.name].member
        self.startup.watch(item, member)  # while it starts, its wait is start-up, never an epoch's pace
        ready = ready_at(item)
        waited = time.monotonic() - self.last_epoch.get(item.unit.name, ready or math.inf)
        if member.name not in self.timed and get_engine(member.engine).fills_window and stalled(member, waited):
            where = stacks.take([(item.process.pid, item.log)], f"stalled: no epoch for {waited:.0f} s",
                                STALL_STACKS_SECONDS, resume=False)[item.process.pid]
            log.warning("%s fold %d: no epoch for %.0f s where one was planned to take %.2g s; it was in %s "
                        "(stacks in %s)", member.name, item.unit.fold, waited, member.step_seconds,
                        "; ".join(where[:3]), item.log)
            self.retime(member, waited)
        if not lines and item.unit.on_gpu and item.unit.name not in self.checked and \
                time.monotonic() - item.started > FIRST_CHECK_SECONDS:
            self.checked.add(item.unit.name)  # no epoch yet: the monitor's samples alone
            self._check(item, None, samples)

    def on_epoch(self, item: Running, line: dict, samples: list[dict]) -> None:
        start = item.started - self.budget.started
        line = {**line, "gpu_util": utilisation(samples, item.task.gpu, start, self.budget.elapsed())}
        log.info(describe(item.unit.member.name, item.unit.fold, line, self.outputs.spec.metric))
        report = self.outputs.report
        self.outputs.update(epochs=(*report.epochs, {"member": item.unit.member.name, "fold": item.unit.fold, **line}))
        member = self.states[item.unit.member.name].member
        if line["epoch"] == TIMED_EPOCH and member.name not in self.timed:
            self.retime(member, line["epoch_seconds"])
        self._check(item, line, samples)

    def on_fold(self, state: MemberState, result: FoldResult) -> None:
        """A member's fold ended: its first one times a member whose folds do not fill their window, and settings
        it learnt (a batch that fits) go to the member's later folds."""
        if result.usable and state.member.name not in self.timed and \
                not get_engine(state.member.engine).fills_window:
            self.retime(state.member, result.epoch_seconds)  # a first fold: its rounds or its fit, timed
        if result.changes:
            member = state.member.model_copy(update=dict(
                settings=state.member.settings.model_copy(update=result.changes)))
            self.apply(Change(member, f"{member.name}: fold {result.fold} changed {result.changes} "
                                      f"({result.message.split('; ')[-1]})"))
        if result.out_of_time and not state.folds_done and get_engine(state.member.engine).fills_window and \
                state.member.name not in self.given_up:
            self.give_up(state.member, result)

    def give_up(self, member: Member, result: FoldResult) -> None:
        """A fold that stretches to its share of the window trained nothing in it: the member's later folds get
        no more time, so they are skipped and their cores go to the members queued behind it (on one core a CNN's
        three doomed folds had held the core until the window closed, a cheap member waiting behind them)."""
        why = f"its fold {result.fold} trained nothing in {result.wall_seconds:.0f} s ({result.message}); later " \
              "folds would get no more time"
        self.given_up.add(member.name)
        self.scheduler.drop(member.name, why)
        self.outputs.action(f"{member.name}: {why}: its folds not started are skipped")

    def _check(self, item: Running, line: dict | None, samples: list[dict]) -> None:
        """The monitor rules, on a fold that runs with its member's current settings (one already changed waits
        for the folds that start with the change)."""
        member = self.states[item.unit.member.name].member
        if item.task.member != member or not item.unit.on_gpu:
            return
        since = [s for s in samples if s["t"] >= item.started - self.budget.started]
        rows = int(len(self.dataset.y) * (member.folds - 1) / member.folds)
        change = combine(member, monitor_rules(member, line, since, item.task.gpu or 0, self.scheduler.free_cores(),
                                               get_engine(member.engine).useful_batch(rows)))
        if change:
            self.apply(change)

    # --- changes to the plan --------------------------------------------------------------------------------

    def apply(self, change: Change) -> None:
        """A member's units not yet started take its new version; the action is logged with its evidence."""
        self.states[change.member.name].member = change.member
        later = self.scheduler.revise(change.member.name, change.member) if self.scheduler else 0
        self.outputs.action(f"{change.action} ({later} later unit(s))")

    def retime(self, member: Member, step_seconds: float) -> None:
        """The first epoch after warm-up (or first fold) against the plan: close to it nothing changes; within the
        tolerance later folds expect what was measured; beyond it the member's engine plans a planned member
        again for the window left (an extra or re-planned member's later folds only expect what was measured)."""
        self.timed.add(member.name)
        if not needs_replan(member, step_seconds):
            if not close_enough(member, step_seconds):
                self._expect(member, step_seconds)
            return
        if 0 < member.step_seconds < step_seconds and self.probed and \
                time.monotonic() - self.reprobed_at > REPROBE_SECONDS:
            self.reprobe()
        again = None
        state = self.states[member.name]
        if not (state.extra or state.replanned):  # an extra keeps the settings its search chose
            context = replan_context(self.outputs.spec, self.hardware, self.plan, member,
                                     self.budget.training_left(), data_shape(self.dataset),
                                     self.costs.get(member.engine), pretrained_models())
            again = get_engine(member.engine).replan(context, member, step_seconds)
        if again is None:  # an extra or re-planned member, or nothing of it scales with time
            self._expect(member, step_seconds)
            return
        self._adopt(member, again, step_seconds)

    def reprobe(self, when: str = "after a slow step") -> None:
        """A step far slower than planned may mean other processes took cores after the run was planned (a fold
        with more threads than free cores slows down many times over): sample again, and plan what starts next
        for the cores that are left."""
        allowed = self.hardware.cpus + self.hardware.busy_cpus
        busy = busy_elsewhere()
        self.reprobed_at = time.monotonic()
        free = max(1, allowed - busy)
        if free == self.hardware.cpus or (free > self.hardware.cpus and self.planned_lanes is None):
            return  # unchanged, or more than the run was planned for when nothing was taken from it
        self.planned_lanes = self.planned_lanes or dict(self.plan.lane_cores)
        self.hardware = dataclasses.replace(self.hardware, cpus=free, busy_cpus=allowed - free)
        lanes = {lane: min(cores, free) for lane, cores in self.planned_lanes.items()}
        self.plan = self.plan.model_copy(update=dict(cpus=free, lane_cores=lanes))
        self.scheduler.plan = self.plan
        self.outputs.action(f"{busy} of {allowed} cores now busy with other processes (sampled {when}): "
                            f"what starts next plans for {free}")

    def _expect(self, member: Member, step_seconds: float) -> None:
        """Later folds of the member expect the step that was measured, and need the longer one at least (a fold
        that cannot finish one at the measured pace is not started); its settings stay."""
        slower = max(0.0, step_seconds - member.step_seconds)
        expected = member.model_copy(update=dict(step_seconds=round(step_seconds, 6),
                                                 min_fold_seconds=round(member.min_fold_seconds + slower, 1)))
        self.states[member.name].member = expected
        self.scheduler.revise(member.name, expected)

    def _adopt(self, member: Member, again: Member, step_seconds: float) -> None:
        """A re-planned member: the same model with other time-scaled settings revises the units not yet started;
        another model (or another number of folds) replaces them, and the running folds of the old one are asked
        to stop at their next epoch, keeping what they trained."""
        engine = get_engine(member.engine)
        keep = set(engine.Settings.model_fields) - set(engine.time_scaled) - {"reasons", "seed"}
        what = f"{member.name}: a real {engine.steps[:-1]} took {step_seconds:.3g} s, {member.step_seconds:.3g} s " \
               f"planned"
        if again.folds == member.folds and again.settings.model_dump(include=keep) == \
                member.settings.model_dump(include=keep):
            if member.startup_seconds and again.startup_seconds != member.startup_seconds:
                again = with_startup(again, member.startup_seconds)  # the same model: the start-up it showed
            scaled = again.settings.model_dump(include=set(engine.time_scaled))
            revised = member.model_copy(update=dict(
                settings=member.settings.model_copy(update=scaled),
                **{k: getattr(again, k) for k in ("step_seconds", "fold_seconds", "min_fold_seconds",
                                                  "max_fold_seconds")}))
            changed = {k: getattr(revised.settings, k) for k in engine.time_scaled
                       if getattr(revised.settings, k) != getattr(member.settings, k)}
            self.apply(Change(revised, f"{what}: later folds {changed or 'unchanged'}"))
            return
        name = f"{member.engine}-{1 + sum(1 for s in self.states.values() if s.member.engine == member.engine)}"
        again = again.model_copy(update=dict(name=name, split_seed=self.plan.seed + len(self.states)))
        self.states[name] = MemberState(again, replanned=True)
        self.scheduler.drop(member.name, f"re-planned as {name}")
        self.scheduler.stop(member.name)
        self.scheduler.add(again)
        self.outputs.action(f"{what}: re-planned as {name} ({again.settings.model_dump(include=keep - {'device'})}, "
                            f"{again.folds} folds) for the {self.budget.training_left():.0f} s left; {member.name}'s "
                            "running folds stop at their next epoch")
