"""The sample submission, the targets and the rows: the sample read (or made from the test file), its value
columns, labels turned into arrays with the rows that lack one dropped, test rows put in the sample's order, and
the image or clip files each row names."""
from __future__ import annotations

import logging
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from runner.common.csvfiles import find_sample
from runner.common.sampling import Sampled
from runner.common.direction_metrics import unit_vectors
from runner.common.distribution_metrics import shares
from runner.common.errors import InputError
from runner.competition.spec import DECISION_CUT, CompetitionSpec
from runner.data.dataset import Dataset
from runner.data.mask_targets import mask_targets
from runner.data.reading import image_files, image_folder, read_csv

log = logging.getLogger(__name__)


def files_with_labels(spec: CompetitionSpec, data_dir: Path, work_dir: Path) -> pd.DataFrame:
    """The training table of a competition whose labels are in its file names (dogs-vs-cats' cat.12.jpg): one row
    per file of the image folder whose name matches the spec's label_pattern, its id the name less the suffix."""
    pattern, suffix = re.compile(spec.label_pattern), spec.image_suffix
    rows = [(path.name[:len(path.name) - len(suffix)], match.group(1))
            for path in sorted(image_files(data_dir, spec.image_dir, work_dir))
            if path.name.endswith(suffix) and (match := pattern.search(path.name))]
    if not rows:
        raise InputError(f"{data_dir / spec.image_dir}: no file name matches the label pattern {spec.label_pattern!r}")
    return pd.DataFrame(rows, columns=[spec.id_column, spec.targets[0]])


def read_sample(spec: CompetitionSpec, data_dir: Path, warnings: list[str] | None = None) -> pd.DataFrame:
    """The sample submission, under the spec's name or another a competition gives it; without one, the test
    file's ids with the spec's columns (said in `warnings`)."""
    path = find_sample(data_dir, spec.sample_submission)
    if path is None:
        return sample_from_test(spec, data_dir, warnings if warnings is not None else [])
    literal = spec.task == "text_normalization"  # its tokens include "None", "NA", "null": words, not gaps
    sample = complete_sample(spec, read_csv(path, "sample submission", data_dir, literal=literal), path)
    if spec.id_column not in sample.columns:
        raise InputError(f"{path}: no id column {spec.id_column!r}")
    if sample[spec.id_column].isna().any():
        raise InputError(f"{path}: column {spec.id_column!r} has empty ids")
    return sample


def sample_from_test(spec: CompetitionSpec, data_dir: Path, warnings: list[str]) -> pd.DataFrame:
    """A sample submission made from the test file's ids and the spec's value columns (a probability column per
    class of the train labels where the spec's classes are the sample's columns), said in a warning."""
    expected = data_dir / spec.sample_submission
    if spec.test_file is None or not (data_dir / spec.test_file).is_file():
        raise InputError(f"{expected}: sample submission not found, and no test file lists the test ids")
    test = read_csv(data_dir / spec.test_file, "test file", data_dir)
    if spec.id_column not in test.columns:
        raise InputError(f"{expected}: sample submission not found, and {spec.test_file} has no id column "
                         f"{spec.id_column!r}")
    columns = list(spec.targets)
    if spec.submission == "probabilities" and len(spec.targets) == 1:
        labels = read_csv(data_dir / spec.train_file, "train file", data_dir)[spec.targets[0]]
        columns = sorted(labels.dropna().astype(str).unique())
    fill = {"probability": 0.5, "probabilities": 1 / max(1, len(columns)), "regression": 0.0}.get(spec.submission,
                                                                                                  pd.NA)
    warnings.append(f"{expected} not found: the submission's rows are {spec.test_file}'s {len(test)} ids, its "
                    f"columns {columns}")
    log.warning(warnings[-1])
    # a column the test file holds under the submission's name is its value (billion-word's test sentences are a
    # valid submission themselves)
    return pd.DataFrame({spec.id_column: test[spec.id_column],
                         **{c: test[c] if c in test.columns else fill for c in columns}})


def nothing_to_learn(dataset: Dataset) -> str | None:
    """Why no model can learn from the training labels (all one class or one value; no inputs for the test rows),
    or None."""
    if not dataset.views:
        return "no inputs describe the test rows (no test file, no test files named by the sample): the training " \
               "labels' prior answers every one"
    y = dataset.y if dataset.y.ndim == 1 else dataset.y[:, 0]
    if len(dataset.y) and (dataset.y == dataset.y[0]).all():
        value = dataset.classes[int(y[0])] if dataset.classes is not None else y[0]
        what = "label" if dataset.classes is not None else "target value"
        return f"every training row has the {what} {value!r}: nothing to learn; the submission predicts it for " \
               "every row"
    return None


