import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import log_loss, roc_auc_score

from conftest import run_cli
from runner.common.errors import InvalidSubmissionError
from runner.competition.grade import edge, grade, medal_positions, thresholds
from runner.competition.spec import CompetitionSpec
from runner.competition.catalog import load_spec


@pytest.mark.parametrize("teams, expected", [
    (50, (5, 10, 20)), (9, (1, 1, 3)), (150, (10, 30, 60)), (500, (11, 50, 100)), (2000, (14, 100, 200)),
])
def test_medal_positions_follow_mle_bench(teams, expected):
    assert medal_positions(teams) == expected


def test_thresholds_detect_direction_and_read_positions():
    lower = thresholds(pd.Series(np.arange(1, 51, dtype=float)))  # 1.0 best ... 50.0 worst
    assert lower.lower_is_better and (lower.gold, lower.silver, lower.bronze) == (5.0, 10.0, 20.0)
    higher = thresholds(pd.Series(np.arange(50, 0, -1, dtype=float)))
    assert not higher.lower_is_better and higher.gold == 46.0 and higher.median == 25.5


def _dog_files(tmp_path, probs, answer_idx):
    classes = ["a", "b", "c"]
    ids = [f"id{i}" for i in range(len(answer_idx))]
    answers = pd.DataFrame({"id": ids, **{c: [int(k == j) for k in answer_idx] for j, c in enumerate(classes)}})
    (tmp_path / "private").mkdir()
    answers.to_csv(tmp_path / "private" / "test.csv", index=False)
    sub = pd.DataFrame({"id": ids, **{c: probs[:, j] for j, c in enumerate(classes)}})
    return sub, tmp_path / "private"


def test_log_loss_matches_sklearn_and_ignores_row_order(tmp_path):
    spec = load_spec("dog-breed")
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.5, 0.25, 0.25]])
    answer_idx = [0, 1, 2, 1]
    sub, answers = _dog_files(tmp_path, probs, answer_idx)
    sub.iloc[::-1].to_csv(tmp_path / "sub.csv", index=False)  # graders match rows by id
    report = grade(tmp_path / "sub.csv", spec, answers)
    assert report.valid_submission
    assert report.score == round(log_loss(answer_idx, probs, labels=[0, 1, 2]), 5)


def test_rows_not_summing_to_one_make_an_invalid_report(tmp_path):
    spec = load_spec("dog-breed")
    sub, answers = _dog_files(tmp_path, np.full((2, 3), 0.5), [0, 1])
    sub.to_csv(tmp_path / "sub.csv", index=False)
    report = grade(tmp_path / "sub.csv", spec, answers)
    assert report.score is None and not report.valid_submission and "sum" in report.error


def test_missing_submission_is_reported_not_raised(tmp_path):
    spec = load_spec("spaceship")
    (tmp_path / "private").mkdir()
    pd.DataFrame({"PassengerId": ["1"], "Transported": [True]}).to_csv(tmp_path / "private" / "test.csv",
                                                                        index=False)
    report = grade(tmp_path / "nothing.csv", spec, tmp_path / "private")
    assert not report.submission_exists and not report.valid_submission


def test_accuracy_and_medals_with_a_leaderboard(tmp_path):
    spec = load_spec("spaceship")
    (tmp_path / "private").mkdir()
    truth = [True, False, True, True, False]
    pd.DataFrame({"PassengerId": list("abcde"), "Transported": truth}).to_csv(tmp_path / "private" / "test.csv",
                                                                               index=False)
    pd.DataFrame({"PassengerId": list("abcde"), "Transported": [True, False, True, False, False]}).to_csv(
        tmp_path / "sub.csv", index=False)
    board = tmp_path / "leaderboard.csv"
    pd.DataFrame({"score": np.linspace(0.95, 0.5, 20)}).to_csv(board, index=False)
    report = grade(tmp_path / "sub.csv", spec, tmp_path / "private", board)
    assert report.score == 0.8
    # 20 teams: gold at position 2 (0.926), silver 4 (0.879), bronze 8 (0.784): 0.8 is bronze
    assert report.bronze_medal and report.any_medal and not report.silver_medal
    assert report.above_median and not report.is_lower_better


