"""The `Boxes` engine: rows of boxes (runner.common.box_rows) learned from each image's pixels at the boxes'
typical places. Each image is shrunk once to a gray square of BOX_SIDE pixels (standardised: its own mean and
spread), and described at every slot's typical box (a class on a side, its mean box over the fold's training
rows): the box's mean and spread against its mirror image's across the middle (a finding on one side makes the
sides differ) and against the whole image's, and the image's left-right differences pooled on a coarse grid.
Standardised logistic regressions on that table give the no-finding class's confidence and the chance that a
finding is abnormal at all; each slot's confidence is the abnormal chance times the slot's share of the abnormal
training images, geometrically averaged with its own regression's (every slot drawn in the fold's training rows
has one, however rarely: even a single drawn box ranks the images better than the abnormal chance alone). Boxes stay at their slot's typical place: the metric's IoU of 0.4 on boxes as the grader reads them
(x_min, y_min, then x_max, y_max as width and height) forgives the jitter of a class about its place, never the
wrong side. A one-shot fit of seconds; what it learns is which images hold findings and on which side. On the
replica's 200 training images (5-fold CV) it scores 0.361 against the typical-box prior's 0.097; writing the
no-finding box beside the findings matters: without it 0.299, the no-finding box alone 0.062.
"""
from __future__ import annotations

import dataclasses
import pickle
import time
import warnings
from multiprocessing.pool import ThreadPool
from pathlib import Path

import numpy as np
from PIL import Image

from runner.common import box_rows
from runner.data.dataset import MAX_PIXELS
from runner.common.atomic import replacing
from runner.engines.base import Engine, EngineResult, FoldData
from runner.engines.oneshot import STARTUP_SECONDS, one_shot_member
from runner.planning.portfolio import Member, PlanContext, Settings

NAME = "boxes"
BOX_SIDE = 48  # the gray square each image is shrunk to: the replica's radiographs are 60-80 px a side
GRID = 8  # the left-right difference pooled on GRID x GRID cells (half of them: the other half mirrors them)
POSITIVES_OWN = 1  # a slot with fewer drawn boxes in the fold's training rows has no regression of its own: on the
# replica's 200 images (5-fold CV) 1 scored 0.361, 2 0.335, 3 0.304, none at all 0.149 (the prior 0.097)
DECODES_PER_CORE_SECOND = 300.0  # opening and shrinking a decoded radiograph's PNG here
FIT_SECONDS = 2.0  # the regressions of a fold on a few thousand images: an estimate, the first fold times it
PRIOR_GAIN = 0.5  # the one engine that learns boxes


class BoxSettings(Settings):
    C: float = 0.1  # strong regularisation: few drawn boxes a slot
    side: int = BOX_SIDE


def standardised(pixels: np.ndarray, side: int) -> np.ndarray:
    """(n, side, side) images, each to zero mean and unit spread (a radiograph's exposure and inversion aside)."""
    images = pixels.reshape(len(pixels), side, side).astype(np.float64)
    images -= images.mean(axis=(1, 2), keepdims=True)
    return images / (images.std(axis=(1, 2), keepdims=True) + 1e-6)


def _gray(path: Path | None, side: int) -> np.ndarray | None:
    """The whole picture as a gray square of `side` pixels (stretched, never cropped: boxes are shares of the whole
    image), or None when it cannot be read or is larger than MAX_PIXELS."""
    if path is None:
        return None
    try:
        with Image.open(path) as image:
            if image.width * image.height > MAX_PIXELS:
                return None
            return np.asarray(image.convert("L").resize((side, side), Image.BILINEAR), dtype=np.float32) / 255.0
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        return None


def gray_table(paths: list, side: int, workers: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows x side*side floats in [0, 1], a mask of those that decoded); an unreadable image is a gray square."""
    table = np.full((len(paths), side * side), 0.5, dtype=np.float32)
    ok = np.zeros(len(paths), dtype=bool)
    with ThreadPool(max(1, workers)) as pool:  # Pillow decodes without the GIL
        for i, pixels in enumerate(pool.imap(lambda p: _gray(p, side), paths, chunksize=16)):
            if pixels is not None:
                table[i], ok[i] = pixels.ravel(), True
    return table, ok


def _region(box: np.ndarray, side: int) -> tuple[slice, slice]:
    x0, y0, x1, y1 = np.clip(np.asarray(box, dtype=np.float64), 0.0, 1.0) * side
    c0, c1 = int(np.floor(x0)), max(int(np.floor(x0)) + 1, int(np.ceil(x1)))
    r0, r1 = int(np.floor(y0)), max(int(np.floor(y0)) + 1, int(np.ceil(y1)))
    return slice(min(r0, side - 1), min(r1, side)), slice(min(c0, side - 1), min(c1, side))


def features(images: np.ndarray, typical: np.ndarray) -> np.ndarray:
    """Each image's table: per slot (typical (classes, SIDES, 4) boxes in shares) its box's mean and spread against
    its mirror box's, and its mean against the image's; then the pooled left-right differences."""
    n, side, _ = images.shape
    mirrored = images[:, :, ::-1]
    columns = []
    for box in typical.reshape(-1, 4):
        rows, cols = _region(box, side)
        here, there = images[:, rows, cols], mirrored[:, rows, cols]
        columns += [here.mean(axis=(1, 2)) - there.mean(axis=(1, 2)), here.std(axis=(1, 2)) - there.std(axis=(1, 2)),
                    here.mean(axis=(1, 2))]
    cell = side // GRID
    difference = (images - mirrored)[:, :cell * GRID, :cell * GRID // 2]
    pooled = difference.reshape(n, GRID, cell, GRID // 2, cell).mean(axis=(2, 4)).reshape(n, -1)
    return np.column_stack([*columns, pooled, np.abs(pooled)])


def _logistic(C: float, seed: int):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=500, random_state=seed))


@dataclasses.dataclass
class BoxModel:
    """The fitted regressions and the boxes' typical places."""

    typical: np.ndarray  # (classes, SIDES, 4)
    share: np.ndarray  # (classes, SIDES): each slot's share of the abnormal training images
    no_finding: object
    abnormal: object
    own: dict  # (class, side) -> its regression

    @property
    def classes(self) -> int:
        return len(self.typical)