def complete_sample(spec: CompetitionSpec, sample: pd.DataFrame, path: Path) -> pd.DataFrame:
    """The sample with the value columns its spec names but it lacks (a sample of ids only): probabilities of
    one half, values of 0, labels empty until the train labels give a class; a clear line says so."""
    if spec.submission == "probabilities" and len(spec.targets) == 1:
        return sample  # its columns are the classes: none can be invented
    if spec.melted_by_pattern:
        return sample  # one value column, a row per item and target: the targets are the train file's columns
    if spec.submission == "multilabel" and any(t in sample.columns for t in spec.targets):
        return sample  # the labels it scores (ranzcr's sample has 9 of the 11)
    if labels_in_one_column(spec, sample):
        return sample  # its columns are the labels, each training row's set in one column
    missing = [t for t in spec.targets if t not in sample.columns]
    if missing:
        log.warning("%s: no column(s) %s; added (%s)", path, missing, spec.submission)
        fill = {"probability": 0.5, "regression": 0.0}.get(spec.submission, pd.NA)
        sample = sample.assign(**{t: fill for t in missing})
    return sample


def labels_in_one_column(spec: CompetitionSpec, sample: pd.DataFrame) -> bool:
    """Whether a multi-label competition's sample has a column per label while its training rows hold their set
    of labels in the one target column (freesound's `labels`, comma-separated)."""
    return spec.submission == "multilabel" and len(spec.targets) == 1 and spec.targets[0] not in sample.columns


def value_columns(spec: CompetitionSpec, sample: pd.DataFrame) -> list[str]:
    """Columns of the sample submission that hold predictions (others, like detecting-insults' Date, are kept)."""
    if spec.melted_by_pattern:  # a row per item and target: its value column(s), whatever their name
        return [c for c in sample.columns if c != spec.id_column]
    if spec.submission == "probabilities" and len(spec.targets) == 1 and spec.targets[0] not in sample.columns:
        return [c for c in sample.columns if c != spec.id_column]
    if labels_in_one_column(spec, sample):
        return [c for c in sample.columns if c != spec.id_column]
    missing = [t for t in spec.targets if t not in sample.columns]
    if spec.submission == "multilabel" and len(missing) < len(spec.targets):
        return [t for t in spec.targets if t in sample.columns]
    if missing:
        raise InputError(f"{spec.sample_submission}: missing column(s) {missing}")
    return list(spec.targets)


def label_sets(column: pd.Series, separator: str = " ", most: int | None = None) -> tuple[list[str], np.ndarray]:
    """(the labels, a 0/1 matrix of rows x labels) of a column whose cells are sets of labels in one string (an
    empty cell is the empty set); with `most`, only that many of the most frequent labels (ties: in name order)."""
    rows = [[v for v in (str(cell).split() if separator == " " else str(cell).split(separator)) if v]
            for cell in column.astype(object).fillna("")]
    counts = Counter(v for row in rows for v in set(row))
    labels = sorted(counts) if most is None else \
        sorted(label for label, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:most])
    index = {label: j for j, label in enumerate(labels)}
    matrix = np.zeros((len(rows), len(labels)), dtype=np.float64)
    for i, row in enumerate(rows):
        matrix[i, [index[v] for v in row if v in index]] = 1.0
    return labels, matrix


MAX_LABELS = 1000  # labels of a set learned at most: past the thousandth the labels are rare enough to pay nothing
LABEL_MATRIX_BYTES = 256 * 2**20  # the 0/1 matrix of the labels learned: every fold's process holds a copy


