"""`runner run`: the supervisor. Baseline at t≈0, then the portfolio in slots, every finished fold re-blending the
members on their out-of-fold predictions and improving the submission.

Budget: wall clock from the start. Training stops at `cut` of the budget; each fold stops at an epoch or round
boundary before its deadline and predicts the test rows itself, so nothing heavy is left for the end. While a
member with a positive expected gain fits, training goes on until the cut; a run that stops earlier says why.

The supervisor keeps the members' ledger and hands the rest to its parts: `RunOutputs` (the report and the
submission files), `Ensemble` (predictions, the blend, the submission it gives), `Controller` (acting on what
running folds show) and `ExtraMembers` (more members while they pay).
"""
from __future__ import annotations

import importlib
import logging
import os
import pickle
import shutil
import threading
import traceback
from pathlib import Path

from runner.units import processes
from runner.common.atomic import replacing
from runner.results.member_state import MemberState
from runner.control.extra_members import member_rows, note_record
from runner.common.budget import Budget
from runner.control.controller import Controller
from runner.data.dataset import Dataset
from runner.data.loading import load_dataset
from runner.data.targets import nothing_to_learn
from runner.planning.registry import get_engine
from runner.results.ensemble import Ensemble
from runner.common.errors import InputError, Interrupted
from runner.control.extra_members import ExtraMembers
from runner.units.tasks import PREPARE, FoldResult, FoldTask
from runner.machine.devices import DeviceError
from runner.machine.hardware import Hardware, probe_hardware
from runner.machine.monitor import Monitor, read_samples
from runner.results.run_folder import RunOutputs
from runner.planning.planner import early_preload, plan_for, prestart_measuring
from runner.planning.portfolio import MAX_MEMBERS, Member, Plan
from runner.results.oof import unit_dir
from runner.results.card_usage import CardUsage, card_usage
from runner.results.report import RunReport
from runner.results.resume import (Reused, code_fingerprint, data_fingerprint, resumed_members, reusable,
                                   unit_fingerprint)
from runner.units.running import Running
from runner.units.scheduler import RUNNING, Scheduler, unit_rows
from runner.competition.spec import CompetitionSpec
from runner.competition.catalog import load_spec
from runner.results.submission import write_given_sample
from runner.units.unit_queue import Unit

log = logging.getLogger("runner")
# scikit-learn's splitter and metrics, which the supervisor needs at its first result (runner.units.tasks,
# runner.common.metrics): a second of imports on a quiet core, several on a busy one
SCORING_MODULES = ("sklearn.model_selection", "sklearn.metrics")


