"""Labelled boxes as rows of a fixed width, so the engines can learn them, the blend average them and the metric
score them as the grader scores the file written from them.

A row holds, for each finding class (0 .. K-1) and each side of the image (the box's centre left or right of the
middle: a finding of either lung), a slot `confidence, x_min, y_min, x_max, y_max`, the coordinates as shares of
the image's width and height; then one last column, the no-finding class K's confidence (its box is always
`0 0 1 1`, as the answers write it). A training row's truth holds 0/1 confidences (a slot whose box nobody drew
holds its class and side's typical box, so the mean of the rows is a prior of typical boxes at their frequencies).

COCO's IoU (and so `coco_map_iou40`) does not change when an image's x and y are each scaled: scoring boxes in
shares scores them as the grader does in pixels, the no-finding box aside, which is `0 0 1 1` on both sides. The
writer multiplies the shares by each test image's own width and height (its DICOM's Columns and Rows).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from runner.common import box_metrics

SIDES = 2  # a class's box left or right of the image's middle
FIELDS = 5  # confidence, x_min, y_min, x_max, y_max
MIN_CONFIDENCE = 1e-3  # a slot below this is not written (nor scored): it adds nothing but length
TRUE_FROM = 0.5  # a truth row's slot holds a box from this confidence on (truths are 0/1)
PRIOR_ROWS = 2_000  # training rows a prior's classes are judged on (evenly spaced): bounds its seconds at any size
NO_FINDING_BOX = (0.0, 0.0, 1.0, 1.0)


def row_width(classes: int) -> int:
    """Columns of a row for `classes` finding classes (the no-finding class after them)."""
    return classes * SIDES * FIELDS + 1


def finding_classes(width: int) -> int:
    if (width - 1) % (SIDES * FIELDS):
        raise ValueError(f"{width} columns are no rows of boxes ({SIDES * FIELDS} a class, one for no finding)")
    return (width - 1) // (SIDES * FIELDS)


def slots(values: np.ndarray) -> np.ndarray:
    """(rows, classes, SIDES, FIELDS) view of rows of boxes (the no-finding column left out)."""
    values = np.asarray(values, dtype=np.float64)
    classes = finding_classes(values.shape[1])
    return values[:, :-1].reshape(len(values), classes, SIDES, FIELDS)


def boxes_of(row: np.ndarray, truth: bool, scale: tuple[float, float] = (1.0, 1.0)) -> list[box_metrics.Box]:
    """A row's labelled boxes (shares times `scale`, (width, height)): a truth's slots from TRUE_FROM on, a
    prediction's from MIN_CONFIDENCE on with their confidences; the no-finding box unscaled."""
    row = np.asarray(row, dtype=np.float64)
    cut = TRUE_FROM if truth else MIN_CONFIDENCE
    width, height = scale
    out: list[box_metrics.Box] = []
    for label, side in zip(*np.nonzero(slots(row[None])[0, :, :, 0] >= cut)):
        confidence, x0, y0, x1, y1 = slots(row[None])[0, label, side]
        x0, x1 = sorted((min(max(x0, 0.0), 1.0) * width, min(max(x1, 0.0), 1.0) * width))
        y0, y1 = sorted((min(max(y0, 0.0), 1.0) * height, min(max(y1, 0.0), 1.0) * height))
        out.append((str(int(label)), float(confidence), x0, y0, x1, y1))
    if row[-1] >= cut:
        out.append((str(finding_classes(len(row))), float(row[-1]), *NO_FINDING_BOX))
    return out


def _listed(rows, truth: bool):
    """Rows of boxes (an array, as the engines predict them) as lists of boxes; lists (as graded) as they are."""
    if isinstance(rows, np.ndarray) and rows.ndim == 2:
        return [boxes_of(row, truth) for row in rows]
    return rows


def coco_map_rows(truths, predictions) -> float:
    """`coco_map_iou40` of rows of boxes or of lists of boxes."""
    return box_metrics.coco_map_iou40(_listed(truths, True), _listed(predictions, False))


def class_ap_rows(truths, predictions) -> float:
    """`class_ap_iou50` of rows of boxes or of lists of boxes."""
    return box_metrics.class_ap_iou50(_listed(truths, True), _listed(predictions, False))


