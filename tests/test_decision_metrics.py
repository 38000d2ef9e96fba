"""One yes or no a row, scored on decisions: probabilistic F1 (rsna-breast-cancer-detection) and the Matthews
correlation of 0/1 labels (nfl-player-contact-detection). The grader scores them as MLE-bench's graders do (values
pinned from their graders on the same inputs, quirks included: probabilities clipped or refused), the writer
turns probabilities into the decisions tuned on out-of-fold rows, and the prior is the best constant the metric
allows."""
import numpy as np
import pandas as pd
import pytest

from runner.common import metrics
from runner.common.binary_metrics import decide, fast_mcc, mcc, probabilistic_f1, tune_decision
from runner.competition.catalog import load_spec
from runner.competition.grade import grade
from runner.results.decisions import tuned
from runner.results.submission import Predictions, build_submission, prior_predictions, validate_submission

BREASTS = pd.DataFrame({"prediction_id": ["1_L", "1_R", "2_L", "2_R", "3_L", "3_R"], "cancer": [1, 0, 0, 1, 0, 0]})
GUESSES = pd.DataFrame({"prediction_id": ["3_R", "3_L", "2_R", "2_L", "1_R", "1_L"],
                        "cancer": [0.2, 0.05, 0.6, 0.3, 0.1, 0.8]})
CONTACTS = pd.DataFrame({"contact_id": [f"1_2_{s}_10_{p}" for s in range(3) for p in ("11", "G")],
                         "contact": [1, 0, 0, 1, 1, 0]})
DECIDED = pd.DataFrame({"contact_id": CONTACTS["contact_id"][::-1].tolist(), "contact": [0, 1, 0, 0, 1, 1]})


def graded(tmp_path, competition, submission, answers):
    spec = load_spec(competition)
    answers.to_csv(tmp_path / spec.answers_file, index=False)
    submission.to_csv(tmp_path / "submission.csv", index=False)
    return grade(tmp_path / "submission.csv", spec, tmp_path)


@pytest.mark.parametrize("values, expected", [
    ([0.2, 0.05, 0.6, 0.3, 0.1, 0.8], 0.691358),  # MLE-bench: 0.691358
    ([-0.5, 0.05, 1.7, 0.3, 0.1, 0.8], 0.847059),  # MLE-bench: 0.847059 (clipped into [0, 1], not refused)
    ([np.nan, 0.05, 0.6, 0.3, 0.1, 0.8], 0.0),  # MLE-bench: 0.0 (a missing value poisons the sums)
    ([0.0] * 6, 0.0),  # MLE-bench: 0.0
    ([1.0] * 6, 0.5),  # MLE-bench: 0.5 (every breast a yes: 2 x prevalence / (1 + prevalence))
])
def test_probabilistic_f1_is_graded_as_mle_bench_grades_rsna_breast_cancer(tmp_path, values, expected):
    report = graded(tmp_path, "rsna-breast-cancer-detection", GUESSES.assign(cancer=values), BREASTS)
    assert report.valid_submission and report.score == pytest.approx(expected, abs=1e-5)


def test_a_breast_left_out_or_text_is_no_valid_probabilistic_f1_submission(tmp_path):
    assert not graded(tmp_path, "rsna-breast-cancer-detection", GUESSES.iloc[:5], BREASTS).valid_submission
    assert not graded(tmp_path, "rsna-breast-cancer-detection", GUESSES.assign(cancer="yes"), BREASTS).valid_submission
    with pytest.raises(ValueError, match="positive"):  # no positive row: recall undefined (the grader fails)
        probabilistic_f1(np.zeros(3), np.full(3, 0.5))


def test_mcc_is_graded_as_mle_bench_grades_nfl_contacts_and_probabilities_are_refused(tmp_path):
    assert graded(tmp_path, "nfl-player-contact-detection", DECIDED, CONTACTS).score == pytest.approx(
        0.333333, abs=1e-5)  # MLE-bench: 0.333333
    floats = DECIDED.assign(contact=DECIDED["contact"].astype(float))
    assert graded(tmp_path, "nfl-player-contact-detection", floats, CONTACTS).score == pytest.approx(
        0.333333, abs=1e-5)  # MLE-bench: 0.333333 (whole numbers written as 1.0 are labels)
    assert graded(tmp_path, "nfl-player-contact-detection", DECIDED.assign(contact=0), CONTACTS).score == 0.0
    probabilities = DECIDED.assign(contact=[0.1, 0.9, 0.2, 0.3, 0.6, 0.7])  # MLE-bench: invalid (a mix of types)
    report = graded(tmp_path, "nfl-player-contact-detection", probabilities, CONTACTS)
    assert not report.valid_submission and "whole numbers" in report.error


def test_mcc_of_probabilities_is_that_of_the_likelier_class_and_the_fast_form_agrees():
    rng = np.random.default_rng(0)
    truth = (rng.random(300) < 0.2).astype(int)
    p = np.clip(truth * 0.4 + rng.uniform(0, 0.6, 300), 0, 1)
    pred = np.column_stack([1 - p, p])
    assert mcc(truth, pred) == pytest.approx(mcc(truth, (p > 0.5).astype(int)))
    assert fast_mcc(truth, pred) == pytest.approx(mcc(truth, pred))
    assert fast_mcc(truth, np.zeros(300)) == 0.0  # one label only: 0, as scikit-learn gives


def test_a_cut_tuned_on_out_of_fold_rows_does_better_than_one_half_where_positives_are_rare():
    rng = np.random.default_rng(1)
    truth = (rng.random(2000) < 0.05).astype(int)
    p = np.clip(0.05 + 0.3 * truth + rng.normal(0, 0.08, 2000), 0, 1)  # the positives' probabilities sit low
    pred = np.column_stack([1 - p, p])
    for name in ("mcc", "probabilistic_f1"):
        metric = metrics.METRICS[name]
        cut, value = tune_decision(metric.score, False, truth, pred)
        assert cut < 0.5 and value > metric.score(truth, decide(pred, 0.5)) + 0.2
        assert value == pytest.approx(metric.score(truth, decide(pred, cut)))


def test_the_writer_decides_from_the_tuned_cut_and_the_prior_is_the_best_constant():
    spec, sample = load_spec("nfl-player-contact-detection"), DECIDED.assign(contact=0)
    p = np.array([0.1, 0.3, 0.05, 0.5, 0.2, 0.25])
    values = np.column_stack([1 - p, p])
    written = build_submission(sample, spec, ["contact"], Predictions(values, (0, 1), "test", (0.2,)))
    assert written["contact"].tolist() == [0, 1, 0, 1, 1, 1]
    validate_submission(written, sample, spec, ["contact"])
    assert build_submission(sample, spec, ["contact"], Predictions(values, (0, 1), "test"))["contact"].sum() == 0
    breast = load_spec("rsna-breast-cancer-detection")
    truth = BREASTS["cancer"].to_numpy()
    prior = prior_predictions(truth, [0, 1], len(GUESSES))
    cut = tuned(breast, truth, np.tile(prior.values[0], (len(truth), 1)), what="training")
    assert cut is not None  # every breast a yes: probabilistic F1's best constant
    written = build_submission(GUESSES, breast, ["cancer"], Predictions(prior.values, (0, 1), "prior", cut))
    assert written["cancer"].tolist() == [1.0] * 6
    # MCC's constant: all no and all yes tie at 0, and the likelier class stays (a cut of 0.5 over a prior of 0.3)
    assert tuned(spec, CONTACTS["contact"].to_numpy(), np.tile([0.7, 0.3], (6, 1))) == (0.5,)
