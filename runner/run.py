"""`runner run`: the supervisor. Baseline at t≈0, then folds in slots, each finished fold improving the submission.

Budget: wall clock from the start. Training stops at `cut` of the budget; each fold stops at an epoch boundary
before its share of that window ends and predicts the test rows itself, so nothing heavy is left for the end.
"""
from __future__ import annotations

import dataclasses
import logging
import pickle
import shutil
import time
from pathlib import Path

import numpy as np

from runner.budget import Budget
from runner.data import Dataset, load_dataset, read_sample, value_columns
from runner.errors import InputError, InvalidSubmissionError
from runner.folds import FoldResult, FoldTask, assign_folds
from runner.hardware import Hardware, available_cpus, probe_hardware
from runner.measure import Costs, gather_costs
from runner.monitor import Monitor
from runner.planner import CPU_CANDIDATES, GPU_CANDIDATES, DataShape, Plan, image_candidates, make_plan
from runner.predict import cv_scores, ensemble, fold_dir
from runner.report import RunReport
from runner.slots import run_folds
from runner.spec import CompetitionSpec, load_spec
from runner.submission import Predictions, build_submission, prior_predictions, publish, sample_baseline
from runner.weights import find_weights

log = logging.getLogger("runner")


class Supervisor:
    """State of one run; every method moves the report forward and rewrites it."""

    def __init__(self, spec: CompetitionSpec, data_dir: Path, out_dir: Path, budget: Budget):
        self.spec, self.data_dir, self.out, self.budget = spec, Path(data_dir), Path(out_dir), budget
        self.work = self.out / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.submission = self.out / "submission.csv"
        self.sample = read_sample(spec, self.data_dir)
        self.columns = value_columns(spec, self.sample)
        self.report = RunReport(spec.id, "running", spec.metric, spec.lower_is_better, budget.seconds, 0.0,
                                str(self.submission), "none", spec=spec.to_json())
        self.dataset: Dataset | None = None
        self.fold_ids: np.ndarray | None = None
        self.prior: Predictions | None = None
        self.results: list[FoldResult] = []

    def update(self, **changes) -> None:
        timings = {**self.report.timings, **changes.pop("timings", {})}
        self.report = dataclasses.replace(self.report, wall_seconds=round(self.budget.elapsed(), 2),
                                          timings=timings, **changes)
        self.report.save(self.out / "report.json")

    def mark(self, event: str) -> dict:
        return {event: round(self.budget.elapsed(), 2)}

    def write_sample_baseline(self) -> None:
        publish(sample_baseline(self.sample, self.spec, self.columns), self.sample, self.spec, self.columns,
                self.submission)
        self.update(submission_source="baseline: sample submission", timings=self.mark("baseline_written"))

    def load_data(self) -> None:
        self.dataset = load_dataset(self.spec, self.data_dir, self.work)
        self.prior = prior_predictions(self.dataset.y, self.dataset.classes, len(self.sample))
        frame = build_submission(self.sample, self.spec, self.columns, self.prior)
        publish(frame, self.sample, self.spec, self.columns, self.submission)
        publish(frame, self.sample, self.spec, self.columns, self.out / "baseline.csv")
        for warning in self.dataset.warnings:
            log.warning(warning)
        self.update(submission_source=self.prior.source, warnings=tuple(self.dataset.warnings),
                    timings=self.mark("data_loaded"))

    def make_plan(self, hardware: Hardware) -> Plan:
        return plan_for(self.spec, self.dataset, hardware, self.budget.training_left(), self.budget.seconds,
                        self.out)

    def prepare_folds(self, plan: Plan, hardware: Hardware) -> Path:
        if plan.engine == "timm":
            from runner.images import prepare_images  # PIL work only where images are trained

            self.dataset = prepare_images(self.dataset, plan.image_size, self.work, hardware.cpus)
            for warning in self.dataset.warnings[len(self.report.warnings):]:
                log.warning(warning)
            self.update(warnings=tuple(self.dataset.warnings), timings=self.mark("images_cached"))
        self.fold_ids = assign_folds(self.dataset.y, self.spec.is_classification, plan.folds, plan.seed)
        path = self.work / "dataset.pkl"
        with open(path, "wb") as handle:
            pickle.dump((self.dataset, self.fold_ids), handle, protocol=pickle.HIGHEST_PROTOCOL)
        return path

    def on_result(self, result: FoldResult, unit: str = "epochs") -> None:
        self.results.append(result)
        level = logging.INFO if result.usable else logging.WARNING
        log.log(level, "fold %d %s%s %s", result.fold, result.status,
                f": {self.spec.metric} {result.score:.5f} after {result.epochs} {unit} in {result.wall_seconds:.0f} s"
                if result.usable else "", result.message)
        changes: dict = dict(folds=tuple(r.to_json() for r in sorted(self.results, key=lambda r: r.fold)))
        predictions = ensemble(self.results, self.out, self.dataset.classes)
        if predictions is not None:
            try:
                frame = build_submission(self.sample, self.spec, self.columns, predictions)
                publish(frame, self.sample, self.spec, self.columns, self.submission)
                changes["submission_source"] = predictions.source
                cv, base = cv_scores(self.spec.metric, self.dataset.y, self.results, self.out, self.fold_ids,
                                     self.prior.values[0])
                changes.update(cv_score=cv, baseline_cv_score=base)
            except InvalidSubmissionError as exc:  # keep the last valid submission
                log.error("ensemble rejected, previous submission kept: %s", exc)
        self.update(**changes, timings=self.mark(f"fold_{result.fold}_done"))

    def train(self, plan: Plan, hardware: Hardware, on_status=lambda _: None) -> None:
        dataset_path = self.prepare_folds(plan, hardware)

        def make_task(fold: int, deadline: float, gpu: int | None) -> FoldTask:
            return FoldTask(fold, plan, str(dataset_path), str(fold_dir(self.out, fold)), deadline, gpu)

        unit = "rounds" if plan.engine == "lightgbm" else "epochs"
        run_folds(plan, make_task, self.budget, lambda r: self.on_result(r, unit), on_status)
        trained = any(r.usable for r in self.results)
        self.update(status="trained" if trained else "baseline", timings=self.mark("training_done"))


