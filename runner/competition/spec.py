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
# positive class, a class label, values, one independent probability per label column (multi-label), a set of
# labels in one string (space-separated), the k likeliest labels in one string, best first, a value the grader
# cuts at 0.5 into a yes or no (written so that the cut falls where out-of-fold predictions put it), a span of a
# text (learned as a choice among candidate spans where the spec names the column that decides it, else a rule's);
# a value with the spread the grader scores it with (osic's FVC and Confidence); or what no engine learns yet,
# written by a rule (runner.results.baselines): run-length masks, boxes, free text, a ranking of items
FORMATS = ("probabilities", "probability", "label", "regression", "multilabel", "labels", "ranked", "decision",
           "mask", "boxes", "span", "text", "ranking",
           "distribution",  # soft labels: each row's shares of the value columns, learned as a value each, summing to 1
           "direction",  # a direction in 3-D as its azimuth and zenith, learned as a unit vector
           "sequence",  # an ordered list of labels in one string (gestures in the order they were made)
           "points",  # labelled points, "label x y" triples (kuzushiji's characters)
           "boxes3d",  # a sample's 3-D boxes in one string, nine tokens a box (lyft's lidar scenes)
           "value_and_spread")  # a value and the spread it is stated with (osic's FVC and Confidence)
# how the engines learn each format: one class per row (probabilities out), independent 0/1 labels, or values
LEARNED_AS = {"probabilities": "classes", "probability": "classes", "label": "classes", "ranked": "classes",
              "regression": "values", "multilabel": "labels", "labels": "labels", "decision": "classes",
              "span": "values",  # a span: each candidate span's score (runner.data.spans)
              "distribution": "values", "direction": "values", "value_and_spread": "values",
              "mask": "pixels",  # each row's masks, every pixel's probability (an image competition's)
              "boxes": "boxes",  # each row's boxes in fixed slots, a confidence each (runner.common.box_rows)
              "points": "points"}  # each page's labelled points in slots, a confidence each (runner.common.point_rows)
DECISION_CUT = 0.5  # a `decision` submission's grader: from this value on, yes
STRING_FORMATS = ("labels", "ranked", "mask", "boxes", "span", "text", "ranking",
                  "sequence", "points", "boxes3d")  # one string per row, any text
# the rules of runner.results.baselines: what a task no engine trains submits
BASELINES = ("noisy_pixels", "most_frequent", "sample", "column", "constant",
             "recent_items",
             "medoid",  # the training answer nearest all the others (ordered label sequences, by edit distance)
             "receiver_fixes",  # each track's own position fixes, at the sample's times
             "constant_by_suffix", "whole_mask", "region_mask", "slice_prior")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".tif", ".tiff", ".bmp")
AUDIO_SUFFIXES = (".wav", ".aif", ".aiff", ".flac", ".ogg")  # what libsndfile reads (runner.data.sounds)
# how a submission's rows meet the answers' (CompetitionSpec.grade_by)
GRADE_BY = ("id", "row", "answers", "merge", "group", "scorer", "subset")
DESCRIPTION_BYTES = 256 * 1024  # what is read of description.md: its evaluation section is near the top


@dataclass(frozen=True)
class ColumnSplit:
    """A string column made of parts, such as spaceship-titanic's Cabin 'deck/num/side'."""

    column: str
    sep: str
    into: tuple[str, ...]


@dataclass(frozen=True)
class Join:
    """A table whose rows add columns to the rows of ids made of parts (runner.competition.id_parts): the row of
    `train_file` (a training row's) or `test_file` (a test row's) whose `keys` columns (the table's) equal the
    row's (`keys`' values), its columns named with `suffix`; with `first_by`, each key's first row by that column (a
    patient's first visit). Two joins of one table are compared: each column's difference (or sameness), and the
    distance between the `position` columns (a player's x and y)."""

    train_file: str
    test_file: str
    keys: dict[str, str]  # the table's column -> the row's column it must equal
    suffix: str
    first_by: str | None = None
    position: tuple[str, ...] = ()


@dataclass(frozen=True)
class LastRows:
    """Of the answers' scored rows, each group's last `count` by `order` (osic's last three visits a patient)."""

    group: str
    order: str
    count: int


