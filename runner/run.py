"""`runner run`: the supervisor. Baseline at t≈0, then the portfolio in slots, every finished fold re-blending the
members on their out-of-fold predictions and improving the submission.

Budget: wall clock from the start. Training stops at `cut` of the budget; each fold stops at an epoch or round
boundary before its deadline and predicts the test rows itself, so nothing heavy is left for the end. While a
member with a positive expected gain fits, training goes on until the cut; a run that stops earlier says why.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import pickle
import shutil
import time
import zipfile
from pathlib import Path

import numpy as np
from pydantic_core import to_jsonable_python

from runner import metrics, processes
from runner.atomic import replacing, write_json
from runner.bags import MemberState, extra_member, note_record, step_seconds, why_stop
from runner.baselines import make_baseline
from runner.blend import Blend, MemberPredictions, choose_blend, pool_gain
from runner.budget import Budget
from runner.control import (FIRST_CHECK_SECONDS, REPROBE_SECONDS, TIMED_EPOCH, Change, close_enough, combine,
                            monitor_rules, needs_replan, stalled)
from runner.csvfiles import SAMPLED, find_sample, read_csv_file
from runner.data import Dataset, load_dataset, nothing_to_learn, read_sample, value_columns
from runner.engines import MEASURE_CAP, get_engine
from runner.engines.vision import pretrained_models, useful_batch
from runner.errors import InputError, Interrupted, InvalidSubmissionError
from runner.folds import PREPARE, FoldResult, FoldTask, assign_folds
from runner.hardware import Hardware, busy_elsewhere, probe_hardware
from runner.monitor import Monitor
from runner.planner import applicable, data_shape, make_plan, replan_context
from runner.portfolio import Member, Plan
from runner.predict import baseline_score, member_predictions, unit_dir
from runner.report import RunReport
from runner.resume import Reused, code_fingerprint, data_fingerprint, reusable, unit_fingerprint
from runner.slots import EVERY_MEMBER_FINISHED, MIN_FOLD_SECONDS, WINDOW_CLOSED, Running, Scheduler, Unit
from runner.spec import CompetitionSpec, load_spec
from runner.submission import Predictions, build_submission, prior_predictions, publish, sample_baseline, write_atomic
from runner.untrusted import inside
from runner.watch import EpochReader, describe, utilisation

log = logging.getLogger("runner")


class Supervisor:
    """State of one run; every method moves the report forward and rewrites it."""

    def __init__(self, spec: CompetitionSpec, data_dir: Path, out_dir: Path, budget: Budget):
        self.spec, self.data_dir, self.out, self.budget = spec, Path(data_dir), Path(out_dir), budget
        self.work = Path(os.environ.get("RUNNER_WORK_DIR") or self.out) / "work"  # a container gives a tmpfs
        self.work.mkdir(parents=True, exist_ok=True)
        os.chmod(self.work, 0o700)  # the fold hand-off is read back by fold processes: nobody else's to touch
        self.submission = self.out / "submission.csv"
        found: list[str] = []
        self.sample = read_sample(spec, self.data_dir, found)
        self.columns = value_columns(spec, self.sample)
        self.report = RunReport(spec.id, "running", spec.metric, spec.lower_is_better, budget.seconds, 0.0,
                                str(self.submission), "none", spec=spec.to_json(), warnings=tuple(found))
        self.dataset: Dataset | None = None
        self.prior: Predictions | None = None
        self.plan: Plan | None = None
        self.states: dict[str, MemberState] = {}
        self.predictions: dict = {}  # member name -> MemberPredictions
        self.fold_ids: dict[tuple[int, int], np.ndarray] = {}
        self.blend: Blend | None = None
        self.results: list[FoldResult] = []
        self.scheduler: Scheduler | None = None
        self.lane_closed: dict[str, str] = {}  # lane -> why no more members were added
        self.reused: dict[str, Reused] = {}  # member -> what an earlier run in this folder finished of it
        self.hardware: Hardware | None = None
        self.costs: dict = {}  # what each engine measured, for re-planning
        self.timed: set[str] = set()  # members whose first real step has been held against the plan
        self.probed = False  # the hardware is this machine's, sampled at the start (not a profile): sample it again
        self.reprobed_at = -math.inf
        self.planned_lanes: dict[str, int] | None = None  # the plan's lane cores before other processes took some
        self.checked: set[str] = set()  # GPU units checked from the monitor's samples before their first epoch
        self.last_epoch: dict[str, float] = {}  # unit -> when its latest epoch line was read
        self.epochs = EpochReader()
        self.monitor: Monitor | None = None
        self.fingerprints = (data_fingerprint(self.data_dir, spec.to_json()), code_fingerprint())

    def update(self, **changes) -> None:
        timings = {**self.report.timings, **changes.pop("timings", {})}
        self.report = dataclasses.replace(self.report, wall_seconds=round(self.budget.elapsed(), 2),
                                          timings=timings, **changes)
        self.report.save(self.out / "report.json")

    def mark(self, event: str) -> dict:
        return {event: round(self.budget.elapsed(), 2)}

    def write_sample_baseline(self) -> None:
        try:
            publish(sample_baseline(self.sample, self.spec, self.columns), self.sample, self.spec, self.columns,
                    self.submission)
        except InvalidSubmissionError as exc:  # labels no sample gives: the class prior will be the first
            log.warning("the sample alone makes no valid submission (%s): the first is the class prior", exc)
            return
        self.update(submission_source="baseline: sample submission", timings=self.mark("baseline_written"))

    def write_rule_baseline(self) -> None:
        """The spec's own rule for a task no engine trains (runner.baselines): the submission and its baseline."""
        made = make_baseline(self.spec, self.data_dir, self.sample, self.columns, self.work)
        frame = self.sample.copy()
        frame[self.columns] = made.values[self.columns].to_numpy()
        publish(frame, self.sample, self.spec, self.columns, self.submission)
        publish(frame, self.sample, self.spec, self.columns, self.out / "baseline.csv")
        log.info("baseline: %s", made.note)
        self.update(status="baseline", error=None, submission_source=f"baseline: {made.note}", cv_score=made.cv,
                    stop_reason=f"no engine trains a {self.spec.id} ({self.spec.note or 'unsupported task'}): "
                                f"{made.note}", timings=self.mark("data_loaded"))

    def load_data(self) -> None:
        self.dataset = load_dataset(self.spec, self.data_dir, self.work, self.budget.seconds)
        self.prior = prior_predictions(self.dataset.y, self.dataset.classes, len(self.sample))
        frame = build_submission(self.sample, self.spec, self.columns, self.prior)
        publish(frame, self.sample, self.spec, self.columns, self.submission)
        publish(frame, self.sample, self.spec, self.columns, self.out / "baseline.csv")
        for warning in self.dataset.warnings:
            log.warning(warning)
        self.update(submission_source=self.prior.source, warnings=(*self.report.warnings, *self.dataset.warnings),
                    timings=self.mark("data_loaded"))

    def resume(self) -> None:
        """Take up what an earlier run in this folder finished for the same data and code: its folds count as
        done, and the blend starts from them."""
        for reused in reusable(self.out, *self.fingerprints):
            self.reused[reused.member.name] = reused
            state = MemberState(reused.member, folds_done=len(reused.results), units_ended=len(reused.results),
                                seconds=sum(r.wall_seconds for r in reused.results), status="reused")
            self.states[reused.member.name] = state
            self.results.extend(reused.results)
            self._predict(state)
        if not self.reused:
            return
        folds = sum(len(r.results) for r in self.reused.values())
        log.info("resumed: %d folds of %d members reused (%s)", folds, len(self.reused), ", ".join(self.reused))
        self.update(resumed=dict(folds_reused=folds, members={n: sorted(r.folds) for n, r in self.reused.items()}),
                    **self._publish_blend(), members=self.member_rows(), folds=self._fold_rows())

    def make_plan(self, hardware: Hardware, engines: list[str] | None = None) -> Plan:
        """The plan; members an earlier run trained keep their settings (their folds must agree), and those it
        did not finish go first."""
        self.hardware = hardware
        planned, self.costs = plan_for(self.spec, self.dataset, hardware, self.budget, self.out, engines=engines)
        unfinished = [r.member for r in self.reused.values() if len(r.folds) < r.member.folds]
        members = unfinished + [m for m in planned.members if m.name not in self.reused]
        sampled = tuple(w for w in self.dataset.warnings if SAMPLED in w)  # a large table cut to the budget
        self.plan = planned.model_copy(update=dict(members=tuple(members), reasons=sampled + planned.reasons))
        self.states.update({m.name: MemberState(m) for m in members if m.name not in self.states})
        return self.plan

    # --- units and their results ------------------------------------------------------------------------------

    def _dataset_path(self, member: Member) -> Path:
        key = get_engine(member.engine).prepare_key(member.settings)
        return self.work / (f"{key}.pkl" if key else "dataset.pkl")

    def make_task(self, unit: Unit, deadline: float, gpu: int | None, threads: int) -> FoldTask:
        out = unit_dir(self.out, unit.member.name, unit.fold)
        if unit.fold == PREPARE:
            return FoldTask(unit.member, PREPARE, str(self.work / "dataset.pkl"), str(out), deadline, threads, gpu,
                            prepared=str(self._dataset_path(unit.member)))
        self.states[unit.member.name].status = "running"  # the scheduler asks for a task as it starts the unit
        return FoldTask(unit.member, unit.fold, str(self._dataset_path(unit.member)), str(out), deadline, threads,
                        gpu, fingerprint=unit_fingerprint(unit.member, unit.fold, *self.fingerprints))

    def _ids(self, member: Member) -> np.ndarray:
        key = (member.folds, member.split_seed)
        if key not in self.fold_ids:
            self.fold_ids[key] = assign_folds(self.dataset.y, self.spec.is_classification, *key)
        return self.fold_ids[key]


    def on_result(self, result: FoldResult) -> None:
        self.results.append(result)
        state = self.states[result.member]
        state.seconds += result.wall_seconds
        if result.fold == PREPARE:
            if not result.usable:
                log.warning("%s: prepare step %s: %s", result.member, result.status, result.message)
                self.update(folds=self._fold_rows())
                return
            log.info("%s prepared in %.0f s", result.member, result.wall_seconds)
            found = [w for w in result.message.splitlines() if w and w not in self.report.warnings]
            for warning in found:  # what its folds' data lost (unreadable images), said once
                log.warning(warning)
            self.update(folds=self._fold_rows(), warnings=(*self.report.warnings, *found))
            return
        state.units_ended += 1
        state.folds_done += result.usable
        self._log(result)
        changes: dict = dict(folds=self._fold_rows())
        if result.usable:
            self._predict(state)
            if state.member.name not in self.timed and not get_engine(state.member.engine).fills_window:
                self._retime(state.member, result.epoch_seconds)  # a first fold: its rounds or its fit, timed
        if result.changes:
            self._revise(state, result)
        # planned members re-blend at every fold (early submissions use partial members); extras once they end
        if state.ended if state.extra else result.usable:
            changes.update(self._publish_blend())
        if state.ended:
            state.status = "done" if state.folds_done else "skipped"
            self._measure_gain(state)
            note_record(state, self.states, self.spec.lower_is_better)
        self.update(**changes, members=self.member_rows(), timings=self.mark(f"{result.member}_{result.fold}_done"))

    def _predict(self, state: MemberState) -> None:
        """The member's out-of-fold and test predictions from its finished folds, and its own CV."""
        predictions = member_predictions(state.member, self.results, self.out, self._ids(state.member))
        self.predictions[state.member.name] = predictions
        state.cv = round(metrics.fast_score(self.spec.metric, self.dataset.y[predictions.covered],
                                            predictions.oof[predictions.covered]), 6)

    def _revise(self, state: MemberState, result: FoldResult) -> None:
        """A fold learnt settings its member's later folds should start with (a batch that fits)."""
        member = state.member.model_copy(update=dict(settings=state.member.settings.model_copy(update=result.changes)))
        self._apply(Change(member, f"{member.name}: fold {result.fold} changed {result.changes} "
                                   f"({result.message.split('; ')[-1]})"))

    def _apply(self, change: Change) -> None:
        """A member's units not yet started take its new version; the action is logged with its evidence."""
        self.states[change.member.name].member = change.member
        later = self.scheduler.revise(change.member.name, change.member) if self.scheduler else 0
        self.on_action(f"{change.action} ({later} later unit(s))")

    # --- learning while training (runner.control) --------------------------------------------------------------

    def watch(self, running: list[Running]) -> None:
        """The epochs running folds finished since the last look: logged, kept, and acted on."""
        samples = list(self.monitor.samples) if self.monitor else []
        for item in running:
            if item.unit.fold == PREPARE:
                continue
            lines = self.epochs.new_lines(Path(item.task.out_dir))
            for line in lines:
                self._on_epoch(item, line, samples)
                self.last_epoch[item.unit.name] = time.monotonic()
            member = self.states[item.unit.member.name].member
            waited = time.monotonic() - self.last_epoch.get(item.unit.name, item.started)
            if member.name not in self.timed and get_engine(member.engine).fills_window and stalled(member, waited):
                log.warning("%s fold %d: no epoch for %.0f s where one was planned to take %.2g s", member.name,
                            item.unit.fold, waited, member.step_seconds)
                self._retime(member, waited)
            if not lines and item.unit.on_gpu and item.unit.name not in self.checked and \
                    time.monotonic() - item.started > FIRST_CHECK_SECONDS:
                self.checked.add(item.unit.name)  # no epoch yet: the monitor's samples alone
                self._check(item, None, samples)

    def _on_epoch(self, item: Running, line: dict, samples: list[dict]) -> None:
        start = item.started - self.budget.started
        line = {**line, "gpu_util": utilisation(samples, item.task.gpu, start, self.budget.elapsed())}
        log.info(describe(item.unit.member.name, item.unit.fold, line, self.spec.metric))
        self.update(epochs=(*self.report.epochs, {"member": item.unit.member.name, "fold": item.unit.fold, **line}))
        member = self.states[item.unit.member.name].member
        if line["epoch"] == TIMED_EPOCH and member.name not in self.timed:
            self._retime(member, line["epoch_seconds"])
        self._check(item, line, samples)

    def _check(self, item: Running, line: dict | None, samples: list[dict]) -> None:
        """The monitor rules, on a fold that runs with its member's current settings (one already changed waits
        for the folds that start with the change)."""
        member = self.states[item.unit.member.name].member
        if item.task.member != member or not item.unit.on_gpu:
            return
        since = [s for s in samples if s["t"] >= item.started - self.budget.started]
        rows = int(len(self.dataset.y) * (member.folds - 1) / member.folds)
        change = combine(member, monitor_rules(member, line, since, item.task.gpu or 0,
                                               self.scheduler.free_cores(), useful_batch(rows)))
        if change:
            self._apply(change)

    def _retime(self, member: Member, step_seconds: float) -> None:
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
            self._reprobe()
        again = None
        state = self.states[member.name]
        if not (state.extra or state.replanned):  # an extra keeps the settings its search chose
            context = replan_context(self.spec, self.hardware, self.plan, member, self.budget.training_left(),
                                     data_shape(self.dataset), self.costs.get(member.engine), pretrained_models())
            again = get_engine(member.engine).replan(context, member, step_seconds)
        if again is None:  # an extra or re-planned member, or nothing of it scales with time
            self._expect(member, step_seconds)
            return
        self._adopt(member, again, step_seconds)

    def _reprobe(self, when: str = "after a slow step") -> None:
        """A step far slower than planned may mean other processes took cores after the run was planned (a fold
        with more threads than free cores slows down many times over): sample again, and plan what starts next
        for the cores that are left. While some are taken this runs again now and then (`_status`), so the run
        grows back into cores the other processes gave back."""
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
        self.on_action(f"{busy} of {allowed} cores now busy with other processes (sampled {when}): "
                       f"what starts next plans for {free}")

    def _expect(self, member: Member, step_seconds: float) -> None:
        """Later folds of the member expect the step that was measured; its settings stay."""
        expected = member.model_copy(update=dict(step_seconds=round(step_seconds, 6)))
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
            revised = member.model_copy(update=dict(
                settings=member.settings.model_copy(update=again.settings.model_dump(include=set(engine.time_scaled))),
                **{k: getattr(again, k) for k in ("step_seconds", "fold_seconds", "min_fold_seconds",
                                                  "max_fold_seconds")}))
            changed = {k: getattr(revised.settings, k) for k in engine.time_scaled
                       if getattr(revised.settings, k) != getattr(member.settings, k)}
            self._apply(Change(revised, f"{what}: later folds {changed or 'unchanged'}"))
            return
        name = f"{member.engine}-{1 + sum(1 for s in self.states.values() if s.member.engine == member.engine)}"
        again = again.model_copy(update=dict(name=name, split_seed=self.plan.seed + len(self.states)))
        self.states[name] = MemberState(again, replanned=True)
        self.scheduler.drop(member.name, f"re-planned as {name}")
        self.scheduler.stop(member.name)
        self.scheduler.add(again)
        self.on_action(f"{what}: re-planned as {name} ({again.settings.model_dump(include=keep - {'device'})}, "
                       f"{again.folds} folds) for the {self.budget.training_left():.0f} s left; {member.name}'s "
                       "running folds stop at their next epoch")

    def _log(self, result: FoldResult) -> None:
        unit = get_engine(self.states[result.member].member.engine).steps
        if result.usable:
            log.info("%s fold %d %s: %s %.5f after %d %s in %.1f s %s", result.member, result.fold, result.status,
                     self.spec.metric, result.score, result.epochs, unit, result.wall_seconds, result.message)
        elif result.status == "skipped":  # one line for all of a member's folds that did not start
            if not any(r.member == result.member and r.status == "skipped" for r in self.results[:-1]):
                log.info("%s: folds from %d on not started: %s", result.member, result.fold, result.message)
        else:
            log.warning("%s fold %d %s: %s", result.member, result.fold, result.status, result.message)

    def _publish_blend(self) -> dict:
        blend = choose_blend(self.spec.metric, self.dataset.y, list(self.predictions.values()))
        if blend is None:
            return {}
        classes = tuple(self.dataset.classes) if self.dataset.classes is not None else None
        weights = ", ".join(f"{name} {w:.2f}" for name, w in sorted(blend.weights.items(), key=lambda i: -i[1]))
        cuts = self._grade_thresholds(blend)
        base = baseline_score(self.spec.metric, self.dataset.y, self.prior.values[0], blend.covered)
        chosen = Predictions(blend.test, classes, f"blend: {weights}", cuts)
        if metrics.better(self.spec.metric, base, blend.cv):  # models that do not beat the prior are not submitted
            chosen = dataclasses.replace(self.prior, source=f"{self.prior.source}: the blend's CV {blend.cv:.5f} is "
                                                            f"worse than the prior's {base:.5f}")
            log.warning(chosen.source)
        try:
            frame = build_submission(self.sample, self.spec, self.columns, chosen)
            publish(frame, self.sample, self.spec, self.columns, self.submission)
        except InvalidSubmissionError as exc:  # keep the last valid submission
            log.error("blend rejected, previous submission kept: %s", exc)
            return {}
        self.blend = blend
        return dict(submission_source=chosen.source, cv_score=blend.cv, baseline_cv_score=round(base, 6),
                    blend={**blend.to_json(), **({"grade_thresholds": cuts} if cuts else {})})

    def _grade_thresholds(self, blend) -> tuple[float, ...] | None:
        """For kappa: cuts of the expected grade tuned on the blend's out-of-fold predictions (their kappa there
        is logged; the CV reported stays the untuned one, which those rows did not choose)."""
        if self.spec.metric != "qwk":
            return None
        oof, rows = blend.oof, blend.covered
        cuts = metrics.fit_grade_thresholds(self.dataset.y[rows], oof[rows])
        tuned = metrics.qwk(self.dataset.y[rows], metrics.grades(oof[rows], cuts))
        log.info("grade cuts %s: kappa %.4f on the out-of-fold rows (%.4f halfway between grades)",
                 ", ".join(f"{c:.2f}" for c in cuts), tuned, blend.cv)
        return cuts

    def _measure_gain(self, state: MemberState) -> None:
        """What this member added to the pool, now that it has ended: the relative fall of the best convex blend's
        loss with it against without it (runner.blend.pool_gain), the baseline prediction always in the pool."""
        if state.member.name not in self.predictions:
            state.gain = 0.0
            return
        n = len(self.dataset.y)  # the class prior / mean is in every pool: a first member's gain is over it
        baseline = MemberPredictions("baseline", np.tile(self.prior.values[0], (n, 1)), np.ones(n, bool),
                                     self.prior.values)
        pool = [baseline, *self.predictions.values()]
        state.gain = round(pool_gain(self.spec.metric, self.dataset.y, pool, state.member.name), 6)

    def _fold_rows(self) -> tuple[dict, ...]:
        return tuple(r.to_json() for r in sorted(self.results, key=lambda r: (r.member, r.fold)))

    def member_rows(self) -> tuple[dict, ...]:
        """One row per member: its own CV (on the rows its finished folds cover) and its blend weight."""
        weights = self.blend.weights if self.blend else {}
        return tuple(dict(name=name, engine=s.member.engine, slot=s.member.slot, folds=s.member.folds,
                          folds_done=s.folds_done, cv=s.cv, weight=weights.get(name, 0.0),
                          seconds=round(s.seconds, 1), gain=s.gain, status=s.status, bag_of=s.member.bag_of,
                          repeat_of=s.member.repeat_of, planned_step_seconds=s.member.step_seconds,
                          step_seconds=round(step_seconds(s, self.results), 6) if s.folds_done else None)
                     for name, s in self.states.items())

    # --- more members while they pay (runner.bags) -------------------------------------------------------------

    def more(self, lane: str) -> Member | None:
        """An extra member for this lane, or None (the reason kept for the report)."""
        weights = self.blend.weights if self.blend else {}
        why = why_stop(lane, self.states, weights, self.results, self.budget.training_left(), MIN_FOLD_SECONDS,
                       self.scheduler.capacity_of(lane))
        if why:
            self.lane_closed[lane] = why
            log.info("no more %s members: %s", lane, why)
            return None
        member = extra_member(lane, self.states, weights, self.results, self.plan.seed + len(self.states),
                              self.spec.lower_is_better)
        self.states[member.name] = MemberState(member)
        log.info("adding %s: %s", member.name, member.reasons[0])
        self.update(members=self.member_rows())
        return member

    # --- the training -----------------------------------------------------------------------------------------

    def write_dataset(self) -> None:
        """The hand-off the fold processes read: in the run's private work folder, written by a rename."""
        with replacing(self.work / "dataset.pkl") as tmp:
            tmp.write_bytes(pickle.dumps(self.dataset, protocol=pickle.HIGHEST_PROTOCOL))

    def train(self, on_status=lambda report, running: None) -> None:
        # the fork server imports the plan's libraries while the dataset is written (not while costs are timed:
        # a busy core would make every candidate look slower than it is)
        processes.warm_up(tuple(m for member in self.plan.members for m in get_engine(member.engine).preload))
        self.write_dataset()
        self.scheduler = Scheduler(self.plan, self.budget, self.make_task, self.on_result,
                                   on_status=lambda running: self._status(on_status, running), more=self.more,
                                   on_action=self.on_action, reused={n: r.folds for n, r in self.reused.items()})
        self.scheduler.results.extend(r for reused in self.reused.values() for r in reused.results)
        ended = self.scheduler.run()
        reason = self.stop_reason(ended)
        trained = any(r.usable for r in self.results if r.fold != PREPARE)
        elapsed = round(self.budget.elapsed(), 2)
        log.info("training ended at %.0f s of %.0f s (%.0f%%): %s", elapsed, self.budget.seconds,
                 100 * elapsed / self.budget.seconds, reason)
        self.update(status="trained" if trained else "baseline", stop_reason=reason, members=self.member_rows(),
                    units=tuple(r.to_json() for r in self.scheduler.records), timings=self.mark("training_done"))

    def _status(self, on_status, running: list[Running]) -> None:
        self.watch(running)
        if self.planned_lanes is not None and self.hardware.busy_cpus and \
                time.monotonic() - self.reprobed_at > REPROBE_SECONDS:
            self._reprobe("again while cores were taken")
        on_status(self.report, running)

    def on_action(self, text: str) -> None:
        log.info("action: %s", text)
        self.update(actions=(*self.report.actions, dict(t=round(self.budget.elapsed(), 2), action=text)))

    def stop_reason(self, ended: str) -> str:
        """The window closed, or why the lanes took no more members (and what was skipped)."""
        if ended == WINDOW_CLOSED:
            return f"the training window closed ({self.budget.cut:.0%} of the budget)"
        parts = [f"{lane} lane: {why}" for lane, why in self.lane_closed.items()]
        return "; ".join(parts + ([ended] if ended != EVERY_MEMBER_FINISHED else [])) or EVERY_MEMBER_FINISHED


