"""Honest submissions for what no engine trains: each is the best the data allows without a model of its kind, and
says what it is.

- `noisy_pixels` (image to image, denoising, where no clean pages train a model): every test pixel as it is,
  which beats the sample's all-white page.
- `most_frequent`: the training answer given most often (a label string, a sequence, an identifier), for every row.
- `medoid`: the training answer with the least edit distance to the others, for every row (a string or a sequence
  of labels scored by its edits, where nearly every answer is unique and the most frequent is an arbitrary one).
- `sample`: the sample's own values, where they are the best answer without a model (a given order of cells).
- `column`: a column of the test file, row by row (the whole text as its own span, the sentence as it is).
- `constant`: the spec's `baseline_value` for every row (an empty mask, a no-finding box).
- `recent_items`: from a log of who took which item when, each person's own recent items, then the items most
  taken lately (runner.results.recent_items); its prior, the popular items alone, is the run's baseline.
- `receiver_fixes`: a position per (track, time) row from the track's own receiver fixes
  (runner.results.receiver_fixes).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runner.common.sequence_metrics import medoid as medoid_index
from runner.data.pages import gray_image
from runner.data.reading import image_files, read_csv
from runner.results.receiver_fixes import track_positions
from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec
from runner.results.recent_items import recommend
from runner.results import shape_priors, slice_prior



@dataclass(frozen=True)
class Baseline:
    """A whole submission's value columns, in the sample's row order, and what they are."""

    values: pd.DataFrame  # the sample's value columns
    note: str
    prior: pd.DataFrame | None = None  # what a rule that chose among answers chose against (the baseline's file)


def make_baseline(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
                  work_dir: Path) -> Baseline:
    return RULES[spec.baseline](spec, Path(data_dir), sample, columns, work_dir)


def _by_id(sample: pd.DataFrame, spec: CompetitionSpec, values: pd.Series, fill, what: str) -> tuple[pd.Series, int]:
    """`values` (indexed by id) in the sample's row order; ids it lacks get `fill`. Also how many were lacking."""
    ids = sample[spec.id_column].astype(str)
    found = values.reindex(ids.to_numpy())
    missing = int(found.isna().sum())
    if missing == len(found):
        raise InputError(f"{what}: none of the sample submission's {len(ids)} ids was found")
    return found.fillna(fill).reset_index(drop=True), missing


# --- image to image ------------------------------------------------------------------------------------------------

def noisy_pixels(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
                 work_dir: Path) -> Baseline:
    """Pixel ids '<image stem>_<row>_<col>' (1-based) take the noisy test image's intensity in [0, 1]."""
    where = data_dir / (spec.test_image_dir or "test")
    parts = []
    for path in sorted(image_files(data_dir, spec.test_image_dir or "test", work_dir)):
        if (pixels := gray_image(path, np.float64)) is None:
            continue
        rows, cols = np.indices(pixels.shape)
        ids = path.stem + "_" + (rows.ravel() + 1).astype(str).astype(object) + "_" \
            + (cols.ravel() + 1).astype(str).astype(object)
        parts.append(pd.Series(pixels.ravel(), index=ids))
    if not parts:
        raise InputError(f"{where}: no readable test image")
    values, missing = _by_id(sample, spec, pd.concat(parts), 1.0, str(where))
    note = "the noisy test pixels themselves (no image-to-image model)" + \
        (f"; {missing} pixel(s) with no image keep the sample's white" if missing else "")
    return Baseline(pd.DataFrame({columns[0]: values}), note)


# --- answers of one string per row ---------------------------------------------------------------------------------

def most_frequent(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
                  work_dir: Path) -> Baseline:
    """The training file's most frequent value of each value column (as read, a string stays a string)."""
    if spec.train_file is None:
        raise InputError(f"spec {spec.id}: the most_frequent baseline needs a train file")
    path = data_dir / spec.train_file
    train = read_csv(path, "train file", data_dir, literal=True)
    missing = [c for c in columns if c not in train.columns]
    if missing:
        raise InputError(f"{path}: no column(s) {missing} to take the most frequent answer from")
    values = {c: [train[c].mode().iloc[0]] * len(sample) for c in columns}
    told = ", ".join(f"{c} = {str(v[0])[:40]!r}" for c, v in values.items())
    return Baseline(pd.DataFrame(values), f"the most frequent training answer for every row ({told})")


