"""Rows whose ids are made of parts (runner.data.part_rows): a table's rows that share the parts made one id (a
breast's images), other tables joined by the parts and compared (two players' tracking at a step, a patient's
first visit), the columns that name what the split keeps apart left out of the features, and the folds' groups and
the rows the grader's rule scores kept for the training rows."""
import numpy as np
import pandas as pd
import pytest

from runner.common.errors import InputError
from runner.competition.catalog import load_spec
from runner.data.loading import load_dataset
from runner.data.part_rows import part_rows


def test_a_breast_s_images_are_one_row_their_numbers_averaged_and_their_files_gathered(tmp_path):
    spec = load_spec("rsna-breast-cancer-detection")
    train = pd.DataFrame({"patient_id": [10, 10, 10, 11, 11], "image_id": [1, 2, 3, 4, 5],
                          "laterality": ["L", "L", "R", "L", "L"], "view": ["CC", "MLO", "CC", "CC", "MLO"],
                          "age": [60.0, 62.0, 61.0, np.nan, 50.0], "cancer": [1, 1, 0, 0, 0], "machine_id": 7})
    test = pd.DataFrame({"patient_id": [20, 20, 21], "image_id": [6, 7, 8], "laterality": ["R", "R", "L"],
                         "view": ["CC", "MLO", "CC"], "age": [70.0, 70.0, 55.0], "machine_id": 7,
                         "prediction_id": ["20_R", "20_R", "21_L"]})
    train.to_csv(tmp_path / "train.csv", index=False)
    test.to_csv(tmp_path / "test.csv", index=False)
    for folder, patient, image in [("train_images", 10, 1), ("train_images", 10, 2), ("train_images", 11, 5),
                                   ("test_images", 20, 7)]:
        (tmp_path / folder / str(patient)).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / str(patient) / f"{image}.dcm").write_bytes(b"")
    (tmp_path / "test_images" / "21").mkdir()
    sample = pd.DataFrame({"prediction_id": ["21_L", "20_R"], "cancer": 0.02})  # sorted as strings
    rows = part_rows(spec, tmp_path, tmp_path / "work", sample, [])
    assert rows.train["prediction_id"].tolist() == ["10_L", "10_R", "11_L"]
    assert rows.train["cancer"].tolist() == [1, 0, 0] and rows.train["age"].tolist() == [61.0, 61.0, 50.0]
    assert rows.test["prediction_id"].tolist() == ["21_L", "20_R"] and rows.test["age"].tolist() == [55.0, 70.0]
    assert "patient_id" not in rows.test.columns and "laterality" in rows.test.columns  # an identifier; a feature
    train_files, test_files = rows.train_files, rows.test_files
    assert [p.name for p in train_files[0]] == ["1.dcm", "2.dcm"] and train_files[1] is None
    assert test_files[0] is None and [p.name for p in test_files[1]] == ["7.dcm"]


def _tracking(play: str, players: dict[int, tuple[float, float]], team: dict[int, str]) -> pd.DataFrame:
    return pd.DataFrame([dict(game_play=play, game_key=int(play[:5]), nfl_player_id=p, step=0, team=team[p],
                              x_position=x, y_position=y, speed=1.0 + p % 3) for p, (x, y) in players.items()])


