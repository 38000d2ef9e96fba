"""Reading a competition's public folder into a Dataset: inputs for the train and test rows, targets as arrays.

Every failure names the file or column at fault. Rows that cannot be used (a missing label, a missing image)
are dropped with a warning instead of stopping the run. `load_dataset` chooses the layout: a table with files
or texts beside it, items listed in files (runner.data.listed), image to image (runner.data.pages) or text
normalisation's tokens (runner.data.tokens)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec
from runner.competition.grade_rows import graded
from runner.data.dataset import SPECTROGRAM_SIDE, Dataset, decode_square, typical_side
from runner.data.decoders import decode, decode_threads, probe_seconds
from runner.data.image_draw import affordable_train, decode_seconds
from runner.data.items import Items, read_items
from runner.data.listed import listed_dataset
from runner.data.pages import pixel_dataset
from runner.data.part_rows import part_rows
from runner.data.reading import read_table
from runner.data.sounds import clip_seconds
from runner.data.table_features import tabular_features
from runner.data.targets import align_test, file_inputs, files_with_labels, read_labels, read_sample, value_columns
from runner.data.tokens import token_dataset

log = logging.getLogger(__name__)


@dataclass
class FileViews:
    """What the files of the rows give: views, the training rows they let train, and what was measured of them."""

    views: dict[str, tuple]
    keep: np.ndarray
    side: int = 0
    seconds_each: float = 0.0
    sampled: tuple = ()


def _file_views(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame, train: pd.DataFrame,
                items: Items | None, warnings: list[str], budget_seconds: float | None, cores: int) -> FileViews:
    """The views of a competition whose inputs are files (images, clips, arrays, a signal per item): the files an
    items reader named, else each row's id plus the spec's suffix; decoded where the spec says how."""
    if items is not None:  # the reader named the files: the rows whose file it found train
        files = {str(i): f for i, f in zip(items.train[spec.id_column].astype(str), items.train_files)}
        train_paths, test_paths = [files.get(str(i)) for i in train[spec.id_column]], items.test_files
        keep = np.array([p is not None for p in train_paths])
    else:
        keep, train_paths, test_paths = file_inputs(spec, train[spec.id_column], sample[spec.id_column], data_dir,
                                                     work_dir, warnings)
    views: dict[str, tuple] = {}
    drawn: tuple = ()
    if spec.decode:  # arrays and other files: pictures (or tables) the engines read, written once
        if budget_seconds:  # a slow decode (a mammogram, a CT study) draws the training files it affords first
            keep, cut = affordable_train(keep, len(test_paths), probe_seconds(spec, train_paths, work_dir),
                                         budget_seconds, decode_threads(), str(data_dir / (spec.image_dir or "")))
            train_paths, drawn = [p if k else None for p, k in zip(train_paths, keep)], (cut,) if cut else ()
            warnings.extend(c.say() for c in drawn)
        views = decode(spec, train_paths, test_paths, work_dir)
        train_paths, test_paths = views.pop("image", (train_paths, test_paths))
        keep = keep & np.array([p is not None for p in train_paths])
        if not keep.any():
            raise InputError(f"{data_dir / (spec.image_dir or '')}: no training file could be read ({spec.decode})")
    if spec.task not in ("image", "audio"):
        return FileViews(views, keep, sampled=drawn)
    found = FileViews(views, keep, sampled=drawn)
    if spec.task == "image" and budget_seconds:  # a first decode of them all must leave time to train
        found.seconds_each = decode_seconds(train_paths, decode_square)
        found.keep, cut = affordable_train(keep, len(test_paths), found.seconds_each, budget_seconds, cores,
                                           str(data_dir / (spec.image_dir or "")))
        found.sampled += (cut,) if cut else ()
        warnings.extend([cut.say()] if cut else [])
    elif budget_seconds:  # clips: what their prepare steps will take, planned from a measured few
        found.seconds_each = clip_seconds(train_paths)
    views[spec.task] = (train_paths, test_paths)
    found.side = typical_side(train_paths) if spec.task == "image" else SPECTROGRAM_SIDE
    return found


def load_dataset(spec: CompetitionSpec, data_dir: Path, work_dir: Path, budget_seconds: float | None = None,
                 memory: int | None = None, cores: int = 1) -> Dataset:
    """Read everything the engines need, checking each file and column as it goes. Besides the competition's own
    input (images, texts or a table), the other columns that train and test files share become a table view. With a
    budget, a training table too large for it is sampled, as one too large for `memory` bytes (the run's) is cut,
    and training images are drawn to what decoding them on `cores` affords (each said in `sampled`)."""
    data_dir = Path(data_dir)
    sample = read_sample(spec, data_dir)
    columns = value_columns(spec, sample)
    if spec.labels_file:
        return listed_dataset(spec, data_dir, work_dir, sample, columns)
    if spec.target_image_dir:
        return pixel_dataset(spec, data_dir, work_dir, sample, columns, budget_seconds)
    if spec.task == "text_normalization":
        return token_dataset(spec, data_dir, sample, columns, budget_seconds, memory)
    warnings: list[str] = []
    parts = part_rows(spec, data_dir, work_dir, sample, warnings, budget_seconds, memory) if spec.id_pattern else None
    items = parts.items if parts else read_items(spec, data_dir, work_dir, sample) if spec.items else None
    if parts is not None:
        train_path, train = Path(parts.where), parts.train
    elif items is not None:
        train_path, train = Path(items.where), items.train
    elif spec.label_pattern:
        train_path = data_dir / spec.image_dir
        train = files_with_labels(spec, data_dir, work_dir)
    else:
        train_path = data_dir / spec.train_file
        train = read_table(train_path, "train file", data_dir, warnings, budget_seconds, memory)
    sampled = tuple(s for s in (train.attrs.get("sampled"),) if s)  # a large table cut to the budget or memory
    # a melted sample's value column holds every target: the train file's target columns are the labels
    train, classes, y = read_labels(spec, train, list(spec.targets) if spec.melted_by_pattern else columns,
                                    train_path, warnings)
    labels, classes = (classes, None) if spec.submission == "labels" else (None, classes)
    views: dict[str, tuple] = {}
    keep = np.ones(len(y), dtype=bool)
    side, seconds_each = 0, 0.0
    if spec.task in ("image", "audio") or spec.decode:
        found = _file_views(spec, data_dir, work_dir, sample, train, items, warnings, budget_seconds, cores)
        views, keep, side, seconds_each = found.views, found.keep, found.side, found.seconds_each
        sampled += found.sampled
    test = parts.test if parts is not None else None
    if not views and test is None and spec.test_file is None:  # the sample lists the test rows, nothing describes them
        warnings.append(f"{data_dir}: no test file with features for a {spec.task} competition: the training "
                        "labels' prior answers every test row")
        return Dataset(spec, columns, classes, y, {}, warnings, labels=labels, test_rows=len(sample))
    test_path = data_dir / (spec.test_file or spec.sample_submission)
    if parts is None and spec.test_file is not None:
        test = align_test(spec, read_table(test_path, "test file", data_dir, warnings), sample, test_path)
    if spec.task == "text":
        for frame, path in ((train, train_path), (test, test_path)):
            if spec.text_column not in frame.columns:
                raise InputError(f"{path}: no text column {spec.text_column!r}")
        views["text"] = (train[spec.text_column].fillna("").astype(str).tolist(),
                         test[spec.text_column].fillna("").astype(str).tolist())
    if test is not None:
        features, test_features = tabular_features(spec, train, test)
        if features.shape[1] and "table" in views:  # beside what the files gave (their statistics)
            given, given_test = views["table"]
            features, test_features = (pd.concat([a.reset_index(drop=True), b.reset_index(drop=True)], axis=1)
                                       for a, b in ((given, features), (given_test, test_features)))
        if features.shape[1]:
            views["table"] = (features, test_features)
    if not views:
        raise InputError(f"{train_path}: no feature columns besides the id and the target(s)")
    return Dataset(spec, columns, classes, y, views, warnings, image_side=side, sampled=sampled,
                   decode_seconds=seconds_each, labels=labels, groups=fold_groups(spec, train),
                   scored=scored_training_rows(spec, train)).subset(keep)


def fold_groups(spec: CompetitionSpec, train: pd.DataFrame) -> np.ndarray | None:
    """Each training row's group (the spec's `fold_groups` column: a patient's visits share a fold), or None."""
    if not spec.fold_groups:
        return None
    if spec.fold_groups not in train.columns:
        raise InputError(f"spec {spec.id}: no column {spec.fold_groups!r} (fold_groups) among the training rows'")
    return pd.factorize(train[spec.fold_groups].astype(str))[0]


def scored_training_rows(spec: CompetitionSpec, train: pd.DataFrame) -> np.ndarray | None:
    """The training rows the grader's rule would score (`scored_rows`, `scored_last` on the training columns), or
    None where there is no rule or the training rows lack a column it reads."""
    if not (spec.scored_rows or spec.scored_last):
        return None
    try:
        return graded(train, spec)
    except InputError:
        return None