def _fitted(x: np.ndarray, y: np.ndarray, C: float, seed: int):
    """A regression of 0/1 `y`, or its constant share where it holds one class only."""
    if y.min() == y.max():
        return float(y[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _logistic(C, seed).fit(x, y)


def _chance(model, x: np.ndarray) -> np.ndarray:
    return np.full(len(x), model) if isinstance(model, float) else model.predict_proba(x)[:, 1]


def fit(images: np.ndarray, y: np.ndarray, C: float, seed: int = 0) -> BoxModel:
    grid = box_rows.slots(y)
    present = grid[..., 0] >= box_rows.TRUE_FROM
    drawn = present.any(axis=0)
    typical = np.where(drawn[..., None],
                       (grid[..., 1:] * present[..., None]).sum(0) / np.maximum(present.sum(0), 1)[..., None],
                       grid[..., 1:].mean(axis=0))
    x = features(images, typical)
    abnormal = present.any(axis=(1, 2))
    share = present[abnormal].mean(axis=0) if abnormal.any() else present.mean(axis=0)
    own = {(c, s): _fitted(x, present[:, c, s].astype(int), C, seed)
           for c, s in zip(*np.nonzero(present.sum(axis=0) >= POSITIVES_OWN))}
    return BoxModel(typical, share, _fitted(x, (y[:, -1] >= box_rows.TRUE_FROM).astype(int), C, seed),
                    _fitted(x, abnormal.astype(int), C, seed), own)


def predict(model: BoxModel, images: np.ndarray) -> np.ndarray:
    """Rows of boxes: each slot at its typical box with its confidence, then the no-finding confidence."""
    x = features(images, model.typical)
    abnormal = _chance(model.abnormal, x)
    confidence = abnormal[:, None, None] * model.share[None]
    for (c, s), own in model.own.items():
        confidence[:, c, s] = np.sqrt(confidence[:, c, s] * _chance(own, x))
    rows = np.concatenate([confidence[..., None], np.broadcast_to(model.typical, (len(x), *model.typical.shape))],
                          axis=-1).reshape(len(x), -1)
    return np.column_stack([rows, _chance(model.no_finding, x)])


class Boxes(Engine):
    name = NAME
    inputs = "image"
    learns = "boxes"  # a row's outputs are its boxes in fixed slots: it takes box submissions alone
    Settings = BoxSettings
    cheap_first = True
    steps = "fits"
    preload = ("sklearn.linear_model", "sklearn.preprocessing", "runner.engines.boxes")

    def plan(self, context: PlanContext) -> list[Member]:
        data = context.data
        prepare = STARTUP_SECONDS + (data.n_train + data.n_test) * data.decode_each(DECODES_PER_CORE_SECOND) \
            / max(1, context.cores)
        why = (f"each image a {BOX_SIDE}x{BOX_SIDE} gray square, described at every class and side's typical box "
               "(against its mirror image and the whole image); logistic regressions of no finding, of any "
               "finding and of each slot drawn often enough; boxes at their typical places")
        member = one_shot_member(context, NAME, BoxSettings(), STARTUP_SECONDS + FIT_SECONDS, FIT_SECONDS,
                                 PRIOR_GAIN, why)
        return [member.model_copy(update=dict(prepare_threads=context.cores, prepare_seconds=round(prepare, 1)))]

    def prepare_key(self, settings: BoxSettings) -> str:
        return f"boxes-{settings.side}"

    def prepare(self, settings: BoxSettings, dataset, work: Path, threads: int):
        train, test = dataset.views["image"]
        table, ok = gray_table(list(train) + list(test), settings.side, threads)
        n = len(train)
        untrainable = ~ok[:n] if dataset.untrainable is None else dataset.untrainable | ~ok[:n]
        views = {**dataset.views, "image": (table[:n], table[n:])}
        return dataclasses.replace(dataset, views=views, untrainable=untrainable)

    def train_fold(self, settings: BoxSettings, data: FoldData, out_dir: Path, deadline: float) -> EngineResult:
        started = time.monotonic()
        model = fit(standardised(np.asarray(data.x_train), settings.side), np.asarray(data.y_train), settings.C,
                    settings.seed)
        train_seconds, t0 = time.monotonic() - started, time.monotonic()
        val, test = (predict(model, standardised(np.asarray(x), settings.side)) for x in (data.x_val, data.x_test))
        checkpoint = out_dir / "model.pkl"
        with replacing(checkpoint) as tmp:
            tmp.write_bytes(pickle.dumps(model))
        return EngineResult(val, test, checkpoint, epochs=1, best_epoch=1, epoch_seconds=train_seconds,
                            min_train_seconds=train_seconds, train_seconds=train_seconds,
                            predict_seconds=time.monotonic() - t0, stopped_by_deadline=False,
                            message=f"{len(model.own)} slot(s) with a regression of their own")
