"""Boxes as a centre-point detector's targets and back (CenterNet's encoding; numpy only, so tests and planning
need no torch).

The image is a grid of `cells` x `cells` (the network's output, its input side over the stride). Each box drawn in
a row of boxes (runner.common.box_rows: a slot per class and side) puts, in its class's heatmap, an elliptical
Gaussian peaking at 1 on the cell holding its centre (TTFNet's: each axis's spread a share of the box's size along
it), and at that cell its class's four regression targets: the box's width and height in cells and its centre's
offset within the cell. Decoding keeps the heatmap's local maxima (a cell no lower than its 3x3 neighbours, as
CenterNet's max-pool does) and fills each slot with its class's highest peak on its side of the image: the row
layout holds one box a class and side, and the answers hold at most one box a class and image. A side with no
peak of its class is left at confidence 0 (not written), so a peak's tail across the middle never stands as a
second, weaker copy of the same box (its box is still its side's likeliest cell's, for a blend to average).
"""
from __future__ import annotations

import numpy as np

from runner.common import box_rows

REGRESSION = 4  # a class's targets at its centre cell: width and height in cells, the centre's offset in the cell
ALPHA = 0.54  # TTFNet's: a Gaussian's spread along an axis is ALPHA/6 of the box's size along it
MIN_SIGMA = 0.5  # cells: a box smaller than a cell still marks its neighbours a little, as CenterNet's radius does


def drawn_boxes(rows: np.ndarray) -> list[list[tuple[int, np.ndarray]]]:
    """Each row's (class, box in shares) for every slot a truth holds (confidence from box_rows.TRUE_FROM)."""
    grid = box_rows.slots(rows)
    present = grid[..., 0] >= box_rows.TRUE_FROM
    return [[(int(c), grid[n, c, s, 1:]) for c, s in zip(*np.nonzero(present[n]))] for n in range(len(rows))]


def mirrored(rows: np.ndarray) -> np.ndarray:
    """Rows of boxes of the images mirrored left-right: each box mirrored, and so moved to the other side's slot."""
    grid = box_rows.slots(rows).copy()
    x0, x1 = grid[..., 1].copy(), grid[..., 3].copy()
    grid[..., 1], grid[..., 3] = 1 - x1, 1 - x0
    return np.column_stack([grid[:, :, ::-1].reshape(len(rows), -1), rows[:, -1]])


def _gaussian(cells: int, column: int, row: int, sigma_x: float, sigma_y: float) -> np.ndarray:
    rows, columns = np.mgrid[:cells, :cells]
    return np.exp(-((columns - column) ** 2 / (2 * sigma_x ** 2) + (rows - row) ** 2 / (2 * sigma_y ** 2)))


