"""Metrics of labelled boxes and points, each over rows (an image, a page, a study): the truth and the prediction of a
row are lists of labelled boxes or points. Each metric computes what a row contributes once (`rows`), so any subset
of the rows, repeated or not (a bootstrap's resample), is scored from it (`total`) without matching boxes again.

- `coco_map_iou40`: COCO's mean average precision at IoU 0.4 over the classes the truth holds (pycocotools: 101
  recall points, 100 boxes an image), with each box's (x_min, y_min, x_max, y_max) put where COCO reads (x, y,
  width, height), as MLE-bench's vinbigdata grader hands them over: a box then reaches from (x_min, y_min) to
  (x_min + x_max, y_min + y_max).
- `class_ap_iou50`: per class, the pairs (found or not, confidence) of every row: a predicted box takes the free true
  box it overlaps most at IoU above 0.5 (found) or none (not found, a false alarm), a true box no prediction took is
  (found, 0), a row with neither is (not found, 0); the class's average precision (scikit-learn's, the precision at
  each confidence weighted by the recall it adds); the mean over the classes the truth names (siim-covid19's study
  labels with their dummy boxes and its image boxes alike).
- `point_in_box_f1`: a predicted (label, x, y) point finds the first true box of its label it lies strictly inside
  and no earlier point took; F1 of the points found over every page (kuzushiji).
"""
from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from typing import Sequence

import numpy as np

COCO_IOU = 0.4  # vinbigdata's one IoU threshold
COCO_MAX_DETECTIONS = 100  # COCO's largest maxDets: the boxes an image keeps, likeliest first
CLASS_AP_IOU = 0.5  # siim-covid19: a box is found above this IoU

# a row's boxes: (label, confidence, x_min, y_min, x_max, y_max); a truth's confidence is not read
Box = tuple[str, float, float, float, float, float]


# --- COCO mean average precision ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class CocoMatches:
    """What COCO's evaluation found, per class: every detection's image, score and whether it matched (in COCO's
    order: by image, then each image's likeliest first), and each image's count of true boxes."""

    classes: tuple
    images: int
    detections: tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], ...]  # image, score, hit, counted
    true_counts: np.ndarray  # (classes, images): true boxes not ignored
    recall_points: np.ndarray


def _coco_dataset(rows: Sequence[Sequence[Box]], classes: Sequence, scored: bool) -> dict:
    """COCO's dataset dict of boxes by image index, each box passed as (x_min, y_min, x_max, y_max) in the slot
    COCO reads as (x, y, width, height), with the area of the box as written."""
    annotations = []
    for image, boxes in enumerate(rows):
        for label, confidence, x_min, y_min, x_max, y_max in boxes:
            annotation = {"id": len(annotations), "image_id": image, "category_id": int(float(label)),
                          "bbox": [x_min, y_min, x_max, y_max], "segmentation": [], "ignore": 0,
                          "area": (x_max - x_min) * (y_max - y_min), "iscrowd": 0}
            if scored:
                annotation["score"] = confidence
            annotations.append(annotation)
    return {"images": [{"id": i} for i in range(len(rows))], "annotations": annotations,
            "categories": [{"id": int(c), "name": str(c), "supercategory": "none"} for c in classes]}


