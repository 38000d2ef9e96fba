"""Ordered label sequences: the edit rate pinned to MLE-bench's multi-modal-gesture-recognition grader on fixed
answers, its refusals (an empty cell, a token that is no integer), and the medoid baseline that answers every row
with the training sequence nearest the others."""
import numpy as np
import pandas as pd
import pytest

from runner.common.errors import InvalidSubmissionError
from runner.common.sequence_metrics import edit_rate, medoid, tokens
from runner.competition.catalog import load_spec
from runner.competition.grade import grade
from runner.results.baselines import make_baseline

TRUTH = ["2 12 3 7", "1 5 9 14 20", "4 4 8", "11 6"]


def gesture_files(tmp_path, predicted: list[str]):
    private = tmp_path / "private"
    private.mkdir(exist_ok=True)
    ids = ["0301", "0302", "0303", "0304"]
    pd.DataFrame({"Id": ids, "Sequence": TRUTH}).to_csv(private / "test.csv", index=False)
    pd.DataFrame({"Id": ids, "Sequence": predicted}).iloc[::-1].to_csv(tmp_path / "submission.csv", index=False)
    return tmp_path / "submission.csv", private


def test_edit_rate_counts_token_edits_over_the_true_gestures():
    # 1 substitution; 1 deletion; 2 insertions; 0: four edits over 14 true gestures
    assert edit_rate(TRUTH, ["2 12 3 8", "1 5 9 14", "4 4 8 1 2", "11 6"]) == pytest.approx(4 / 14)
    assert edit_rate(["10 2"], ["1 0 2"]) == pytest.approx(1.0)  # tokens, not characters: 10 is one gesture
    assert tokens([3, 4]) == [3, 4]


def test_gestures_are_graded_as_mle_bench(tmp_path):
    spec = load_spec("multi-modal-gesture-recognition")
    path, private = gesture_files(tmp_path, ["2 3 7", "1 5 9 14 20 20", "8 4 4", "6"])
    report = grade(path, spec, private)
    assert report.valid_submission and report.score == pytest.approx(0.35714, abs=1e-5)  # MLE-bench: 0.35714
    path, private = gesture_files(tmp_path, ["1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"] * 4)
    report = grade(path, spec, private)
    assert report.valid_submission and report.score == pytest.approx(5.0, abs=1e-5)  # MLE-bench: 5.0


@pytest.mark.parametrize("bad", ["", "1 2 x", "1.5 2"])
def test_a_cell_that_is_no_integer_sequence_is_invalid(tmp_path, bad):
    path, private = gesture_files(tmp_path, [bad, "1", "2", "3"])
    report = grade(path, load_spec("multi-modal-gesture-recognition"), private)
    assert not report.valid_submission and "integers" in report.error  # MLE-bench: invalid in each case
    with pytest.raises(InvalidSubmissionError):
        tokens("nan")


def test_medoid_is_the_sequence_nearest_all_the_others():
    sequences = ["1 2 3 4", "1 2 3 5", "9 9", "1 2 4 4", "1 2 3 4 6"]
    assert medoid(sequences) == 0
    assert medoid(["7 8"]) == 0


def test_the_medoid_baseline_answers_every_test_row_with_it(tmp_path):
    spec = load_spec("multi-modal-gesture-recognition")
    pd.DataFrame({"Id": ["0001", "0002", "0003"], "Sequence": ["5 6 7", "5 6 8", "1 2"]}).to_csv(
        tmp_path / "training.csv", index=False)
    sample = pd.DataFrame({"Id": [301, 302], "Sequence": ["1 2", "3 4"]})
    made = make_baseline(spec, tmp_path, sample, ["Sequence"], tmp_path)
    assert made.values["Sequence"].tolist() == ["5 6 7", "5 6 7"] and "5 6 7" in made.note
    rate_medoid = edit_rate(np.array(["5 6 7", "5 6 8", "1 2"]), np.array(["5 6 7"] * 3))
    rate_other = edit_rate(np.array(["5 6 7", "5 6 8", "1 2"]), np.array(["1 2"] * 3))
    assert rate_medoid < rate_other
