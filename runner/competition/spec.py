"""CompetitionSpec: what a competition's files are and how it is scored (runner.competition.catalog finds one
by id; runner.competition.inference infers one for a competition no YAML describes)."""
from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass

from pydantic import ValidationError

from runner.common.errors import SpecError
from runner.common.metrics import LOWER_IS_BETTER
from runner.common.saved import Saved

TASKS = ("tabular", "image", "text", "audio", "image_to_image", "text_normalization", "unsupported")
# what the sample submission's value columns hold: one probability per class of one label, one probability of the
# positive class, a class label, values, or one independent probability per label column (multi-label)
FORMATS = ("probabilities", "probability", "label", "regression", "multilabel")
BASELINES = ("noisy_pixels",)  # see runner.results.baselines
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".tif", ".tiff", ".bmp")
AUDIO_SUFFIXES = (".wav", ".aif", ".aiff", ".flac", ".ogg")  # what libsndfile reads (runner.data.sounds)
DESCRIPTION_BYTES = 256 * 1024  # what is read of description.md: its evaluation section is near the top


@dataclass(frozen=True)
class ColumnSplit:
    """A string column made of parts, such as spaceship-titanic's Cabin 'deck/num/side'."""

    column: str
    sep: str
    into: tuple[str, ...]


@dataclass(frozen=True)
class CompetitionSpec(Saved):
    id: str
    task: str  # one of TASKS
    metric: str  # a key of LOWER_IS_BETTER
    submission: str  # one of FORMATS: what the sample submission's value columns hold
    id_column: str
    targets: tuple[str, ...]  # label column, or one-hot columns, or regression targets, in the train file
    train_file: str | None = "train.csv"  # None: the labels are in the image file names (label_pattern)
    test_file: str | None = "test.csv"  # features of the test rows; None when only the sample lists them
    sample_submission: str = "sample_submission.csv"
    answers_file: str = "test.csv"  # in prepared/private
    aliases: tuple[str, ...] = ()
    image_dir: str | None = None  # folder or .zip with the training images (an audio task's sound clips)
    test_image_dir: str | None = None
    image_suffix: str = ""  # file name = id + suffix
    text_column: str | None = None
    drop_columns: tuple[str, ...] = ()
    split_columns: tuple[ColumnSplit, ...] = ()
    grade_by: str = "id"  # "id": rows matched by id; "row": by position (nomad2018's grader)
    scored_columns: tuple[str, ...] = ()  # the value columns the grader scores, where not all of them
    label_pattern: str | None = None  # regex whose group is the label in a training file's name (no train file)
    baseline: str | None = None  # one of BASELINES: how an unsupported task still gets an honest submission
    # items listed in files rather than a train table (mlsp-2013-birds): `labels_file` has lines `id,label,...`
    # (`id,?` for a test item) under a header, `names_file` is a CSV of id and file name (without the suffix)
    labels_file: str | None = None
    names_file: str | None = None
    feature_files: tuple[str, ...] = ()  # ready features `id,value,...` under a one-line header, joined by id
    stacked_ids: int = 0  # the sample has a row per (item, label), Id = item * stacked_ids + label (0: not so)
    target_image_dir: str | None = None  # image to image: the clean images, named as the inputs in image_dir
    folds: int = 5
    inferred: bool = False
    note: str = ""
    evidence: tuple[str, ...] = ()  # for an inferred spec: each choice and what in the files led to it

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise SpecError(f"spec {self.id}: task {self.task!r} is not one of {TASKS}")
        if self.metric not in LOWER_IS_BETTER:
            raise SpecError(f"spec {self.id}: metric {self.metric!r} is not one of {sorted(LOWER_IS_BETTER)}")
        if self.submission not in FORMATS:
            raise SpecError(f"spec {self.id}: submission {self.submission!r} is not one of {FORMATS}")
        if self.baseline is not None and self.baseline not in BASELINES:
            raise SpecError(f"spec {self.id}: baseline {self.baseline!r} is not one of {BASELINES}")
        if self.stacked_ids and self.submission != "multilabel":
            raise SpecError(f"spec {self.id}: stacked_ids needs the multilabel submission format")
        if self.label_pattern is not None and re.compile(self.label_pattern).groups != 1:
            raise SpecError(f"spec {self.id}: label_pattern {self.label_pattern!r} needs exactly one group")

    @property
    def lower_is_better(self) -> bool:
        return LOWER_IS_BETTER[self.metric]

    @property
    def is_classification(self) -> bool:
        """One label per row, learned as classes; multi-label columns are learned as 0/1 values."""
        return self.submission not in ("regression", "multilabel")

    @classmethod
    def from_json(cls, data: dict) -> "CompetitionSpec":
        """Read back with pydantic (runner.common.saved); a field no spec has is named rather than ignored."""
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise SpecError(f"spec {data.get('id', '?')}: unknown field(s) {sorted(unknown)}")
        try:
            return super().from_json(data)
        except ValidationError as exc:  # a missing or mistyped field, named
            fields = ", ".join(".".join(map(str, e["loc"])) + f" ({e['msg']})" for e in exc.errors())
            raise SpecError(f"spec {data.get('id', '?')}: {fields}") from exc


def spec_json(spec: CompetitionSpec) -> str:
    return json.dumps(spec.to_json(), indent=2)