def measure_costs(spec: CompetitionSpec, dataset: Dataset, hardware: Hardware, budget_seconds: float, work: Path,
                  here: bool = True, engines: list[str] | None = None) -> dict:
    """Each applicable engine's measurements, within its share of the budget (a failed one plans without)."""
    costs = {}
    for name in applicable(spec, data_shape(dataset), engines):
        engine = get_engine(name)
        seconds = min(MEASURE_CAP, engine.measure_share * budget_seconds)
        if seconds <= 0:
            continue
        try:
            cost = engine.measure(dataset, hardware, seconds, work, here)
        except Exception as exc:  # planning goes on with the engine's unmeasured rule
            log.warning("measuring %s failed, planning without: %s: %s", name, type(exc).__name__, exc)
            continue
        if cost is not None:
            costs[name] = cost
    return costs


def plan_for(spec: CompetitionSpec, dataset: Dataset, hardware: Hardware, budget: Budget, out: Path,
             here: bool = True, engines: list[str] | None = None) -> tuple[Plan, dict]:
    """Measure what needs measuring, then plan the training window that is left (with `engines` only, if given);
    the plan and the costs it was made from."""
    costs = measure_costs(spec, dataset, hardware, budget.seconds, Path(out), here, engines)
    write_json(Path(out) / "costs.json", {n: to_jsonable_python(c, fallback=lambda o: o.to_json())
                                         for n, c in costs.items()})
    return make_plan(spec, hardware, budget.training_left(), data_shape(dataset), costs, pretrained_models(),
                     engines=engines), costs


