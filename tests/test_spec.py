import json

import pandas as pd
import pytest

from runner.errors import SpecError
from runner.spec import CompetitionSpec, infer_spec, known_specs, load_spec

REQUIRED = ["dog-breed-identification", "aerial-cactus-identification", "plant-pathology-2020-fgvc7",
            "leaf-classification", "spaceship-titanic", "tabular-playground-series-may-2022",
            "tabular-playground-series-dec-2021", "nomad2018-predict-transparent-conductors",
            "spooky-author-identification", "detecting-insults-in-social-commentary"]


def test_every_required_competition_has_a_spec():
    assert set(REQUIRED) <= set(known_specs())


@pytest.mark.parametrize("competition", REQUIRED)
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
