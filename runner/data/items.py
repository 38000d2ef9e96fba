"""Items whose labels no train table lists, read by the layout a spec names in `items`: each reader gives the
training rows (the id and target columns) and the file each training and test row reads, in the sample's order
for the test rows. What reads each file (a picture, a clip, an array) is the task's, or the spec's `decode`
(runner.data.decoders).

- `folders`: the label is the name of the folder below `image_dir` that a file is in (alaska2's Cover/, JMiPOD/,
  tensorflow-speech's train/audio/<word>/); the test files are named by the sample's ids in `test_image_dir`.
- `array_records`: the records of a JSON array (statoil's train.json.7z), their lists of numbers one array file
  each for the spec's `decode`, their other fields a table (runner.data.array_records).
- `pulse_events`: events whose hits lie in shared batch files, one row of features each (runner.data.pulse_events).
- `coco`: COCO-style JSON: images and their annotations' categories (runner.data.coco).
- `table`: a training table whose id and label columns are named apart from the sample's (runner.data.table_items).
- `bson`: BSON documents holding each item's pictures, tiled into one per item (runner.data.bson_records).
- `slice_rows`: slices of series whose masks are written a row per slice and class (runner.data.slice_rows).
- `fragments`: folders of depth slices, each training one with its own run-length labels (runner.data.fragments).
- `study_images`: radiographs nested by study, each with its boxes and its study's label (runner.data.study_images).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable

import pandas as pd

from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec
from runner.data.array_records import array_records
from runner.data.band_records import band_records
from runner.data.pulse_events import pulse_events
from runner.data.bson_records import bson_items
from runner.data.coco import coco_items
from runner.data.fragments import fragments
from runner.data.reading import image_files, image_folder
from runner.data.slice_rows import slice_rows
from runner.data.study_images import study_images
from runner.data.table_items import table_items


@dataclass
class Items:
    """What an items reader found: the training rows and each training and test row's file (None: not found)."""

    train: pd.DataFrame  # the id column and the target column(s), one row per training item
    train_files: list[Path | None]
    test_files: list[Path | None]  # the sample's rows, in its order
    where: str  # what was read, for messages: a file or folder
    # the test rows' own fields, in the sample's order, where the reader reads them (no test file lists them): the
    # columns they share with `train` become the table view
    test: pd.DataFrame | None = None
    groups: list | None = None  # each training row's group, where rows of one group must share a fold
    score_groups: list | None = None  # each training row's group in a metric that scores groups apart (a series)


def files_named(data_dir: Path, folder: str, work_dir: Path, names: pd.Series, suffix: str = "") -> list[Path | None]:
    """The file named each of `names` (plus `suffix`) anywhere below `folder` (or its extracted archive), by its
    name alone: a nested layout finds its files as a flat one does."""
    found = {p.name: p for p in image_files(data_dir, folder, work_dir)}
    return [found.get(f"{name}{suffix}") for name in names.astype(str)]


def _below(folder: Path, root: Path) -> PurePosixPath | None:
    """`folder`'s path below `root`, or None where it is not below it."""
    try:
        return PurePosixPath(Path(folder).resolve().relative_to(Path(root).resolve()).as_posix())
    except ValueError:
        return None


def from_folders(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame) -> Items:
    """Each file of `image_dir` with the spec's suffix, its label the first folder it is in below `image_dir`, its
    id its path there; files straight in `image_dir` have no label and are left out, as are the test folder's
    where it lies below `image_dir` (alaska2's Test/ beside its four training folders at the public root)."""
    root = image_folder(data_dir, spec.image_dir, work_dir)
    tests = _below(data_dir / spec.test_image_dir, root) if spec.test_image_dir else None
    rows = []
    for path in sorted(image_files(data_dir, spec.image_dir, work_dir)):
        relative = PurePosixPath(path.relative_to(root).as_posix())
        if tests is not None and tests.parts and relative.parts[:len(tests.parts)] == tests.parts:
            continue
        if len(relative.parts) > 1 and path.name.endswith(spec.image_suffix) and not path.name.startswith("."):
            rows.append((str(relative), relative.parts[0], path))
    if not rows:
        raise InputError(f"{data_dir / spec.image_dir}: no file in a folder below it: no label to read")
    train = pd.DataFrame([(i, label) for i, label, _ in rows], columns=[spec.id_column, spec.targets[0]])
    test = files_named(data_dir, spec.test_image_dir or spec.image_dir, work_dir, sample[spec.id_column],
                       spec.test_suffix)
    # one file name in several label folders is one picture in several versions (alaska2's cover and its stego
    # copies) or one speaker's word: those rows share a fold, so none validates what its twin trained
    return Items(train, [path for *_, path in rows], test, str(data_dir / spec.image_dir),
                 groups=[path.name for *_, path in rows])


# a spec's `items` -> the reader of that layout
READERS: dict[str, Callable[[CompetitionSpec, Path, Path, pd.DataFrame], Items]] = {
    "folders": from_folders,
    "array_records": lambda *args: Items(*array_records(*args)),  # JSON records whose lists are arrays
    "pulse_events": lambda *args: Items(*pulse_events(*args)),  # events' hits in batch files, a row each
    "coco": lambda *args: Items(*coco_items(*args)),  # COCO-style JSON (runner.data.coco)
    "table": lambda *args: Items(*table_items(*args)),  # a table named apart from the sample (runner.data.table_items)
    "bson": lambda *args: Items(*bson_items(*args)),  # BSON documents with pictures (runner.data.bson_records)
    "band_records": lambda *args: Items(*band_records(*args)),  # folders of band arrays (runner.data.band_records)
    "slice_rows": lambda *args: Items(*slice_rows(*args)),  # slices, a mask row per class (runner.data.slice_rows)
    "fragments": lambda *args: Items(*fragments(*args)),  # folders of depth slices (runner.data.fragments)
    "study_images": lambda *args: Items(*study_images(*args)),  # images nested by study (runner.data.study_images)
}


def read_items(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame) -> Items:
    if spec.items not in READERS:
        raise InputError(f"spec {spec.id}: no reader for items {spec.items!r}; known: {', '.join(READERS)}")
    return READERS[spec.items](spec, Path(data_dir), Path(work_dir), sample)
