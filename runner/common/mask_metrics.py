"""Metrics of segmentation masks: each scores rows of (truth, prediction) boolean masks through statistics computed
once per row, so that any subset of the rows (a bootstrap's resample) is scored from them without decoding a mask
again. A metric called on (truths, predictions) scores every row; grading decodes a submission's run-length
strings into the same masks (runner.competition.grade_shapes). Cross-validation calls it on rows of per-pixel
probabilities (each row a mask flattened): a pixel is in the mask from MASK_CUT on, as the writer cuts them until
a cut is tuned (`decided`, `tune_mask_cut`).

- `mask_iou_sweep`: per image, the share of IoU thresholds 0.50, 0.55, ... 0.95 its one object exceeds; 1 for an
  empty prediction of an empty truth, 0 for any prediction of one; the mean over images. As MLE-bench bins the
  pixels (a histogram over each mask's own range), an empty prediction of a non-empty truth counts as a mask of
  every pixel: its IoU is the truth's share of the image.
- `mean_dice`: per image 2|X∩Y| / (|X|+|Y|), 1 when both are empty; the mean over images.
- `global_dice`: the same over every pixel of every image at once.
- `pixel_f05`: per image the F0.5 score of its pixels (precision weighted over recall), the mean over images.
- `dice_hausdorff`: each row a series of slices (depth, classes, height, width): 0.4 x the mean Dice of every
  (slice, class) mask whose truth or prediction holds a pixel, plus 0.6 x (1 - the mean over series of the
  symmetric Hausdorff distance between the classes' union volumes, in coordinates divided by the volume's shape,
  over the unit cube's diagonal); a series empty on both sides is left out, one empty on one side counts 1, and so
  does a prediction more than ten times the truth's size. Rows of flat masks (no series to stack) are scored by
  their mean Dice.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

IOU_THRESHOLDS = np.arange(0.5, 1.0, 0.05)  # as MLE-bench spells them (0.6000000000000001 and all)
F_BETA = 0.5  # vesuvius: precision counts more than recall
DICE_WEIGHT, HAUSDORFF_WEIGHT = 0.4, 0.6
OVERSIZED = 10  # a prediction this many times the truth's voxels is as far as can be (distance 1)
MASK_CUT = 0.5  # a pixel's probability from which it is in the mask, until a cut is tuned on out-of-fold rows
# the cuts and least sizes tried: a small mask is more often a false find than a true one in an empty image, which
# the IoU sweep scores 0 (tgs' winners dropped masks under a few dozen pixels)
# a cut of 0 marks every pixel: a constant's best answer where a metric pools sparse objects (global Dice 2p/(1+p))
CUTS = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7)
LEAST_SHARES = (0.0, 0.002, 0.005, 0.01, 0.02)  # of the mask's pixels: below this a predicted mask is left empty
# the supervisor tunes after every fold, inside the run's budget: at most this long each time, the likeliest pairs
# first, so a slow metric (Hausdorff distances of whole scans) never holds a run past its end
TUNE_SECONDS = 2.0


@dataclass(frozen=True)
class MaskMetric:
    """`row(truth, prediction)`: a row's statistics (a 1-D array); `total(statistics)`: the score of rows'
    statistics stacked (rows, k). Calling it scores every row of two sequences of masks."""

    row: Callable[[np.ndarray, np.ndarray], np.ndarray]
    total: Callable[[np.ndarray], float]
    # how rows of flat masks are scored where `row` scores volumes (dice_hausdorff): a blend's rows hold no series,
    # so it is chosen on their mean Dice, and the masks written are held against the prior as volumes
    # (runner.common.mask_volumes)
    flat: "MaskMetric | None" = None

    def statistics(self, truths: Sequence[np.ndarray], predictions: Sequence[np.ndarray]) -> np.ndarray:
        if len(truths) != len(predictions):
            raise ValueError(f"{len(predictions)} predicted masks for {len(truths)} true ones")
        rows = [self.row(as_mask(t), as_mask(p)) for t, p in zip(truths, predictions)]
        return np.vstack(rows) if rows else np.zeros((0, 1))

    def __call__(self, truths: Sequence[np.ndarray], predictions: Sequence[np.ndarray]) -> float:
        if self.flat is not None and len(truths) and np.ndim(truths[0]) == 1:
            return self.flat(truths, predictions)
        return self.total(self.statistics(truths, predictions))


def as_mask(values) -> np.ndarray:
    """A boolean mask of a decoded one (booleans, 0/1 integers) or of probabilities (a pixel from MASK_CUT on)."""
    values = np.asarray(values)
    return values >= MASK_CUT if values.dtype.kind == "f" else values.astype(bool)


def decided(pred: np.ndarray, cut: float = MASK_CUT, least: int = 0) -> np.ndarray:
    """Rows of per-pixel probabilities as the masks a submission writes: each pixel from `cut` on, and a row's
    mask left empty where it holds fewer than `least` pixels."""
    masks = np.asarray(pred) >= cut
    masks[masks.sum(axis=1) < least] = False
    return masks


def cut_pairs(pixels: int) -> list[tuple[float, int]]:
    """The (cut, least pixels) pairs tuning tries beyond (MASK_CUT, 0), each once (small masks round several
    shares to one size), the likeliest first: cuts nearest MASK_CUT, small least sizes."""
    pairs = {(cut, int(round(share * pixels))) for cut in CUTS for share in LEAST_SHARES} - {(MASK_CUT, 0)}
    return sorted(pairs, key=lambda pair: (abs(pair[0] - MASK_CUT), pair[1], pair[0]))


def best_pair(score: Callable[[float, int], float], pixels: int, seconds: float = TUNE_SECONDS
              ) -> tuple[float, int, float]:
    """(cut, least, score) of the best pair `score` gives within `seconds` (the likeliest pairs first); MASK_CUT
    and no least size, scored first, win ties, so a cut moves only for a gain."""
    stop = time.monotonic() + seconds
    best = (MASK_CUT, 0, score(MASK_CUT, 0))
    for cut, least in cut_pairs(pixels):
        if time.monotonic() > stop:
            break
        value = score(cut, least)
        if value > best[2] + 1e-12:
            best = (cut, least, value)
    return best


def tune_mask_cut(metric: "MaskMetric", y: np.ndarray, pred: np.ndarray,
                  seconds: float = TUNE_SECONDS) -> tuple[float, int, float]:
    """(cut, least pixels, score): the pixel cut and the least mask size among CUTS x LEAST_SHARES whose masks
    score best for `metric` (higher is better for every mask metric) on rows of truth `y` and probabilities
    `pred` (each row a mask flattened), within `seconds`."""
    truth = np.asarray(y) >= MASK_CUT
    pixels = pred.shape[1] if pred.ndim == 2 else 1
    return best_pair(lambda cut, least: metric(truth, decided(pred, cut, least)), pixels, seconds)


def _checked(truth: np.ndarray, prediction: np.ndarray) -> None:
    if truth.shape != prediction.shape:
        raise ValueError(f"a predicted mask of shape {prediction.shape} for a true one of {truth.shape}")


def _mean(statistics: np.ndarray) -> float:
    return float(np.mean(statistics[:, 0])) if len(statistics) else float("nan")


def _iou_sweep_row(truth: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    _checked(truth, prediction)
    true_pixels, predicted = int(truth.sum()), int(prediction.sum())
    if true_pixels == 0:
        return np.array([1.0 if predicted == 0 else 0.0])
    if predicted == 0:  # binned over its own range [0, 0], every pixel of an empty prediction lands in the object
        iou = true_pixels / truth.size
    else:
        both = int(np.logical_and(truth, prediction).sum())
        iou = both / (true_pixels + predicted - both)
    return np.array([float(np.mean(iou > IOU_THRESHOLDS))])


def _dice_row(truth: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    _checked(truth, prediction)
    sizes = int(truth.sum()) + int(prediction.sum())
    return np.array([1.0 if sizes == 0 else 2 * int(np.logical_and(truth, prediction).sum()) / sizes])


def _overlap_row(truth: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    _checked(truth, prediction)
    return np.array([np.logical_and(truth, prediction).sum(), truth.sum() + prediction.sum()], dtype=np.float64)


def _global_dice(statistics: np.ndarray) -> float:
    sizes = statistics[:, 1].sum() if len(statistics) else 0.0
    return float(2 * statistics[:, 0].sum() / sizes) if sizes else float("nan")


def f_beta(true_positives: float, false_positives: float, false_negatives: float, beta: float = F_BETA) -> float:
    """F-beta of counts; 0 where it is undefined (no pixel on either side), as scikit-learn's zero division."""
    weight = 1 + beta ** 2
    denominator = weight * true_positives + beta ** 2 * false_negatives + false_positives
    return float(weight * true_positives / denominator) if denominator else 0.0


