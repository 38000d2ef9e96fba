import json

import pandas as pd
import pytest

from runner.common.errors import SpecError
from runner.competition.spec import CompetitionSpec
from runner.competition.inference import infer_spec
from runner.competition.catalog import known_specs, load_spec

REQUIRED = ["dog-breed-identification", "aerial-cactus-identification", "plant-pathology-2020-fgvc7",
            "leaf-classification", "spaceship-titanic", "tabular-playground-series-may-2022",
            "tabular-playground-series-dec-2021", "nomad2018-predict-transparent-conductors",
            "spooky-author-identification", "detecting-insults-in-social-commentary"]


def test_every_required_competition_has_a_spec():
    assert set(REQUIRED) <= set(known_specs())


@pytest.mark.parametrize("competition", sorted(known_specs()))
def test_specs_round_trip_through_json(competition):
    spec = load_spec(competition)
    assert CompetitionSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec


def test_aliases_resolve():
    assert load_spec("dog-breed").id == "dog-breed-identification"
    assert load_spec("spaceship").id == "spaceship-titanic"


def test_metric_directions_follow_mle_bench():
    assert load_spec("dog-breed").lower_is_better
    assert load_spec("nomad2018").lower_is_better
    assert not load_spec("aerial-cactus").lower_is_better
    assert load_spec("nomad2018").grade_by == "row"


def test_unknown_id_without_data_names_the_known_ones(tmp_path):
    with pytest.raises(SpecError) as info:
        load_spec("no-such-competition", tmp_path)
    assert "no-such-competition" in str(info.value) and "spaceship-titanic" in str(info.value)


def _folder(tmp_path, train: dict, sample: dict, description: str | None = None, test: dict | None = None):
    pd.DataFrame(train).to_csv(tmp_path / "train.csv", index=False)
    pd.DataFrame(sample).to_csv(tmp_path / "sample_submission.csv", index=False)
    if test is not None:
        pd.DataFrame(test).to_csv(tmp_path / "test.csv", index=False)
    if description:
        (tmp_path / "description.md").write_text(description)
    return tmp_path


def test_infers_multiclass_probabilities_from_a_label_column(tmp_path):
    folder = _folder(tmp_path, {"id": range(6), "x": range(6), "kind": list("abcabc")},
                     {"id": [10, 11], "a": 0.3, "b": 0.3, "c": 0.4}, test={"id": [10, 11], "x": [1, 2]})
    spec = infer_spec("new-comp", folder)
    assert (spec.task, spec.submission, spec.metric, spec.targets) == ("tabular", "probabilities", "log_loss",
                                                                       ("kind",))


def test_infers_binary_auc_from_the_description(tmp_path):
    folder = _folder(tmp_path, {"id": range(6), "x": range(6), "target": [0, 1] * 3}, {"id": [9], "target": 0.5},
                     "Submissions are evaluated on area under the ROC curve.", test={"id": [9], "x": [1]})
    spec = infer_spec("new-comp", folder)
    assert (spec.submission, spec.metric) == ("probability", "roc_auc")


def test_infers_regression(tmp_path):
    folder = _folder(tmp_path, {"id": range(6), "x": range(6), "y": [0.5, 1.2, 3.3, 2.2, 0.1, 9.9]},
                     {"id": [7], "y": 0.0}, "Evaluated with RMSLE.", test={"id": [7], "x": [3]})
    spec = infer_spec("new-comp", folder)
    assert (spec.task, spec.submission, spec.metric) == ("tabular", "regression", "rmsle")


def test_infers_text(tmp_path):
    long = "a sentence that is clearly longer than forty characters in all"
    folder = _folder(tmp_path, {"id": range(4), "body": [long] * 4, "label": [0, 1, 0, 1]},
                     {"id": [5], "label": 0}, test={"id": [5], "body": [long]})
    assert infer_spec("new-comp", folder).task == "text"
    assert infer_spec("new-comp", folder).text_column == "body"


def test_infers_images_from_a_folder_of_id_named_files(tmp_path):
    (tmp_path / "pics").mkdir()
    for i in range(6):
        (tmp_path / "pics" / f"img{i}.png").write_bytes(b"")
    folder = _folder(tmp_path, {"id": [f"img{i}" for i in range(4)], "label": [0, 1, 0, 1]},
                     {"id": ["img4", "img5"], "label": 0})
    spec = infer_spec("new-comp", folder)
    assert (spec.task, spec.image_dir, spec.image_suffix) == ("image", "pics", ".png")


