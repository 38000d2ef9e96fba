"""Metrics of one class label per row (macro-F1 over the labels either side names, the top-1 error), the TPR-banded
ROC area and the 1-100 range of a regression: each scored as MLE-bench's graders score herbarium, iwildcam-2019,
inaturalist-2019, alaska2 and petfinder (values pinned from those graders on the same inputs), including what
they call invalid, and cross-validation scoring what the grader scores of the file the writer makes."""
import numpy as np
import pandas as pd
import pytest

from runner.common import metrics
from runner.common.class_metrics import fast_macro_f1, first_integer_labels, integer_labels, macro_f1
from runner.common.errors import InvalidSubmissionError
from runner.common.roc_metrics import banded_auc
from runner.competition.catalog import load_spec
from runner.competition.grade import grade
from runner.results.submission import Predictions, build_submission, validate_submission

HERBARIUM = pd.DataFrame({"Id": [0, 1, 2, 3, 4, 5], "Predicted": [3, 3, 5, 7, 7, 7]})
TRUTH = np.array([0, 1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0])
SCORES = np.array([0.1, 0.9, 0.35, 0.8, 0.2, 0.4, 0.7, 0.6, 0.05, 0.3, 0.95, 0.5])


def graded(tmp_path, competition: str, submission: pd.DataFrame, answers: pd.DataFrame):
    spec = load_spec(competition)
    answers.to_csv(tmp_path / spec.answers_file, index=False)
    submission.to_csv(tmp_path / "submission.csv", index=False)
    return grade(tmp_path / "submission.csv", spec, tmp_path)


def test_macro_f1_counts_a_label_only_the_submission_names_as_a_class_of_f1_zero(tmp_path):
    """Rows in another order; 9 is never true: labels 3, 5, 7, 9 score 1, 1, 0.8, 0 -> 0.7."""
    submission = pd.DataFrame({"Id": [5, 4, 3, 2, 1, 0], "Predicted": [7, 9, 7, 5, 3, 3]})
    report = graded(tmp_path, "herbarium-2020", submission, HERBARIUM)
    assert report.valid_submission and report.score == pytest.approx(0.7)  # MLE-bench: 0.7
    floats = submission.assign(Predicted=[7.0, 7.9, 7.0, 5.0, 3.0, 3.0])  # int() cuts 7.9 to 7
    assert graded(tmp_path, "herbarium-2022", floats, HERBARIUM).score == 1.0  # MLE-bench: 1.0
    for bad in (["3", "3", "5", "7", "7", "x"], ["3 5", "3", "5", "7", "7", "7"], [3.0, 3, 5, 7, 7, np.nan]):
        report = graded(tmp_path, "herbarium-2021", HERBARIUM.assign(Predicted=bad), HERBARIUM)
        assert not report.valid_submission and "row" in report.error  # MLE-bench: ValueError, invalid


def test_macro_f1_of_probabilities_is_that_of_their_likeliest_labels_and_the_fast_form_agrees():
    rng = np.random.default_rng(0)
    for _ in range(50):
        k = int(rng.integers(2, 7))
        y, p = rng.integers(0, k, 40), rng.random((40, k))
        assert macro_f1(y, p) == pytest.approx(macro_f1(y, p.argmax(axis=1)))
        assert fast_macro_f1(y, p) == pytest.approx(macro_f1(y, p), abs=1e-12)
    assert metrics.LOWER_IS_BETTER["macro_f1"] is False and metrics.LOWER_IS_BETTER["top1_error"] is True


def test_the_top1_error_reads_a_ranked_string_by_its_first_label_and_refuses_floats(tmp_path):
    answers = pd.DataFrame({"id": [10, 11, 12, 13], "predicted": [1, 2, 3, 4]})
    ranked = pd.DataFrame({"id": [13, 12, 11, 10], "predicted": ["4 1 2", "9 3", "2", "1 4"]})
    assert graded(tmp_path, "inaturalist-2019", ranked, answers).score == pytest.approx(0.25)  # MLE-bench: 0.25
    assert graded(tmp_path, "inaturalist-2019", ranked.assign(predicted=[4, 9, 2, 1]), answers).score == 0.25
    floats = graded(tmp_path, "inaturalist-2019", ranked.assign(predicted=[4.0, 9.0, 2.0, 1.0]), answers)
    assert not floats.valid_submission  # MLE-bench: AttributeError ('float' has no split), invalid
    assert first_integer_labels(np.array([3, 4])).tolist() == [3, 4]
    with pytest.raises(InvalidSubmissionError):
        integer_labels(["7", "seven"])


def test_iwildcam_2019s_extra_index_column_and_ids_listed_twice_are_graded_as_mle_bench_does(tmp_path):
    answers = pd.DataFrame({"Id": ["a", "b", "b", "c", "d"], "Category": [0, 0, 0, 3, 10]})
    submission = pd.DataFrame({"Unnamed: 0": [4, 3, 2, 1, 0], "Id": ["d", "c", "b", "b", "a"],
                               "Category": [10, 0, 0, 0, 13]})
    report = graded(tmp_path, "iwildcam-2019", submission, answers)
    assert report.valid_submission and report.score == pytest.approx(0.41667, abs=1e-5)  # MLE-bench: 0.4166667


