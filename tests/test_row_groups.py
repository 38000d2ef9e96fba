"""Rows in groups and records with a value per position: each row's features from its group (neighbours along
the order that never cross into another group, running sums, counts), records read as a row per position, and
cross-validation that trains and scores only the rows the grader scores, folds keeping a group whole."""
import json

import numpy as np
import pandas as pd
import pytest

from runner.common.errors import InputError
from runner.competition.catalog import load_spec
from runner.competition.spec import PositionRows, RowGroups
from runner.data.group_features import counted_values, with_group_features
from runner.data.loading import load_dataset
from runner.data.records import position_rows, read_json_records
from runner.demo import write_demo
from runner.units.tasks import assign_folds

BREATHS = RowGroups("breath", "t", ("u", "c"), (1, -1), ("u",), ("c",))


def breaths() -> pd.DataFrame:
    """Two breaths of three steps, the file's rows out of time order."""
    return pd.DataFrame({"breath": [7, 7, 7, 9, 9, 9], "t": [0.2, 0.0, 0.1, 0.0, 0.2, 0.1],
                         "u": [3.0, 1.0, 2.0, 10.0, 30.0, 20.0], "c": ["x", "x", "y", "y", "y", "x"]})


def test_neighbours_follow_the_order_and_stop_at_the_groups_end():
    out = with_group_features(BREATHS, breaths(), counted_values(BREATHS, breaths()), "train")
    assert out["u"].tolist() == breaths()["u"].tolist()  # the rows keep the file's order
    assert out["u_lag1"][0] == 2.0 and out["u_lag1"][2] == 1.0 and out["u_lag1"][4] == 20.0
    assert np.isnan(out["u_lag1"][1]) and np.isnan(out["u_lag1"][3])  # a breath's first step has no past
    assert np.isnan(out["u_lead1"][0]) and out["u_lead1"][3] == 20.0  # nor its last a future
    assert out["u_cumsum"].tolist() == [6.0, 1.0, 3.0, 10.0, 60.0, 30.0]
    assert out["u_diff1"][2] == 1.0 and out["group_step"].tolist() == [2, 0, 1, 0, 2, 1]
    assert out["u_group_max"].tolist() == [3.0] * 3 + [30.0] * 3
    assert out["c_lag1"][2] == "x" and out["c_count_y"].tolist() == [1.0] * 3 + [2.0] * 3
    assert "breath" in out.columns  # kept for the folds; the table leaves it out


def test_counted_values_come_from_train_and_a_missing_column_is_named():
    test = breaths().assign(c="z")
    out = with_group_features(BREATHS, test, counted_values(BREATHS, breaths()), "test")
    assert "c_count_z" not in out.columns and out["c_count_x"].eq(0).all()
    with pytest.raises(InputError, match="no column"):
        with_group_features(BREATHS, breaths().drop(columns="t"), {}, "test.csv")


def test_records_become_a_row_per_position():
    records = [{"id": "id_a", "sequence": "ACG", "loop": "SSH", "score": [0.1, 0.2], "snr": 1.5},
               {"id": "id_b", "sequence": "UU", "loop": "EE", "score": [0.3, 0.4], "snr": 0.5}]
    rows = position_rows(records, PositionRows("id", "_", "pos"), "id_seqpos", "train.json")
    assert rows["id_seqpos"].tolist() == ["id_a_0", "id_a_1", "id_a_2", "id_b_0", "id_b_1"]
    assert rows["sequence"].tolist() == list("ACGUU") and rows["pos"].tolist() == [0, 1, 2, 0, 1]
    assert rows["score"].tolist()[:2] == [0.1, 0.2] and np.isnan(rows["score"][2])  # past the list's end
    assert rows["snr"].tolist() == [1.5] * 3 + [0.5] * 2 and rows["id"].tolist()[3] == "id_b"


def test_json_lines_and_arrays_are_both_read(tmp_path):
    (tmp_path / "lines.json").write_text('{"id": "a", "x": [1]}\n\n{"id": "b", "x": [2]}\n')
    (tmp_path / "array.json").write_text('[{"id": "a", "x": [1]}]')
    assert [r["id"] for r in read_json_records(tmp_path / "lines.json", "train")] == ["a", "b"]
    assert read_json_records(tmp_path / "array.json", "train")[0]["x"] == [1]
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InputError, match="bad.json"):
        read_json_records(tmp_path / "bad.json", "train")


def test_cross_validation_trains_and_scores_only_the_scored_rows(tmp_path):
    root = write_demo("ventilator-pressure-prediction", tmp_path / "data", scale=0.2)
    public = root / "prepared" / "public"
    train = pd.read_csv(public / "train.csv")
    dataset = load_dataset(load_spec("ventilator-pressure-prediction"), public, tmp_path / "work")
    features, test_features = dataset.views["table"]
    assert len(dataset.y) == (train["u_out"] == 0).sum() and features["u_out"].eq(0).all()
    assert len(test_features) == len(pd.read_csv(public / "test.csv"))  # every test row is predicted
    assert np.allclose(dataset.y[:, 0], train.loc[train["u_out"] == 0, "pressure"])
    assert "breath_id" not in features.columns and "u_in_cumsum" in features.columns
    folds = assign_folds(dataset.y, False, 5, 0, groups=dataset.groups)
    by_breath = pd.Series(folds).groupby(train.loc[train["u_out"] == 0, "breath_id"].to_numpy()).nunique()
    assert by_breath.eq(1).all()  # a breath's rows share a fold


def test_the_metric_groups_and_a_row_per_base_are_read_for_their_competitions(tmp_path):
    root = write_demo("champs-scalar-coupling", tmp_path / "data", scale=0.2)
    champs = load_dataset(load_spec("champs-scalar-coupling"), root / "prepared" / "public", tmp_path / "work")
    assert set(champs.score_groups) <= {"1JHC", "1JHN", "2JHC", "2JHH", "2JHN", "3JHC", "3JHH", "3JHN"}
    assert "molecule_name" not in champs.views["table"][0].columns and "type_count_1JHC" in champs.views["table"][0]
    root = write_demo("stanford-covid-vaccine", tmp_path / "data", scale=0.2)
    public = root / "prepared" / "public"
    covid = load_dataset(load_spec("stanford-covid-vaccine"), public, tmp_path / "work")
    records = [json.loads(line) for line in (public / "train.json").read_text().splitlines()]
    passing = sum(r["SN_filter"] == 1 for r in records)  # the rows like the test's: it was drawn among them
    assert 0 < passing < len(records) and len(covid.y) == 68 * passing and covid.y.shape[1] == 3
    train, test = covid.views["table"]
    assert {"sequence_lag1", "structure_lead2", "predicted_loop_type"} <= set(train.columns)
    assert "index" not in train.columns and "signal_to_noise" not in train.columns  # not in test.json
    assert len(test) == len(pd.read_csv(public / "sample_submission.csv"))