class Supervisor:
    """One run's ledger of members and fold results; its parts do the rest."""

    def __init__(self, spec: CompetitionSpec, data_dir: Path, out_dir: Path, budget: Budget):
        self.spec, self.data_dir, self.out, self.budget = spec, Path(data_dir), Path(out_dir), budget
        self.work = Path(os.environ.get("RUNNER_WORK_DIR") or self.out) / "work"  # a container gives a tmpfs
        self.work.mkdir(parents=True, exist_ok=True)
        os.chmod(self.work, 0o700)  # the fold hand-off is read back by fold processes: nobody else's to touch
        self.outputs = RunOutputs(spec, self.data_dir, self.out, budget)
        self.dataset: Dataset | None = None
        self.ensemble: Ensemble | None = None
        self.plan: Plan | None = None
        self.states: dict[str, MemberState] = {}
        self.results: list[FoldResult] = []
        self.reused: dict[str, Reused] = {}  # member -> what an earlier run in this folder finished of it
        self.controller: Controller | None = None
        self.extras: ExtraMembers | None = None
        self.scheduler: Scheduler | None = None
        self.server_early = False  # the fork server was started before the data was read (_server_early)
        self.on_status = lambda report, running: None  # the caller's view of the run while it trains
        self.fingerprints = (data_fingerprint(self.data_dir, spec.to_json()), code_fingerprint())

    @property
    def report(self) -> RunReport:
        return self.outputs.report

    def update(self, **changes) -> None:
        self.outputs.update(**changes)

    def load_data(self, hardware: Hardware | None = None) -> None:
        """The dataset, read within the run's memory and drawn to what its budget affords on its cores."""
        memory, cores = (hardware.ram_bytes, hardware.cpus) if hardware else (None, 1)
        self.dataset = load_dataset(self.spec, self.data_dir, self.work, self.budget.seconds, memory, cores,
                                    accelerated=bool(hardware and hardware.gpus))
        # the spec as the data was read: masks' sizes measured on them (a re-plan learns at the targets' size)
        self.spec = self.outputs.spec = self.dataset.spec
        self.ensemble = Ensemble(self.outputs, self.dataset, self.outputs.write_prior(self.dataset))
        if self.dataset.sampled:
            self.update(sampled=self.dataset.sampled)

    def resume(self) -> None:
        """Take up what an earlier run in this folder finished for the same data and code: its folds count as
        done, and the blend starts from them."""
        for reused in reusable(self.out, *self.fingerprints):
            self.reused[reused.member.name] = reused
            state = MemberState(reused.member, folds_done=len(reused.results), units_ended=len(reused.results),
                                seconds=sum(r.wall_seconds for r in reused.results), status="reused")
            self.states[reused.member.name] = state
            self.results.extend(reused.results)
            self.ensemble.add(state, self.results)
        if not self.reused:
            return
        folds = sum(len(r.results) for r in self.reused.values())
        log.info("resumed: %d folds of %d members reused (%s)", folds, len(self.reused), ", ".join(self.reused))
        self.update(resumed=dict(folds_reused=folds, members={n: sorted(r.folds) for n, r in self.reused.items()}),
                    **self.ensemble.publish(), members=self.member_rows(), folds=self.fold_rows())

    def make_plan(self, hardware: Hardware, engines: list[str] | None = None, probed: bool = False,
                  max_members: int = MAX_MEMBERS) -> Plan:
        """The plan; members an earlier run trained keep their settings (their folds must agree), and those it
        did not finish go first."""
        planned, costs = plan_for(self.spec, self.dataset, hardware, self.budget, self.out, engines=engines,
                                  max_members=max_members)
        members, cut = resumed_members(list(planned.members), self.reused, max_members)
        sampled = self.dataset.sampled  # data cut to the budget or memory: said first
        reasons = tuple(s.say() for s in sampled) + ((cut,) if cut else ()) + planned.reasons
        self.plan = planned.model_copy(update=dict(members=tuple(members), sampled=sampled, reasons=reasons))
        self.states.update({m.name: MemberState(m) for m in members if m.name not in self.states})
        self.controller = Controller(self.outputs, self.states, self.plan, hardware, costs, self.dataset, probed)
        self.extras = ExtraMembers(self.states, self.results, self.ensemble, self.plan.seed)
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

    def on_result(self, result: FoldResult) -> None:
        self.results.append(result)
        state = self.states[result.member]
        state.seconds += result.wall_seconds
        if result.fold == PREPARE:
            self._on_prepared(result)
            return
        state.units_ended += 1
        state.folds_done += result.usable
        self._log(result)
        changes: dict = dict(folds=self.fold_rows())
        if result.usable:
            self.ensemble.add(state, self.results)
        self.controller.on_fold(state, result)
        # planned members re-blend at every fold (early submissions use partial members); extras once they end
        if state.ended if state.extra else result.usable:
            changes.update(self.ensemble.publish())
        if state.ended:
            state.status = "done" if state.folds_done else "skipped"
            self.ensemble.measure_gain(state)
            note_record(state, self.states, self.spec.lower_is_better)
        # the units that ended so far too: a run its watchdog stops says from them how it used its cards
        self.update(**changes, members=self.member_rows(), **unit_rows(self.scheduler),
                    timings=self.outputs.mark(f"{result.member}_{result.fold}_done"))

    def _on_prepared(self, result: FoldResult) -> None:
        if not result.usable:
            log.warning("%s: prepare step %s: %s", result.member, result.status, result.message)
        else:  # what its folds' data lost (unreadable images), said once
            log.info("%s prepared in %.0f s", result.member, result.wall_seconds)
            self.outputs.warn(result.message.splitlines())
        self.update(folds=self.fold_rows())

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

    def fold_rows(self) -> tuple[dict, ...]:
        return tuple(r.to_json() for r in sorted(self.results, key=lambda r: (r.member, r.fold)))

    def member_rows(self) -> tuple[dict, ...]:
        return member_rows(self.states, self.results, self.ensemble.weights if self.ensemble else {})

    def more(self, lane: str) -> Member | None:
        """An extra member for this lane, or None (runner.control.extra_members)."""
        member = self.extras.more(lane)
        if member:
            self.update(members=self.member_rows())
        return member

    # --- the training -----------------------------------------------------------------------------------------

    def write_dataset(self) -> None:
        """The hand-off the fold processes read: in the run's private work folder, written by a rename."""
        with replacing(self.work / "dataset.pkl") as tmp:
            tmp.write_bytes(pickle.dumps(self.dataset, protocol=pickle.HIGHEST_PROTOCOL))

    def _slots(self) -> Scheduler:
        """The slots for the plan, wired to this run: tasks from here, results back, the controller watching."""
        return Scheduler(self.plan, self.budget, self.make_task, self.on_result, on_status=self._status,
                         more=self.more, on_action=self.outputs.action,
                         reused={n: r.folds for n, r in self.reused.items()})

    def train(self, on_status=lambda report, running: None) -> None:
        # the fork server imports the plan's libraries while the dataset is written, where it was not started
        # before the data was read (not while costs are timed: on few cores a busy one would make every candidate
        # look slower than it is); one started then without some of them is replaced
        preload = tuple(m for member in self.plan.members for m in get_engine(member.engine).preload)
        if lacked := processes.warm_up(preload, self.out / "fork_server.log", replace_lacking=self.server_early):
            log.info("the fork server started before the data was read lacked %s: replaced", ", ".join(lacked))
        scoring = _import_behind(SCORING_MODULES)
        self.write_dataset()
        if why := _not_imported(scoring, self.budget):  # a run whose import outlasts its window keeps its baseline
            log.warning(why)
            self.update(status="baseline", stop_reason=why, timings=self.outputs.mark("training_done"))
            return
        self.on_status = on_status
        scheduler = self.scheduler = self.controller.scheduler = self.extras.scheduler = self._slots()
        scheduler.results.extend(r for reused in self.reused.values() for r in reused.results)
        ended = scheduler.run()
        reason = self.extras.stop_reason(ended, self.budget.cut)
        trained = any(r.usable for r in self.results if r.fold != PREPARE)
        elapsed = round(self.budget.elapsed(), 2)
        log.info("training ended at %.0f s of %.0f s (%.0f%%): %s", elapsed, self.budget.seconds,
                 100 * elapsed / self.budget.seconds, reason)
        self.update(status="trained" if trained else "baseline", stop_reason=reason, members=self.member_rows(),
                    timings=self.outputs.mark("training_done"), **unit_rows(self.scheduler))
        self.update(card_usage=self.card_usage())

    def card_usage(self) -> CardUsage | None:
        """How the run used its cards over its training window: from its start to its cut, or to when training
        ended where folds ran past the cut (runner.results.card_usage); None without a card."""
        if self.plan is None:
            return None
        report = self.report
        window = (0.0, max(self.budget.seconds * self.budget.cut, report.timings.get("training_done", 0.0)))
        return card_usage(self.plan.gpus, window, report.units, report.folds, report.epochs, report.members,
                          read_samples(self.out / "monitor.jsonl"))

    def _status(self, running: list[Running]) -> None:
        # the report names the units running whenever they change: a run its watchdog stops counts the card's
        # time from these (runner.watchdog), and folds running past the cut are what holds a card then
        said = {(u["member"], u["fold"]) for u in self.report.units if u["status"] == RUNNING}
        if {(r.unit.member.name, r.unit.fold) for r in running} != said:
            self.update(**unit_rows(self.scheduler))
        self.controller.watch(running)
        self.on_status(self.report, running)


