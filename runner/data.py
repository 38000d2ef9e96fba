"""Reading a competition's public folder into a Dataset: inputs for the train and test rows, targets as arrays.

Every failure names the file or column at fault. Rows that cannot be used (a missing label, a missing image)
are dropped with a warning instead of stopping the run.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from runner.csvfiles import (compression, content_bytes, estimated_rows, find_sample, read_csv_file,
                             read_csv_sample)
from runner.errors import InputError
from runner.image_budget import affordable_train, decode_seconds
from runner.sampling import SAMPLING_SEED, Sampled
from runner.sounds import MELS
from runner.spec import CompetitionSpec
from runner.spoken import SOURCES, token_table
from runner.untrusted import inside, walk

log = logging.getLogger(__name__)

MEMORY_SHARE = 0.25  # of the machine's memory one CSV may fill once read (pandas needs several times its size)
MEMORY_PER_FILE_BYTE = 4  # bytes of memory a byte of CSV takes once parsed, roughly
LARGE_TABLE_BYTES = 256 * 2**20  # a training table beyond this is sampled to what the budget affords, not read whole
ROWS_PER_BUDGET_SECOND = 2_000  # rows a second of budget trains well: ~1 h buys 7M rows, as GBM folds on 8 cores
MIN_SAMPLED_ROWS = 100_000  # fewer rows than this are no saving worth the lost signal
READ_SHARE = 0.1  # of the budget that reading a large training table may take
MAX_ZIP_RATIO = 20  # images come compressed already: a zip that expands more than this is a bomb
MAX_ZIP_MEMBERS = 2_000_000
DISK_MARGIN = 0.8  # of the free disk an extraction may fill
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
    choices: np.ndarray | None = None  # text normalisation: each test row's string for each class (runner.spoken)
    sampled: tuple[Sampled, ...] = ()  # what the engines learn from only a part of, and why (runner.sampling)
    decode_seconds: float = 0.0  # one core's seconds to decode one training image, measured (0: not measured)

    @property
    def n_outputs(self) -> int:
        return len(self.classes) if self.classes is not None else self.y.shape[1]

    @property
    def inputs(self) -> frozenset[str]:
        return frozenset(self.views)

    @property
    def n_test(self) -> int:
        return len(next(iter(self.views.values()))[1])

    def subset(self, keep: np.ndarray) -> "Dataset":
        """The same dataset keeping only the train rows where `keep` is true."""
        views = {kind: (rows_of(train, keep), test) for kind, (train, test) in self.views.items()}
        groups = None if self.groups is None else self.groups[keep]
        return dataclasses.replace(self, y=self.y[keep], views=views, warnings=list(self.warnings), groups=groups)


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


def decode_square(path: Path | None, side: int) -> np.ndarray | None:
    """An RGB square of `side` pixels (shorter side resized, centre cropped), or None when unreadable or larger
    than MAX_PIXELS (checked from the header, before anything is decoded)."""
    if path is None:
        return None
    try:
        with Image.open(path) as image:
            if image.width * image.height > MAX_PIXELS:
                log.warning("%s: refused: %d x %d pixels, more than %d", path, image.width, image.height, MAX_PIXELS)
                return None
            image.draft("RGB", (side, side))  # JPEG: decode at a reduced scale, much faster for large photos
            image = image.convert("RGB")
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


def _located(path: Path, what: str, root: Path | None) -> Path:
    """The real path of an input file inside `root` (its folder by default), or an InputError naming it."""
    if not os.path.lexists(path):
        raise InputError(f"{path}: {what} not found")
    return inside(root or Path(path).parent, path)


def read_csv(path: Path, what: str, root: Path | None = None, warnings: list[str] | None = None,
             budget_seconds: float | None = None, literal: bool = False, memory: int | None = None) -> pd.DataFrame:
    """A CSV file inside `root` (its folder by default; links out of it are refused), or an InputError that says
    which file and why. A file larger than the run's memory (`memory` bytes, else this machine's) can hold is read
    only as far as it can; with a budget, a large one is sampled evenly instead, to the rows that budget affords
    (`sampled_rows`)."""
    real = _located(path, what, root)
    try:  # a broken archive fails already when its content's size is read
        size = content_bytes(real)  # what parsing sees: a zipped CSV parses as its content, not its archive
        rows = affordable_rows(real, size, memory)
        sampled = budget_seconds is not None and (rows is not None or size > LARGE_TABLE_BYTES)
        if sampled:
            frame = read_csv_sample(real, sampled_rows(budget_seconds, rows), READ_SHARE * budget_seconds,
                                    warnings if warnings is not None else [])
        else:
            frame = read_csv_file(real, rows, warnings, literal)
    except Exception as exc:  # pandas raises ParserError, EmptyDataError, OSError, BadZipFile...
        raise InputError(f"{path}: cannot read {what}: {exc}") from exc
    if frame.empty:
        raise InputError(f"{path}: {what} has no rows")
    if rows is not None and not sampled:
        frame.attrs["sampled"] = Sampled(what="rows", kept=len(frame), of=estimated_rows(real), source=str(path),
                                         how="the file's first rows", why=f"{size / 2**30:.1f} GiB is "
                                         f"more than {MEMORY_SHARE:.0%} of the run's memory can parse")
        if warnings is not None:
            warnings.append(frame.attrs["sampled"].say())
    return frame


def sampled_rows(budget_seconds: float, memory_rows: int | None) -> int:
    """Training rows a budget affords: ROWS_PER_BUDGET_SECOND for each of its seconds, within memory."""
    return int(min(memory_rows or math.inf, max(MIN_SAMPLED_ROWS, budget_seconds * ROWS_PER_BUDGET_SECOND)))


def read_records(path: Path, what: str, root: Path | None = None) -> pd.DataFrame:
    """A JSON array of records (or a zip holding one .json) as a table; a field holding a list becomes its length
    (random-acts-of-pizza's subreddits), nested objects are flattened."""
    real = _located(path, what, root)
    try:
        if compression(real) == "zip":
            with zipfile.ZipFile(real) as archive:
                names = [n for n in archive.namelist() if n.lower().endswith(".json")]
                if len(names) != 1:
                    raise InputError(f"{path}: {what}: expected one .json inside, found {names[:5]}")
                records = json.loads(archive.read(names[0]))
        else:
            records = json.loads(real.read_bytes())
    except (ValueError, zipfile.BadZipFile, OSError) as exc:
        raise InputError(f"{path}: cannot read {what}: {exc}") from exc
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise InputError(f"{path}: {what} is not a JSON array of records")
    if not records:
        raise InputError(f"{path}: {what} has no records")
    frame = pd.json_normalize(records)
    for column in frame.columns:
        if frame[column].map(lambda v: isinstance(v, list)).any():
            frame[column] = frame[column].map(lambda v: len(v) if isinstance(v, list) else np.nan)
    return frame


def read_table(path: Path, what: str, root: Path | None = None, warnings: list[str] | None = None,
               budget_seconds: float | None = None, memory: int | None = None) -> pd.DataFrame:
    """A CSV or a JSON array of records, by the file's name (`.json` or `.json.zip`)."""
    if Path(path).name.lower().endswith((".json", ".json.zip")):
        return read_records(path, what, root)
    return read_csv(path, what, root, warnings, budget_seconds, memory=memory)


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


def affordable_rows(path: Path, size: int, memory: int | None = None) -> int | None:
    """How many rows of a CSV whose content is `size` bytes fit in MEMORY_SHARE of `memory` bytes (the run's; else
    this machine's), its rows' length measured on its first MiB (None: all of it)."""
    import psutil

    room = MEMORY_SHARE * (memory or psutil.virtual_memory().total) / MEMORY_PER_FILE_BYTE
    if size <= room:
        return None
    return int(estimated_rows(path) * room / size)


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
    return pd.DataFrame({spec.id_column: test[spec.id_column], **{c: fill for c in columns}})


def nothing_to_learn(dataset: Dataset) -> str | None:
    """Why no model can learn from the training labels (all one class or one value), or None."""
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
    if spec.submission == "multilabel" and any(t in sample.columns for t in spec.targets):
        return sample  # the labels it scores (ranzcr's sample has 9 of the 11)
    missing = [t for t in spec.targets if t not in sample.columns]
    if missing:
        log.warning("%s: no column(s) %s; added (%s)", path, missing, spec.submission)
        fill = {"probability": 0.5, "regression": 0.0}.get(spec.submission, pd.NA)
        sample = sample.assign(**{t: fill for t in missing})
    return sample


def value_columns(spec: CompetitionSpec, sample: pd.DataFrame) -> list[str]:
    """Columns of the sample submission that hold predictions (others, like detecting-insults' Date, are kept)."""
    if spec.submission == "probabilities" and len(spec.targets) == 1:
        return [c for c in sample.columns if c != spec.id_column]
    missing = [t for t in spec.targets if t not in sample.columns]
    if spec.submission == "multilabel" and len(missing) < len(spec.targets):
        return [t for t in spec.targets if t in sample.columns]
    if missing:
        raise InputError(f"{spec.sample_submission}: missing column(s) {missing}")
    return list(spec.targets)


def _labels(spec: CompetitionSpec, train: pd.DataFrame, columns: list[str], path: Path,
            warnings: list[str]) -> tuple[pd.DataFrame, list | None, np.ndarray]:
    """(rows kept, classes, y) for the spec's submission format."""
    missing = [t for t in spec.targets if t not in train.columns]
    if missing:
        raise InputError(f"{path}: missing target column(s) {missing}")
    nan_rows = train[list(spec.targets)].isna().any(axis=1)
    if nan_rows.all():
        raise InputError(f"{path}: target column(s) {list(spec.targets)} are empty in every row")
    if nan_rows.any():
        warnings.append(f"{path}: dropped {int(nan_rows.sum())} row(s) with an empty {list(spec.targets)}")
        train = train.loc[~nan_rows].reset_index(drop=True)
    if spec.submission == "regression":
        return train, None, train[list(spec.targets)].to_numpy(dtype=np.float64)
    if spec.submission == "multilabel":  # learned as 0/1 values, one per label the submission holds
        values = train[columns].apply(pd.to_numeric, errors="coerce")
        if ((values != 0) & (values != 1)).any().any():
            raise InputError(f"{path}: multi-label column(s) {columns} hold values other than 0 and 1")
        return train, None, values.to_numpy(dtype=np.float64)
    if len(spec.targets) > 1:  # one-hot columns
        return train, list(columns), train[columns].to_numpy(dtype=np.float64).argmax(axis=1)
    labels = train[spec.targets[0]]
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
    classes = sorted(labels.unique().tolist(), key=lambda v: (str(type(v)), v))
    if spec.submission == "probability" and len(classes) != 2:
        raise InputError(f"{path}: column {spec.targets[0]!r} should have 2 values, found {len(classes)}")
    return train, classes, labels.map({c: i for i, c in enumerate(classes)}).to_numpy()


def _align_test(spec: CompetitionSpec, test: pd.DataFrame, sample: pd.DataFrame, path: Path) -> pd.DataFrame:
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


def image_folder(data_dir: Path, name: str, work_dir: Path) -> Path:
    """A folder of images inside the public folder: `name` itself, or where its .zip was extracted (once, images
    only, within the caps of `check_zip`) under work_dir."""
    source = data_dir / name
    if not os.path.lexists(source):
        raise InputError(f"{source}: image folder not found")
    real = inside(data_dir, source, "folder" if source.is_dir() else "file")
    if real.is_dir():
        return source
    target = work_dir / "extracted" / source.stem
    if not (target / ".complete").exists():
        try:
            with zipfile.ZipFile(real) as archive:
                members = check_zip(archive, source, work_dir)
                archive.extractall(target, members=members)
        except (zipfile.BadZipFile, OSError) as exc:
            raise InputError(f"{source}: cannot extract: {exc}") from exc
        (target / ".complete").touch()
    return target


def check_zip(archive: zipfile.ZipFile, source: Path, work_dir: Path) -> list[zipfile.ZipInfo]:
    """The image members of a zip, refused (before anything is written) when there are too many, when they
    expand more than MAX_ZIP_RATIO times (images are compressed already) or would fill the disk."""
    from runner.spec import AUDIO_SUFFIXES, IMAGE_SUFFIXES

    suffixes = IMAGE_SUFFIXES + AUDIO_SUFFIXES
    members = [m for m in archive.infolist() if not m.is_dir() and Path(m.filename).suffix.lower() in suffixes]
    if len(members) > MAX_ZIP_MEMBERS:
        raise InputError(f"{source}: refused: {len(members)} images, more than {MAX_ZIP_MEMBERS}")
    expanded, packed = sum(m.file_size for m in members), sum(m.compress_size for m in members)
    if expanded > MAX_ZIP_RATIO * max(1, packed):
        raise InputError(f"{source}: refused: its images expand {expanded / max(1, packed):.0f} times "
                         f"({expanded / 2**30:.1f} GiB), more than the {MAX_ZIP_RATIO} times images can")
    work_dir.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(work_dir).free
    if expanded > DISK_MARGIN * free:
        raise InputError(f"{source}: refused: its images need {expanded / 2**30:.1f} GiB, the work folder has "
                         f"{free / 2**30:.1f} GiB free")
    return members


def image_files(data_dir: Path, name: str, work_dir: Path) -> list[Path]:
    """Every file of an image folder (or of where its zip was extracted), sub-folders included, none beyond it."""
    folder = image_folder(data_dir, name, work_dir)
    root = data_dir if Path(folder).resolve() == (data_dir / name).resolve() else folder  # extracted: its own
    return walk(folder, within=root)


def _images_of(data_dir: Path, name: str, work_dir: Path, ids: pd.Series, suffix: str) -> list[Path | None]:
    found = {p.name: p for p in image_files(data_dir, name, work_dir)}
    return [found.get(f"{i}{suffix}") for i in ids.astype(str)]


def _file_inputs(spec, train_names: pd.Series, test_names: pd.Series, data_dir, work_dir, warnings):
    """(trainable rows, training paths, test paths) of a competition whose inputs are files (images, clips), each
    named its row's name plus the spec's suffix."""
    kind = "clip" if spec.task == "audio" else "image"
    train_paths = _images_of(data_dir, spec.image_dir, work_dir, train_names, spec.image_suffix)
    test_paths = _images_of(data_dir, spec.test_image_dir or spec.image_dir, work_dir, test_names,
                            spec.image_suffix)
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
        return _listed_dataset(spec, data_dir, work_dir, sample, columns)
    if spec.target_image_dir:
        return _pixel_dataset(spec, data_dir, work_dir, sample, columns, budget_seconds)
    if spec.task == "text_normalization":
        return _token_dataset(spec, data_dir, sample, columns, budget_seconds, memory)
    warnings: list[str] = []
    if spec.label_pattern:
        train_path = data_dir / spec.image_dir
        train = files_with_labels(spec, data_dir, work_dir)
    else:
        train_path = data_dir / spec.train_file
        train = read_table(train_path, "train file", data_dir, warnings, budget_seconds, memory)
    sampled = tuple(s for s in (train.attrs.get("sampled"),) if s)  # a large table cut to the budget or memory
    train, classes, y = _labels(spec, train, columns, train_path, warnings)
    views: dict[str, tuple] = {}
    keep = np.ones(len(y), dtype=bool)
    side, seconds_each = 0, 0.0
    if spec.task in ("image", "audio"):
        keep, train_paths, test_paths = _file_inputs(spec, train[spec.id_column], sample[spec.id_column], data_dir,
                                                     work_dir, warnings)
        if spec.task == "image" and budget_seconds:  # a first decode of them all must leave time to train
            seconds_each = decode_seconds(train_paths, decode_square)
            keep, cut = affordable_train(keep, len(test_paths), seconds_each, budget_seconds, cores,
                                         str(data_dir / spec.image_dir))
            sampled += (cut,) if cut else ()
            warnings.extend([cut.say()] if cut else [])
        views[spec.task] = (train_paths, test_paths)
        side = typical_side(train_paths) if spec.task == "image" else SPECTROGRAM_SIDE
    elif spec.test_file is None:
        raise InputError(f"spec {spec.id}: a {spec.task} competition needs a test file with features")
    test = None
    if spec.test_file is not None:
        test_path = data_dir / spec.test_file
        test = _align_test(spec, read_table(test_path, "test file", data_dir, warnings), sample, test_path)
    if spec.task == "text":
        for frame, path in ((train, train_path), (test, test_path)):
            if spec.text_column not in frame.columns:
                raise InputError(f"{path}: no text column {spec.text_column!r}")
        views["text"] = (train[spec.text_column].fillna("").astype(str).tolist(),
                         test[spec.text_column].fillna("").astype(str).tolist())
    if test is not None:
        features, test_features = tabular_features(spec, train, test)
        if features.shape[1]:
            views["table"] = (features, test_features)
    if not views:
        raise InputError(f"{train_path}: no feature columns besides the id and the target(s)")
    return Dataset(spec, columns, classes, y, views, warnings, image_side=side, sampled=sampled,
                   decode_seconds=seconds_each).subset(keep)


# --- items listed in files (mlsp-2013-birds) ---------------------------------------------------------------

def stacked_items(spec: CompetitionSpec, sample: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """For a sample with a row per (item, label), Id = item * spec.stacked_ids + label: each row's item and label."""
    ids = pd.to_numeric(sample[spec.id_column], errors="coerce")
    if ids.isna().any() or (ids < 0).any():
        raise InputError(f"{spec.sample_submission}: column {spec.id_column!r} must hold item * {spec.stacked_ids} "
                         f"+ label, e.g. {sample[spec.id_column].iloc[int(np.argmax(ids.isna() | (ids < 0)))]!r}")
    ids = ids.to_numpy(dtype=np.int64)
    return ids // spec.stacked_ids, ids % spec.stacked_ids


def _listed_labels(spec: CompetitionSpec, data_dir: Path) -> dict[int, list[int]]:
    """Each training item's labels from the labels file (`id,label,...`; a test item's `id,?` is left out)."""
    path = data_dir / spec.labels_file
    known: dict[int, list[int]] = {}
    for number, line in enumerate(_located(path, "labels file", data_dir).read_text().splitlines()[1:], start=2):
        fields = [f.strip() for f in line.split(",") if f.strip()]
        if not fields or "?" in fields[1:]:
            continue
        try:
            known[int(fields[0])] = [int(f) for f in fields[1:]]
        except ValueError as exc:
            raise InputError(f"{path}: line {number}: {exc}") from exc
    if not known:
        raise InputError(f"{path}: no training item (every line is `id,?`)")
    return known


def _file_names(spec: CompetitionSpec, data_dir: Path, items) -> pd.Series:
    """The file name (less its suffix) of each item: from the names file, else the item itself."""
    if not spec.names_file:
        return pd.Series([str(i) for i in items])
    path = data_dir / spec.names_file
    table = read_csv(path, "names file", data_dir)
    if table.shape[1] < 2:
        raise InputError(f"{path}: needs two columns, the id and the file name")
    names = dict(zip(pd.to_numeric(table.iloc[:, 0], errors="coerce"), table.iloc[:, 1].astype(str)))
    return pd.Series([names.get(i, f"<item {i} not in {spec.names_file}>") for i in items])


def _ready_features(spec: CompetitionSpec, data_dir: Path, train_items, test_items) -> tuple | None:
    """The feature files joined by item id (rows of one id averaged: a file may hold one per segment) as a
    (train, test) table; an item a file lacks gets empty values."""
    frames = []
    for name in spec.feature_files:
        path = data_dir / name
        try:
            table = pd.read_csv(_located(path, "feature file", data_dir), header=None, skiprows=1)
        except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
            raise InputError(f"{path}: cannot read: {exc}") from exc
        table = table.apply(pd.to_numeric, errors="coerce").dropna(subset=[0]).dropna(axis=1, how="all")
        table = table.groupby(0).mean()
        table.columns = [f"{Path(name).stem}_{j}" for j in range(table.shape[1])]
        frames.append(table)
    if not frames:
        return None
    joined = pd.concat(frames, axis=1)
    return joined.reindex(train_items).reset_index(drop=True), joined.reindex(test_items).reset_index(drop=True)


def _listed_dataset(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame,
                    columns: list[str]) -> Dataset:
    """A competition whose items, labels and files are listed in files (see the spec's `labels_file`): one row per
    item, a 0/1 column per label; test items in the sample's order, each of its rows a (test item, label)."""
    items, labels = stacked_items(spec, sample)
    test_items, k = pd.unique(items), int(labels.max()) + 1
    known = _listed_labels(spec, data_dir)
    y = np.zeros((len(known), k))
    for i, present in enumerate(known.values()):
        y[i, [label for label in present if 0 <= label < k]] = 1
    warnings: list[str] = []
    views: dict[str, tuple] = {}
    keep = np.ones(len(y), dtype=bool)
    if spec.task == "audio":
        keep, train_paths, test_paths = _file_inputs(spec, _file_names(spec, data_dir, known),
                                                     _file_names(spec, data_dir, test_items), data_dir, work_dir,
                                                     warnings)
        views["audio"] = (train_paths, test_paths)
    if (table := _ready_features(spec, data_dir, list(known), test_items)) is not None:
        views["table"] = table
    if not views:
        raise InputError(f"spec {spec.id}: a {spec.task} competition listed in {spec.labels_file} needs files "
                         "(task audio) or feature_files")
    side = SPECTROGRAM_SIDE if spec.task == "audio" else 0
    return Dataset(spec, columns, None, y, views, warnings, image_side=side).subset(keep)


# --- image to image (denoising-dirty-documents) --------------------------------------------------------------

WINDOW = 5  # a pixel's neighbourhood: its 5 x 5 window of noisy intensities
BACKGROUND = 7  # the paper's own tone near a pixel: the lightest and the median of its 7 x 7 window
MAX_TOKEN_ROWS = 2_000_000  # training tokens the engines learn from at most: ~300 MB of features
# training tokens the candidates' normalisers learn from, per second of budget: five normalisers (four cross-fitted,
# one of all train) learn 6M tokens and the engines' 1.2M rows are made in 47 s on one core here (Russian at its
# real size, 600 s), so loading stays under a tenth of the budget
TAUGHT_PER_BUDGET_SECOND = 10_000
MAX_PIXEL_ROWS = 2_000_000  # training pixels kept at most (a random share of them): ~250 MB of features


def pixel_features(image: np.ndarray) -> np.ndarray:
    """(pixels x columns) float32 of a gray image in [0, 1], row by row: the WINDOW x WINDOW neighbourhood, the
    window's lightest and median value and the page's median (the paper's tone, under stains), and the position."""
    from scipy.ndimage import maximum_filter, median_filter

    padded = np.pad(image, WINDOW // 2, mode="edge")
    window = np.lib.stride_tricks.sliding_window_view(padded, (WINDOW, WINDOW)).reshape(image.size, -1)
    rows, cols = np.indices(image.shape)
    extra = [maximum_filter(image, BACKGROUND, mode="nearest"), median_filter(image, BACKGROUND, mode="nearest"),
             np.full(image.shape, np.median(image)), rows / max(1, image.shape[0] - 1),
             cols / max(1, image.shape[1] - 1)]
    return np.concatenate([window, np.stack([e.ravel() for e in extra], axis=1)], axis=1).astype(np.float32)


def gray_image(path: Path, dtype=np.float32) -> np.ndarray | None:
    """An image's gray intensities in [0, 1], or None when it cannot be read or is larger than MAX_PIXELS."""
    try:
        with Image.open(path) as image:
            if image.width * image.height > MAX_PIXELS:
                return None
            return np.asarray(image.convert("L"), dtype=dtype) / 255.0
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        return None


def _area(path: Path) -> int:
    try:
        with Image.open(path) as image:
            return image.width * image.height
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        return 0


def _pixel_columns() -> list[str]:
    return [f"w{r}{c}" for r in range(WINDOW) for c in range(WINDOW)] + ["lightest", "median", "page", "row", "col"]


def _pixel_dataset(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame, columns: list[str],
                   budget_seconds: float | None) -> Dataset:
    """Image to image as a table: a row per training pixel (its noisy neighbourhood; the clean intensity as the
    target; the pixels of one page one group) and a row per sample row (`<image>_<row>_<col>`, 1-based, of the
    test images), so the table engines learn the map pixel by pixel."""
    warnings: list[str] = []
    paths = sorted(image_files(data_dir, spec.image_dir, work_dir))
    pixels = np.mean([_area(p) for p in paths[:SIDE_SAMPLE]] or [0]) * len(paths)  # from headers: no decoding
    most = min(MAX_PIXEL_ROWS, sampled_rows(budget_seconds, None)) if budget_seconds else MAX_PIXEL_ROWS
    share = min(1.0, most / max(1.0, pixels))  # each page keeps this share of its pixels, before any is stacked
    rng = np.random.default_rng(SAMPLING_SEED)
    features, targets, groups, located, pages, sides, areas = [], [], [], [], [], [], []
    for path in paths:
        clean_path = data_dir / spec.target_image_dir / path.name
        noisy, clean = gray_image(path), gray_image(inside(data_dir, clean_path)) if clean_path.is_file() else None
        if noisy is None or clean is None or noisy.shape != clean.shape:
            warnings.append(f"{path}: no readable clean image of its size in {spec.target_image_dir}/, skipped")
            continue
        keep = np.flatnonzero(rng.random(noisy.size) < share) if share < 1 else np.arange(noisy.size)
        features.append(pixel_features(noisy)[keep])
        targets.append(clean.ravel()[keep])
        groups.append(np.full(len(targets[-1]), len(groups)))
        located.append(np.divmod(keep, noisy.shape[1]))  # each kept pixel's row and column
        pages.append((str(path), str(clean_path)))
        sides.append(min(noisy.shape))
        areas.append(noisy.size)
    if not features:
        raise InputError(f"{data_dir / spec.image_dir}: no training image with a clean one in {spec.target_image_dir}/")
    x, y, group = np.concatenate(features), np.concatenate(targets), np.concatenate(groups)
    sampled = () if share >= 1 else (Sampled(
        what="training pixels", kept=len(y), of=int(sum(areas)), how="the same random share of each page's",
        why=f"what the budget trains, at most {MAX_PIXEL_ROWS:,}", source=str(data_dir / spec.image_dir)),)
    warnings.extend(s.say() for s in sampled)
    ids = sample[spec.id_column].astype(str)
    parts = ids.str.extract(r"^(.+)_(\d+)_(\d+)$")
    if parts.isna().any().any():
        raise InputError(f"{spec.sample_submission}: ids must be <image>_<row>_<col>, e.g. "
                         f"{ids[parts.isna().any(axis=1)].iloc[0]!r}")
    test = np.full((len(ids), x.shape[1]), np.nan, dtype=np.float32)
    found = {p.stem: p for p in image_files(data_dir, spec.test_image_dir or "test", work_dir)}
    test_codes, test_pages = np.full(len(ids), -1), []  # each row's test page, as the page view names it
    for stem, rows in parts.groupby(0).groups.items():
        image = gray_image(found[stem]) if stem in found else None
        if image is None:
            warnings.append(f"{data_dir / (spec.test_image_dir or 'test')}: no readable image {stem}: its "
                            f"{len(rows)} pixel(s) get the mean")
            continue
        test_codes[np.asarray(rows)] = len(test_pages)
        test_pages.append(str(found[stem]))
        r, c = parts.loc[rows, 1].astype(int) - 1, parts.loc[rows, 2].astype(int) - 1
        inside_image = ((r >= 0) & (r < image.shape[0]) & (c >= 0) & (c < image.shape[1])).to_numpy()
        flat = (r * image.shape[1] + c).to_numpy()
        test[np.asarray(rows)[inside_image]] = pixel_features(image)[flat[inside_image]]
    names = _pixel_columns()
    at_row, at_col = (parts[k].astype(np.int32).to_numpy() - 1 for k in (1, 2))  # 0-based; int32: millions of rows
    test_rows = pd.DataFrame({"noisy": pd.Categorical.from_codes(test_codes, categories=test_pages), "row": at_row,
                              "col": at_col})
    views = {"table": (pd.DataFrame(x, columns=names), pd.DataFrame(test, columns=names)),
             "page": (_page_rows(pages, group, located), test_rows)}
    return Dataset(spec, columns, None, y[:, None].astype(np.float64), views, warnings, groups=group,
                   image_side=int(np.median(sides)), source_pixels=int(sum(areas)), sampled=sampled)


def _page_rows(pages: list[tuple[str, str]], group: np.ndarray, located: list[tuple]) -> pd.DataFrame:
    """The training pixels as the page view's rows: the noisy page's path, the clean one's, row and column."""
    rows, cols = (np.concatenate([part[k] for part in located]) for k in (0, 1))
    return pd.DataFrame({"noisy": pd.Categorical.from_codes(group, categories=[n for n, _ in pages]),
                         "clean": pd.Categorical.from_codes(group, categories=[c for _, c in pages]),
                         "row": rows.astype(np.int32), "col": cols.astype(np.int32)})


# --- text normalisation (runner.spoken) ----------------------------------------------------------------------

def _sentences_within(train: pd.DataFrame, most: int) -> pd.DataFrame:
    """Whole sentences, drawn at random, up to `most` tokens (a token's neighbours are its features)."""
    sizes = train.groupby("sentence_id", sort=False).size()
    order = sizes.sample(frac=1.0, random_state=SAMPLING_SEED)
    kept = order.index[np.cumsum(order.to_numpy()) <= most]
    return train[train["sentence_id"].isin(kept)]


def _token_dataset(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
                   budget_seconds: float | None, memory: int | None) -> Dataset:
    """A row per token: its features, the class of the first candidate that says it right (runner.spoken). Every
    training token teaches the candidates; the rows the engines learn are whole sentences, as many tokens as the
    budget trains. A training file larger than `memory` bytes (the run's) parses is read as far as they do."""
    warnings: list[str] = []
    train = read_csv(data_dir / spec.train_file, "train file", data_dir, warnings, literal=True, memory=memory)
    cut = train.attrs.get("sampled")  # the file's first rows: said in `warnings` already
    test_path = data_dir / spec.test_file
    test = read_csv(test_path, "test file", data_dir, warnings, literal=True)
    for frame, path, needed in ((train, data_dir / spec.train_file, ("sentence_id", "before", columns[0])),
                                (test, test_path, ("sentence_id", "token_id", "before"))):
        if missing := [c for c in needed if c not in frame.columns]:
            raise InputError(f"{path}: missing column(s) {missing}")
    train[["before", columns[0]]] = train[["before", columns[0]]].fillna("")  # an empty field: an empty token
    if cut and train["sentence_id"].nunique() > 1:  # the file's last sentence read may have lost its end
        train = train[train["sentence_id"] != train["sentence_id"].iloc[-1]]
    if "token_id" in train.columns:  # sentence order: a token's neighbours are its context
        train = train.sort_values(["sentence_id", "token_id"], kind="stable").reset_index(drop=True)
    test["before"] = test["before"].fillna("")
    tokens, where = _test_tokens(test, sample, spec.id_column, columns[0], test_path, warnings)
    most = min(MAX_TOKEN_ROWS, sampled_rows(budget_seconds, None)) if budget_seconds else MAX_TOKEN_ROWS
    rows, sampled, source = train.rename(columns={columns[0]: "after"}), [], str(data_dir / spec.train_file)
    whole = cut.of if cut else len(train)
    if budget_seconds and len(rows) > TAUGHT_PER_BUDGET_SECOND * budget_seconds:
        rows = _sentences_within(rows, int(TAUGHT_PER_BUDGET_SECOND * budget_seconds))
        sampled.append(Sampled(what="training tokens the candidates' normalisers learn from", kept=len(rows),
                               of=whole, how="whole sentences at random", source=source,
                               why=f"what {budget_seconds:.0f} s affords"))
    table = token_table(rows, tokens, learned_from=_sentences_within(rows, most))
    learned = len(table.y) + table.unanswerable
    if learned < whole:
        sampled.append(Sampled(what="training tokens the engines learn from", kept=learned, of=whole,
                               how="whole sentences at random", source=source,
                               why=f"what the budget trains, at most {MAX_TOKEN_ROWS:,}"))
    warnings.extend(s.say() for s in sampled)
    warnings.append(f"{table.unanswerable} of those {learned} training tokens ({table.unanswerable / learned:.1%}) "
                    f"no candidate says right are left out: the CV is the accuracy on the others")
    test_rows = table.x_test.iloc[where].reset_index(drop=True)  # the sample's order
    return Dataset(spec, columns, list(SOURCES), table.y, {"table": (table.x, test_rows)}, warnings,
                   groups=table.groups, choices=table.choices[where], sampled=tuple(s for s in (cut, *sampled) if s))


def _test_tokens(test: pd.DataFrame, sample: pd.DataFrame, id_column: str, value: str, path: Path,
                 warnings: list[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """The test tokens in sentence order (a token's neighbours are among its features, whatever order the sample
    lists them in), a sentence of its own for each sample id the test table lacks (its sample value the token),
    and where each sample row's token is."""
    test = test.sort_values(["sentence_id", "token_id"], kind="stable").reset_index(drop=True)
    ids = test["sentence_id"].astype(str) + "_" + test["token_id"].astype(str)
    if (twice := ids.duplicated()).any():  # the first of each id is the token the sample's row gets
        warnings.append(f"{path}: {int(twice.sum())} token id(s) given twice (e.g. {ids[twice].iloc[0]!r}): the "
                        f"first of each is spoken")
        test, ids = test[~twice].reset_index(drop=True), ids[~twice].reset_index(drop=True)
    where = pd.Index(ids).get_indexer(sample[id_column].astype(str))
    test = test.astype({"sentence_id": str})
    alone = np.flatnonzero(where < 0)
    if len(alone):
        where[alone] = len(test) + np.arange(len(alone))
        test = pd.concat([test, pd.DataFrame({"sentence_id": [f"alone {k}" for k in range(len(alone))],
                                              "token_id": 0, "before": sample[value].iloc[alone].astype(str)})],
                         ignore_index=True)
        warnings.append(f"{path}: no token for {len(alone)} of the sample's ids (e.g. "
                        f"{sample[id_column].iloc[alone[0]]!r}): each is its sample value, spoken alone")
    return test, where


# --- tabular features ----------------------------------------------------------------------------------------

def _split(frame: pd.DataFrame, spec: CompetitionSpec) -> pd.DataFrame:
    for split in spec.split_columns:
        if split.column in frame.columns:
            parts = frame[split.column].astype("string").str.split(split.sep, expand=True)
            for i, name in enumerate(split.into):
                frame[name] = parts[i] if i in parts.columns else pd.NA
            frame = frame.drop(columns=split.column)
    return frame


DATE_LIKE = re.compile(r"^\s*(\d{4}-\d{1,2}-\d{1,2}|\d{1,2}/\d{1,2}/\d{2,4})")  # ISO or US dates, times optional
DATE_SHARE = 0.95  # of a column's values that must parse as dates before it is taken for one


def _dates(text: pd.Series) -> pd.Series | None:
    """The column parsed as UTC timestamps when nearly all of a sample of it looks like and parses as dates."""
    probe = text.head(200)
    if not len(probe) or probe.str.match(DATE_LIKE).mean() < DATE_SHARE:
        return None
    parsed = pd.to_datetime(probe.str.replace(r"\s*UTC$", "", regex=True), errors="coerce", utc=True, format="mixed")
    if parsed.notna().mean() < DATE_SHARE:
        return None
    return pd.to_datetime(text.str.replace(r"\s*UTC$", "", regex=True), errors="coerce", utc=True, format="mixed")


def _date_parts(frame: pd.DataFrame, column: str, when: pd.Series) -> pd.DataFrame:
    """A date column becomes what trees split on: year, month, weekday, hour and days since the epoch."""
    when = when.reindex(frame.index)
    parts = {"year": when.dt.year, "month": when.dt.month, "weekday": when.dt.day_of_week, "hour": when.dt.hour,
             "days": (when - pd.Timestamp("1970-01-01", tz="UTC")).dt.total_seconds() / 86400}
    for name, values in parts.items():
        frame[f"{column}_{name}"] = values.astype("float64")
    return frame.drop(columns=column)


def _codes(frame: pd.DataFrame, column: str, width: int) -> pd.DataFrame:
    """A fixed-width code such as 'ABBCAD' becomes one categorical feature per position (its letter's code point)
    plus its count of distinct letters; a missing code is missing in each. Vectorised: millions of rows in a
    second, where a Python call per letter took tens."""
    present = frame[column].notna().to_numpy()
    letters = frame.loc[present, column].astype(str).to_numpy().astype(f"<U{width}").view(np.uint32)
    letters = letters.reshape(-1, width).astype("float64")
    spread = np.full((len(frame), width + 1), np.nan)
    spread[present, :width] = letters
    ordered = np.sort(letters, axis=1)
    spread[present, width] = 1 + (np.diff(ordered, axis=1) != 0).sum(axis=1)
    names = [f"{column}_{i}" for i in range(width)] + [f"{column}_unique"]
    added = pd.DataFrame(spread, columns=names, index=frame.index)
    return pd.concat([frame.drop(columns=column), added], axis=1)


def tabular_features(spec: CompetitionSpec, train: pd.DataFrame, test: pd.DataFrame):
    """Model-ready features: parts of split columns, booleans as numbers, dates as their parts, strings as pandas
    categories (LightGBM's native categoricals), fixed-width codes spread per position, id-like strings dropped,
    infinities missing."""
    drop = {spec.id_column, *spec.targets, *spec.drop_columns, spec.text_column}
    shared = [c for c in train.columns if c in test.columns and c not in drop]
    both = pd.concat([train[shared], test[shared]], keys=["train", "test"])
    both = _split(both, spec)
    for column in list(both.columns):
        values = both[column]
        if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
            continue  # numbers as they are (before any check turns millions of them into strings)
        if pd.api.types.is_bool_dtype(values) or set(values.dropna().astype(str).unique()) <= {"True", "False"}:
            both[column] = values.astype("string").map({"True": 1.0, "False": 0.0}).astype("float64")
        else:
            text = values.dropna().astype(str)
            unique = text.nunique()
            lengths = text.str.len()
            if (when := _dates(text)) is not None:
                both = _date_parts(both, column, when)
            elif unique > 0.5 * len(text) and lengths.nunique() == 1 and lengths.iloc[0] <= 20:
                both = _codes(both, column, int(lengths.iloc[0]))
            elif unique > 0.5 * len(text) or unique > 1000:
                both = both.drop(columns=column)  # id-like: no signal a tree can use
            else:
                both[column] = pd.Categorical(values.astype("string"))
    numeric = both.select_dtypes("number").columns
    both[numeric] = both[numeric].replace([np.inf, -np.inf], np.nan)  # infinities are missing values to every engine
    return both.loc["train"].reset_index(drop=True), both.loc["test"].reset_index(drop=True)