def write_given_sample(data_dir: Path, out_dir: Path) -> None:
    """The sample submission as the competition gives it becomes the first submission, before any other file is
    read, so neither inferring the competition nor its train file can leave the run without one; the checked
    baseline replaces it a moment later. A sample that cannot be read is left to the checks that name it."""
    path = find_sample(data_dir)
    if (out_dir / "submission.csv").exists():  # an earlier run's: this run's checked baseline replaces it
        return
    try:
        sample = read_csv_file(inside(data_dir, path)) if path else None
    except (InputError, OSError, ValueError, zipfile.BadZipFile):
        return
    if sample is not None and len(sample) and sample.shape[1] > 1:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(sample, out_dir / "submission.csv")


def run_competition(name: str, data_dir: Path, budget: Budget, out_dir: Path, hardware: Hardware | None = None,
                    on_plan=lambda plan: None, on_status=lambda report, running: None,
                    engines: list[str] | None = None) -> RunReport:
    """The whole run. Raises RunnerError only when not even the sample submission can be read; otherwise returns
    a report whose `error` explains what stopped training (a valid submission exists either way)."""
    write_given_sample(Path(data_dir), Path(out_dir))
    spec = load_spec(name, Path(data_dir))
    for line in spec.evidence:  # an inferred spec: one line per choice and what led to it
        log.info("inferred %s", line)
    supervisor = Supervisor(spec, data_dir, out_dir, budget)
    try:
        supervisor.write_sample_baseline()
        if spec.task == "unsupported" and spec.baseline:
            supervisor.write_rule_baseline()
            return supervisor.report
        supervisor.probed = hardware is None
        hardware = hardware or probe_hardware(Path(out_dir))
        supervisor.update(hardware=hardware.to_json())
        supervisor.load_data()
        if why := nothing_to_learn(supervisor.dataset):
            log.warning(why)
            supervisor.update(status="baseline", error=None, stop_reason=why)
            return supervisor.report
        supervisor.resume()
        plan = supervisor.make_plan(hardware, engines)
        plan.save(Path(out_dir) / "plan.json")
        supervisor.update(plan=plan.to_json(), members=supervisor.member_rows(), timings=supervisor.mark("planned"))
        on_plan(plan)
        if not plan.members and not supervisor.reused:  # a resumed run goes on with extras from what it reused
            supervisor.update(status="baseline", error=None, stop_reason=plan.reasons[-1])
            return supervisor.report
        with Monitor(Path(out_dir) / "monitor.jsonl", budget.started) as supervisor.monitor:
            supervisor.train(on_status)
    except InputError as exc:  # the baseline already written stays the submission
        supervisor.update(status="error", error=str(exc))
    except Interrupted as exc:  # the units are stopped already (the scheduler's finally): say so, then go
        supervisor.update(status="interrupted", stop_reason=f"{exc} at {budget.elapsed():.0f} s",
                          members=supervisor.member_rows())
        raise
    finally:
        shutil.rmtree(supervisor.work, ignore_errors=True)  # image cache, extracted zips: checkpoints stay
    return supervisor.report