def coco_matches(truths: Sequence[Sequence[Box]], predictions: Sequence[Sequence[Box]]) -> CocoMatches:
    """pycocotools' per-image evaluation at COCO_IOU over the classes the truths hold, kept per class."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    if len(truths) != len(predictions):
        raise ValueError(f"{len(predictions)} images predicted for {len(truths)} true ones")
    classes = tuple(sorted({int(float(box[0])) for boxes in truths for box in boxes}))
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress
        truth, found = COCO(), COCO()
        truth.dataset, found.dataset = _coco_dataset(truths, classes, False), _coco_dataset(predictions, classes, True)
        truth.createIndex()
        found.createIndex()
        evaluation = COCOeval(truth, found, "bbox")
        evaluation.params.imgIds = list(range(len(truths)))
        evaluation.params.iouThrs = np.array([COCO_IOU])
        # the "all" area range alone: the only one the total reads; the other three tripled the time (a blend on
        # out-of-fold rows scores dozens of trials: 0.31 s a score of 200 radiographs with four ranges, 0.13 s)
        evaluation.params.areaRng, evaluation.params.areaRngLbl = evaluation.params.areaRng[:1], ["all"]
        evaluation.evaluate()
    images, areas = len(truths), len(evaluation.params.areaRng)
    detections, counts = [], np.zeros((len(classes), images))
    for k in range(len(classes)):
        parts = [[], [], [], []]
        for i in range(images):
            record = evaluation.evalImgs[k * areas * images + i]  # area range 0: all (the only one)
            if record is None:
                continue
            scores = np.asarray(record["dtScores"][:COCO_MAX_DETECTIONS], dtype=np.float64)
            parts[0].append(np.full(len(scores), i))
            parts[1].append(scores)
            parts[2].append(np.asarray(record["dtMatches"][0, :COCO_MAX_DETECTIONS]) > 0)
            parts[3].append(~np.asarray(record["dtIgnore"][0, :COCO_MAX_DETECTIONS], dtype=bool))
            counts[k, i] = np.count_nonzero(np.asarray(record["gtIgnore"]) == 0)
        detections.append(tuple(np.concatenate(p) if p else np.zeros(0) for p in parts))
    return CocoMatches(classes, images, tuple(detections), counts, np.asarray(evaluation.params.recThrs))


def _interpolated_precision(hits: np.ndarray, alarms: np.ndarray, positives: float, points: np.ndarray) -> np.ndarray:
    """COCO's precision at each recall point: cumulative hits and false alarms (weighted counts) along the
    detections in falling score, the precision made non-increasing from the right, read at the first detection
    reaching each recall point (0 past the last)."""
    found, alarmed = np.cumsum(hits), np.cumsum(alarms)
    recall = found / positives
    precision = found / (found + alarmed + np.spacing(1))
    precision = np.maximum.accumulate(precision[::-1])[::-1]
    at = np.searchsorted(recall, points, side="left")
    out = np.zeros(len(points))
    inside = at < len(precision)
    out[inside] = precision[at[inside]]
    return out


def coco_total(matches: CocoMatches, weights: np.ndarray | None = None) -> float:
    """The mean over classes with true boxes of COCO's 101-point precision, each image counted `weights` times (all
    once by default: pycocotools' own figure)."""
    weights = np.ones(matches.images) if weights is None else np.asarray(weights, dtype=np.float64)
    precisions = []
    for k, (image, score, hit, counted) in enumerate(matches.detections):
        positives = float(matches.true_counts[k] @ weights)
        if positives == 0:
            continue
        weight = weights[image.astype(int)] if len(image) else np.zeros(0)
        keep = weight > 0
        order = np.argsort(-score[keep], kind="mergesort")
        weight, hit, counted = weight[keep][order], hit[keep][order], counted[keep][order]
        precisions.append(_interpolated_precision(weight * (hit & counted), weight * (~hit & counted), positives,
                                                  matches.recall_points))
    return float(np.mean(precisions)) if precisions else -1.0


def coco_map_iou40(truths: Sequence[Sequence[Box]], predictions: Sequence[Sequence[Box]]) -> float:
    return coco_total(coco_matches(truths, predictions))


# --- average precision per class (siim-covid19) --------------------------------------------------------------------

def iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two (x_min, y_min, x_max, y_max) boxes; 0 when the union is empty."""
    width = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    height = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = width * height
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def class_pairs(truth: Sequence[Box], prediction: Sequence[Box], label: str) -> list[tuple[int, float]]:
    """One row's (found, confidence) pairs for `label` (see the module's docstring)."""
    free = [box[2:] for box in truth if box[0] == label]
    taken = [False] * len(free)
    pairs = []
    for box in sorted(prediction, key=lambda b: b[1], reverse=True):
        if box[0] != label:
            continue
        best, best_iou = -1, 0.0
        for j, true_box in enumerate(free):
            overlap = iou(box[2:], true_box)
            if not taken[j] and overlap > best_iou and overlap > CLASS_AP_IOU:
                best, best_iou = j, overlap
        if best >= 0:
            taken[best] = True
        pairs.append((int(best >= 0), box[1]))
    pairs.extend([(1, 0.0)] * taken.count(False))
    return pairs or [(0, 0.0)]


def average_precision(found: np.ndarray, confidence: np.ndarray, weights: np.ndarray | None = None) -> float:
    """scikit-learn's average precision (tested equal to it) with weights: the precision at each distinct
    confidence, from the highest down, times the recall it adds."""
    weights = np.ones(len(found)) if weights is None else np.asarray(weights, dtype=np.float64)
    order = np.argsort(-confidence, kind="mergesort")
    found, confidence, weights = np.asarray(found)[order], np.asarray(confidence)[order], weights[order]
    hits, alarms = np.cumsum(weights * found), np.cumsum(weights * (1 - found))
    last = np.r_[np.flatnonzero(np.diff(confidence)), len(confidence) - 1]  # the last of each distinct confidence
    hits, alarms = hits[last], alarms[last]
    if hits[-1] <= 0:
        return 0.0
    precision = hits / np.maximum(hits + alarms, np.finfo(float).tiny)
    recall = hits / hits[-1]
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


@dataclass(frozen=True)
class ClassPairs:
    """Every row's pairs for each class: `found`, `confidence` and `row` (the row each pair came from)."""

    labels: tuple[str, ...]
    pairs: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]
    rows: int