def test_two_players_tracking_is_joined_to_each_contact_id_and_compared(tmp_path):
    spec = load_spec("nfl-player-contact-detection")
    team = {1: "home", 2: "away", 3: "home", 4: "home", 5: "away", 6: "away"}
    labels = pd.DataFrame({"contact_id": ["58000_000001_0_1_2", "58000_000001_0_1_3", "58000_000001_0_1_G"],
                           "game_play": "58000_000001", "datetime": "t", "step": 0, "nfl_player_id_1": 1,
                           "nfl_player_id_2": ["2", "3", "G"], "contact": [1, 0, 0]})
    labels.to_csv(tmp_path / "train_labels.csv", index=False)
    _tracking("58000_000001", {1: (10.0, 10.0), 2: (10.3, 10.4), 3: (20.0, 10.0)}, team).to_csv(
        tmp_path / "train_player_tracking.csv", index=False)
    _tracking("59000_000002", {4: (0.0, 0.0), 5: (3.0, 4.0), 6: (0.0, 1.0)}, team).to_csv(
        tmp_path / "test_player_tracking.csv", index=False)
    sample = pd.DataFrame({"contact_id": ["59000_000002_0_4_5", "59000_000002_0_4_G", "59000_000002_0_4_6"],
                           "contact": 0})
    sample.to_csv(tmp_path / "sample_submission.csv", index=False)
    data = load_dataset(spec, tmp_path, tmp_path / "work")
    train, test = data.views["table"]
    assert train["distance_1_2"].round(3).tolist()[:2] == [0.5, 10.0] and np.isnan(train["distance_1_2"][2])
    assert test["distance_1_2"].tolist()[0] == 5.0 and test["x_position_1-x_position_2"].tolist()[0] == -3.0
    assert test["team_1=team_2"].tolist()[0] == 0.0 and test["team_1=team_2"].tolist()[2] == 0.0
    assert "game_play" not in test.columns  # what the split keeps apart
    assert not {"game_key_1", "game_key_1-game_key_2", "nfl_player_id_1"} & set(test.columns)  # what the spec drops
    assert data.y.tolist() == [1, 0, 0] and data.groups.tolist() == [0, 0, 0]


def test_each_visit_joins_the_patient_s_first_one_and_the_last_visits_are_the_scored_rows(tmp_path):
    spec = load_spec("osic-pulmonary-fibrosis-progression")
    visits = pd.DataFrame({"Patient": ["A"] * 5 + ["B"] * 4, "Weeks": [3, 0, 8, 12, 20, 5, 9, 14, 30],
                           "FVC": [2950, 3000, 2900, 2880, 2800, 2000, 1990, 1950, 1900], "Percent": 70.0, "Age": 60,
                           "Sex": "Male", "SmokingStatus": "Ex-smoker"})
    visits.to_csv(tmp_path / "train.csv", index=False)
    first = pd.DataFrame({"Patient": ["C"], "Weeks": [2], "FVC": [2500], "Percent": 65.0, "Age": 70, "Sex": "Female",
                          "SmokingStatus": "Never smoked"})
    first.to_csv(tmp_path / "test.csv", index=False)
    pd.DataFrame({"Patient_Week": ["C_-1", "C_10"], "FVC": 2000, "Confidence": 100}).to_csv(
        tmp_path / "sample_submission.csv", index=False)
    data = load_dataset(spec, tmp_path, tmp_path / "work")
    train, test = data.views["table"]
    assert train["Weeks-Weeks_first"].tolist() == [3, 0, 8, 12, 20, 0, 4, 9, 25]
    assert (train["FVC_first"] == [3000] * 5 + [2000] * 4).all()
    assert test["Weeks-Weeks_first"].tolist() == [-3, 8] and test["Sex_first"].tolist() == ["Female"] * 2
    assert "Percent" not in train.columns  # a visit's own measurement is no feature: the test rows have none
    assert data.scored.tolist() == [False, False, True, True, True, False, True, True, True]
    assert data.groups.tolist() == [0] * 5 + [1] * 4


def test_an_id_the_test_table_lacks_is_named(tmp_path):
    spec = load_spec("rsna-breast-cancer-detection")
    pd.DataFrame({"patient_id": [1], "image_id": [1], "laterality": ["L"], "cancer": [0]}).to_csv(
        tmp_path / "train.csv", index=False)
    pd.DataFrame({"patient_id": [2], "image_id": [2], "laterality": ["L"], "prediction_id": ["2_L"]}).to_csv(
        tmp_path / "test.csv", index=False)
    with pytest.raises(InputError, match="'2_R'"):
        part_rows(spec, tmp_path, tmp_path / "work", pd.DataFrame({"prediction_id": ["2_L", "2_R"]}), [])