def _import_behind(modules: tuple[str, ...]) -> threading.Thread:
    """`modules` imported in a thread, so that the run can wait for them with a deadline (a run that ends first
    leaves the thread behind: a daemon); the thread is named for them."""
    thread = threading.Thread(target=lambda: [importlib.import_module(m) for m in modules], daemon=True,
                              name=", ".join(modules))
    thread.start()
    return thread


def _not_imported(thread: threading.Thread, budget: Budget) -> str | None:
    """None once `thread` (`_import_behind`) is done, waited for until the training window closes and no longer;
    else why training ends there. Units start only once it is done: a unit started meanwhile shares a busy core
    with the import, and its deadline pays for it."""
    thread.join(max(0.0, budget.training_left()))
    return f"the training window closed while the supervisor was still importing {thread.name}" \
        if thread.is_alive() else None


def _server_early(spec: CompetitionSpec, hardware: Hardware, engines: list[str] | None, outputs: RunOutputs) -> bool:
    """On a machine with cores to spare, the fork server started before the data is read, importing what the
    task's engines train with (on a card torch and timm took 9 s after the plan, the card idle meanwhile); its
    stderr, and a unit's until the unit has its own log, in the run's folder. Whether it was."""
    if not (preload := early_preload(spec, hardware, engines)):
        return False
    processes.warm_up(preload, outputs.out / "fork_server.log")
    outputs.update(timings=outputs.mark("fork_server_started"))
    log.info("fork server started before the data is read, importing %s", ", ".join(preload))
    return True


def _end(prestarted: list) -> None:
    """Each process an engine started before the data was read (`prestart_measuring`), ended where still there."""
    for end in prestarted:
        end()


