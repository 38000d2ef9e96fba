"""The run's folder as a user reads it: `report.json`, rewritten at every change, and `submission.csv` and
`baseline.csv`, each replaced atomically and only by a valid submission."""
from __future__ import annotations

import dataclasses
import functools
import logging
from pathlib import Path

import numpy as np

from runner.results.baselines import make_baseline
from runner.common import box_rows
from runner.data import canvas, slice_rows, study_images
from runner.results.decisions import tuned
from runner.common.budget import Budget
from runner.common.label_metrics import constant_set_threshold
from runner.common.mask_metrics import decided
from runner.common.metrics import METRICS
from runner.data.dataset import Dataset
from runner.data.targets import read_sample, value_columns
from runner.common.errors import InvalidSubmissionError
from runner.common.latest_writes import LatestWrites
from runner.results.report import RunReport
from runner.competition.spec import CompetitionSpec
from runner.results.submission import (
    Predictions, build_submission, prior_predictions, sample_baseline, validate_submission, write_read_back)

log = logging.getLogger("runner")

# a submission of more cells (rows x columns) than this is written in the background: formatting millions of rows
# takes seconds (5.8M pixel rows: 7 s), which would hold the supervisor at every fold's re-blend
BACKGROUND_CELLS = 1_000_000


class RunOutputs:
    """The report and the submission files of one run."""

    def __init__(self, spec: CompetitionSpec, data_dir: Path, out_dir: Path, budget: Budget):
        self.spec, self.out, self.budget, self.data_dir = spec, Path(out_dir), budget, Path(data_dir)
        self.rule_prior = None  # the spec's rule's submission, where a learned blend must beat it (write_prior)
        self.submission = self.out / "submission.csv"
        found: list[str] = []
        self.sample = read_sample(spec, Path(data_dir), found)
        if spec.learned_as == "boxes" and spec.task != "unsupported" and spec.items == "study_images":
            files = study_images.row_files(spec, Path(data_dir), self.sample)
            box_rows.with_file_sizes(self.sample, files)
            self.sample.attrs[box_rows.ROW_GROUPS] = study_images.study_rows(spec, self.sample, files)
        elif spec.learned_as == "boxes" and spec.task != "unsupported":  # learned boxes: in each test image's pixels
            box_rows.with_sizes(self.sample, Path(data_dir) / (spec.test_image_dir or spec.image_dir or ""),
                                spec.id_column, spec.test_suffix or "")
        if spec.mask is not None and spec.mask.class_column and spec.task != "unsupported":  # learned slices
            slice_rows.with_slice_sizes(spec, self.sample, Path(data_dir))
        if spec.mask is not None and spec.mask.own_size and spec.task != "unsupported":  # items on a canvas
            canvas.with_item_sizes(spec, self.sample, canvas.test_paths(spec, self.sample, Path(data_dir)))
        self.columns = value_columns(spec, self.sample)
        self.writes = LatestWrites() if self.sample.size > BACKGROUND_CELLS else None
        self.report = RunReport(spec.id, "running", spec.metric, spec.lower_is_better, budget.seconds, 0.0,
                                str(self.submission), "none", spec=spec.to_json(), warnings=tuple(found))

    def update(self, **changes) -> None:
        timings = {**self.report.timings, **changes.pop("timings", {})}
        self.report = dataclasses.replace(self.report, wall_seconds=round(self.budget.elapsed(), 2),
                                          timings=timings, **changes)
        self.report.save(self.out / "report.json")

    def mark(self, event: str) -> dict:
        return {event: round(self.budget.elapsed(), 2)}

    def action(self, text: str) -> None:
        """An action taken while training, logged and kept in the report with when it was taken."""
        log.info("action: %s", text)
        self.update(actions=(*self.report.actions, dict(t=round(self.budget.elapsed(), 2), action=text)))

    def warn(self, warnings: list[str] | tuple[str, ...]) -> None:
        """Warnings not said before: logged, and kept in the report."""
        new = [w for w in warnings if w and w not in self.report.warnings]
        for warning in new:
            log.warning(warning)
        if new:
            self.update(warnings=(*self.report.warnings, *new))

    def publish(self, predictions: Predictions, baseline: bool = False) -> None:
        """The submission from `predictions` (InvalidSubmissionError leaves the last valid one in place); with
        `baseline`, also the run's baseline.csv."""
        frame = build_submission(self.sample, self.spec, self.columns, predictions)
        self._publish(frame, self.submission)
        if baseline:
            self._publish(frame, self.out / "baseline.csv")

    def _publish(self, frame, path: Path) -> None:
        """Validate now (InvalidSubmissionError to the caller), then write, read back and check it before it
        replaces the last: here, or in the background for a large submission (`flush` waits for it)."""
        validate_submission(frame, self.sample, self.spec, self.columns)
        write = functools.partial(write_read_back, frame, self.sample, self.spec, self.columns, path)
        if self.writes:
            self.writes.put(path, write)
        else:
            write()

    def flush(self) -> None:
        """Every submission published is on disk (the run's end)."""
        if self.writes:
            self.writes.flush()

    def write_sample_baseline(self) -> None:
        try:
            self._publish(sample_baseline(self.sample, self.spec, self.columns), self.submission)
        except InvalidSubmissionError as exc:  # labels no sample gives: the class prior will be the first
            log.warning("the sample alone makes no valid submission (%s): the first is the class prior", exc)
            return
        self.update(submission_source="baseline: sample submission", timings=self.mark("baseline_written"))

    def write_rule_baseline(self, data_dir: Path, work: Path) -> None:
        """The spec's own rule for a task no engine trains (runner.results.baselines): the submission and its baseline."""
        made = make_baseline(self.spec, data_dir, self.sample, self.columns, work)
        frame = self.sample.copy()
        frame[self.columns] = made.values[self.columns].to_numpy()
        self._publish(frame, self.submission)
        if made.prior is not None:  # the rule chose against a prior: that is the baseline its choice must beat
            frame = self.sample.copy()
            frame[self.columns] = made.prior[self.columns].to_numpy()
        self._publish(frame, self.out / "baseline.csv")
        log.info("baseline: %s", made.note)
        self.update(status="baseline", error=None, submission_source=f"baseline: {made.note}",
                    stop_reason=f"no engine trains a {self.spec.id} ({self.spec.note or 'unsupported task'}): "
                                f"{made.note}", timings=self.mark("data_loaded"))

    def write_prior(self, dataset: Dataset) -> Predictions:
        """The class prior (or mean) once labels are read: the submission and the baseline every blend must beat;
        where a learned spec of series of masks names a rule (`baseline`), the rule's submission is both instead
        (the blend is held against the depth prior, the rule's kind: runner.results.written_scores)."""
        prior = prior_predictions(dataset.y, dataset.classes, dataset.n_test, dataset.choices, dataset.labels,
                                  self.spec.metric)
        if self.spec.baseline and self.spec.learned_as == "pixels" and self.spec.mask.series:
            return self.write_learned_rule(prior, dataset)
        if self.spec.learned_as == "boxes" and len(dataset.y):
            prior = self.pruned_box_prior(prior, dataset.y)
        if self.spec.learned_as == "points":  # no constant guess of codes and places finds more than it claims
            prior = dataclasses.replace(prior, values=np.zeros_like(prior.values),
                                        source="baseline: no characters (an empty cell a page)")
        if dataset.labels is not None and len(dataset.y):  # the one set for every row: its labels frequent enough
            metric = METRICS[self.spec.metric]
            cut = constant_set_threshold(metric.score, metric.lower_is_better, dataset.y, prior.values[0])
            prior = dataclasses.replace(prior, thresholds=(cut,),
                                        source=f"{prior.source}, from {cut:.2f} on (tuned on the training rows)")
        elif len(dataset.y) and (cuts := tuned(self.spec, dataset.y, np.tile(prior.values[0], (len(dataset.y), 1)),
                                               dataset.scored, "training")):
            prior = dataclasses.replace(prior, thresholds=cuts)  # the best constant the metric allows
            if self.spec.learned_as == "pixels":
                prior = dataclasses.replace(prior, source=pixel_prior_source(prior.values[0], cuts))
        self.publish(prior, baseline=True)
        for warning in dataset.warnings:
            log.warning(warning)
        self.update(submission_source=prior.source, warnings=(*self.report.warnings, *dataset.warnings),
                    timings=self.mark("data_loaded"))
        return prior


    def pruned_box_prior(self, prior: Predictions, y: np.ndarray) -> Predictions:
        """The mean row of boxes without the classes whose typical boxes lower the training rows' score."""
        metric = METRICS[self.spec.metric]
        row, dropped = box_rows.pruned_prior(prior.values[0], y, metric.score, metric.lower_is_better)
        if not dropped:
            return prior
        names = self.spec.boxes.labels if self.spec.boxes is not None and self.spec.boxes.labels else None
        said = ", ".join(names[c] if names else str(c) for c in dropped)
        return dataclasses.replace(prior, values=np.tile(row, (len(prior.values), 1)),
                                   source=f"{prior.source}; no typical box of {said} (they cost the training rows "
                                          "more than they find)")

    def write_learned_rule(self, prior: Predictions, dataset: Dataset) -> Predictions:
        """The spec's rule (the `slice_prior`'s depth and place) as the submission and baseline of a learned spec:
        a stronger prior than each pixel's share, which the blend must beat as written (runner.results.ensemble)."""
        made = make_baseline(self.spec, self.data_dir, self.sample, self.columns, self.out)
        self.rule_prior = self.sample.copy()
        self.rule_prior[self.columns] = made.values[self.columns].to_numpy()
        self._publish(self.rule_prior, self.submission)
        self._publish(self.rule_prior, self.out / "baseline.csv")
        prior = dataclasses.replace(prior, source=f"baseline: {made.note}")
        for warning in dataset.warnings:
            log.warning(warning)
        self.update(submission_source=prior.source, warnings=(*self.report.warnings, *dataset.warnings),
                    timings=self.mark("data_loaded"))
        return prior

    def publish_rule_prior(self) -> None:
        """The rule's submission again (a blend that no longer beats it)."""
        self._publish(self.rule_prior, self.submission)


def pixel_prior_source(shares: np.ndarray, cuts: tuple[float, ...]) -> str:
    """What a mask prior writes: each pixel's share of the training masks, cut where the training rows score best."""
    marked = int(decided(shares[None], cuts[0], int(cuts[1])).sum())
    return (f"baseline: each pixel's share of the training masks, a pixel in the mask from {cuts[0]:.2f} on and a "
            f"mask under {cuts[1]:.0f} pixels left empty (tuned on the training rows): "
            + (f"the same {marked}-pixel mask for every row" if marked else "the empty mask for every row"))