@dataclass(frozen=True)
class RowGroups:
    """Rows that belong together (a breath's time steps, a molecule's atom pairs, a sequence's positions): folds
    keep a group whole, and each row takes features from its group's other rows (runner.data.group_features)."""

    column: str  # the group of a row; not itself a feature (an arbitrary name or number)
    order: str | None = None  # what orders a group's rows (a time, a position); None: the file's order
    sequence: tuple[str, ...] = ()  # columns whose neighbours along the order become features
    lags: tuple[int, ...] = (1, 2, 3, -1, -2, -3)  # the neighbours: positive looks back, negative ahead
    statistics: tuple[str, ...] = ()  # number columns whose group mean, min, max and spread become features
    counts: tuple[str, ...] = ()  # category columns whose count of each value in the group become features


@dataclass(frozen=True)
class PositionRows:
    """Records (JSON lines or a JSON array) whose list and string fields hold a value per position, read as a row
    per position: the sample's id of a row is the record's `key`, `separator` and the position ('id_0f1_0')."""

    key: str = "id"  # the record's field that names it
    separator: str = "_"
    position: str = "position"  # the column a row's position is read into


@dataclass(frozen=True)
class RealSize:
    """The real competition as MLE-bench prepares it: what `runner plan` and `--scale real` size against."""

    train: int  # training rows or items (images, clips, files, documents)
    test: int  # test rows or items
    gigabytes: float = 0.0  # the prepared public folder on disk
    side: int = 0  # the images' (or pages', clips' pictures') typical shorter side in pixels, where there are some
    # the masks' median run in the real items' pixels, where they are learned on a measured canvas (hubmap's
    # glomeruli, some 300 pixels across): the canvas a real run would measure (runner.data.canvas)
    mask_run: int = 0
    note: str = ""  # what the counts count, where not rows


@dataclass(frozen=True)
class MaskFormat:
    """How a competition writes masks as run-length strings (runner.common.rle) and how its grader reads them."""

    order: str = "column"  # how the labels and the submission flatten a mask: "column" (top to bottom first), "row"
    graded_order: str | None = None  # how the grader decodes both sides, where not `order` (uw-madison's)
    empty: str | None = ""  # an empty mask's cell: "" (an empty cell), a token ("-"), None: none can be written
    shape: tuple[int, int] | None = None  # (height, width) of every mask, where the answers do not say
    size_columns: tuple[str, ...] = ()  # the answers' (height, width) columns: each row's mask size
    answer_column: str | None = None  # the answers' run-length column, where not the submission's
    train_column: str | None = None  # the train file's run-length column, where not the submission's
    only_columns: bool = False  # the grader rejects a submission with any column beyond the sample's
    # the text in an id after which a slice's number follows (uw-madison's "_slice_"): the rows whose ids share what
    # comes before it are one series, graded as a volume
    series: str | None = None
    region: str | None = None  # a file in each test item's folder marking where the mask can be (vesuvius' mask.png)
    # masks written a row per item and class (uw-madison's organs): the column naming a row's class, and the classes
    # in the order a learned row holds them (runner.data.slice_rows)
    class_column: str | None = None
    classes: tuple[str, ...] = ()
    # each item's mask is as large as its image (hubmap's slides, vesuvius' fragments): learned on one square canvas
    # whose side the training masks decide and written at each test item's own size (runner.data.canvas)
    own_size: bool = False
    item_labels: str | None = None  # a training item's own run-length file in its folder (vesuvius' inklabels_rle.csv)
    # on a machine with a card, the largest side items resized to `shape` (a CPU's) are learned at instead: their own
    # median side at most, within the memory the supervisor holds their pixels in (runner.data.canvas.card_side)
    card_side: int = 0

    @property
    def decoded_order(self) -> str:
        return self.graded_order or self.order


@dataclass(frozen=True)
class BandRecords:
    """Items that are folders of band arrays (height x width x frames each, one file a band), their masks an array
    in the folder (contrails' records): how the folders are read and drawn as pictures."""

    file: str = "band_{band:02}.npy"  # a band's file in an item's folder
    frame: int = 0  # the frame the masks label
    # each channel of the picture: a band, or a band less another (contrails' "ash" colours: 15 - 14, 14 - 11, 14)
    channels: tuple[tuple[int, ...], ...] = ()
    mask_file: str = "mask.npy"  # a training item's mask (height x width, or with trailing axes of 1)
    train_dirs: tuple[str, ...] = ()  # folders of labelled items beyond image_dir (contrails' validation/)


