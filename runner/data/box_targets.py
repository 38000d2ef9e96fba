"""Boxes as training targets: a train file of a row per drawn box (`image_id, class_id, x_min, y_min, x_max, y_max`,
several readers an image, the no-finding class with empty coordinates) gathered into a row per image of the fixed
width runner.common.box_rows lays out. A slot (class, side) holds 1 and the mean of the boxes drawn there, in
shares of the image's size (its DICOM's or picture's own); the no-finding column 1 where any reader said so (as
the answers keep it). A slot nobody drew holds its class and side's mean box over the training images (or the
mirror of the other side's, or a small box at the side's middle), so the rows' mean is a prior of typical boxes.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.common import box_rows
from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec

COLUMNS = ("class_id", "x_min", "y_min", "x_max", "y_max")
DEFAULT_SIZE = 0.1  # a class never drawn on a side: a box this share of the image at the side's middle


def _typical(boxes: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """(classes, SIDES, 4): each slot's mean drawn box, else the other side's mirrored, else a default."""
    classes = boxes.shape[1]
    typical = np.zeros((classes, box_rows.SIDES, 4))
    for c in range(classes):
        for s in range(box_rows.SIDES):
            if drawn[:, c, s].any():
                typical[c, s] = boxes[drawn[:, c, s], c, s].mean(axis=0)
            elif drawn[:, c, 1 - s].any():
                x0, y0, x1, y1 = boxes[drawn[:, c, 1 - s], c, 1 - s].mean(axis=0)
                typical[c, s] = (1 - x1, y0, 1 - x0, y1)
            else:
                u = 0.25 + 0.5 * s
                typical[c, s] = (u - DEFAULT_SIZE / 2, 0.5 - DEFAULT_SIZE / 2, u + DEFAULT_SIZE / 2,
                                 0.5 + DEFAULT_SIZE / 2)
    return typical


def box_targets(spec: CompetitionSpec, train: pd.DataFrame, path: Path,
                warnings: list[str]) -> tuple[pd.DataFrame, None, np.ndarray]:
    """(a row per image, None, rows of boxes) from the train file at `path` (its images beside it): see the
    module's docstring. The no-finding class is the one whose rows have no coordinates (vinbigdata's 14), the
    finding classes 0 .. K-1 below it."""
    data_dir = Path(path).parent
    missing = [c for c in (spec.id_column, *COLUMNS) if c not in train.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {missing} (a row per drawn box)")
    frame = train[[spec.id_column, *COLUMNS]].copy()
    frame["class_id"] = pd.to_numeric(frame["class_id"], errors="coerce")
    if frame["class_id"].isna().any():
        raise InputError(f"{path}: column 'class_id' holds values that are no class numbers")
    empty = frame[list(COLUMNS[1:])].isna().any(axis=1)
    none_class = sorted(frame.loc[empty, "class_id"].astype(int).unique().tolist())
    classes = int(frame["class_id"].max()) if none_class else int(frame["class_id"].max()) + 1
    if spec.boxes is not None and spec.boxes.labels:  # named classes: the no-finding one is the last name
        classes = len(spec.boxes.labels) - 1
    if none_class and none_class != [classes]:
        raise InputError(f"{path}: rows without a box hold class(es) {none_class}; only the highest class "
                         f"({classes}, no finding) may")
    images = pd.unique(frame[spec.id_column].astype(str))
    index = {image: i for i, image in enumerate(images)}
    if {"width", "height"} <= set(train.columns):  # the items reader read each image's size (nested files)
        sized = train.drop_duplicates(spec.id_column)
        sizes = sized.set_index(sized[spec.id_column].astype(str)).loc[list(images), ["width", "height"]]
        sizes = sizes.to_numpy(dtype=np.float64)
    else:
        sizes = np.array(box_rows.image_sizes(data_dir / (spec.image_dir or ""), images, spec.image_suffix or ""))
    if (sizes == 1.0).all(axis=1).any():
        warnings.append(f"{path}: {int((sizes == 1.0).all(axis=1).sum())} image(s) of unknown size: their boxes "
                        "are taken as drawn on a 1 x 1 picture")
    rows = np.array([index[str(i)] for i in frame[spec.id_column]])
    no_finding = np.zeros(len(images))
    no_finding[rows[empty.to_numpy()]] = 1.0
    drawn_rows = ~empty.to_numpy()
    coords = frame.loc[drawn_rows, list(COLUMNS[1:])].to_numpy(dtype=np.float64)
    where, labels = rows[drawn_rows], frame.loc[drawn_rows, "class_id"].to_numpy(dtype=int)
    shares = coords / np.concatenate([sizes[where], sizes[where]], axis=1)  # (x, y, x, y) over (w, h, w, h)
    side = ((shares[:, 0] + shares[:, 2]) / 2 >= 0.5).astype(int)
    sums = np.zeros((len(images), classes, box_rows.SIDES, 4))
    counts = np.zeros((len(images), classes, box_rows.SIDES))
    np.add.at(sums, (where, labels, side), shares)
    np.add.at(counts, (where, labels, side), 1.0)
    drawn = counts > 0
    boxes = sums / np.maximum(counts, 1)[..., None]
    boxes = np.where(drawn[..., None], boxes, _typical(boxes, drawn)[None])
    y = np.concatenate([drawn[..., None].astype(np.float64), boxes], axis=-1).reshape(len(images), -1)
    y = np.concatenate([y, no_finding[:, None]], axis=1)
    return pd.DataFrame({spec.id_column: images}), None, y
