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
from runner.competition.grade_rows import last_rows
from runner.data.canvas import on_canvas
from runner.data.dataset import SPECTROGRAM_SIDE, Dataset, decode_square, typical_side
from runner.data.decoders import decodable_train, decode
from runner.data.group_features import counted_values, group_codes, with_group_features
from runner.data.image_draw import affordable_train, decode_seconds
from runner.data.items import Items, read_items
from runner.data.listed import listed_dataset
from runner.data.mask_targets import mask_columns, with_mask_shape
from runner.data.pages import pixel_dataset
from runner.data.part_rows import part_rows
from runner.data.reading import read_table
from runner.data.records import read_position_table
from runner.data.slice_rows import on_card_side
from runner.data.sounds import clip_seconds
from runner.data.spans import span_dataset
from runner.data.table_features import tabular_features
from runner.data.targets import align_test, file_inputs, files_with_labels, read_labels, read_sample, value_columns
from runner.data.texts import pair_features, text_view
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
        if budget_seconds:  # a first decode of them all must leave time to train
            train_paths, cut = decodable_train(spec, train_paths, test_paths, work_dir, budget_seconds, cores)
            drawn, keep = (cut,) if cut else (), keep & np.array([p is not None for p in train_paths])
            warnings.extend([cut.say()] if cut else [])
        views = decode(spec, train_paths, test_paths, work_dir, cores)
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


def _on_canvas(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame, train: pd.DataFrame,
               items: Items | None, where: Path) -> tuple[CompetitionSpec, pd.DataFrame]:
    """Items whose masks are as large as their images: the spec with the canvas they are learned on, and the
    training rows with their masks on it (runner.data.canvas)."""
    if items is not None:
        files = {str(i): f for i, f in zip(items.train[spec.id_column].astype(str), items.train_files)}
        paths = [files.get(str(i)) for i in train[spec.id_column].astype(str)]
    else:  # the warnings of missing files are said once, where the views read them
        paths = file_inputs(spec, train[spec.id_column], sample[spec.id_column], data_dir, work_dir, [])[1]
    spec, train, said = on_canvas(spec, train, paths, mask_columns(spec), str(where))
    log.info(said)
    return spec, train


def _read_rows(spec: CompetitionSpec, path: Path, what: str, data_dir: Path, warnings: list[str],
               budget_seconds: float | None = None, memory: int | None = None) -> pd.DataFrame:
    """A train or test file's rows: a row per position of records with a value per position (the spec's
    `positions`), else the table. Rows in groups are read whole, never sampled row by row: a sampled breath has
    no neighbours left (only what memory holds is read, its first rows)."""
    if spec.positions is not None:
        return read_position_table(path, what, spec, data_dir)
    return read_table(path, what, data_dir, warnings, None if spec.groups else budget_seconds, memory)


def _scored_train_rows(spec: CompetitionSpec, train: pd.DataFrame, path: Path, warnings: list[str]) -> np.ndarray:
    """The training rows the grader would score (the spec's `scored_rows` on the train file's columns): the only
    rows folds train and validate on. Every row where the file lacks what the condition names (the answers'
    own marks)."""
    from runner.competition.scoring import scored_rows

    if not spec.scored_rows:
        return np.ones(len(train), dtype=bool)
    try:
        keep = scored_rows(train, spec.scored_rows)
    except InputError as exc:  # a mark only the answers carry (stanford-covid's `keep`)
        warnings.append(f"{path}: the scored rows' condition does not read on the train file ({exc}): every "
                        "training row is scored")
        return np.ones(len(train), dtype=bool)
    if not keep.any():
        raise InputError(f"{path}: no training row meets the scored rows' condition {spec.scored_rows!r}")
    return keep


