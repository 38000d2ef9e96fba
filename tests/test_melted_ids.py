"""Ids made of parts: the sample's ids split by the spec's pattern into the columns they are made of, and a melted
sample (a row per item and target, rsna-2022-cervical-spine-fracture-detection's `<StudyInstanceUID>_C3`; stacked
numbers, mlsp-2013-birds') written from and graded as (items x targets). The weighted multi-label log loss is
pinned to MLE-bench's grader on the same inputs, its validity checks included."""
import numpy as np
import pandas as pd
import pytest

from runner.common import metrics
from runner.common.errors import InputError
from runner.competition.catalog import load_spec
from runner.competition.grade import grade
from runner.competition.id_parts import id_parts, items_in_order, melted_rows
from runner.results.submission import Predictions, build_submission, validate_submission

SPINE = load_spec("rsna-2022-cervical-spine-fracture-detection")
TARGETS = list(SPINE.targets)
TRUTH = np.array([[1, 0, 1, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0, 0]])
STUDIES = ["1.2.3.4", "1.2.3.5", "1.2.3.6"]
# MLE-bench's answers: the studies' table melted, every patient_overall row first, then every C1 row, ...
ANSWERS = pd.DataFrame(TRUTH, columns=TARGETS).assign(StudyInstanceUID=STUDIES).melt(
    id_vars="StudyInstanceUID", var_name="prediction_type", value_name="fractured")
ANSWERS["row_id"] = ANSWERS["StudyInstanceUID"] + "_" + ANSWERS["prediction_type"]
GUESSES = [0.641, 0.664, 0.139, 0.047, 0.426, 0.308, 0.54, 0.849, 0.189, 0.72, 0.052, 0.843, 0.023, 0.803, 0.918,
           0.542, 0.72, 0.602, 0.896, 0.801, 0.036, 0.059, 0.279, 0.631]  # for the answers' rows, last row first
SUBMISSION = pd.DataFrame({"row_id": ANSWERS["row_id"][::-1].tolist(), "fractured": GUESSES})


def graded(tmp_path, submission):
    ANSWERS.to_csv(tmp_path / SPINE.answers_file, index=False)
    submission.to_csv(tmp_path / "submission.csv", index=False)
    return grade(tmp_path / "submission.csv", SPINE, tmp_path)


def test_an_id_splits_into_the_columns_its_pattern_names():
    nfl = load_spec("nfl-player-contact-detection")
    parts = id_parts(nfl, pd.Series(["58168_003392_0_47795_52521", "58168_003392_12_47795_G"]), "sample")
    assert parts.to_dict("list") == {"game_play": ["58168_003392"] * 2, "step": ["0", "12"],
                                     "nfl_player_id_1": ["47795"] * 2, "nfl_player_id_2": ["52521", "G"]}
    osic = id_parts(load_spec("osic"), pd.Series(["ID00007637202177411956430_-5"]), "sample")
    assert osic.iloc[0].tolist() == ["ID00007637202177411956430", "-5"]  # the last '_' parts the week
    with pytest.raises(InputError, match="'58168_x'"):
        id_parts(nfl, pd.Series(["58168_x"]), "sample")


def test_a_melted_row_names_its_item_and_its_target():
    items, targets = melted_rows(SPINE, ANSWERS, "answers")
    assert items[:3].tolist() == STUDIES and targets[[0, 3, 23]].tolist() == [0, 1, 7]
    assert items_in_order(items).tolist() == STUDIES
    with pytest.raises(InputError, match="C8"):
        melted_rows(SPINE, pd.DataFrame({"row_id": ["1.2.3.4_C8"]}), "sample")
    birds = load_spec("mlsp-birds")  # stacked numbers: Id = item * 100 + label
    items, labels = melted_rows(birds, pd.DataFrame({"Id": [100, 118, 2301]}), "sample")
    assert items.tolist() == [1, 1, 23] and labels.tolist() == [0, 18, 1]


@pytest.mark.parametrize("values, expected", [
    (GUESSES, 1.147895),  # MLE-bench: 1.147895
    ([0.5] * 24, 0.693147),  # MLE-bench: 0.693147
    ([0.0, 1.0] * 12, 7.908365),  # MLE-bench: 7.908365 (sure answers clipped to 1e-15 from 0 and 1)
])
def test_the_weighted_multilabel_log_loss_is_graded_as_mle_bench_grades_rsna_2022(tmp_path, values, expected):
    report = graded(tmp_path, SUBMISSION.assign(fractured=values))
    assert report.valid_submission and report.score == pytest.approx(expected, abs=1e-5)


def test_a_melted_submission_out_of_range_empty_or_short_is_invalid(tmp_path):
    assert not graded(tmp_path, SUBMISSION.assign(fractured=1.2)).valid_submission  # MLE-bench: invalid
    assert not graded(tmp_path, SUBMISSION.assign(fractured=[np.nan] + GUESSES[1:])).valid_submission  # invalid
    assert not graded(tmp_path, SUBMISSION.iloc[:-1]).valid_submission  # MLE-bench: invalid (broadcast error)


def test_the_writer_melts_each_item_s_predictions_into_the_sample_s_rows_and_cv_scores_what_is_graded(tmp_path):
    sample = ANSWERS[["row_id"]].assign(fractured=0.5)
    rng = np.random.default_rng(0)
    values = np.clip(TRUTH * 0.5 + rng.uniform(0.05, 0.45, TRUTH.shape), 0, 1)  # (studies x targets)
    written = build_submission(sample, SPINE, ["fractured"], Predictions(values, None, "test"))
    validate_submission(written, sample, SPINE, ["fractured"])
    assert written["fractured"].tolist()[:3] == values[:, 0].tolist()  # every study's patient_overall first
    assert written["fractured"].iloc[3 * 7 + 2] == values[2, 7]  # the C7 row of the third study
    cv = metrics.score("weighted_multilabel_log_loss", TRUTH, values)
    assert graded(tmp_path, written).score == pytest.approx(cv, abs=1e-5)
