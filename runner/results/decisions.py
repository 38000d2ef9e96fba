"""What a submission states beyond the engines' probabilities or values, tuned on rows whose truth is known: the cut
from which a yes-or-no row is written as a yes, where the metric scores decisions (the Matthews correlation of 0/1
labels, probabilistic F1, which sharp answers score higher than hedged ones), and the spread a value is stated with
(the Laplace log-likelihood's Confidence), and a mask's pixel cut and least size. The blend tunes them on its out-of-fold rows, the prior on the training
rows it answers alike, so the prior is the best constant the metric allows (probabilistic F1's all-yes; the spread
of the training values about their mean), never a weaker one."""
from __future__ import annotations

import logging

import numpy as np

from runner.common import metrics
from runner.common.binary_metrics import tune_decision
from runner.common.mask_metrics import MASK_METRICS, tune_mask_cut
from runner.common.mask_volumes import tune_volume_cut
from runner.common.point_rows import tune_cut
from runner.common.spread_metrics import best_spread
from runner.competition.spec import CompetitionSpec
from runner.data.mask_targets import mask_columns

log = logging.getLogger("runner")

DECISION_METRICS = ("mcc", "probabilistic_f1")  # scored on 0/1 decisions, or scored higher for them


def tuned(spec: CompetitionSpec, y: np.ndarray, pred: np.ndarray, rows: np.ndarray | None = None,
          what: str = "out-of-fold", series: np.ndarray | None = None) -> tuple[float, ...] | None:
    """What the writer needs beyond `pred` for the spec's submission, tuned on `rows` (all by default) of the truth
    `y`: a value's spread, a yes-or-no row's cut; None when it needs nothing. `series`: each row's series, where
    the metric scores masks as series' volumes."""
    rows = np.ones(len(y), dtype=bool) if rows is None else rows
    if not rows.any():
        return None
    truth, guess = y[rows], pred[rows]
    if spec.submission == "value_and_spread":
        spread = best_spread(truth, guess)
        log.info("spread %.1f: the best one for the %s rows' values (%d rows)", spread, what, int(rows.sum()))
        return (spread,)
    if spec.learned_as == "pixels" and series is not None and spec.mask is not None and spec.mask.series:
        cut, least, value = tune_volume_cut(MASK_METRICS[spec.metric], truth, guess, series[rows],
                                            len(mask_columns(spec)))
        log.info("a pixel in the mask from %.2f on, a class's mask of fewer than %d pixels left empty: %s %.4f on "
                 "the %s rows' series", cut, least, spec.metric, value, what)
        return (cut, float(least))
    if spec.learned_as == "pixels":
        cut, least, value = tune_mask_cut(MASK_METRICS[spec.metric], truth, guess)
        log.info("a pixel in the mask from %.2f on, a mask of fewer than %d pixels left empty: %s %.4f on the %s "
                 "rows", cut, least, spec.metric, value, what)
        return (cut, float(least))
    if spec.learned_as == "points":
        cut, value = tune_cut(truth, guess)
        log.info("points written from a confidence of %.2f on: %s %.4f on the %s rows", cut, spec.metric, value, what)
        return (cut,)
    if spec.metric in DECISION_METRICS and guess.ndim == 2 and guess.shape[1] == 2:
        metric = metrics.METRICS[spec.metric]
        cut, value = tune_decision(metric.score, metric.lower_is_better, truth, guess)
        log.info("a yes from %.4f on: %s %.4f on the %s rows", cut, spec.metric, value, what)
        return (cut,)
    return None