@dataclass(frozen=True)
class BoxFormat:
    """How a `boxes` submission names its classes and which rows hold which (siim-covid's studies and images):
    rows of boxes (runner.common.box_rows) whose classes have names, some of them a whole image's label."""

    labels: tuple[str, ...] = ()  # each finding class's name as written (its number where empty), the no-finding last
    # classes that label a whole image (siim-covid's study appearances): always written with the dummy box `0 0 1 1`
    whole: tuple[str, ...] = ()
    # (how a row's id ends, the classes it is written with): a study row its appearances, an image row its opacities
    # and `none`; a row whose id ends otherwise gets every class
    rows: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # images nested `<image_dir>/<study>/<series>/<image><suffix>` (`items: study_images`): the file of each study's
    # labels (a one-hot column per whole class, `id` as `<study><study_suffix>`) and its columns' classes
    study_file: str | None = None
    study_columns: tuple[tuple[str, str], ...] = ()  # (column, class)
    study_suffix: str = "_study"
    image_suffix: str = "_image"
    study_column: str = "StudyInstanceUID"  # the image file's column naming its study
    label_column: str = "label"  # the image file's boxes, as the answers write them (`opacity 1 x y x y ...`)


@dataclass(frozen=True)
class Medals:
    """The score thresholds of MLE-bench's medals, from the competition's final leaderboard by MLE-bench's own
    rules (runner.competition.grade.medal_positions): a score at least as good as one earns it."""

    gold: float
    silver: float
    bronze: float
    median: float  # above-median is strict
    teams: int


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
    test_image_suffix: str | None = None  # a test file's name = its id + this, where not `image_suffix` ("": the id)
    text_column: str | None = None
    # several columns read together as one text, each after its name (us-patent's anchor, target and context)
    text_columns: tuple[str, ...] = ()
    # pairs of text columns compared as a table view (lengths, shared words, the similarity of their TF-IDF vectors)
    text_pairs: tuple[tuple[str, str], ...] = ()
    # the train file's names of the targets, where not the submission's (jigsaw-unintended's `target` is submitted
    # as `prediction`), and the answers' (its `toxicity`)
    train_targets: tuple[str, ...] = ()
    answer_targets: tuple[str, ...] = ()
    subgroup_columns: tuple[str, ...] = ()  # the answers' identity columns whose subgroups a bias metric weighs
    span_condition: str | None = None  # a learned span: the column whose value changes which words make it
    drop_columns: tuple[str, ...] = ()
    split_columns: tuple[ColumnSplit, ...] = ()
    # "id": rows matched by id; "row": by position (nomad2018's grader); "answers": only the ids the answers hold
    # are scored, and the submission must hold each of them (h-and-m's customers who bought in the test week);
    # "merge": the answers joined with the submission's rows of each id, the ids' sets equal (a repeated id repeats
    # its answer, as champs' grader merges); "group": by position within each group of `score_groups`
    # (smartphone-decimeter's trips); "scorer": by the format's own scorer (answers of several rows an id:
    # vinbigdata's boxes); "subset": by id, the submission may leave answers out, which are not scored (osic's)
    grade_by: str = "id"
    exact_columns: bool = False  # the grader rejects a submission with any column beside the id and the targets
    scored_columns: tuple[str, ...] = ()  # the value columns the grader scores, where not all of them
    required_columns: tuple[str, ...] = ()  # columns a submission must hold that the grader does not score
    label_pattern: str | None = None  # regex whose group is the label in a training file's name (no train file)
    baseline: str | None = None  # one of BASELINES: how an unsupported task still gets an honest submission
    baseline_value: str | None = None  # the `constant` rule's string (an empty mask, a no-finding box)
    baseline_column: str | None = None  # the `column` rule's column of the test file (the whole text as the span)
    # items listed in files rather than a train table (mlsp-2013-birds): `labels_file` has lines `id,label,...`
    # (`id,?` for a test item) under a header, `names_file` is a CSV of id and file name (without the suffix)
    labels_file: str | None = None
    names_file: str | None = None
    feature_files: tuple[str, ...] = ()  # ready features `id,value,...` under a one-line header, joined by id
    stacked_ids: int = 0  # the sample has a row per (item, label), Id = item * stacked_ids + label (0: not so)
    target_image_dir: str | None = None  # image to image: the clean images, named as the inputs in image_dir
    # where the items and their labels are when no train table lists them (runner.data.items: coco, folders, ...),
    # and the file that reader reads for the training items (a COCO JSON, a BSON file) and for the test items
    items: str | None = None
    items_file: str | None = None
    test_items_file: str | None = None
    # how each item's file becomes what the engines read, where it is no picture or clip (runner.data.decoders)
    decode: str | None = None
    label_separator: str = " "  # between the labels of a `labels` or `ranked` string
    top_k: int = 0  # ranked: the labels a row holds, likeliest first
    new_label: str | None = None  # ranked: the label of an item none of the training labels names (new_whale)
    # the rows the grader scores, as a condition on the answers' columns (pandas' query: "u_out == 0"); cross-
    # validation scores the training rows that meet it on the train file's columns
    scored_rows: str | None = None
    scored_last: LastRows | None = None  # and of those, only each group's last rows
    # ids made of parts (runner.competition.id_parts): a regex whose named groups split the sample's ids into the
    # columns they are made of; a group named `target` names the target column a melted row holds (one row per item
    # and target); the rows of a table that share the other parts are one id (a breast's images)
    id_pattern: str | None = None
    joins: tuple[Join, ...] = ()  # tables that add columns to such rows by their parts
    id_folders: bool = False  # each id's files are the folder named by it below image_dir (a study's slices)
    file_column: str | None = None  # each table row's file is this column's value + image_suffix (several an id)
    spread_column: str | None = None  # value_and_spread: the sample's column of each value's stated spread
    # the training rows like the test's, where the test was drawn among rows that meet a condition on the train
    # file's columns (stanford-covid's SN_filter == 1): the others are left out of training and cross-validation
    train_rows: str | None = None
    # the grader picks a submission's scored rows by their place in its file, as the answers' rows are placed (a
    # mask aligned by row label: stanford-covid-vaccine), not by id; the same for a file in the sample's order
    scored_rows_by_position: bool = False
    groups: RowGroups | None = None  # rows in groups: folds keep a group whole, rows take their group's features
    # the column (of the train file and the answers) whose groups a grouped metric scores apart and averages
    # (champs' coupling type, a trip)
    score_groups: str | None = None
    positions: PositionRows | None = None  # records with a value per position: a row per position
    mask: MaskFormat | None = None  # a `mask` submission: how its run-length strings are written and graded
    bands: BandRecords | None = None  # items that are folders of band arrays (`items: band_records`)
    boxes: BoxFormat | None = None  # a `boxes` submission's class names and rows (siim-covid's), where not numbers
    # the `constant_by_suffix` rule: (id ending, string) pairs, the string a row gets by how its id ends (siim-covid19's
    # `_study`, `_image`)
    baseline_values: tuple[tuple[str, str], ...] = ()
    group_column: str | None = None  # training rows with one value of it share a fold (one recording's windows)
    positions_file: str | None = None  # where each sensor is (`sensor_id,x,y,z`): joined to the hits of an event
    # a probability submission read from more than two labels: this one is the negative class, every other label
    # the positive one (alaska2's Cover folder against its three stego folders)
    negative_label: str | None = None
    value_range: tuple[float, float] | None = None  # the values a regression's grader accepts (petfinder's 1-100)
    real: RealSize | None = None
    medals: Medals | None = None
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
        if self.baseline == "constant" and self.baseline_value is None:
            raise SpecError(f"spec {self.id}: the constant baseline needs baseline_value, the string it writes")
        if self.baseline == "column" and not (self.baseline_column and self.test_file):
            raise SpecError(f"spec {self.id}: the column baseline needs baseline_column in the test file")
        if (self.stacked_ids or self.melted_by_pattern) and self.submission != "multilabel":
            raise SpecError(f"spec {self.id}: melted ids (stacked_ids, an id_pattern's target) need the multilabel "
                            "submission format")
        if self.melted_by_pattern and not self.scored_columns:
            raise SpecError(f"spec {self.id}: a melted sample's value column (its targets are the train file's) "
                            "must be named in scored_columns")
        if self.id_pattern is not None and not re.compile(self.id_pattern).groupindex:
            raise SpecError(f"spec {self.id}: id_pattern {self.id_pattern!r} names no part (?P<column>...)")
        if self.joins and self.id_pattern is None:
            raise SpecError(f"spec {self.id}: joins need an id_pattern, the parts they join on")
        if self.submission == "value_and_spread" and not self.spread_column:
            raise SpecError(f"spec {self.id}: a value_and_spread submission needs spread_column")
        if self.train_targets and len(self.train_targets) != len(self.targets):
            raise SpecError(f"spec {self.id}: train_targets names {len(self.train_targets)} columns for "
                            f"{len(self.targets)} targets")
        if self.submission == "span" and self.task != "unsupported" and not (self.text_column and self.test_file):
            raise SpecError(f"spec {self.id}: a learned span needs text_column, the test file's text it is cut from")
        if self.label_pattern is not None and re.compile(self.label_pattern).groups != 1:
            raise SpecError(f"spec {self.id}: label_pattern {self.label_pattern!r} needs exactly one group")
        if self.text_columns and self.text_column not in (None, self.text_columns[0]):
            raise SpecError(f"spec {self.id}: text_column must be the first of text_columns {self.text_columns}")
        if self.submission == "mask" and self.mask is None:
            raise SpecError(f"spec {self.id}: a mask submission needs `mask`, how its run-length strings are written")
        if self.baseline == "constant_by_suffix" and not self.baseline_values:
            raise SpecError(f"spec {self.id}: the constant_by_suffix baseline needs baseline_values, a string per id "
                            "ending")
        if self.submission == "ranked" and self.top_k < 1:
            raise SpecError(f"spec {self.id}: a ranked submission needs top_k, the labels a row holds")
        if self.grade_by not in GRADE_BY:
            raise SpecError(f"spec {self.id}: grade_by {self.grade_by!r} is not one of {GRADE_BY}")
        if self.grade_by == "group" and not self.score_groups:
            raise SpecError(f"spec {self.id}: grade_by 'group' needs score_groups, the column of the groups")
        if self.negative_label is not None and self.submission != "probability":
            raise SpecError(f"spec {self.id}: negative_label needs the probability submission format")
        low, high = self.value_range or (0.0, 0.0)
        if self.value_range is not None and (self.submission != "regression" or low > high):
            raise SpecError(f"spec {self.id}: value_range needs a regression submission and its low end first")
        if self.submission not in LEARNED_AS and self.task != "unsupported":
            raise SpecError(f"spec {self.id}: no engine learns a {self.submission!r} submission: task must be "
                            "'unsupported', with the baseline rule that writes it")

    @property
    def melted_by_pattern(self) -> bool:
        """Whether the sample has a row per item and target, its id naming the target (an id_pattern's `target`)."""
        return self.id_pattern is not None and "target" in re.compile(self.id_pattern).groupindex

    @property
    def melted(self) -> bool:
        """Whether the sample has a row per item and target: stacked numbers or an id naming its target."""
        return bool(self.stacked_ids) or self.melted_by_pattern

    @property
    def test_suffix(self) -> str:
        """What a test item's id needs to be its file's name."""
        return self.image_suffix if self.test_image_suffix is None else self.test_image_suffix

    @property
    def texts(self) -> tuple[str, ...]:
        """The text columns read as the text view: the spec's several, or its one."""
        return self.text_columns or ((self.text_column,) if self.text_column else ())

    @property
    def lower_is_better(self) -> bool:
        return LOWER_IS_BETTER[self.metric]

    @property
    def learned_as(self) -> str:
        """How the engines learn it: "classes" (probabilities out), "labels" (independent 0/1), "values", or
        "pixels" (each row's masks flattened, a probability per pixel)."""
        return LEARNED_AS.get(self.submission, "values")

    @property
    def is_classification(self) -> bool:
        """One label per row, learned as classes; multi-label columns are learned as 0/1 values."""
        return self.learned_as == "classes"

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