def pruned_prior(row: np.ndarray, y: np.ndarray, score, lower_is_better: bool) -> tuple[np.ndarray, list[int]]:
    """The mean row of boxes without the finding classes whose typical boxes cost the training rows more than they
    find (siim-covid's opacities, which rarely sit where their mean does): each class judged once, in order, by
    `score(truth, predictions)` on at most PRIOR_ROWS of the rows. The row, and the classes left out."""
    rows = np.asarray(y)[np.unique(np.linspace(0, len(y) - 1, min(len(y), PRIOR_ROWS)).astype(int))]
    best_row = np.asarray(row, dtype=np.float64).copy()
    best = score(rows, np.tile(best_row, (len(rows), 1)))
    dropped = []
    for c in range(finding_classes(len(best_row))):
        trial = best_row.copy()
        trial[:-1].reshape(-1, SIDES, FIELDS)[c, :, 0] = 0.0
        value = score(rows, np.tile(trial, (len(rows), 1)))
        if (value < best) if lower_is_better else (value > best):
            best, best_row = value, trial
            dropped.append(c)
    return best_row, dropped


def _number(value: float) -> str:
    return f"{value:.1f}" if value != int(value) else str(int(value))


def row_classes(layout, row_id: str, classes: int) -> tuple[str, ...]:
    """The class names a row is written with: those its id's ending names (`layout.rows`), else every class (its
    number where the layout names none), the no-finding class last."""
    names = tuple(layout.labels) if layout is not None and layout.labels else tuple(map(str, range(classes + 1)))
    for suffix, chosen in (layout.rows if layout is not None else ()):
        if row_id.endswith(suffix):
            return tuple(chosen)
    return names


def _named(boxes: list[box_metrics.Box], layout, allowed: tuple[str, ...]) -> list[box_metrics.Box]:
    """A row's boxes under their classes' names, only those of `allowed`; a whole-image class once, at its best
    confidence over the sides, with the dummy box `0 0 1 1` (a study's label is no place)."""
    names = layout.labels if layout is not None and layout.labels else None
    out, whole = [], {}
    for label, confidence, *box in boxes:
        name = names[int(label)] if names else label
        if name not in allowed:
            continue
        if layout is not None and name in layout.whole:
            whole[name] = max(whole.get(name, 0.0), confidence)
        else:
            out.append((name, confidence, *box))
    return out + [(name, confidence, *NO_FINDING_BOX) for name, confidence in whole.items()]


def _fallback(layout, allowed: tuple[str, ...], classes: int) -> str:
    """The class a row with no box says (every row needs a string): no finding (the last class) where the row may
    say it, else its first class."""
    no_finding = row_classes(layout, "", classes)[-1]
    return no_finding if no_finding in allowed else allowed[0]


def written(values: np.ndarray, sizes: Sequence[tuple[float, float]], layout=None,
            ids: Sequence[str] | None = None) -> list[str]:
    """Each row's `class confidence x_min y_min x_max y_max` groups, single spaces, in pixels of its image's
    (width, height); confidences rounded to 5 places, coordinates to 0.1 pixel. With a layout
    (runner.competition.spec.BoxFormat) classes are written by name, each row only with those its id's ending
    names (`ids`). A row with no box above MIN_CONFIDENCE says no finding (`K 0.001 0 0 1 1`, or its first class
    where no finding is not among its own): every row needs a string."""
    values = np.nan_to_num(np.asarray(values, dtype=np.float64))
    if len(values) != len(sizes) or (ids is not None and len(ids) != len(values)):
        raise ValueError(f"{len(values)} rows of boxes for {len(sizes)} image sizes")
    classes = finding_classes(values.shape[1])
    out = []
    for k, (row, size) in enumerate(zip(values, sizes)):
        row = row.copy()
        row[:-1].reshape(classes, SIDES, FIELDS)[:, :, 0] = np.round(slots(row[None])[0, :, :, 0], 5)
        row[-1] = round(float(row[-1]), 5)
        allowed = row_classes(layout, str(ids[k]) if ids is not None else "", classes)
        groups = [f"{label} {confidence:.5f} " + " ".join(_number(round(v, 1)) for v in box)
                  for label, confidence, *box in _named(boxes_of(row, False, size), layout, allowed)]
        out.append(" ".join(groups) or f"{_fallback(layout, allowed, classes)} {MIN_CONFIDENCE:.5f} 0 0 1 1")
    return out


def dicom_size(path: Path | None) -> tuple[float, float]:
    """(width, height) in pixels of a DICOM file, from its header (Columns, Rows); (1, 1) when unreadable."""
    if path is None:
        return 1.0, 1.0
    try:
        import pydicom

        header = pydicom.dcmread(path, stop_before_pixels=True)
        return float(header.Columns), float(header.Rows)
    except Exception:  # noqa: BLE001 - an unreadable file's boxes are written at a size of 1: still valid
        return 1.0, 1.0