def test_a_sample_with_an_unnamed_index_column_is_written_back_with_its_header(tmp_path):
    from runner.results.submission import write_read_back

    spec = load_spec("iwildcam-2019")
    (tmp_path / "sample.csv").write_text(",Id,Category\n15,a,0\n32,b,0\n")
    sample = pd.read_csv(tmp_path / "sample.csv")
    written = build_submission(sample, spec, ["Category"], Predictions(np.array([[0.2, 0.8], [0.9, 0.1]]), (0, 3),
                                                                       "test"))
    write_read_back(written, sample, spec, ["Category"], tmp_path / "submission.csv")
    assert (tmp_path / "submission.csv").read_text() == ",Id,Category\n15,a,3\n32,b,0\n"


def test_the_banded_roc_area_weights_the_low_true_positive_rates_twice(tmp_path):
    assert banded_auc(TRUTH, SCORES) == pytest.approx(0.8412698, abs=1e-7)  # MLE-bench: 0.8412698412698414
    assert banded_auc(TRUTH, np.column_stack([1 - SCORES, SCORES])) == pytest.approx(banded_auc(TRUTH, SCORES))
    assert banded_auc(TRUTH, np.zeros(12)) == pytest.approx(0.5857143, abs=1e-7)  # MLE-bench: 0.5857142857142857
    assert banded_auc(TRUTH, TRUTH * 1.0) == 1.0 and banded_auc(TRUTH, -TRUTH * 1.0) == 0.0  # MLE-bench: 1.0, 0.0
    ids = [f"{k:04d}.jpg" for k in range(1, 13)]
    answers = pd.DataFrame({"Id": ids, "Label": TRUTH})
    report = graded(tmp_path, "alaska2", pd.DataFrame({"Id": ids[::-1], "Label": SCORES[::-1]}), answers)
    assert report.valid_submission and report.score == pytest.approx(0.84127, abs=1e-5)
    assert graded(tmp_path, "alaska2", answers.assign(Label=0), answers).score == pytest.approx(0.58571)


def test_cross_validation_scores_labels_as_the_grader_scores_the_file_written(tmp_path):
    spec = load_spec("herbarium-2020")
    classes = (3, 5, 7, 11)
    rng = np.random.default_rng(2)
    y = rng.integers(0, len(classes), 60)
    probabilities = np.eye(len(classes))[y] * 0.5 + rng.random((60, len(classes)))
    sample = pd.DataFrame({"Id": range(60), "Predicted": 0})
    written = build_submission(sample, spec, ["Predicted"], Predictions(probabilities, classes, "test"))
    validate_submission(written, sample, spec, ["Predicted"])
    answers = sample.assign(Predicted=[classes[k] for k in y])
    assert graded(tmp_path, "herbarium-2020", written, answers).score == \
        pytest.approx(metrics.score("macro_f1", y, probabilities), abs=1e-5)


def test_a_regression_with_a_range_is_cut_into_it_and_graded_invalid_outside_it(tmp_path):
    spec = load_spec("petfinder")
    answers = pd.DataFrame({"Id": ["a", "b", "c"], "Pawpularity": [10, 50, 90]})
    report = graded(tmp_path, "petfinder", pd.DataFrame({"Id": ["c", "b", "a"], "Pawpularity": [12.5, 40, 100]}),
                    answers)
    assert report.score == pytest.approx(68.81436, abs=1e-5)  # MLE-bench: 68.81436381066577
    for values in ([0.5, 40, 100], [12.5, 40, 100.01]):  # MLE-bench: invalid, outside [1, 100]
        assert not graded(tmp_path, "petfinder", answers.assign(Pawpularity=values), answers).valid_submission
    sample = answers.assign(Pawpularity=50.0)
    written = build_submission(sample, spec, ["Pawpularity"],
                               Predictions(np.array([[-3.0], [55.0], [140.0]]), None, "test"))
    assert written["Pawpularity"].tolist() == [1.0, 55.0, 100.0]
    validate_submission(written, sample, spec, ["Pawpularity"])
    with pytest.raises(InvalidSubmissionError, match="outside"):
        validate_submission(sample.assign(Pawpularity=[0.0, 1.0, 2.0]), sample, spec, ["Pawpularity"])


def test_a_range_or_a_negative_label_where_the_format_has_none_is_refused():
    from runner.common.errors import SpecError
    from runner.competition.spec import CompetitionSpec

    base = dict(id="x", task="image", metric="accuracy", submission="label", id_column="id", targets=("y",))
    with pytest.raises(SpecError, match="value_range"):
        CompetitionSpec(**base, value_range=(1.0, 100.0))
    with pytest.raises(SpecError, match="negative_label"):
        CompetitionSpec(**base, negative_label="Cover")
    with pytest.raises(SpecError, match="value_range"):
        CompetitionSpec(**{**base, "submission": "regression", "metric": "rmse"}, value_range=(100.0, 1.0))
