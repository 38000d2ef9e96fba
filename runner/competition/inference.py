"""A spec for a competition no YAML describes, inferred from its `sample_submission.csv`, its train file and
`description.md`, each choice reported with the evidence for it."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pandas as pd

from runner.common import archives
from runner.common.csvfiles import find_sample, read_csv_file
from runner.common.errors import InputError
from runner.common.metrics import LOWER_IS_BETTER
from runner.competition.spec import AUDIO_SUFFIXES, DESCRIPTION_BYTES, IMAGE_SUFFIXES, CompetitionSpec

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
TABLE_NAME = re.compile(r"\.(csv|json)(\.(zip|7z|gz|tar\.gz))?", re.IGNORECASE)  # after the stem: train.json.7z
MAX_TEXT_CLASSES_SHARE = 0.5  # a text target with at most this many values a row is a class label; more: free text


def _metric_from_description(data_dir: Path) -> tuple[str, str] | None:
    """(metric, the words that name it) from description.md: its first DESCRIPTION_BYTES only, searched with
    patterns that take time linear in its length."""
    from runner.common.untrusted import inside

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


def _table_named(data_dir: Path, stem: str) -> Path | None:
    """`<stem>.csv` or `<stem>.json`, as it is or in an archive (`train.json.7z`, `test.csv.zip`), or None."""
    found = sorted(p for p in data_dir.glob(f"{stem}.*") if p.is_file() and TABLE_NAME.fullmatch(p.name[len(stem):]))
    return found[0] if found else None


def _train_file(data_dir: Path, id_column: str, sample_name: str) -> Path | None:
    """The file with the training labels: one of TRAIN_NAMES, else a train table in an archive or JSON, else the
    one other CSV that has the id column."""
    for name in TRAIN_NAMES:
        if (data_dir / name).is_file():
            return data_dir / name
    if (table := _table_named(data_dir, "train")) is not None:
        return table
    for path in sorted(data_dir.glob("*.csv")):
        if path.name not in (sample_name, "test.csv") and path.is_file():
            try:
                if id_column in _read_head(path, 5).columns:
                    return path
            except InputError:
                continue
    return None


def _read_head(path: Path, rows: int | None = 5000) -> pd.DataFrame:
    from runner.common.untrusted import inside

    real = inside(path.parent, path)
    try:
        if ".json" in path.name.lower():  # a JSON array of records, in an archive or not
            raw = archives.read_member(real) if archives.kind(real) else real.read_bytes()
            frame = pd.json_normalize(json.loads(raw)[:rows])
            return frame.apply(lambda c: c.map(lambda v: len(v) if isinstance(v, list) else v))  # as the data reads
        return read_csv_file(real, rows)
    except Exception as exc:  # pandas raises many types for broken CSVs
        raise InputError(f"{path}: cannot read the table: {exc}") from exc


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
                test_file=test.name if (test := _table_named(data_dir, "test")) else None,
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
        text = [t for t in targets if not pd.api.types.is_numeric_dtype(values[t]) and
                pd.to_numeric(values[t].dropna(), errors="coerce").isna().any()]
        classes = values[targets[0]].nunique()
        one_hot = binary and len(targets) > 1 and not text and (values.sum(axis=1) == 1).all()
        if text and len(targets) == 1 and classes <= max(2, MAX_TEXT_CLASSES_SHARE * len(values)):
            fmt, metric, what = "label", described or "accuracy", "text values, often repeated: a class label"
        elif text:  # free text, never read as numbers: the most frequent answer until an engine writes such text
            evidence.append(f"labels: {train_path.name} column(s) {text} hold text of many values")
            return dataclasses.replace(unsupported(f"{text[0]!r} holds free text, which no engine writes"),
                                       submission="text", baseline="most_frequent",
                                       train_file=train_path.name, targets=tuple(text))
        elif one_hot:
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