def picture_size(path: Path | None) -> tuple[float, float]:
    """(width, height) in pixels of a picture, from its header; (1, 1) when unreadable."""
    if path is None:
        return 1.0, 1.0
    try:
        from PIL import Image

        with Image.open(path) as image:
            return float(image.width), float(image.height)
    except (OSError, SyntaxError, ValueError):
        return 1.0, 1.0


def image_sizes(folder: Path, ids: Sequence, suffix: str) -> list[tuple[float, float]]:
    """Each id's image size (width, height) from `folder/<id><suffix>` (a DICOM's header; any other image's own)."""
    out = []
    for name in ids:
        path = Path(folder) / f"{name}{suffix}"
        if suffix.lower() in (".dicom", ".dcm"):
            out.append(dicom_size(path if path.exists() else None))
        else:
            out.append(picture_size(path))
    return out


SIZES = "image_sizes"  # the sample's attribute holding each test image's (width, height): what the writer scales by
ROW_GROUPS = "row_groups"  # the sample's attribute: each row's rows whose whole-image classes it is written with


def with_sizes(sample, folder: Path, id_column: str, suffix: str):
    """The sample with its test images' sizes (width, height) in its attributes, for `boxes_column`."""
    sample.attrs[SIZES] = image_sizes(folder, sample[id_column].astype(str).tolist(), suffix)
    return sample


def with_file_sizes(sample, paths: Sequence[Path | None]):
    """The sample with each row's image size from its DICOM file (`paths`, in the sample's order; None: 1 x 1)."""
    sample.attrs[SIZES] = [dicom_size(path) for path in paths]
    return sample


def pooled(values: np.ndarray, groups: Sequence[Sequence[int]], whole: Sequence[int]) -> np.ndarray:
    """Rows of boxes whose whole-image classes (`whole`, class numbers) are each the mean over its group's rows of
    their best side's confidence (a study's appearance from all of its radiographs), held in the right side's slot;
    the other slots as they were."""
    values = np.asarray(values, dtype=np.float64)
    out = values.copy()
    best = slots(values)[..., 0][:, list(whole)].max(axis=2)  # (rows, whole classes): each one's best side
    grid = slots(out).copy()
    for k, group in enumerate(groups):
        if list(group) != [k]:
            grid[k, list(whole), :, 0] = 0.0
            grid[k, list(whole), 1, 0] = best[list(group)].mean(axis=0)
    out[:, :-1] = grid.reshape(len(out), -1)
    return out


def as_graded(values: np.ndarray, studies: Sequence, layout, truth: bool) -> list[list[box_metrics.Box]]:
    """Rows of boxes of images (`studies`: each image's study) as the grader's rows of a file written from them: a
    row per study (in their first image's order) with its whole-image classes pooled over its images as the writer
    pools them, then a row per image with the other classes; a prediction row with no box says the writer's
    fallback (`_fallback` at MIN_CONFIDENCE)."""
    values = np.nan_to_num(np.asarray(values, dtype=np.float64))
    classes = finding_classes(values.shape[1])
    images: dict = {}
    for k, study in enumerate(studies):
        images.setdefault(study, []).append(k)
    whole = [layout.labels.index(name) for name in layout.whole]
    pooled_values = pooled(values, [images[study] for study in studies], whole)
    study_rows = [pooled_values[rows[0]] for rows in images.values()]
    out = []
    for rows, suffix in ((study_rows, layout.study_suffix), (values, layout.image_suffix)):
        allowed = row_classes(layout, suffix, classes)
        for row in rows:
            named = _named(boxes_of(row, truth), layout, allowed)
            out.append(named or ([] if truth else [(_fallback(layout, allowed, classes), MIN_CONFIDENCE,
                                                    *NO_FINDING_BOX)]))
    return out


def boxes_column(values, predictions, sample, columns, spec) -> dict:
    """The submission writer of rows of boxes: each test row's boxes in its image's pixels (the sizes `with_sizes`
    put in the sample)."""
    from runner.common.errors import InvalidSubmissionError

    sizes = sample.attrs.get(SIZES)
    if sizes is None or len(sizes) != len(values):
        raise InvalidSubmissionError("the test images' sizes are unknown: boxes cannot be written in their pixels")
    groups, layout = sample.attrs.get(ROW_GROUPS), spec.boxes
    if groups is not None and len(groups) == len(values) and layout is not None and layout.whole:
        values = pooled(values, groups, [layout.labels.index(name) for name in layout.whole])
    try:
        return {columns[0]: written(values, sizes, spec.boxes, sample[spec.id_column].astype(str).tolist())}
    except ValueError as exc:
        raise InvalidSubmissionError(str(exc)) from None