def data_shape(dataset: Dataset) -> DataShape:
    features = dataset.train.shape[1] if hasattr(dataset.train, "shape") else 0
    targets = dataset.y.shape[1] if dataset.y.ndim == 2 else 1
    return DataShape(len(dataset.y), len(dataset.test), features, len(dataset.classes or ()), targets)


def plan_for(spec: CompetitionSpec, dataset: Dataset, hardware: Hardware, window: float, budget_seconds: float,
             out: Path, here: bool = True) -> Plan:
    """Measure what needs measuring, then plan `window` seconds of training. Image models are timed for a few
    real steps each on this machine (within 5% of the budget); for a GPU we are not on (`here=False`, a named
    profile) their memory and FLOPs are estimated instead. Tables get a few timed boosting rounds per way of
    splitting the cores (within 2% of the budget, budgets from 50 s), when planning for this machine."""
    data, costs = data_shape(dataset), Costs()
    seconds = min(120.0, 0.05 * budget_seconds)
    if spec.task == "tabular" and here and 0.02 * budget_seconds >= 1.0:  # shorter: the unmeasured rule
        from runner.engines.gbm import measure_rounds  # LightGBM only where tables are boosted

        deadline = time.monotonic() + min(30.0, 0.02 * budget_seconds)
        try:
            costs = Costs(rounds=measure_rounds(dataset.train, dataset.y, data.classes, hardware.cpus, deadline))
        except Exception as exc:  # planning goes on with the unmeasured rule
            log.warning("timing boosting rounds failed, planning without: %s: %s", type(exc).__name__, exc)
    if spec.task == "image" and seconds >= 3.0:  # shorter budgets cannot spare even the imports: smallest model
        device = "cuda" if hardware.gpus and here else "cpu"
        costs = gather_costs(image_candidates(hardware), device, max(2, data.classes), available_cpus(), seconds,
                             here or not hardware.gpus, out)
    pretrained = frozenset(m for m, _ in GPU_CANDIDATES + CPU_CANDIDATES if find_weights(m))
    return make_plan(spec, hardware, window, data, costs, pretrained)


def run_competition(name: str, data_dir: Path, budget: Budget, out_dir: Path, hardware: Hardware | None = None,
                    on_plan=lambda plan: None, on_status=lambda _: None) -> RunReport:
    """The whole run. Raises RunnerError only when not even the sample submission can be read; otherwise returns
    a report whose `error` explains what stopped training (a valid submission exists either way)."""
    spec = load_spec(name, Path(data_dir))
    supervisor = Supervisor(spec, data_dir, out_dir, budget)
    try:
        supervisor.write_sample_baseline()
        hardware = hardware or probe_hardware(Path(out_dir))
        supervisor.update(hardware=hardware.to_json())
        supervisor.load_data()
        plan = supervisor.make_plan(hardware)
        plan.save(Path(out_dir) / "plan.json")
        supervisor.update(plan=plan.to_json(), timings=supervisor.mark("planned"))
        on_plan(plan)
        if plan.engine == "none":
            supervisor.update(status="baseline", error=None)
            return supervisor.report
        with Monitor(Path(out_dir) / "monitor.jsonl", budget.started):
            supervisor.train(plan, hardware, on_status)
    except InputError as exc:  # the baseline already written stays the submission
        supervisor.update(status="error", error=str(exc))
    finally:
        shutil.rmtree(supervisor.work, ignore_errors=True)  # image cache, extracted zips: checkpoints stay
    return supervisor.report