def encode(rows: np.ndarray, cells: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(heatmaps (n, classes, cells, cells), regression (n, classes, REGRESSION, cells, cells), centres (n,
    classes, cells, cells) bool) of rows of boxes: see the module's docstring."""
    classes = box_rows.finding_classes(rows.shape[1])
    heat = np.zeros((len(rows), classes, cells, cells), dtype=np.float32)
    regression = np.zeros((len(rows), classes, REGRESSION, cells, cells), dtype=np.float32)
    centres = np.zeros((len(rows), classes, cells, cells), dtype=bool)
    for n, boxes in enumerate(drawn_boxes(rows)):
        for label, box in boxes:
            x0, y0, x1, y1 = np.clip(box, 0.0, 1.0) * cells
            width, height = max(x1 - x0, 1e-3), max(y1 - y0, 1e-3)
            cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
            column, row = min(cells - 1, int(cx)), min(cells - 1, int(cy))
            spread = _gaussian(cells, column, row, max(MIN_SIGMA, ALPHA * width / 6),
                               max(MIN_SIGMA, ALPHA * height / 6))
            heat[n, label] = np.maximum(heat[n, label], spread)
            regression[n, label, :, row, column] = (width, height, cx - column, cy - row)
            centres[n, label, row, column] = True
    return heat, regression, centres


def peaks(heat: np.ndarray) -> np.ndarray:
    """Where each map (the last two axes) is a local maximum: no lower than any of its 3x3 neighbours."""
    padded = np.pad(heat, [(0, 0)] * (heat.ndim - 2) + [(1, 1), (1, 1)], constant_values=-np.inf)
    cells_y, cells_x = heat.shape[-2:]
    most = np.max([padded[..., dy:dy + cells_y, dx:dx + cells_x] for dy in range(3) for dx in range(3)], axis=0)
    return heat >= most


def boxes_at(regression: np.ndarray) -> np.ndarray:
    """Every cell's box (..., 4, cells, cells) in shares, x_min, y_min, x_max, y_max, from its regression."""
    cells_y, cells_x = regression.shape[-2:]
    rows, columns = np.mgrid[:cells_y, :cells_x]
    cx, cy = (columns + regression[..., 2, :, :]) / cells_x, (rows + regression[..., 3, :, :]) / cells_y
    half_w, half_h = np.abs(regression[..., 0, :, :]) / cells_x / 2, np.abs(regression[..., 1, :, :]) / cells_y / 2
    return np.clip(np.stack([cx - half_w, cy - half_h, cx + half_w, cy + half_h], axis=-3), 0.0, 1.0)


def decode(heat: np.ndarray, regression: np.ndarray, no_finding: np.ndarray) -> np.ndarray:
    """Rows of boxes from heatmaps (n, classes, cells, cells) of probabilities, their regression (n, classes,
    REGRESSION, cells, cells) and each image's no-finding confidence (n,): each slot its class's highest peak on
    its side (its centre's); where the side has none, confidence 0 and its likeliest cell's box."""
    n, classes, cells_y, cells_x = heat.shape
    boxes = boxes_at(regression)  # (n, classes, 4, cells, cells)
    side = ((boxes[:, :, 0] + boxes[:, :, 2]) / 2 >= 0.5).astype(int)
    local = peaks(heat)
    out = np.zeros((n, classes, box_rows.SIDES, box_rows.FIELDS))
    flat_boxes = boxes.reshape(n, classes, 4, -1)
    for s in range(box_rows.SIDES):
        # a peak outranks any cell that is none (heat is at most 1): the side's best cell stands only for its box
        rank = np.where(side == s, heat + 2.0 * local, -1.0).reshape(n, classes, -1)
        best = rank.argmax(axis=-1)[..., None]
        chosen = np.take_along_axis(np.where(local, heat, 0.0).reshape(n, classes, -1), best, -1)[..., 0]
        out[:, :, s, 0] = np.where(np.take_along_axis(rank, best, -1)[..., 0] >= 2.0, chosen, 0.0)
        out[:, :, s, 1:] = np.take_along_axis(flat_boxes, best[:, :, None], -1)[..., 0]
    return np.column_stack([out.reshape(n, -1), no_finding])


def encode_points(pages: list[np.ndarray], cells: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One heatmap's targets for pages of characters, each page's boxes (k, 4: x, y, width, height in cells):
    (heatmaps (n, 1, cells, cells), regression (n, 1, REGRESSION, cells, cells), centres (n, 1, cells, cells)
    bool, and each character's (page, row, column) centre cell (k, 3), in the pages' order). Each Gaussian is drawn
    within 3 sigmas of its centre only, all of a page's at once: a page holds hundreds of characters, each a few
    cells across."""
    n = len(pages)
    heat = np.zeros((n, 1, cells, cells), dtype=np.float32)
    regression = np.zeros((n, 1, REGRESSION, cells, cells), dtype=np.float32)
    centres = np.zeros((n, 1, cells, cells), dtype=bool)
    where = []
    for p, boxes in enumerate(pages):
        x, y, width, height = np.asarray(boxes, dtype=np.float64).reshape(-1, 4).T
        width, height = np.maximum(width, 1e-3), np.maximum(height, 1e-3)
        cx, cy = np.clip(x + width / 2, 0.0, cells - 1e-3), np.clip(y + height / 2, 0.0, cells - 1e-3)
        column, row = cx.astype(int), cy.astype(int)
        sigma_x, sigma_y = np.maximum(MIN_SIGMA, ALPHA * width / 6), np.maximum(MIN_SIGMA, ALPHA * height / 6)
        reach_x, reach_y = np.ceil(3 * sigma_x).astype(int), np.ceil(3 * sigma_y).astype(int)
        offsets = np.arange(-max(reach_x.max(initial=0), reach_y.max(initial=0)),
                            max(reach_x.max(initial=0), reach_y.max(initial=0)) + 1)
        dy, dx = offsets[None, :, None], offsets[None, None, :]
        rows, columns = np.broadcast_arrays(row[:, None, None] + dy, column[:, None, None] + dx)
        drawn = ((np.abs(dx) <= reach_x[:, None, None]) & (np.abs(dy) <= reach_y[:, None, None])
                 & (rows >= 0) & (rows < cells) & (columns >= 0) & (columns < cells))
        spread = np.exp(-(dx ** 2 / (2 * sigma_x[:, None, None] ** 2) + dy ** 2 / (2 * sigma_y[:, None, None] ** 2)))
        np.maximum.at(heat[p, 0], (rows[drawn], columns[drawn]), spread[drawn].astype(np.float32))
        regression[p, 0, :, row, column] = np.stack([width, height, cx - column, cy - row], axis=1)
        centres[p, 0, row, column] = True
        where.extend((p, r, c) for r, c in zip(row.tolist(), column.tolist()))
    return heat, regression, centres, np.array(where, dtype=np.int64).reshape(-1, 3)
