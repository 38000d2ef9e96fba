"""Radiographs nested by study (`items: study_images`, siim-covid's `<image_dir>/<study>/<series>/<image>.dcm`), each
image a training item: its boxes from the image file's label string as the answers write them (`opacity 1 x_min
y_min x_max y_max ...`, or `none 1 0 0 1 1`) and its study's label (the study file's one-hot columns) as a box of a
whole-image class covering the image. They are handed on as a row per drawn box with each image's size
(runner.data.box_targets' layout), so that boxes are gathered into rows one way; an image without a box draws the
no-finding class. A test row is a sample row: an image row its image, a study row its study's first image (most
studies hold one radiograph), whose whole-image classes the writer averages over the study's image rows
(`study_rows`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.common.box_rows import dicom_size
from runner.common.errors import InputError
from runner.competition.spec import BoxFormat, CompetitionSpec
from runner.data.reading import read_csv

FIELDS = 6  # a box as the label strings write it: label, confidence, x_min, y_min, x_max, y_max


def _layout(spec: CompetitionSpec) -> BoxFormat:
    layout = spec.boxes
    if layout is None or not (layout.study_file and layout.labels and layout.study_columns):
        raise InputError(f"spec {spec.id}: images nested by study need boxes.labels, boxes.study_file and "
                         "boxes.study_columns")
    return layout


def nested_files(folder: Path, suffix: str) -> dict[str, tuple[str, Path]]:
    """{image name: (its study, its file)} of every file with `suffix` below `folder`, the study the first folder
    below it."""
    found = {}
    for path in sorted(Path(folder).rglob(f"*{suffix}")):
        found[path.name[:-len(suffix)]] = (path.relative_to(folder).parts[0], path)
    return found


def parsed_boxes(text, where: str) -> list[tuple[str, float, float, float, float]]:
    """(label, x_min, y_min, x_max, y_max) of each group of a label string; an empty cell holds none."""
    tokens = text.split() if isinstance(text, str) else []
    if len(tokens) % FIELDS:
        raise InputError(f"{where}: {len(tokens)} values, not groups of {FIELDS} (label confidence x y x y)")
    try:
        return [(tokens[i], *(float(v) for v in tokens[i + 2:i + FIELDS])) for i in range(0, len(tokens), FIELDS)]
    except ValueError:
        raise InputError(f"{where}: a box's coordinates are no numbers") from None


def _study_classes(spec: CompetitionSpec, layout: BoxFormat, data_dir: Path) -> dict[str, int]:
    """{study: its whole-image class} from the study file's one-hot columns (the largest where several are set)."""
    path = data_dir / layout.study_file
    studies = read_csv(path, "study file", data_dir)
    columns = [c for c, _ in layout.study_columns]
    missing = [c for c in (spec.id_column, *columns) if c not in studies.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {missing}")
    classes = np.array([layout.labels.index(name) for _, name in layout.study_columns])
    chosen = classes[studies[columns].to_numpy(dtype=float).argmax(axis=1)]
    ids = studies[spec.id_column].astype(str).str.removesuffix(layout.study_suffix)
    return dict(zip(ids, chosen.tolist()))


def study_images(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame):
    """(a row per drawn box: id, class_id, x_min, y_min, x_max, y_max, width, height; each row's image file; the
    test rows' files; what was read; None; each row's study, which a fold keeps whole and the grader scores as one
    row of appearances)."""
    layout = _layout(spec)
    path = data_dir / spec.train_file
    images = read_csv(path, "train file", data_dir)
    missing = [c for c in (spec.id_column, layout.study_column, layout.label_column) if c not in images.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {missing}")
    study_class, none = _study_classes(spec, layout, data_dir), len(layout.labels) - 1
    found = nested_files(data_dir / (spec.image_dir or "train"), spec.image_suffix or "")
    rows, files, groups = [], [], []
    for image_id, study, text in zip(images[spec.id_column].astype(str), images[layout.study_column].astype(str),
                                     images[layout.label_column]):
        name = image_id.removesuffix(layout.image_suffix)
        if name not in found:
            continue  # no file: not a training item
        file = found[name][1]
        width, height = dicom_size(file)
        drawn = [(layout.labels.index(label), *box) for label, *box in parsed_boxes(text, f"{path}, id {image_id}")
                 if label in layout.labels and layout.labels.index(label) != none and label not in layout.whole]
        drawn = drawn or [(none, np.nan, np.nan, np.nan, np.nan)]
        if study in study_class:
            drawn.append((study_class[study], 0.0, 0.0, width, height))
        rows.extend((image_id, *box, width, height) for box in drawn)
        files.extend([file] * len(drawn))
        groups.extend([study] * len(drawn))
    if not rows:
        raise InputError(f"{path}: no id names an image below {data_dir / (spec.image_dir or 'train')}")
    train = pd.DataFrame(rows, columns=[spec.id_column, "class_id", "x_min", "y_min", "x_max", "y_max", "width",
                                        "height"])
    return train, files, row_files(spec, data_dir, sample), str(path), None, groups, groups  # scored by study too


def row_files(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame) -> list[Path | None]:
    """Each sample row's image: an image row's own, a study row's study's first; None where there is none."""
    layout = _layout(spec)
    found = nested_files(data_dir / (spec.test_image_dir or "test"), spec.image_suffix or "")
    first: dict[str, Path] = {}
    for study, file in found.values():
        first.setdefault(study, file)
    out = []
    for row_id in sample[spec.id_column].astype(str):
        if row_id.endswith(layout.study_suffix):
            out.append(first.get(row_id.removesuffix(layout.study_suffix)))
        else:
            out.append(found.get(row_id.removesuffix(layout.image_suffix), (None, None))[1])
    return out


def study_rows(spec: CompetitionSpec, sample: pd.DataFrame, files: list[Path | None]) -> list[list[int]]:
    """For each sample row, the rows whose whole-image classes it is written with: a study row its study's image
    rows (their files below its folder), where it has any; every other row itself."""
    layout = _layout(spec)
    ids = sample[spec.id_column].astype(str).tolist()
    images: dict[str, list[int]] = {}
    for k, (row_id, file) in enumerate(zip(ids, files)):
        if row_id.endswith(layout.image_suffix) and file is not None:
            images.setdefault(Path(file).parents[1].name, []).append(k)  # <study>/<series>/<image>
    return [images.get(row_id.removesuffix(layout.study_suffix), [k]) if row_id.endswith(layout.study_suffix)
            else [k] for k, row_id in enumerate(ids)]
