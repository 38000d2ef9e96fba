"""The blend keeper: every member's out-of-fold and test predictions, the blend re-chosen on them after each
member's fold, the submission it gives, and what each ended member added to the pool."""
from __future__ import annotations

import dataclasses
import logging

import numpy as np

from runner.common import metrics
from runner.common.bias_metrics import best_cut
from runner.common.label_metrics import tune_new_label, tune_threshold
from runner.results.member_state import MemberState
from runner.results.blend import FUSED, Blend, MemberPredictions, choose_blend, pool_gain
from runner.results.decisions import tuned
from runner.data.dataset import Dataset
from runner.common.errors import InvalidSubmissionError
from runner.units.tasks import FoldResult, assign_folds
from runner.results.run_folder import RunOutputs
from runner.planning.portfolio import Member
from runner.results.oof import baseline_score, member_predictions
from runner.results.written_scores import WrittenScores
from runner.results.submission import Predictions

log = logging.getLogger("runner")


class Ensemble:
    """The members' predictions and the blend that is the submission."""

    def __init__(self, outputs: RunOutputs, dataset: Dataset, prior: Predictions):
        self.outputs, self.dataset, self.prior = outputs, dataset, prior
        self.metric = outputs.spec.metric
        self.predictions: dict[str, MemberPredictions] = {}
        self.blend: Blend | None = None
        self.fold_ids: dict[tuple[int, int], np.ndarray] = {}
        self.written = WrittenScores(outputs.spec, dataset, prior)

    @property
    def weights(self) -> dict[str, float]:
        return self.blend.weights if self.blend else {}

    def _ids(self, member: Member) -> np.ndarray:
        key = (member.folds, member.split_seed)
        if key not in self.fold_ids:
            self.fold_ids[key] = assign_folds(self.dataset.y, self.outputs.spec.is_classification, *key,
                                              groups=self.dataset.groups)
        return self.fold_ids[key]

    def add(self, state: MemberState, results: list[FoldResult]) -> None:
        """The member's out-of-fold and test predictions from its finished folds, and its own CV."""
        # rows the blend fuses rather than mixes (points) are fused across a member's folds the same way
        combined = {"combined": FUSED[self.metric][0]} if self.metric in FUSED else {}
        predictions = member_predictions(state.member, results, self.outputs.out, self._ids(state.member), **combined)
        self.predictions[state.member.name] = predictions
        covered, groups = predictions.covered, self.dataset.score_groups
        state.cv = round(metrics.fast_score(self.metric, self.dataset.y[covered], predictions.oof[covered],
                                            None if groups is None else groups[covered]), 6)

    def publish(self) -> dict:
        """The blend chosen again and written as the submission when it beats the prior; the report's changes."""
        blend = choose_blend(self.metric, self.dataset.y, list(self.predictions.values()), self.prior.values[0],
                             self.dataset.score_groups)
        if blend is None:
            return {}
        classes = tuple(self.dataset.classes) if self.dataset.classes is not None else None
        weights = ", ".join(f"{name} {w:.2f}" for name, w in sorted(blend.weights.items(), key=lambda i: -i[1]))
        cuts = (self.grade_thresholds(blend) or self.set_threshold(blend) or self.new_label_score(blend)
                or self.decision_cut(blend) or self.decisions(blend))
        base = round(baseline_score(self.metric, self.dataset.y, self.prior.values[0], blend.covered,
                                    self.dataset.score_groups), 6)  # as the CV
        labels = tuple(self.dataset.labels) if self.dataset.labels is not None else None
        chosen = Predictions(blend.test, classes, f"blend: {weights}", cuts, self.dataset.choices, labels)
        # held against the prior as the files written will score where that is not the blend's CV (written_scores)
        written = self.written.of(blend, cuts)
        ours, theirs = (written.ours, written.theirs) if written else (blend.cv, base)
        # models that do not beat the prior are not submitted: one that ties it learned nothing (a booster cut
        # after its first round predicts the majority class), and its predictions would only stand in for the prior's
        beaten = metrics.better(self.metric, ours, theirs)
        if not beaten:
            chosen = dataclasses.replace(self.prior, source=f"{self.prior.source}: the blend's CV {ours:.5f} is "
                                                            f"no better than the prior's {theirs:.5f}")
            log.warning(chosen.source)
        try:
            if beaten or self.outputs.rule_prior is None:
                self.outputs.publish(chosen)
            else:  # the rule's own submission is the prior
                self.outputs.publish_rule_prior()
        except InvalidSubmissionError as exc:  # keep the last valid submission
            log.error("blend rejected, previous submission kept: %s", exc)
            return {}
        self.blend = blend
        cv = ours if written and written.reported else blend.cv
        base = theirs if written and written.prior_reported else base
        return dict(submission_source=chosen.source, cv_score=cv, baseline_cv_score=base,
                    blend={**blend.summary(), **({"grade_thresholds": cuts} if cuts else {})})

    def grade_thresholds(self, blend: Blend) -> tuple[float, ...] | None:
        """For kappa: cuts of the expected grade tuned on the blend's out-of-fold predictions (their kappa there
        is logged; the CV reported stays the untuned one, which those rows did not choose)."""
        if self.metric != "qwk":
            return None
        oof, rows = blend.oof, blend.covered
        cuts = metrics.fit_grade_thresholds(self.dataset.y[rows], oof[rows])
        tuned = metrics.qwk(self.dataset.y[rows], metrics.grades(oof[rows], cuts))
        log.info("grade cuts %s: kappa %.4f on the out-of-fold rows (%.4f halfway between grades)",
                 ", ".join(f"{c:.2f}" for c in cuts), tuned, blend.cv)
        return cuts

    def set_threshold(self, blend: Blend) -> tuple[float] | None:
        """For a set of labels: the probability from which a label is in a row's set, tuned for the metric on the
        blend's out-of-fold predictions (the CV reported stays the one at the default threshold)."""
        if self.dataset.labels is None:
            return None
        oof, rows = blend.oof[blend.covered], blend.covered
        metric = metrics.METRICS[self.metric]
        threshold, tuned = tune_threshold(metric.score, metric.lower_is_better, self.dataset.y[rows], oof)
        log.info("label threshold %.2f: %s %.4f on the out-of-fold rows (%.4f at the default)", threshold,
                 self.metric, tuned, blend.cv)
        return (threshold,)

    def decisions(self, blend: Blend) -> tuple[float, ...] | None:
        """A yes-or-no row's cut or a value's spread, tuned on the blend's out-of-fold rows that the grader's rule
        would score (runner.results.decisions)."""
        rows = blend.covered if self.dataset.scored is None else blend.covered & self.dataset.scored
        return tuned(self.outputs.spec, self.dataset.y, blend.oof, rows, series=self.written.series())

    def new_label_score(self, blend: Blend) -> tuple[float] | None:
        """For a ranked list with a new label (an item none of the training labels names): the score it is given
        in every row, tuned on the blend's out-of-fold rows where a label no other row holds stands for a new
        item (runner.common.label_metrics.tune_new_label)."""
        spec, classes = self.outputs.spec, self.dataset.classes
        names = [str(c) for c in classes] if classes is not None else []
        if spec.submission != "ranked" or spec.new_label not in names:
            return None
        rows = blend.covered
        score, tuned = tune_new_label(self.dataset.y[rows], blend.oof[rows], names.index(spec.new_label), spec.top_k)
        log.info("%s given %.4f in every row: MAP@%d %.4f on the out-of-fold rows, unseen labels counted as new",
                 spec.new_label, score, spec.top_k, tuned)
        return (score,)

    def decision_cut(self, blend: Blend) -> tuple[float] | None:
        """For a decision the grader cuts: the probability from which a row is a yes, where the blend's out-of-fold
        balanced accuracy peaks (what an AUC of decisions measures)."""
        if self.outputs.spec.submission != "decision":
            return None
        rows = blend.covered
        cut, tuned = best_cut(self.dataset.y[rows], blend.oof[rows][:, -1])
        log.info("decision cut %.3f: balanced accuracy %.4f on the out-of-fold rows", cut, tuned)
        return (cut,)

    def measure_gain(self, state: MemberState) -> None:
        """What this member added to the pool, now that it has ended: the relative fall of the best convex blend's
        loss with it against without it (runner.results.blend.pool_gain), the baseline prediction always in the pool."""
        if state.member.name not in self.predictions:
            state.gain = 0.0
            return
        n = len(self.dataset.y)  # the class prior / mean is in every pool: a first member's gain is over it
        baseline = MemberPredictions("baseline", np.tile(self.prior.values[0], (n, 1)), np.ones(n, bool),
                                     self.prior.values)
        pool = [baseline, *self.predictions.values()]
        state.gain = round(pool_gain(self.metric, self.dataset.y, pool, state.member.name), 6)