def class_ap_pairs(truths: Sequence[Sequence[Box]], predictions: Sequence[Sequence[Box]]) -> ClassPairs:
    if len(truths) != len(predictions):
        raise ValueError(f"{len(predictions)} rows predicted for {len(truths)} true ones")
    labels = tuple(sorted({box[0] for boxes in truths for box in boxes}))
    out = []
    for label in labels:
        found, confidence, rows = [], [], []
        for row, (truth, prediction) in enumerate(zip(truths, predictions)):
            for hit, score in class_pairs(truth, prediction, label):
                found.append(hit)
                confidence.append(score)
                rows.append(row)
        out.append((np.asarray(found, float), np.asarray(confidence, float), np.asarray(rows, int)))
    return ClassPairs(labels, tuple(out), len(truths))


def class_ap_total(pairs: ClassPairs, weights: np.ndarray | None = None, exact: bool = True) -> float:
    """The mean over classes of each class's average precision, each row counted `weights` times; `exact`:
    scikit-learn's own function (what the graders call) where every row counts once."""
    from sklearn.metrics import average_precision_score

    scores = []
    for found, confidence, rows in pairs.pairs:
        if weights is None and exact:
            if found.all():
                raise ValueError("every pair of a class is found: its average precision is undefined")
            scores.append(float(average_precision_score(found, confidence)))
        else:
            weight = np.ones(len(found)) if weights is None else np.asarray(weights, float)[rows]
            keep = weight > 0
            scores.append(average_precision(found[keep], confidence[keep], weight[keep]) if keep.any() else 0.0)
    return float(np.mean(scores)) if scores else 0.0


def class_ap_iou50(truths: Sequence[Sequence[Box]], predictions: Sequence[Sequence[Box]]) -> float:
    return class_ap_total(class_ap_pairs(truths, predictions))


# --- points inside boxes (kuzushiji) -------------------------------------------------------------------------------

def _inside(boxes: Sequence[tuple[str, float, float, float, float]],
            points: Sequence[tuple[str, float, float]]) -> np.ndarray:
    """(boxes, points): whether each point lies strictly inside each box of its label."""
    _, codes = np.unique([str(p[0]) for p in points] + [str(b[0]) for b in boxes], return_inverse=True)
    labels, box_labels = codes[:len(points)], codes[len(points):]  # labels as integers: compared fast
    xs, ys = np.array([p[1:3] for p in points], float).T
    x, y, width, height = np.array([b[1:5] for b in boxes], float).T[:, :, None]
    return (x < xs) & (xs < x + width) & (y < ys) & (ys < y + height) & (box_labels[:, None] == labels)


def _walked(inside: np.ndarray) -> int:
    """Boxes that find a point, each box in the answers' order taking the first free point inside it."""
    free, found = np.ones(inside.shape[1], bool), 0
    for row in inside:
        hit = row & free
        if hit.any():
            found += 1
            free[int(np.argmax(hit))] = False
    return found


def prefix_counts(boxes: Sequence[tuple[str, float, float, float, float]],
                  points: Sequence[tuple[str, float, float]], lengths: Sequence[int]) -> np.ndarray:
    """A page's (found, false alarms, missed) for each first `length` of its points (points written from a
    confidence on, likeliest first, are a prefix): (len(lengths), 3), each as `point_counts` of the prefix."""
    lengths = np.asarray(lengths, dtype=int)
    if not len(boxes) or not len(points):
        return np.column_stack([np.zeros_like(lengths), lengths, np.full_like(lengths, len(boxes))])
    inside = _inside(boxes, points)
    if (inside.sum(axis=0) <= 1).all():  # no point in two boxes: each box finds its first point inside, if the
        first = np.where(inside.any(axis=1), inside.argmax(axis=1), len(points))  # prefix holds it
        found = (first[None, :] < lengths[:, None]).sum(axis=1)
    else:  # a box may take a point another box wanted: the grader's walk
        found = np.array([_walked(inside[:, :m]) for m in lengths])
    return np.column_stack([found, lengths - found, len(boxes) - found])


def point_counts(boxes: Sequence[tuple[str, float, float, float, float]],
                 points: Sequence[tuple[str, float, float]]) -> tuple[int, int, int]:
    """A page's (found, false alarms, missed): boxes are (label, x, y, width, height), points (label, x, y); each
    box in turn takes the first free point of its label strictly inside it."""
    found, alarms, missed = prefix_counts(boxes, points, [len(points)])[0].tolist()
    return found, alarms, missed


def point_f1_total(counts: np.ndarray) -> float:
    """Micro F1 of pages' (found, false alarms, missed) counts; 0 where undefined or nothing is found."""
    found, alarms, missed = (np.asarray(counts, float).reshape(-1, 3).sum(axis=0)).tolist()
    if found + alarms == 0 or found + missed == 0 or found == 0:
        return 0.0
    precision, recall = found / (found + alarms), found / (found + missed)
    return float(2 * precision * recall / (precision + recall))


def point_in_box_f1(truths: Sequence, predictions: Sequence) -> float:
    return point_f1_total(np.array([point_counts(t, p) for t, p in zip(truths, predictions)]).reshape(-1, 3))