def learned_labels(column: pd.Series, separator: str, source: str) -> tuple[list[str], np.ndarray, Sampled | None]:
    """`label_sets` of a training column, as many of the most frequent labels as MAX_LABELS and the matrix's
    memory allow (facebook's 42,000 tags; imet's 3,474), and what was left out, said as a part of the labels."""
    most = int(min(MAX_LABELS, max(1, LABEL_MATRIX_BYTES // (8 * max(1, len(column))))))
    labels, matrix = label_sets(column, separator, most)
    if len(labels) < most:
        return labels, matrix, None
    every = len({v for cell in column.astype(object).fillna("") for v in
                 (str(cell).split() if separator == " " else str(cell).split(separator)) if v})
    if every <= len(labels):
        return labels, matrix, None
    return labels, matrix, Sampled(what="labels", kept=len(labels), of=every, how="the most frequent",
                                   why=f"a 0/1 column per label learned, {LABEL_MATRIX_BYTES >> 20} MiB and "
                                       f"{MAX_LABELS} labels at most; the others are never predicted",
                                   source=source)


def label_columns(column: pd.Series, columns: list[str], separator: str, path: Path,
                  warnings: list[str]) -> np.ndarray:
    """A 0/1 matrix of rows x `columns` (the sample's labels) from a column of label sets; a label no column
    names is said and left out."""
    labels, matrix = label_sets(column, separator)
    unknown = [label for label in labels if label not in columns]
    if len(unknown) == len(labels):
        raise InputError(f"{path}: no label of column {column.name!r} is a column of the sample submission")
    if unknown:
        warnings.append(f"{path}: label(s) {unknown[:5]} of column {column.name!r} are no column of the sample "
                        "submission: left out")
    index = {label: j for j, label in enumerate(labels)}
    out = np.zeros((len(matrix), len(columns)), dtype=np.float64)
    for j, name in enumerate(columns):
        if name in index:
            out[:, j] = matrix[:, index[name]]
    return out


def read_labels(spec: CompetitionSpec, train: pd.DataFrame, columns: list[str], path: Path,
            warnings: list[str]) -> tuple[pd.DataFrame, list | None, np.ndarray]:
    """(rows kept, classes, y) for the spec's submission format; a `labels` format's classes are the labels each
    column of y stands for (y is 0/1, learned as independent labels)."""
    if spec.submission == "boxes":  # a row per drawn box, gathered into a row of boxes per image
        from runner.data.box_targets import box_targets

        return box_targets(spec, train, path, warnings)
    if spec.submission == "points":  # a page's characters, gathered into a row of points
        from runner.data.point_targets import point_targets

        return point_targets(spec, train, path, warnings)
    if spec.submission == "mask":  # each row's masks, learned pixel by pixel (their columns checked there)
        return train, None, mask_targets(spec, train, path)
    missing = [t for t in spec.targets if t not in train.columns]
    if missing:
        raise InputError(f"{path}: missing target column(s) {missing}")
    # a set of labels may be empty
    nan_rows = train[list(spec.targets)].isna().any(axis=1) & (spec.submission != "labels")
    if nan_rows.all():
        raise InputError(f"{path}: target column(s) {list(spec.targets)} are empty in every row")
    if nan_rows.any():
        warnings.append(f"{path}: dropped {int(nan_rows.sum())} row(s) with an empty {list(spec.targets)}")
        train = train.loc[~nan_rows].reset_index(drop=True)
    if spec.submission in ("regression", "value_and_spread"):  # values, learned as such
        values = train[list(spec.targets)].apply(pd.to_numeric, errors="coerce")
        if (text := values.isna() & train[list(spec.targets)].notna()).any().any():
            column = values.columns[text.any()][0]
            raise InputError(f"{path}: target column {column!r} holds text ({train.loc[text[column], column].iloc[0]!r}"
                             "), not numbers: a regression cannot learn it")
        return train, None, values.to_numpy(dtype=np.float64)
    if spec.submission == "labels":  # a set of labels per row, learned as one 0/1 column each
        labels, matrix, cut = learned_labels(train[spec.targets[0]], spec.label_separator, str(path))
        if cut is not None:
            warnings.append(cut.say())
            train.attrs["sampled_labels"] = cut
        return train, labels, matrix
    if spec.submission == "multilabel" and list(spec.targets) != columns and len(spec.targets) == 1:
        return train, None, label_columns(train[spec.targets[0]], columns, spec.label_separator, path, warnings)
    if spec.submission == "distribution":  # each row's counts (votes) as its shares: learned as values
        return train, None, shares(train[columns].apply(pd.to_numeric, errors="coerce").fillna(0).to_numpy())
    if spec.submission == "direction":  # azimuth and zenith learned as the unit vector they point along
        return train, None, unit_vectors(train[columns].apply(pd.to_numeric, errors="coerce").to_numpy())
    if spec.submission == "multilabel":  # learned as 0/1 values, one per label the submission holds
        values = train[columns].apply(pd.to_numeric, errors="coerce")
        if ((values != 0) & (values != 1)).any().any():
            raise InputError(f"{path}: multi-label column(s) {columns} hold values other than 0 and 1")
        return train, None, values.to_numpy(dtype=np.float64)
    if len(spec.targets) > 1:  # one-hot columns
        return train, list(columns), train[columns].to_numpy(dtype=np.float64).argmax(axis=1)
    labels = train[spec.targets[0]]
    if spec.submission == "decision":  # the grader cuts the truth where it cuts the predictions
        labels = (pd.to_numeric(labels, errors="coerce") >= DECISION_CUT).astype(int)
    if spec.submission == "probabilities":
        classes = list(columns)
        names = labels.astype(str)
        unknown = ~names.isin(classes)
        if unknown.all():
            raise InputError(f"{path}: no value of {spec.targets[0]!r} is a column of the sample submission")
        if unknown.any():
            warnings.append(f"{path}: dropped {int(unknown.sum())} row(s) whose {spec.targets[0]!r} is not a "
                            f"sample submission column (e.g. {names[unknown].iloc[0]!r})")
            train, names = train.loc[~unknown].reset_index(drop=True), names[~unknown].reset_index(drop=True)
        return train, classes, names.map({c: i for i, c in enumerate(classes)}).to_numpy()
    if spec.negative_label is not None:  # one label against every other (alaska2's Cover against its stego folders)
        labels = (labels.astype(str) != spec.negative_label).astype(int)
    classes = sorted(labels.unique().tolist(), key=lambda v: (str(type(v)), v))
    if spec.submission == "probability" and len(classes) != 2:
        raise InputError(f"{path}: column {spec.targets[0]!r} should have 2 values, found {len(classes)}")
    return train, classes, labels.map({c: i for i, c in enumerate(classes)}).to_numpy()


def align_test(spec: CompetitionSpec, test: pd.DataFrame, sample: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Test rows in the sample submission's order."""
    if spec.id_column not in test.columns:
        raise InputError(f"{path}: no id column {spec.id_column!r}")
    ids = sample[spec.id_column]
    if len(test) == len(sample) and test[spec.id_column].astype(str).tolist() == ids.astype(str).tolist():
        return test.reset_index(drop=True)
    indexed = test.drop_duplicates(spec.id_column).set_index(test[spec.id_column].drop_duplicates().astype(str))
    missing = ~ids.astype(str).isin(indexed.index)
    if missing.any():
        raise InputError(f"{path}: {int(missing.sum())} id(s) of the sample submission are not in it "
                         f"(e.g. {ids[missing].iloc[0]!r})")
    return indexed.loc[ids.astype(str)].reset_index(drop=True)


def _images_of(data_dir: Path, name: str, work_dir: Path, ids: pd.Series, suffix: str,
               folders: bool = False) -> list[Path | None]:
    if folders:
        return id_folders(data_dir, name, work_dir, ids)
    found = {p.name: p for p in image_files(data_dir, name, work_dir)}
    return [found.get(f"{i}{suffix}") for i in ids.astype(str)]


def id_folders(data_dir: Path, name: str, work_dir: Path, ids: pd.Series) -> list[Path | None]:
    """The folder named by each id right below the image folder (a study's slices, a case's series), or None; an id
    read as a number finds its zero-padded folder (BraTS21ID 13 is `00013/`); an id that is no plain name (a path,
    '..') names none."""
    root = Path(image_folder(data_dir, name, work_dir))
    present = {p.name: p.name for p in root.iterdir() if p.is_dir()}
    padded = {str(int(n)): n for n in present if n.isdigit()}
    return [root / (present.get(i) or padded[i]) if i in present or i in padded else None for i in ids.astype(str)]


def file_inputs(spec, train_names: pd.Series, test_names: pd.Series, data_dir, work_dir, warnings):
    """(trainable rows, training paths, test paths) of a competition whose inputs are files (images, clips), each
    named its row's name plus the spec's suffix."""
    kind = "clip" if spec.task == "audio" else "folder" if spec.id_folders else "image"
    train_paths = _images_of(data_dir, spec.image_dir, work_dir, train_names, spec.image_suffix, spec.id_folders)
    test_paths = _images_of(data_dir, spec.test_image_dir or spec.image_dir, work_dir, test_names, spec.test_suffix,
                            spec.id_folders)
    missing_train = np.array([p is None for p in train_paths])
    if missing_train.all():
        raise InputError(f"{data_dir / spec.image_dir}: none of the training {kind}s named in "
                         f"{spec.train_file or 'the file names'} was found")
    if missing_train.any():
        warnings.append(f"{data_dir / spec.image_dir}: {int(missing_train.sum())} training {kind}(s) missing, "
                        "skipped")
    missing_test = sum(p is None for p in test_paths)
    if missing_test:
        warnings.append(f"{data_dir / (spec.test_image_dir or spec.image_dir)}: {missing_test} test {kind}(s) "
                        "missing; their rows get the prior")
    return ~missing_train, train_paths, test_paths
