"""Items whose labels no train table lists, read by the layout a spec names in `items`: each reader gives the
training rows (the id and target columns) and the file each training and test row reads, in the sample's order
for the test rows. What reads each file (a picture, a clip, an array) is the task's, or the spec's `decode`
(runner.data.decoders).

- `folders`: the label is the name of the folder below `image_dir` that a file is in (alaska2's Cover/, JMiPOD/,
  tensorflow-speech's train/audio/<word>/); the test files are named by the sample's ids in `test_image_dir`.
- `array_records`: the records of a JSON array (statoil's train.json.7z), their lists of numbers one array file
  each for the spec's `decode`, their other fields a table (runner.data.array_records).
- `pulse_events`: events whose hits lie in shared batch files, one row of features each (runner.data.pulse_events).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable

import pandas as pd

from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec
from runner.data.array_records import array_records
from runner.data.pulse_events import pulse_events
from runner.data.reading import image_files, image_folder


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


def files_named(data_dir: Path, folder: str, work_dir: Path, names: pd.Series, suffix: str = "") -> list[Path | None]:
    """The file named each of `names` (plus `suffix`) anywhere below `folder` (or its extracted archive), by its
    name alone: a nested layout finds its files as a flat one does."""
    found = {p.name: p for p in image_files(data_dir, folder, work_dir)}
    return [found.get(f"{name}{suffix}") for name in names.astype(str)]


def from_folders(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame) -> Items:
    """Each file of `image_dir` with the spec's suffix, its label the first folder it is in below `image_dir`, its
    id its path there; files straight in `image_dir` have no label and are left out."""
    root = image_folder(data_dir, spec.image_dir, work_dir)
    rows = []
    for path in sorted(image_files(data_dir, spec.image_dir, work_dir)):
        relative = PurePosixPath(path.relative_to(root).as_posix())
        if len(relative.parts) > 1 and path.name.endswith(spec.image_suffix) and not path.name.startswith("."):
            rows.append((str(relative), relative.parts[0], path))
    if not rows:
        raise InputError(f"{data_dir / spec.image_dir}: no file in a folder below it: no label to read")
    train = pd.DataFrame([(i, label) for i, label, _ in rows], columns=[spec.id_column, spec.targets[0]])
    test = files_named(data_dir, spec.test_image_dir or spec.image_dir, work_dir, sample[spec.id_column],
                       spec.test_suffix)
    return Items(train, [path for *_, path in rows], test, str(data_dir / spec.image_dir))


# a spec's `items` -> the reader of that layout
READERS: dict[str, Callable[[CompetitionSpec, Path, Path, pd.DataFrame], Items]] = {
    "folders": from_folders,
    "array_records": lambda *args: Items(*array_records(*args)),  # JSON records whose lists are arrays
    "pulse_events": lambda *args: Items(*pulse_events(*args)),  # events' hits in batch files, a row each
}


def read_items(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame) -> Items:
    if spec.items not in READERS:
        raise InputError(f"spec {spec.id}: no reader for items {spec.items!r}; known: {', '.join(READERS)}")
    return READERS[spec.items](spec, Path(data_dir), Path(work_dir), sample)
