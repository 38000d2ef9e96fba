"""The Dataset every engine trains on: targets, and views of the same rows (a table, texts, images, clips,
pages); and what images give at a glance (their typical side, an RGB square)."""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from runner.common.sampling import Sampled
from runner.competition.spec import CompetitionSpec
from runner.data.sounds import MELS

log = logging.getLogger(__name__)


MAX_PIXELS = 50_000_000  # per image, well under PIL's bomb limit (~89 M): one decode per core must fit in memory
INPUTS = ("table", "text", "image", "audio", "page")  # the views a Dataset can carry; each engine reads one
SPECTROGRAM_SIDE = MELS  # an audio competition's pictures: its clips' mel spectrograms, as tall as wide
SIDE_SAMPLE = 64  # training images whose headers give the typical image side: a median, read in milliseconds


@dataclass
class Dataset:
    """What the engines train on: targets, and one or more views of the same rows (a table of features, texts,
    images), each a (train, test) pair. Test rows are in the sample submission's order."""

    spec: CompetitionSpec
    value_columns: list[str]  # the sample submission's columns that predictions fill
    classes: list | None  # class values in output order; None for regression
    y: np.ndarray  # (n,) class indices, or (n, t) regression targets
    views: dict[str, tuple]  # input kind -> (train, test): DataFrames, lists of texts, image paths or arrays
    warnings: list[str] = field(default_factory=list)
    image_cache: str | None = None  # decoded images (.npy): train rows then test rows; the image view holds rows
    untrainable: np.ndarray | None = None  # train rows no fold fits on (their input could not be read)
    groups: np.ndarray | None = None  # train rows of one group share a fold (the pixels of one page)
    image_side: int = 0  # the images' (or pages') median shorter side in pixels; an audio task's spectrogram side
    source_pixels: int = 0  # image to image: every pixel of the training pages, however many rows the table keeps
    choices: np.ndarray | None = None  # text normalisation: each test row's string for each class (runner.data.textnorm.candidates)
    sampled: tuple[Sampled, ...] = ()  # what the engines learn from only a part of, and why (runner.common.sampling)
    decode_seconds: float = 0.0  # one core's seconds to decode one training image or clip (0: not measured)
    # a `labels` submission: the label each column of y stands for (y holds 0/1 per label; the writer names them)
    labels: list[str] | None = None
    test_rows: int = 0  # the test rows where no view holds them (no test features: the prior answers every row)
    scored: np.ndarray | None = None  # train rows the grader's rule would score (osic's last visits): tuned on them
    score_groups: np.ndarray | None = None  # each train row's group in a metric that scores groups apart

    @property
    def n_outputs(self) -> int:
        return len(self.classes) if self.classes is not None else self.y.shape[1]

    @property
    def inputs(self) -> frozenset[str]:
        return frozenset(self.views)

    @property
    def n_test(self) -> int:
        return len(next(iter(self.views.values()))[1]) if self.views else self.test_rows

    def subset(self, keep: np.ndarray) -> "Dataset":
        """The same dataset keeping only the train rows where `keep` is true."""
        views = {kind: (rows_of(train, keep), test) for kind, (train, test) in self.views.items()}
        groups = None if self.groups is None else self.groups[keep]
        score_groups = None if self.score_groups is None else self.score_groups[keep]
        scored = None if self.scored is None else self.scored[keep]
        return dataclasses.replace(self, y=self.y[keep], views=views, warnings=list(self.warnings), groups=groups,
                                   score_groups=score_groups, scored=scored)


def typical_side(paths: list[Path | None]) -> int:
    """The median shorter side of up to SIDE_SAMPLE training images spread over the list, read from their
    headers without decoding (0 when none is readable)."""
    present = [p for p in paths if p is not None]
    sides = []
    for k in np.unique(np.linspace(0, len(present) - 1, min(SIDE_SAMPLE, len(present))).astype(int)):
        try:
            with Image.open(present[k]) as image:
                sides.append(min(image.size))
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
            continue
    return int(np.median(sides)) if sides else 0


def decode_square(path: Path | None, side: int, whole: bool = False) -> np.ndarray | None:
    """An RGB square of `side` pixels (shorter side resized, centre cropped; `whole`: the whole picture stretched
    to it, where boxes are shares of it), or None when unreadable or larger than MAX_PIXELS (checked from the
    header, before anything is decoded)."""
    if path is None:
        return None
    try:
        with Image.open(path) as image:
            if image.width * image.height > MAX_PIXELS:
                log.warning("%s: refused: %d x %d pixels, more than %d", path, image.width, image.height, MAX_PIXELS)
                return None
            image.draft("RGB", (side, side))  # JPEG: decode at a reduced scale, much faster for large photos
            image = image.convert("RGB")
            if whole:
                return np.asarray(image.resize((side, side), Image.BILINEAR, reducing_gap=2.0), dtype=np.uint8)
            scale = side / min(image.size)
            size = (max(side, round(image.width * scale)), max(side, round(image.height * scale)))
            image = image.resize(size, Image.BILINEAR, reducing_gap=2.0)
            left, top = (image.width - side) // 2, (image.height - side) // 2
            return np.asarray(image.crop((left, top, left + side, top + side)), dtype=np.uint8)
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        log.debug("cannot decode %s: %s", path, exc)
        return None


def rows_of(inputs, keep: np.ndarray):
    """The rows of a view's inputs (a table, an array, a sparse matrix or a list) where `keep` is true, in their
    order."""
    if hasattr(inputs, "tocsr"):  # a sparse matrix: TF-IDF's vectors
        return inputs.tocsr()[np.flatnonzero(keep)]
    if hasattr(inputs, "iloc"):
        return inputs.loc[keep].reset_index(drop=True)
    if isinstance(inputs, np.ndarray):
        return inputs[keep]
    return [x for x, k in zip(inputs, keep) if k]