def given_sample(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
                 work_dir: Path) -> Baseline:
    return Baseline(sample[columns].fillna("").reset_index(drop=True), "the sample submission's own answers")


def column(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
           work_dir: Path) -> Baseline:
    """The test file's `baseline_column`, in the sample's row order (an id it lacks keeps the sample's value)."""
    path = data_dir / spec.test_file
    test = read_csv(path, "test file", data_dir, literal=True)
    for name in (spec.id_column, spec.baseline_column):
        if name not in test.columns:
            raise InputError(f"{path}: no column {name!r}")
    by_id = test.drop_duplicates(spec.id_column).set_index(test[spec.id_column].drop_duplicates().astype(str))
    values, missing = _by_id(sample, spec, by_id[spec.baseline_column].fillna(""), "", str(path))
    fill = sample[columns[0]].reset_index(drop=True)
    values = values.where(sample[spec.id_column].astype(str).isin(by_id.index).to_numpy(), fill)
    return Baseline(pd.DataFrame({columns[0]: values}), f"{spec.test_file}'s {spec.baseline_column!r} as it is" +
                    (f"; {missing} id(s) it lacks keep the sample's value" if missing else ""))


def constant(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
             work_dir: Path) -> Baseline:
    shown = spec.baseline_value or "an empty string"
    return Baseline(pd.DataFrame({c: [spec.baseline_value] * len(sample) for c in columns}), f"{shown!r} for every row")


def recent_items(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
                 work_dir: Path) -> Baseline:
    """Each person's own recent items then the popular ones, the days of their own past chosen on the log."""
    ranked = recommend(spec, data_dir, sample)
    return Baseline(pd.DataFrame({columns[0]: ranked.chosen}), ranked.note,
                    prior=pd.DataFrame({columns[0]: ranked.prior}))


MEDOID_SAMPLE = 1000  # training answers the medoid is chosen among and measured against: a million distances


def medoid(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
           work_dir: Path) -> Baseline:
    """For each value column, the training answer (of an even sample of MEDOID_SAMPLE) whose summed edit distance
    to the others is least, for every row: of the answers train gives, the constant one that scores best on them.
    A `sequence` submission's answers are measured in its tokens (gestures), any other in characters (an InChI)."""
    from rapidfuzz.distance import Levenshtein
    from rapidfuzz.process import cdist

    if spec.train_file is None:
        raise InputError(f"spec {spec.id}: the medoid baseline needs a train file")
    path = data_dir / spec.train_file
    train = read_csv(path, "train file", data_dir, literal=True)
    values = {}
    for column in columns:
        if column not in train.columns:
            raise InputError(f"{path}: no column {column!r} to take the medoid answer from")
        answers = train[column].dropna().astype(str)
        answers = answers[answers.str.strip() != ""].reset_index(drop=True)
        if answers.empty:
            raise InputError(f"{path}: column {column!r} holds no answer")
        if spec.submission == "sequence":
            chosen = answers[medoid_index(answers.tolist())]
        else:
            drawn = answers.sample(min(len(answers), MEDOID_SAMPLE), random_state=0).tolist()
            chosen = drawn[int(np.argmin(cdist(drawn, drawn, scorer=Levenshtein.distance, workers=1).mean(axis=1)))]
        values[column] = [chosen] * len(sample)
    told = ", ".join(f"{c} = {v[0][:60]!r}" for c, v in values.items())
    return Baseline(pd.DataFrame(values), f"the training answer nearest the others by edits, for every row ({told})")


def receiver_fixes(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
                   work_dir: Path) -> Baseline:
    """Each track's own receiver fixes, at each row's time (runner.results.receiver_fixes)."""
    values, note = track_positions(spec, data_dir, sample, columns)
    return Baseline(values, note)


def _ruled(rule):
    """A rule of another module, which gives the value columns and their note, as a Baseline."""
    return lambda *args: Baseline(*rule(*args))


RULES = {"noisy_pixels": noisy_pixels, "most_frequent": most_frequent, "sample": given_sample, "column": column,
         "constant": constant, "recent_items": recent_items, "medoid": medoid, "receiver_fixes": receiver_fixes,
         "whole_mask": _ruled(shape_priors.whole_mask), "region_mask": _ruled(shape_priors.region_mask),
         "constant_by_suffix": _ruled(shape_priors.constant_by_suffix),
         "slice_prior": _ruled(slice_prior.slice_prior)}