def fold_groups(spec: CompetitionSpec, train: pd.DataFrame, path: Path) -> np.ndarray | None:
    """Each training row's group where the spec names a group column (rows of one recording, of one patient:
    they share a fold, so validation rows are never seen in training); None otherwise."""
    if spec.group_column is None:
        return None
    if spec.group_column not in train.columns:
        raise InputError(f"{path}: no group column {spec.group_column!r}")
    return pd.factorize(train[spec.group_column].astype(str))[0]


def load_dataset(spec: CompetitionSpec, data_dir: Path, work_dir: Path, budget_seconds: float | None = None,
                 memory: int | None = None, cores: int = 1, accelerated: bool = False) -> Dataset:
    """Read everything the engines need, checking each file and column as it goes. Besides the competition's own
    input (images, texts or a table), the other columns that train and test files share become a table view. With a
    budget, a training table too large for it is sampled, as one too large for `memory` bytes (the run's) is cut,
    and training images are drawn to what decoding them on `cores` affords (each said in `sampled`). `accelerated`:
    a card learns the images (masks resized to one square are learned larger there: `mask.card_side`)."""
    data_dir = Path(data_dir)
    sample = read_sample(spec, data_dir)
    spec = with_mask_shape(spec, sample)  # masks learned at the one size the sample gives them, where the spec does not
    if accelerated and memory and spec.mask is not None and spec.mask.card_side and spec.items == "slice_rows":
        spec, said = on_card_side(spec, data_dir, sample, memory)
        log.info(said)
    columns = value_columns(spec, sample)
    if spec.labels_file:
        return listed_dataset(spec, data_dir, work_dir, sample, columns)
    if spec.target_image_dir:
        return pixel_dataset(spec, data_dir, work_dir, sample, columns, budget_seconds)
    if spec.task == "text_normalization":
        return token_dataset(spec, data_dir, sample, columns, budget_seconds, memory)
    if spec.submission == "span":  # a choice among candidate spans of each text
        return span_dataset(spec, data_dir, sample, columns, budget_seconds, memory)
    warnings: list[str] = []
    if spec.id_pattern:  # ids made of parts: the sample's ids split, a table's rows by the same parts, joins
        items = part_rows(spec, data_dir, work_dir, sample, warnings, budget_seconds, memory)
    else:
        items = read_items(spec, data_dir, work_dir, sample) if spec.items else None
    if items is not None:
        train_path, train = Path(items.where), items.train
    elif spec.label_pattern:
        train_path = data_dir / spec.image_dir
        train = files_with_labels(spec, data_dir, work_dir)
    else:
        train_path = data_dir / spec.train_file
        train = _read_rows(spec, train_path, "train file", data_dir, warnings, budget_seconds, memory)
        train = train.rename(columns=dict(zip(spec.train_targets, spec.targets)))  # as the submission names them
    sampled = tuple(s for s in (train.attrs.get("sampled"),) if s)  # a large table cut to the budget or memory
    if spec.mask is not None and spec.mask.own_size and spec.task != "unsupported":  # whole slides, fragments
        spec, train = _on_canvas(spec, data_dir, work_dir, sample, train, items, train_path)
    counted = counted_values(spec.groups, train) if spec.groups else {}
    if spec.groups:  # before any row is dropped: a labelled row's neighbours may have no label
        train = with_group_features(spec.groups, train, counted, str(train_path))
    # a melted sample's value column holds every target: the train file's target columns are the labels
    train, classes, y = read_labels(spec, train, list(spec.targets) if spec.melted_by_pattern else columns,
                                    train_path, warnings)
    sampled += tuple(s for s in (train.attrs.get("sampled_labels"),) if s)  # a set's rarest labels left out
    groups = group_codes(train, spec.groups, str(train_path)) if spec.groups else None
    if spec.score_groups and spec.score_groups not in train.columns:
        raise InputError(f"{train_path}: no column {spec.score_groups!r}, the groups the metric scores apart")
    score_groups = train[spec.score_groups].astype(str).to_numpy() if spec.score_groups else None
    if score_groups is None and items is not None and items.score_groups is not None:  # the reader's (a series)
        by_id = {str(i): g for i, g in zip(items.train[spec.id_column], items.score_groups)}
        score_groups = np.asarray([by_id.get(str(i)) for i in train[spec.id_column]], dtype=object)
    labels, classes = (classes, None) if spec.submission == "labels" else (None, classes)
    views: dict[str, tuple] = {}
    if groups is None and items is not None and items.groups is not None:  # rows of a group share a fold
        by_id = {str(i): g for i, g in zip(items.train[spec.id_column], items.groups)}
        groups = np.asarray([by_id.get(str(i)) for i in train[spec.id_column]], dtype=object)
    keep = np.ones(len(y), dtype=bool)
    side, seconds_each = 0, 0.0
    if spec.task in ("image", "audio") or spec.decode:
        found = _file_views(spec, data_dir, work_dir, sample, train, items, warnings, budget_seconds, cores)
        views, keep, side, seconds_each = found.views, found.keep, found.side, found.seconds_each
        sampled += found.sampled
    described = spec.test_file is not None or (items is not None and items.test is not None)
    if not views and not described:  # the sample lists the test rows, and nothing describes them
        warnings.append(f"{data_dir}: no test file with features for a {spec.task} competition: the training "
                        "labels' prior answers every test row")
        return Dataset(spec, columns, classes, y, {}, warnings, labels=labels, test_rows=len(sample))
    test = None
    if spec.test_file is not None:
        test_path = data_dir / spec.test_file
        test = _read_rows(spec, test_path, "test file", data_dir, warnings)
        if spec.groups:
            test = with_group_features(spec.groups, test, counted, str(test_path))
        test = align_test(spec, test, sample, test_path)
    elif items is not None and items.test is not None:  # the reader read the test rows' fields
        test = items.test.reset_index(drop=True)
    if spec.task == "text":  # one column or several read together; pairs of them compared as a table
        views["text"] = text_view(spec, train, test, train_path, test_path)
        if spec.text_pairs:
            views["table"] = pair_features(spec, train, test)
    if test is not None:
        features, test_features = tabular_features(spec, train, test)
        if features.shape[1] and "table" in views:  # beside what the files gave (their statistics), or text pairs
            given, given_test = views["table"]
            features, test_features = (pd.concat([a.reset_index(drop=True), b.reset_index(drop=True)], axis=1)
                                       for a, b in ((given, features), (given_test, test_features)))
        if features.shape[1]:
            views["table"] = (features, test_features)
    if not views:
        raise InputError(f"{train_path}: no feature columns besides the id and the target(s)")
    keep &= _scored_train_rows(spec, train, train_path, warnings)
    if spec.train_rows:  # rows like the test's only: the test was drawn among them
        from runner.competition.scoring import scored_rows

        keep &= scored_rows(train, spec.train_rows)
        if not keep.any():
            raise InputError(f"{train_path}: no training row meets the condition {spec.train_rows!r}")
    return Dataset(spec, columns, classes, y, views, warnings, image_side=side, sampled=sampled,
                   decode_seconds=seconds_each, labels=labels,
                   groups=groups if groups is not None else fold_groups(spec, train, train_path),
                   score_groups=score_groups, scored=scored_training_rows(spec, train)).subset(keep)


def scored_training_rows(spec: CompetitionSpec, train: pd.DataFrame) -> np.ndarray | None:
    """The training rows the grader's rule would score (`scored_rows`, `scored_last` on the training columns), or
    None where there is no rule or the training rows lack a column it reads: a spread or a cut is tuned on them."""
    if not (spec.scored_rows or spec.scored_last):
        return None
    from runner.competition.scoring import scored_rows

    try:
        keep = scored_rows(train, spec.scored_rows) if spec.scored_rows else np.ones(len(train), dtype=bool)
        return last_rows(train, spec, keep)
    except InputError:
        return None
