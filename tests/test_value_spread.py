"""A value scored with the spread stated for it (osic-pulmonary-fibrosis-progression's FVC and Confidence): the
modified Laplace log-likelihood over each patient's last three measured weeks, a submission that leaves rows out
scored on the rows it has, pinned to MLE-bench's grader on the same inputs; the spread the writer states is the
one that scores the out-of-fold rows best."""
import numpy as np
import pandas as pd
import pytest

from runner.common import metrics
from runner.common.errors import InvalidSubmissionError
from runner.common.spread_metrics import LEAST_SPREAD, best_spread, laplace_log_likelihood
from runner.competition.catalog import load_spec
from runner.competition.grade import grade
from runner.competition.grade_rows import last_rows
from runner.competition.scoring import scored_rows
from runner.results.decisions import tuned
from runner.results.submission import Predictions, build_submission, validate_submission

OSIC = load_spec("osic-pulmonary-fibrosis-progression")
MEASURED = {("A", 0): 2000, ("A", 3): 1950, ("A", 5): 1930, ("A", 9): 1900, ("B", 1): 3000, ("B", 4): 2950,
            ("B", 8): 2900, ("B", 10): 2800}
# MLE-bench's answers: every patient at every week, FVC where measured (NaN elsewhere), Confidence 100
ANSWERS = pd.DataFrame([(p, w, MEASURED.get((p, w), np.nan)) for p in "AB" for w in range(11)],
                       columns=["Patient", "Weeks", "FVC"]).assign(Percent=np.nan, Age=70, Sex="Male",
                                                                  SmokingStatus="Ex-smoker")
ANSWERS["Patient_Week"] = ANSWERS["Patient"] + "_" + ANSWERS["Weeks"].astype(str)
ANSWERS["Confidence"] = 100
SUBMISSION = pd.DataFrame({"Patient_Week": ANSWERS["Patient_Week"],
                           "FVC": [2000 - 8 * w for w in range(11)] + [3000 - 15 * w for w in range(11)],
                           "Confidence": [60.0 + 20 * w for w in range(11)] + [150.0] * 11}).iloc[::-1]


def graded_score(tmp_path, submission):
    ANSWERS.to_csv(tmp_path / OSIC.answers_file, index=False)
    submission.to_csv(tmp_path / "submission.csv", index=False)
    return grade(tmp_path / "submission.csv", OSIC, tmp_path)


@pytest.mark.parametrize("submission, expected", [
    (SUBMISSION, -5.657578),  # MLE-bench: -5.657578
    (SUBMISSION[SUBMISSION["Patient_Week"] != "B_10"], -5.623371),  # MLE-bench: -5.623371 (a row left out: unscored)
    (SUBMISSION.assign(Confidence=np.nan), -5.147286),  # MLE-bench: -5.147286 (an empty spread is 0, then 70)
    (SUBMISSION.assign(FVC=5000.0), -14.542571),  # MLE-bench: -14.542571 (each miss capped at 1000)
])
def test_the_laplace_log_likelihood_is_graded_as_mle_bench_grades_osic(tmp_path, submission, expected):
    report = graded_score(tmp_path, submission)
    assert report.valid_submission and report.score == pytest.approx(expected, abs=1e-5)


def test_an_unknown_patient_week_text_or_a_week_twice_is_invalid(tmp_path):
    unknown = pd.concat([SUBMISSION, pd.DataFrame({"Patient_Week": ["C_1"], "FVC": [1.0], "Confidence": [100.0]})])
    assert "no answer's" in graded_score(tmp_path, unknown).error  # MLE-bench: invalid
    assert not graded_score(tmp_path, SUBMISSION.assign(FVC="x")).valid_submission  # MLE-bench: invalid
    assert not graded_score(tmp_path, pd.concat([SUBMISSION, SUBMISSION.iloc[:1]])).valid_submission


def test_each_patient_s_last_three_measured_weeks_are_the_rows_scored():
    keep = last_rows(ANSWERS, OSIC, scored_rows(ANSWERS, OSIC.scored_rows))
    assert ANSWERS.loc[keep, "Patient_Week"].tolist() == ["A_3", "A_5", "A_9", "B_4", "B_8", "B_10"]


def test_the_best_spread_is_the_one_constant_that_scores_the_values_best():
    rng = np.random.default_rng(0)
    truth = rng.normal(2500, 400, 300)
    values = truth + rng.laplace(0, 150, 300)
    spread = best_spread(truth, values)
    best = laplace_log_likelihood(truth, values[:, None])  # values alone: scored with that spread
    assert best == pytest.approx(laplace_log_likelihood(truth, np.column_stack([values, np.full(300, spread)])))
    for other in (0.5 * spread, 0.9 * spread, 1.1 * spread, 2 * spread):
        assert laplace_log_likelihood(truth, np.column_stack([values, np.full(300, other)])) < best
    assert best_spread(truth, truth) == LEAST_SPREAD  # no error: the least spread the grader allows


def test_the_writer_states_the_tuned_spread_beside_the_values(tmp_path):
    sample = SUBMISSION.assign(FVC=2000, Confidence=100)
    truth = np.array([1900.0, 2100.0, 2000.0, 1800.0])
    spread = tuned(OSIC, truth[:, None], np.full((4, 1), 2000.0), what="training")
    assert spread == (pytest.approx(np.sqrt(2) * 100.0),)
    values = np.arange(len(sample), dtype=float)[:, None] + 2500
    written = build_submission(sample, OSIC, ["FVC"], Predictions(values, None, "test", spread))
    validate_submission(written, sample, OSIC, ["FVC"])
    assert written["FVC"].tolist() == values[:, 0].tolist() and (written["Confidence"] == spread[0]).all()
    with pytest.raises(InvalidSubmissionError, match="spread"):  # a value with no spread is no submission
        build_submission(sample, OSIC, ["FVC"], Predictions(values, None, "test"))
    assert metrics.score("laplace_log_likelihood", truth, np.full((4, 1), 2000.0)) == pytest.approx(
        laplace_log_likelihood(truth, np.column_stack([np.full(4, 2000.0), np.full(4, spread[0])])))
