"""3-D boxes written as one string per sample (the Lyft / nuScenes detection format): each object is nine tokens,
`confidence center_x center_y center_z width length height yaw class_name`, in world metres and radians about
the vertical axis. Scored as the devkit's 3-D mAP: for each sample and each IoU threshold of 0.50 to 0.95, the
average precision of each class its truth holds, averaged; the samples' means averaged.

A box's footprint is the rectangle of its length along its heading and its width across, its height centred on
center_z; the IoU of two boxes is their footprints' overlap times their heights' overlap over the union of their
volumes. Predictions of a class are taken by falling confidence (equal confidences in their written order): each
is a true positive when the truth box it overlaps most, over the threshold, is not yet taken; average precision
is the area under the precision envelope, VOC style. A class the truth holds and the prediction lacks scores 0;
predicted classes the truth lacks are ignored.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runner.common.errors import InvalidSubmissionError

TOKENS = 9  # per object: confidence, centre (3), size (3), yaw, class
IOU_THRESHOLDS = np.round(np.arange(0.50, 0.951, 0.05), 2)  # COCO's sweep
EPS = np.finfo(np.float64).eps  # precision's floor, as the devkit divides


@dataclass(frozen=True)
class Box:
    """One box: its confidence, centre, size (width, length, height), yaw and class."""

    confidence: float
    center: tuple[float, float, float]
    size: tuple[float, float, float]
    yaw: float
    name: str

    @property
    def volume(self) -> float:
        return float(np.prod(self.size))

    def footprint(self) -> np.ndarray:
        """The four corners (4, 2) of its base, counter-clockwise: front right, front left, back left, back
        right."""
        (x, y, _), (width, length, _) = self.center, self.size
        c, s = np.cos(self.yaw), np.sin(self.yaw)
        ahead, across = np.array([c, s]) * length / 2, np.array([s, -c]) * width / 2
        centre = np.array([x, y])
        return np.array([centre + ahead + across, centre + ahead - across, centre - ahead - across,
                         centre - ahead + across])


def parse_boxes(cell, row: int = 0) -> list[Box]:
    """The boxes of one row's string ('' or a missing cell: none). A token count that is no multiple of nine, a
    token that is no number where one belongs, a missing or infinite value, or a size not above 0 is an
    InvalidSubmissionError naming the row (the devkit refuses each)."""
    text = "" if cell is None or (isinstance(cell, float) and np.isnan(cell)) else str(cell)
    if not text.strip():
        return []
    parts = text.split(" ")
    if len(parts) % TOKENS:
        raise InvalidSubmissionError(f"row {row}: {len(parts)} tokens, not {TOKENS} per object")
    boxes = []
    for k in range(0, len(parts), TOKENS):
        try:
            numbers = [float(v) for v in parts[k:k + TOKENS - 1]]
        except ValueError as exc:
            raise InvalidSubmissionError(f"row {row}: object {k // TOKENS}: {exc}") from exc
        if not np.isfinite(numbers).all() or min(numbers[4:7]) <= 0:
            raise InvalidSubmissionError(f"row {row}: object {k // TOKENS}: missing values or a size not above 0")
        boxes.append(Box(numbers[0], tuple(numbers[1:4]), tuple(numbers[4:7]), numbers[7], parts[k + TOKENS - 1]))
    return boxes


def _clipped(polygon: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The part of a convex polygon on the left of the directed line a -> b (Sutherland-Hodgman's one step)."""
    if not len(polygon):
        return polygon
    side = (b[0] - a[0]) * (polygon[:, 1] - a[1]) - (b[1] - a[1]) * (polygon[:, 0] - a[0])
    out = []
    for i in range(len(polygon)):
        j = (i + 1) % len(polygon)
        if side[i] >= 0:
            out.append(polygon[i])
        if (side[i] >= 0) != (side[j] >= 0):
            t = side[i] / (side[i] - side[j])
            out.append(polygon[i] + t * (polygon[j] - polygon[i]))
    return np.array(out).reshape(-1, 2)


def _area(polygon: np.ndarray) -> float:
    if len(polygon) < 3:
        return 0.0
    x, y = polygon[:, 0], polygon[:, 1]
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2)


def overlap_area(first: np.ndarray, second: np.ndarray) -> float:
    """The area two counter-clockwise convex polygons share."""
    clipped = first
    for i in range(len(second)):
        clipped = _clipped(clipped, second[i], second[(i + 1) % len(second)])
    return _area(clipped)


def iou(a: Box, b: Box) -> float:
    """The 3-D IoU of two boxes standing on the ground plane (footprint overlap times height overlap)."""
    low = max(a.center[2] - a.size[2] / 2, b.center[2] - b.size[2] / 2)
    high = min(a.center[2] + a.size[2] / 2, b.center[2] + b.size[2] / 2)
    if high <= low:
        return 0.0
    shared = overlap_area(a.footprint(), b.footprint()) * (high - low)
    return float(np.clip(shared / (a.volume + b.volume - shared), 0.0, 1.0))


def average_precision(truth: list[Box], predicted: list[Box], threshold: float,
                      overlaps: np.ndarray | None = None) -> float:
    """One class's VOC average precision in one sample; `overlaps` (predictions x truths, in the given orders)
    saves recomputing IoUs across thresholds."""
    if overlaps is None:
        overlaps = np.array([[iou(p, t) for t in truth] for p in predicted]).reshape(len(predicted), len(truth))
    order = sorted(range(len(predicted)), key=lambda i: -predicted[i].confidence)  # stable: ties keep their order
    taken = np.zeros(len(truth), dtype=bool)
    hits = np.zeros(len(order))
    for rank, i in enumerate(order):
        j = int(np.argmax(overlaps[i])) if len(truth) else -1
        if j >= 0 and overlaps[i, j] > threshold and not taken[j]:
            hits[rank], taken[j] = 1.0, True
    tp = np.cumsum(hits)
    recalls = np.concatenate(([0.0], tp / len(truth), [1.0]))
    precisions = np.concatenate(([0.0], tp / np.maximum(np.arange(1, len(order) + 1), EPS), [0.0]))
    precisions = np.maximum.accumulate(precisions[::-1])[::-1]  # the envelope: best precision at any later recall
    steps = np.flatnonzero(recalls[1:] != recalls[:-1])
    return float(np.sum((recalls[steps + 1] - recalls[steps]) * precisions[steps + 1]))


def sample_map(truth: list[Box], predicted: list[Box]) -> float:
    """One sample's mAP, averaged over IOU_THRESHOLDS: for each threshold, the mean over the classes its truth
    holds of their average precision."""
    classes = sorted({b.name for b in truth})
    per_class = np.zeros((len(IOU_THRESHOLDS), len(classes)))
    for k, name in enumerate(classes):
        gt = [b for b in truth if b.name == name]
        guesses = [b for b in predicted if b.name == name]
        if not guesses:
            continue
        overlaps = np.array([[iou(p, t) for t in gt] for p in guesses])
        per_class[:, k] = [average_precision(gt, guesses, t, overlaps) for t in IOU_THRESHOLDS]
    return float(per_class.mean()) if classes else float("nan")


def box3d_map(truth: np.ndarray, pred: np.ndarray) -> float:
    """Rows of box strings (truth with a confidence each, as the answers write them): the mean over rows of each
    sample's mAP over the IoU sweep."""
    return float(np.mean([sample_map(parse_boxes(t, i), parse_boxes(p, i))
                          for i, (t, p) in enumerate(zip(truth, pred))]))