def run_competition(name: str, data_dir: Path, budget: Budget, out_dir: Path, hardware: Hardware | None = None,
                    on_plan=lambda plan: None, on_status=lambda report, running: None,
                    engines: list[str] | None = None, gpus: str | None = None, memory: int | None = None,
                    max_members: int | None = None) -> RunReport:
    """The whole run. Raises RunnerError only when not even the sample submission can be read; otherwise returns
    a report whose `error` explains what stopped training (a valid submission exists either way). `gpus` limits
    the run to those cards (`runner run --gpus`; else CUDA_VISIBLE_DEVICES; else every card), `memory` to those
    bytes (`runner run --memory`; else the machine's within its cgroup's limit), `max_members` to that many
    members, planned and extra (`runner run --max-members`; else MAX_MEMBERS)."""
    write_given_sample(Path(data_dir), Path(out_dir))
    adopting = (why := processes.adopt_orphans()) is None  # units whose fork server dies stay in this tree
    if not adopting:
        log.info("a unit whose fork server dies leaves the run's process tree (it is still killed by its pid at "
                 "its deadline): %s", why)
    spec = load_spec(name, Path(data_dir))
    for line in spec.evidence:  # an inferred spec: one line per choice and what led to it
        log.info("inferred %s", line)
    supervisor = Supervisor(spec, data_dir, out_dir, budget)
    outputs = supervisor.outputs
    monitor, prestarted = None, []
    try:
        outputs.write_sample_baseline()
        rules_only = spec.task == "unsupported" and bool(spec.baseline)
        if rules_only:
            outputs.write_rule_baseline(Path(data_dir), supervisor.work)
        probed = hardware is None
        hardware = hardware or probe_hardware(Path(out_dir), gpus=gpus, memory=memory)  # --gpus checked
        outputs.update(hardware=hardware.to_json())
        if rules_only:
            return outputs.report
        # sampled from here on, each GPU slot's card as the plan numbers them: the card's use is measured over the
        # whole training window, the data read and the costs measured included (runner.results.card_usage)
        monitor = Monitor(Path(out_dir) / "monitor.jsonl", budget.started,
                          devices=tuple(g.device or str(i) for i, g in enumerate(hardware.gpus))).start()
        # a measuring process imports its libraries while the data is read, instead of inside its window
        prestarted = prestart_measuring(spec, hardware, budget.seconds, Path(out_dir), budget.deadline, engines)
        if prestarted:
            outputs.update(timings=outputs.mark("measuring_started"))
        supervisor.server_early = _server_early(spec, hardware, engines, outputs)
        supervisor.load_data(hardware)
        if why := nothing_to_learn(supervisor.dataset):
            log.warning(why)
            outputs.update(status="baseline", error=None, stop_reason=why)
            return outputs.report
        supervisor.resume()
        plan = supervisor.make_plan(hardware, engines, probed, max_members or MAX_MEMBERS)
        _end(prestarted)  # one the plan did not measure with
        plan.save(Path(out_dir) / "plan.json")
        outputs.update(plan=plan.to_json(), members=supervisor.member_rows(), timings=outputs.mark("planned"))
        on_plan(plan)
        if not plan.members and not supervisor.reused:  # a resumed run goes on with extras from what it reused
            outputs.update(status="baseline", error=None, stop_reason=plan.reasons[-1])
            return outputs.report
        supervisor.controller.monitor = monitor
        supervisor.train(on_status)
    except (InputError, DeviceError) as exc:  # the baseline already written stays the submission
        outputs.update(status="error", error=str(exc))
    except Interrupted as exc:  # the units are stopped already (the scheduler's finally): say so, then go
        outputs.update(status="interrupted", stop_reason=f"{exc} at {budget.elapsed():.0f} s",
                       members=supervisor.member_rows(), **unit_rows(supervisor.scheduler))
        outputs.update(card_usage=supervisor.card_usage())
        raise
    except Exception as exc:  # a fault of ours, anywhere: the best valid submission stays, the report says where
        log.exception("the run failed; its best valid submission so far stays")
        outputs.update(status="failed", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc(),
                       members=supervisor.member_rows())
    finally:
        _end(prestarted)
        if adopting:  # a process that calls run_competition (a test, a flow) is nobody's subreaper once it returns
            processes.adopt_orphans(on=False)
        if monitor is not None:
            monitor.stop()
        outputs.flush()  # the last submission published is on disk before the run returns
        shutil.rmtree(supervisor.work, ignore_errors=True)  # image cache, extracted zips: checkpoints stay
    return outputs.report