def _f05_row(truth: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    _checked(truth, prediction)
    both = int(np.logical_and(truth, prediction).sum())
    return np.array([f_beta(both, int(prediction.sum()) - both, int(truth.sum()) - both)])


def hausdorff(truth: np.ndarray, prediction: np.ndarray) -> float:
    """The symmetric Hausdorff distance of two volumes' voxels, in coordinates over the truth's shape, over the
    unit cube's diagonal; nan when both are empty, 0 when equal, 1 when one is empty or the prediction is more than
    OVERSIZED times the truth."""
    from scipy.spatial.distance import directed_hausdorff

    true_voxels, predicted = int(truth.sum()), int(prediction.sum())
    if true_voxels == 0 and predicted == 0:
        return float("nan")
    if np.array_equal(truth, prediction):
        return 0.0
    if true_voxels == 0 or predicted == 0 or predicted > OVERSIZED * true_voxels:
        return 1.0
    scale = np.asarray(truth.shape, dtype=np.float64)
    a, b = np.argwhere(truth) / scale, np.argwhere(prediction) / scale
    return float(max(directed_hausdorff(a, b)[0], directed_hausdorff(b, a)[0]) / np.sqrt(truth.ndim))


def _series_row(truth: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    """A series (depth, classes, height, width): the sum and count of its (slice, class) Dice scores that are
    defined, and its Hausdorff distance."""
    _checked(truth, prediction)
    if truth.ndim != 4:
        raise ValueError(f"a series of class masks is (depth, classes, height, width), not {truth.shape}")
    both = np.logical_and(truth, prediction).sum(axis=(2, 3))
    sizes = truth.sum(axis=(2, 3)) + prediction.sum(axis=(2, 3))
    defined = sizes > 0
    dice = 2 * both[defined] / sizes[defined]
    return np.array([dice.sum(), defined.sum(), hausdorff(truth.any(axis=1), prediction.any(axis=1))])


def _dice_hausdorff(statistics: np.ndarray) -> float:
    counted = statistics[:, 1].sum() if len(statistics) else 0.0
    dice = statistics[:, 0].sum() / counted if counted else float("nan")
    distances = statistics[:, 2][~np.isnan(statistics[:, 2])] if len(statistics) else np.zeros(0)
    distance = float(distances.mean()) if len(distances) else float("nan")
    return float(DICE_WEIGHT * dice + HAUSDORFF_WEIGHT * (1 - distance))


MASK_METRICS: dict[str, MaskMetric] = {
    "mask_iou_sweep": MaskMetric(_iou_sweep_row, _mean),
    "mean_dice": MaskMetric(_dice_row, _mean),
    "global_dice": MaskMetric(_overlap_row, _global_dice),
    "pixel_f05": MaskMetric(_f05_row, _mean),
    "dice_hausdorff": MaskMetric(_series_row, _dice_hausdorff, flat=MaskMetric(_dice_row, _mean)),
}
