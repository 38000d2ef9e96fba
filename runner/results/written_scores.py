"""The blend and the prior scored on the out-of-fold rows as the files each writes would score, where that is not
the blend's own CV: sets of labels at their tuned thresholds, a ranked list's new label where it was tuned, masks at
their cut and least size (as series' volumes where the metric scores volumes), points from their tuned confidence,
radiographs as the grader's rows of studies and images. The blend is held against the prior so; where the files
written are what was scored, the CV and the prior's score reported are these too."""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from runner.common import box_rows, mask_metrics, mask_volumes, metrics, point_rows
from runner.common.label_metrics import LABEL_THRESHOLD, decided, stand_in_truth
from runner.competition.spec import CompetitionSpec
from runner.data.dataset import Dataset
from runner.data.mask_targets import mask_columns
from runner.results.blend import Blend
from runner.results.decisions import tuned
from runner.results.submission import Predictions

log = logging.getLogger("runner")


@dataclass(frozen=True)
class WrittenScore:
    """The blend's and the prior's scores as written; `reported`: the CV reported is the blend's here (else its
    own), `prior_reported`: the prior's score reported is this one (else the prior's CV as the blend's rows)."""

    ours: float
    theirs: float
    reported: bool = False
    prior_reported: bool = False


class WrittenScores:
    """The scorers of what the blend and the prior write, each None where it does not apply."""

    def __init__(self, spec: CompetitionSpec, dataset: Dataset, prior: Predictions):
        self.spec, self.dataset, self.prior, self.metric = spec, dataset, prior, spec.metric
        self.depth_prior: tuple | None = None  # a series' depth prior of the training rows and its cut (volumes)

    def of(self, blend: Blend, cuts) -> WrittenScore | None:
        return (self.new_items(blend, cuts) or self.sets(blend, cuts) or self.masks(blend, cuts)
                or self.points(blend, cuts) or self.studies(blend))

    def series(self) -> np.ndarray | None:
        """Each training row's series, where the metric scores masks as series' volumes (dice_hausdorff)."""
        mask = self.spec.mask
        return self.dataset.score_groups if mask is not None and mask.series else None

    def new_items(self, blend: Blend, cuts) -> WrittenScore | None:
        """(the blend's, the prior's) MAP@k on the out-of-fold rows with unseen labels counted as new items, the
        blend's new label at its tuned score; None where no new label was tuned."""
        spec = self.spec
        if cuts is None or spec.submission != "ranked" or spec.new_label is None:
            return None
        new = [str(c) for c in self.dataset.classes].index(spec.new_label)
        rows = blend.covered
        truth = stand_in_truth(self.dataset.y[rows], new)
        ours = blend.oof[rows].copy()
        ours[:, new] = cuts[0]
        prior = np.tile(self.prior.values[0], (len(truth), 1))
        scored = [round(metrics.score(self.metric, truth, pred), 6) for pred in (ours, prior)]
        log.info("as the test set scores them (labels no other row holds counted as %s): blend %.4f, prior %.4f",
                 spec.new_label, *scored)
        return WrittenScore(*scored)

    def _scored(self, blend: Blend, written, cuts, own) -> tuple[float, float]:
        """(the blend's, the prior's) score on the blend's out-of-fold rows of what each writes: `written(pred,
        cuts)` at the blend's tuned cuts and at the prior's `own`."""
        rows = blend.covered
        truth = self.dataset.y[rows]
        prior = np.tile(self.prior.values[0], (len(truth), 1))
        scored = [round(metrics.score(self.metric, truth, written(pred, cut)), 6)
                  for pred, cut in ((blend.oof[rows], cuts), (prior, own))]
        return scored[0], scored[1]

    def sets(self, blend: Blend, cuts) -> WrittenScore | None:
        """(the blend's, the prior's) score on the out-of-fold rows of the sets each writes: at the blend's tuned
        threshold, and at the prior's own (tuned on the training rows); None where this is no set of labels."""
        if cuts is None or self.dataset.labels is None:
            return None
        own = self.prior.thresholds or (LABEL_THRESHOLD,)
        return WrittenScore(*self._scored(blend, lambda pred, cut: decided(pred, cut[0]), cuts, own))

    def masks(self, blend: Blend, cuts) -> WrittenScore | None:
        """(the blend's, the prior's) score on the out-of-fold rows of the masks each writes: each at its own tuned
        pixel cut and least size; None where this is no mask."""
        if cuts is None or self.spec.learned_as != "pixels":
            return None
        if self.series() is not None:
            return self.volumes(blend, cuts)
        own = self.prior.thresholds or (mask_metrics.MASK_CUT, 0)
        scored = self._scored(blend, lambda pred, cut: mask_metrics.decided(pred, cut[0], int(cut[1])), cuts, own)
        log.info("as the masks written score: blend %.4f, prior %.4f on the out-of-fold rows", *scored)
        return WrittenScore(*scored, prior_reported=True)  # a blend of flat masks was chosen on their mean Dice

    def points(self, blend: Blend, cuts) -> WrittenScore | None:
        """(the blend's, the prior's) F1 on the out-of-fold rows of the points each writes: the blend's from its
        tuned confidence on, the prior's at its own; None where these are no points."""
        if cuts is None or self.spec.learned_as != "points":
            return None
        own = self.prior.thresholds or (point_rows.POINT_CUT,)
        scored = self._scored(blend, lambda pred, cut: [point_rows.points_of(row, cut[0]) for row in pred], cuts,
                              own)
        log.info("as the points written score: blend %.4f, prior %.4f on the out-of-fold rows", *scored)
        return WrittenScore(*scored, reported=True, prior_reported=True)

    def studies(self, blend: Blend) -> WrittenScore | None:
        """(the blend's, the prior's) score on the out-of-fold images as the grader scores the file written from
        them: a row per study, its appearances pooled over its images, and a row per image
        (runner.common.box_rows.as_graded); None where no class labels a whole study."""
        layout, studies = self.spec.boxes, self.dataset.score_groups
        if layout is None or not layout.whole or studies is None:
            return None
        rows = blend.covered
        truth = box_rows.as_graded(self.dataset.y[rows], studies[rows], layout, truth=True)
        prior = np.tile(self.prior.values[0], (int(rows.sum()), 1))
        scored = [round(metrics.score(self.metric, truth, box_rows.as_graded(pred, studies[rows], layout, False)), 6)
                  for pred in (blend.oof[rows], prior)]
        log.info("as the studies and images written score: blend %.4f, prior %.4f on the out-of-fold rows", *scored)
        return WrittenScore(*scored, reported=True, prior_reported=True)

    def volumes(self, blend: Blend, cuts) -> WrittenScore:
        """(the blend's, the depth prior's) score of the masks each writes on the out-of-fold rows' series, each at
        its own tuned cut and least size: the prior each class's share by depth and place drawn from every training
        row (runner.common.mask_volumes.depth_prior), at its best, as the rule that is the prior's submission."""
        spec, y, series = self.spec, self.dataset.y, self.series()
        metric, classes = mask_metrics.MASK_METRICS[self.metric], len(mask_columns(spec))
        if self.depth_prior is None:
            shares = mask_volumes.depth_prior(y, series)
            self.depth_prior = (shares, tuned(spec, y, shares, what="training", series=series))
        shares, (cut, least) = self.depth_prior
        groups = [rows for rows in mask_volumes.series_rows(series) if blend.covered[rows].all()]
        truth = y >= mask_metrics.MASK_CUT

        def written(pred: np.ndarray, cut: float, least: float) -> float:
            masks = mask_volumes.decided_classes(pred, classes, cut, int(least))
            return round(mask_volumes.volume_score(metric, truth, masks, groups, classes), 6)

        ours, theirs = written(blend.oof, *cuts[:2]), written(shares, cut, least)
        log.info("as the masks written score on %d series: blend %.4f, depth prior %.4f on the out-of-fold rows",
                 len(groups), ours, theirs)
        return WrittenScore(ours, theirs, reported=True, prior_reported=True)
