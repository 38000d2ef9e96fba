"""CompetitionSpec: what a competition's files are and how it is scored.

Known competitions are described in `competitions/<id>.yaml`; any other MLE-bench id is inferred from its
`sample_submission.csv`, its train file and `description.md`.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml
from pydantic import ValidationError

from runner.csvfiles import find_sample, read_csv_file
from runner.errors import InputError, SpecError
from runner.metrics import LOWER_IS_BETTER
from runner.saved import Saved

TASKS = ("tabular", "image", "text", "audio", "image_to_image", "text_normalization", "unsupported")
# what the sample submission's value columns hold: one probability per class of one label, one probability of the
# positive class, a class label, values, or one independent probability per label column (multi-label)
FORMATS = ("probabilities", "probability", "label", "regression", "multilabel")
BASELINES = ("noisy_pixels",)  # see runner.baselines
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".tif", ".tiff", ".bmp")
AUDIO_SUFFIXES = (".wav", ".aif", ".aiff", ".flac", ".ogg")  # what libsndfile reads (runner.sounds)
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
        """Read back with pydantic (runner.saved); a field no spec has is named rather than ignored."""
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise SpecError(f"spec {data.get('id', '?')}: unknown field(s) {sorted(unknown)}")
        try:
            return super().from_json(data)
        except ValidationError as exc:  # a missing or mistyped field, named
            fields = ", ".join(".".join(map(str, e["loc"])) + f" ({e['msg']})" for e in exc.errors())
            raise SpecError(f"spec {data.get('id', '?')}: {fields}") from exc


def competitions_dir() -> Path:
    """The folder of spec files: $RUNNER_COMPETITIONS, else `competitions/` beside the package."""
    return Path(os.environ.get("RUNNER_COMPETITIONS", Path(__file__).resolve().parent.parent / "competitions"))


def _load_yaml(path: Path) -> CompetitionSpec:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SpecError(f"{path}: cannot read spec: {exc}") from exc
    if "split_columns" in data:
        data["split_columns"] = [
            {"column": col, "sep": v["sep"], "into": v["into"]} for col, v in data["split_columns"].items()
        ]
    return CompetitionSpec.from_json(data)


def known_specs() -> dict[str, CompetitionSpec]:
    """Every spec in the competitions folder, keyed by id."""
    specs = [_load_yaml(p) for p in sorted(competitions_dir().glob("*.yaml"))]
    return {s.id: s for s in specs}


def find_spec(name: str) -> CompetitionSpec | None:
    for spec in known_specs().values():
        if name == spec.id or name in spec.aliases:
            return spec
    return None


def load_spec(name: str, data_dir: Path | None = None) -> CompetitionSpec:
    """The spec for an id or alias; inferred from `data_dir` when the id is not known."""
    spec = find_spec(name)
    if spec is not None:
        return spec
    if data_dir is not None and find_sample(Path(data_dir)) is not None:
        return infer_spec(name, Path(data_dir))
    known = ", ".join(sorted(known_specs()))
    where = f"; no sample submission in {data_dir} either" if data_dir else ""
    raise SpecError(f"unknown competition {name!r}{where}. Known: {known}")


# --- inference for competitions without a spec -------------------------------------------------------------

_METRIC_WORDS = (
    ("rmsle", r"rmsle|root[\s-]mean[\s-]squared?[\s-]log|(rmse|squared?[\s-]error)\)?,? (between|of) the log"),
    ("qwk", r"quadratic(ly)? weighted (cohen'?s )?kappa|weighted kappa"),
    ("log_loss", r"log[\s-]?loss|logarithmic loss|cross[\s-]?entropy"),
    ("mean_column_roc_auc", r"mean column[\s-]?wise (roc )?auc|column[\s-]wise.{0,80}auc"),  # bounded: linear
    ("roc_auc", r"\bauc\b|area under the (roc )?curve|roc[\s-]auc"),
    ("accuracy", r"\baccuracy\b|categorization accuracy"),
    ("rmse", r"\brmse\b|root[\s-]mean[\s-]squared?[\s-]error"),
    ("mae", r"\bmae\b|mean absolute error"),
)


TRAIN_NAMES = ("train.csv", "labels.csv", "train_labels.csv")  # where competitions keep the training labels
QUOTE = 50  # characters of description.md quoted around the words that named the metric


def _metric_from_description(data_dir: Path) -> tuple[str, str] | None:
    """(metric, the words that name it) from description.md: its first DESCRIPTION_BYTES only, searched with
    patterns that take time linear in its length."""
    from runner.untrusted import inside

    path = data_dir / "description.md"
    try:
        real = inside(data_dir, path)
    except InputError:
        return None
    with open(real, "rb") as handle:
        text = handle.read(DESCRIPTION_BYTES).decode(errors="replace").lower()
    for metric, pattern in _METRIC_WORDS:
        if found := re.search(pattern, text):
            start = max(0, found.start() - QUOTE)
            return metric, " ".join(text[start:found.end() + QUOTE].split())
    return None


def _train_file(data_dir: Path, id_column: str, sample_name: str) -> Path | None:
    """The file with the training labels: one of TRAIN_NAMES, else the one other CSV that has the id column."""
    for name in TRAIN_NAMES:
        if (data_dir / name).is_file():
            return data_dir / name
    for path in sorted(data_dir.glob("*.csv")):
        if path.name not in (sample_name, "test.csv") and path.is_file():
            try:
                if id_column in _read_head(path, 5).columns:
                    return path
            except InputError:
                continue
    return None


def _read_head(path: Path, rows: int | None = 5000) -> pd.DataFrame:
    from runner.untrusted import inside

    real = inside(path.parent, path)
    try:
        return read_csv_file(real, rows)
    except Exception as exc:  # pandas raises many types for broken CSVs
        raise InputError(f"{path}: cannot read CSV: {exc}") from exc


def _find_files(data_dir: Path, ids: pd.Series, suffixes: tuple[str, ...]) -> tuple[str, str] | None:
    """(folder, suffix) of a folder whose file names are the given ids plus one of `suffixes` (images, clips)."""
    sample = [str(i) for i in ids.head(20)]
    real = data_dir.resolve()
    for folder in sorted(p for p in data_dir.iterdir() if p.is_dir() and real in p.resolve().parents):
        for suffix in ("",) + suffixes:
            if all((folder / f"{i}{suffix}").is_file() for i in sample) and (
                suffix or Path(sample[0]).suffix.lower() in suffixes
            ):
                return folder.name, suffix
    return None


def infer_spec(name: str, data_dir: Path) -> CompetitionSpec:
    """A best-effort spec from the files of an MLE-bench public folder, each choice with its evidence. Never raises
    for odd data: a spec that cannot be trained comes back with task 'unsupported' and a note, so the sample
    submission is still written."""
    sample_path = find_sample(data_dir)
    sample = _read_head(sample_path)
    id_column, targets = sample.columns[0], tuple(sample.columns[1:])
    evidence = [f"id column {id_column!r}, value columns {list(targets)[:6]}: the columns of {sample_path.name}"]
    found = _metric_from_description(data_dir)
    described = found[0] if found else None
    if found:
        evidence.append(f"metric {found[0]}: description.md says \"{found[1]}\"")
    train_path = _train_file(data_dir, id_column, sample_path.name)
    base = dict(id=name, id_column=id_column, targets=targets, inferred=True, sample_submission=sample_path.name,
                test_file="test.csv" if (data_dir / "test.csv").is_file() else None,
                train_file=train_path.name if train_path else "train.csv")

    def unsupported(note: str) -> CompetitionSpec:
        rule = _rule_baseline(data_dir, sample[id_column], targets)
        if rule is not None:  # image to image, or a kind no engine trains but one a baseline rule knows
            fields, why = rule
            usual, task = fields.pop("metric"), fields.pop("task", "unsupported")
            said = (why,) if task != "unsupported" else (f"not trained: {note}", why)
            return CompetitionSpec(task=task, metric=described or usual, note=note if task == "unsupported" else why,
                                   evidence=(*evidence, *said), **{**base, **fields})
        metric = described or "accuracy"
        fmt = "regression" if metric in ("rmsle", "rmse", "mae") else "label"
        return CompetitionSpec(task="unsupported", metric=metric, submission=fmt, note=note,
                               evidence=(*evidence, f"not trained: {note}"), **base)

    if not targets:
        return unsupported(f"{sample_path.name} has no value column")
    if train_path is None:
        return unsupported(f"no file with training labels ({', '.join(TRAIN_NAMES)}, or a CSV with column "
                           f"{id_column!r}): only the sample submission can be written")
    try:
        train = _read_head(train_path)
    except InputError as exc:  # the sample submission is still written
        return unsupported(str(exc))
    if id_column not in train.columns:
        return unsupported(f"{train_path.name} has no id column {id_column!r}")

    label_column = next((c for c in train.columns if set(map(str, train[c].dropna().unique())) >= set(targets)
                         and len(targets) > 1), None)
    if label_column is not None:  # one probability column per class of a label column
        fmt, metric, train_targets = "probabilities", described or "log_loss", (label_column,)
        evidence.append(f"labels: {train_path.name} column {label_column!r}, whose values are the sample's "
                        f"{len(targets)} value columns: one probability per class")
    elif all(t in train.columns for t in targets):
        train_targets = targets
        values = train[list(targets)]
        binary = all(values[t].dropna().nunique() <= 2 for t in targets)
        integer = all(pd.api.types.is_integer_dtype(values[t]) or pd.api.types.is_bool_dtype(values[t])
                      for t in targets)
        one_hot = binary and len(targets) > 1 and (values.sum(axis=1) == 1).all()
        if one_hot:
            fmt, metric = "probabilities", described or "mean_column_roc_auc"
            what = "one-hot columns: one probability per class"
        elif len(targets) > 1 and binary:
            fmt, metric = "multilabel", described or "mean_column_roc_auc"
            what = "0/1 columns, several per row: one independent probability per label"
        elif described in ("roc_auc", "log_loss") and binary:
            fmt, metric, what = "probability", described, "two values and a probability metric: one probability"
        elif integer and values[targets[0]].nunique() <= 50:
            fmt, metric, what = "label", described or "accuracy", "few integer values: a class label"
        else:
            fmt, metric, what = "regression", described or "rmse", "numbers: values"
        evidence.append(f"labels: {train_path.name} column(s) {list(targets)[:6]}, named as in the sample; {what}")
    else:
        return unsupported(f"{train_path.name} has none of the sample submission's columns {list(targets)}")
    if not found:
        evidence.append(f"metric {metric}: description.md names none; the usual one for {fmt}")

    if fmt == "probabilities" and len(train_targets) > 1 and metric not in ("mean_column_roc_auc", "log_loss"):
        metric = "mean_column_roc_auc"
    images = _find_files(data_dir, train[id_column], IMAGE_SUFFIXES)
    sounds = None if images else _find_files(data_dir, train[id_column], AUDIO_SUFFIXES)
    text = next((c for c in train.columns if c not in train_targets and pd.api.types.is_string_dtype(train[c])
                 and train[c].astype(str).str.len().mean() > 40), None)
    task = "image" if images else "audio" if sounds else "text" if text else "tabular"
    if task in ("image", "audio") and fmt == "regression":
        return unsupported(f"{task} regression is not trained by this runner")
    extra = {}
    if files := images or sounds:
        kind, suffixes = ("images", IMAGE_SUFFIXES) if images else ("sound clips", AUDIO_SUFFIXES)
        test_files = _find_files(data_dir, sample[id_column], suffixes)
        extra = dict(image_dir=files[0], image_suffix=files[1],
                     test_image_dir=test_files[0] if test_files else files[0])
        evidence.append(f"{kind}: {files[0]}/ holds a file named id{files[1] and ' + ' + files[1]} for each "
                        f"training id" + (f"; test {kind} in {test_files[0]}/" if test_files else ""))
    if text:
        extra["text_column"] = text
        evidence.append(f"text: column {text!r} averages more than 40 characters")
    evidence.append(f"task {task}; {'lower' if LOWER_IS_BETTER[metric] else 'higher'} {metric} is better")
    return CompetitionSpec(task=task, metric=metric, submission=fmt,
                           **{**base, "targets": train_targets}, **extra, evidence=tuple(evidence),
                           note=f"inferred from {sample_path.name}, {train_path.name} and description.md")


PIXEL_ID = re.compile(r"^(.+)_\d+_\d+$")  # '<image>_<row>_<col>': one submission row per pixel


def _image_pair(data_dir: Path) -> tuple[str, str] | None:
    """(inputs, targets) of two image folders `X/` and `X_*/` whose image names are the same: noisy pages and
    clean ones (denoising-dirty-documents' train/ and train_cleaned/)."""
    def images(folder: Path) -> set[str]:
        return {p.name for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES}

    for folder in sorted(p for p in data_dir.iterdir() if p.is_dir()):
        for other in sorted(data_dir.glob(f"{folder.name}_*")):
            if other.is_dir() and (names := images(folder)) and names == images(other):
                return folder.name, other.name
    return None


def _rule_baseline(data_dir: Path, ids: pd.Series, targets: tuple) -> tuple[dict, str] | None:
    """(spec fields, evidence) of what a competition without a train table calls for: pixel ids of the images in a
    folder with a pair of noisy and clean image folders (image to image, trained), else the noisy-pixels rule; or
    tokens with their spoken form in a training table (text normalisation, trained); None when none fits."""
    if len(targets) != 1:
        return None
    stems = {m.group(1) for i in ids.astype(str).head(50) if (m := PIXEL_ID.match(i))}
    if stems and len(stems) <= 50 and ids.astype(str).head(50).str.match(PIXEL_ID).all():
        for folder in sorted(p for p in data_dir.iterdir() if p.is_dir()):
            names = {p.stem for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES}
            if stems <= names:
                fields = dict(submission="regression", metric="rmse", train_file=None, test_file=None,
                              test_image_dir=folder.name)
                why = f"the ids are <image>_<row>_<col> of the images in {folder.name}/"
                if pair := _image_pair(data_dir):
                    return (dict(fields, task="image_to_image", image_dir=pair[0], target_image_dir=pair[1]),
                            f"image to image: {why}; {pair[0]}/ and {pair[1]}/ hold images of the same names")
                return dict(fields, baseline="noisy_pixels"), f"baseline noisy_pixels: {why}"
    tables = {}
    for path in sorted(data_dir.iterdir()):
        if path.is_file() and re.search(r"\.csv(\.(zip|gz))?$", path.name) and "sample" not in path.name.lower():
            try:
                tables[path.name] = set(_read_head(path, 5).columns)
            except InputError:
                continue
    train = next((n for n, cols in tables.items() if {"before", "after", "sentence_id"} <= cols), None)
    test = next((n for n, cols in tables.items() if {"before", "sentence_id", "token_id"} <= cols
                 and "after" not in cols), None)
    if train and test:
        return (dict(task="text_normalization", submission="label", metric="accuracy", train_file=train,
                     test_file=test),
                f"text normalization: {train} pairs tokens (before) with their spoken form (after), {test} lists "
                "the test tokens")
    return None


def spec_json(spec: CompetitionSpec) -> str:
    return json.dumps(spec.to_json(), indent=2)