def test_untrainable_competition_is_marked_unsupported_with_a_reason(tmp_path):
    pd.DataFrame({"id": ["a.wav"], "transcript": ["?"]}).to_csv(tmp_path / "sample_submission.csv", index=False)
    spec = infer_spec("audio-comp", tmp_path)
    assert spec.task == "unsupported" and "train.csv" in spec.note


@pytest.mark.parametrize("words, labels, expected", [
    ("Submissions are scored on the quadratic weighted kappa between grades.", [0, 1, 2, 3, 4, 2], "qwk"),
    ("Evaluated on the Root-Mean-Squared-Error (RMSE) between the logarithm of the predicted value and the "
     "logarithm of the observed sales price.", [1.5, 2.5, 9.0, 3.3, 4.1, 7.7], "rmsle"),
    ("Submissions are evaluated using the multi-class logarithmic loss.", None, "log_loss"),
])
def test_the_metric_comes_from_the_descriptions_words_and_is_quoted_as_evidence(tmp_path, words, labels, expected):
    train = {"id": range(6), "x": range(6), "y": labels or list("abcabc")}
    sample = {"id": [7], "y": 0} if labels else {"id": [7], "a": 0.3, "b": 0.3, "c": 0.4}
    spec = infer_spec("new-comp", _folder(tmp_path, train, sample, words, test={"id": [7], "x": [3]}))
    assert spec.metric == expected
    assert any(line.startswith(f"metric {expected}: description.md says") for line in spec.evidence)


def test_infers_labels_from_another_csv_and_png_images_as_a_new_user_would_bring_them(tmp_path):
    """train/<id>.png, test/<id>.png, labels.csv with id,label, one probability column per class: an ordinary
    image competition the runner has no spec for."""
    for folder, ids in (("train", range(6)), ("test", range(6, 8))):
        (tmp_path / folder).mkdir()
        for i in ids:
            (tmp_path / folder / f"p{i}.png").write_bytes(b"")
    pd.DataFrame({"id": [f"p{i}" for i in range(6)], "label": list("xyzxyz")}).to_csv(tmp_path / "labels.csv",
                                                                                     index=False)
    pd.DataFrame({"id": ["p6", "p7"], "x": 1 / 3, "y": 1 / 3, "z": 1 / 3}).to_csv(tmp_path / "sample_submission.csv",
                                                                               index=False)
    (tmp_path / "description.md").write_text("Submissions are evaluated on multi-class log loss.")
    spec = infer_spec("new-images", tmp_path)
    assert (spec.task, spec.submission, spec.metric, spec.train_file, spec.targets) == (
        "image", "probabilities", "log_loss", "labels.csv", ("label",))
    assert (spec.image_dir, spec.test_image_dir, spec.image_suffix) == ("train", "test", ".png")
    assert [line.split(" ")[0] for line in spec.evidence] == ["id", "metric", "labels:", "images:", "task"]
    assert spec.evidence[-1] == "task image; lower log_loss is better"


def test_several_zero_one_columns_are_multi_label_unless_each_row_has_exactly_one(tmp_path):
    long = "a sentence that is clearly longer than forty characters in all"
    labels = {"a": [1, 0, 1, 0], "b": [1, 1, 0, 0]}  # rows with two labels and with none
    spec = infer_spec("tags", _folder(tmp_path, {"id": range(4), "text": [long] * 4, **labels},
                                      {"id": [5], "a": 0.5, "b": 0.5}, test={"id": [5], "text": [long]}))
    assert (spec.submission, spec.metric, spec.task) == ("multilabel", "mean_column_roc_auc", "text")
    one_hot = {"a": [1, 0, 1, 0], "b": [0, 1, 0, 1]}
    spec = infer_spec("kinds", _folder(tmp_path, {"id": range(4), "x": range(4), **one_hot},
                                       {"id": [5], "a": 0.5, "b": 0.5}, test={"id": [5], "x": [1]}))
    assert spec.submission == "probabilities"


def test_runner_specs_lists_every_spec_in_aligned_columns(capsys):
    """`runner specs`: a line per spec, its split, task, format, metric and aliases each starting where the others'
    do (a text_normalization task pushed its line's columns out of step with a fixed width of 8), then the count."""
    from runner.cli import main

    assert main(["specs"]) == 0
    *lines, count = capsys.readouterr().out.splitlines()
    assert len(lines) == len(known_specs()) and count == f"{len(known_specs())} competitions"
    assert any(line.split()[:2] == ["dog-breed-identification", "low"] for line in lines)
    assert len({line.index("aliases:") for line in lines}) == 1
    assert any(" text_normalization " in line for line in lines)