def test_nomad_is_graded_by_row_position(tmp_path):
    spec = load_spec("nomad2018")
    (tmp_path / "private").mkdir()
    answers = pd.DataFrame({"id": [1, 2], "formation_energy_ev_natom": [0.1, 0.2], "bandgap_energy_ev": [1.0, 2.0]})
    answers.to_csv(tmp_path / "private" / "test.csv", index=False)
    answers.assign(id=[2, 1]).to_csv(tmp_path / "sub.csv", index=False)  # ids relabelled, values in place
    assert grade(tmp_path / "sub.csv", spec, tmp_path / "private").score == 0.0
    answers.assign(bandgap_energy_ev=[-1.0, 2.0]).to_csv(tmp_path / "neg.csv", index=False)
    assert not grade(tmp_path / "neg.csv", spec, tmp_path / "private").valid_submission


def _binary_case(n=400, seed=0):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n)
    spec = CompetitionSpec(id="edge-case", task="tabular", metric="roc_auc", submission="probability",
                           id_column="id", targets=("y",))
    answers = pd.DataFrame({"id": [f"r{i}" for i in range(n)], "y": truth})
    return spec, answers, truth, rng


def test_edge_separates_a_clearly_better_submission_and_not_a_near_copy():
    spec, answers, truth, rng = _binary_case()
    good = np.clip(truth * 0.6 + rng.random(len(truth)) * 0.4, 0, 1)
    noise = rng.random(len(truth))
    shuffled = answers.sample(frac=1, random_state=1)  # row order must not matter
    ours = pd.DataFrame({"id": shuffled["id"], "y": good[shuffled.index]})
    theirs = pd.DataFrame({"id": answers["id"], "y": noise})
    clear = edge(spec, ours, theirs, answers, rounds=200)
    assert clear.value == pytest.approx(roc_auc_score(truth, good) - roc_auc_score(truth, noise))
    assert 0 < clear.low < clear.value < clear.high
    # a near copy of a submission that ranks some rows wrong (`good` ranks none wrong: both would score 1.0 on
    # every resample, an interval of zero width)
    fair = np.clip(truth * 0.3 + rng.random(len(truth)) * 0.7, 0, 1)
    nudged = pd.DataFrame({"id": answers["id"], "y": np.clip(fair + rng.normal(0, 0.01, len(fair)), 0, 1)})
    close = edge(spec, pd.DataFrame({"id": answers["id"], "y": fair}), nudged, answers, rounds=200)
    assert roc_auc_score(truth, fair) < 0.95
    assert close.low < 0 < close.high and close.high - close.low > 1e-3  # this test set cannot tell them apart
    assert edge(spec, theirs, ours, answers, rounds=200).value == pytest.approx(-clear.value)


def test_edge_is_positive_for_the_lower_error_when_lower_is_better():
    rng = np.random.default_rng(2)
    truth = rng.normal(size=300)
    spec = CompetitionSpec(id="edge-rmse", task="tabular", metric="rmse", submission="regression",
                           id_column="id", targets=("y",))
    answers = pd.DataFrame({"id": range(300), "y": truth})
    close = pd.DataFrame({"id": range(300), "y": truth + rng.normal(0, 0.1, 300)})
    far = pd.DataFrame({"id": range(300), "y": truth + rng.normal(0, 1.0, 300)})
    result = edge(spec, close, far, answers, rounds=200)
    assert result.value > 0.5 and result.low > 0
    with pytest.raises(InvalidSubmissionError):
        edge(spec, close.iloc[:10], far, answers)


@pytest.mark.slow
def test_grade_against_another_submission_prints_the_edge(tmp_path):
    spec = load_spec("dog-breed")
    rng = np.random.default_rng(3)
    answer_idx = rng.integers(0, 3, 300)
    sharp = np.full((300, 3), 0.05)
    sharp[np.arange(300), answer_idx] = 0.9
    sub, answers = _dog_files(tmp_path, sharp, answer_idx)
    sub.to_csv(tmp_path / "sharp.csv", index=False)
    sub.assign(a=1 / 3, b=1 / 3, c=1 / 3).to_csv(tmp_path / "flat.csv", index=False)
    done = run_cli("grade", str(tmp_path / "sharp.csv"), "dog-breed", "--answers", str(answers),
                   "--against", str(tmp_path / "flat.csv"))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["against"]["score"] == pytest.approx(np.log(3), abs=1e-4)
    assert out["against"]["edge"]["value"] == pytest.approx(out["against"]["score"] - out["score"], abs=1e-4)
    assert 0 < out["against"]["edge"]["low"] <= out["against"]["edge"]["high"]
    assert spec.lower_is_better  # so a positive edge is the lower log loss
