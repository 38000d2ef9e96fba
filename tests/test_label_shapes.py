"""Labels written as strings: a set of labels per row (space-separated, scored by micro-F1) and the k likeliest
labels per row (scored by MAP@k). The grader scores them as MLE-bench's graders do (values pinned from
plant-pathology-2021-fgvc8's and whale-categorization-playground's graders on the same inputs), the writer turns
probabilities into the strings the grader reads, and cross-validation scores what the grader would."""
import numpy as np
import pandas as pd
import pytest

from runner.common import metrics
from runner.common.label_metrics import average_precision_at_k, decided, tune_threshold
from runner.competition.catalog import load_spec
from runner.competition.grade import grade
from runner.competition.spec import CompetitionSpec
from runner.data.targets import label_sets
from runner.results.submission import Predictions, build_submission, validate_submission

PLANT = pd.DataFrame({"image": ["a.jpg", "b.jpg", "c.jpg", "d.jpg"],
                      "labels": ["scab", "rust complex", "healthy", "scab frog_eye_leaf_spot"]})
WHALE_SPEC = CompetitionSpec(id="whale-like", task="image", metric="map_at_5", submission="ranked",
                             id_column="Image", targets=("Id",), top_k=5, answers_file="answers.csv")


def graded(tmp_path, spec, submission: pd.DataFrame, answers: pd.DataFrame):
    answers.to_csv(tmp_path / spec.answers_file, index=False)
    submission.to_csv(tmp_path / "submission.csv", index=False)
    return grade(tmp_path / "submission.csv", spec, tmp_path)


def test_a_set_of_labels_is_scored_as_mle_bench_scores_plant_pathology_2021(tmp_path):
    """Rows in another order, a label the answers never hold (powdery_mildew) counting for nothing: 8/11."""
    submission = pd.DataFrame({"image": ["d.jpg", "c.jpg", "b.jpg", "a.jpg"],
                               "labels": ["scab", "healthy rust", "rust", "scab powdery_mildew"]})
    report = graded(tmp_path, load_spec("plant-pathology-2021"), submission, PLANT)
    assert report.valid_submission and report.score == pytest.approx(0.72727, abs=1e-5)  # MLE-bench: 0.7272727
    empty = submission.assign(labels=["", "", "", ""])  # empty sets: valid, and worth nothing
    assert graded(tmp_path, load_spec("plant-pathology-2021"), empty, PLANT).score == 0.0


def test_ranked_labels_are_scored_as_mle_bench_scores_whale_categorization(tmp_path):
    answers = pd.DataFrame({"Image": ["1.jpg", "2.jpg", "3.jpg"], "Id": ["w_1", "new_whale", "w_3"]})
    submission = pd.DataFrame({"Image": ["3.jpg", "1.jpg", "2.jpg"],
                               "Id": ["w_9 w_3 w_1 new_whale w_2", "w_1 w_2 w_3 w_4 w_5", "w_2 w_3 w_4 w_5 w_6"]})
    report = graded(tmp_path, WHALE_SPEC, submission, answers)
    assert report.valid_submission and report.score == pytest.approx(0.5)  # MLE-bench: 0.5
    assert average_precision_at_k({"a"}, ["b", "a", "a"], 5) == 0.5  # a label found again counts once
    assert average_precision_at_k({"a"}, ["b", "c", "d", "e", "f", "a"], 5) == 0.0  # past k: not found
    assert average_precision_at_k(set(), ["a"], 5) == 0.0


def test_the_writer_puts_each_label_past_the_threshold_in_the_set_and_the_likeliest_at_least():
    spec = load_spec("plant-pathology-2021")
    sample = PLANT.assign(labels="healthy")
    values = np.array([[0.9, 0.1, 0.6], [0.2, 0.3, 0.1], [0.5, 0.5, 0.49], [0.0, 0.0, 0.0]])
    written = build_submission(sample, spec, ["labels"], Predictions(values, None, "test", (0.5,),
                                                                      labels=("healthy", "rust", "scab")))
    assert written["labels"].tolist() == ["healthy scab", "rust", "healthy rust", "healthy"]
    validate_submission(written, sample, spec, ["labels"])
    assert build_submission(sample, spec, ["labels"], Predictions(values, None, "test", (0.95,), labels=(
        "healthy", "rust", "scab")))["labels"].tolist() == ["healthy", "rust", "healthy", "healthy"]


def test_the_writer_ranks_the_k_likeliest_classes_best_first():
    sample = pd.DataFrame({"Image": ["1.jpg", "2.jpg"], "Id": ["new_whale"] * 2})
    values = np.array([[0.1, 0.5, 0.2, 0.15, 0.05, 0.0], [0.3, 0.0, 0.0, 0.0, 0.0, 0.7]])
    classes = ("new_whale", "w_1", "w_2", "w_3", "w_4", "w_5")
    written = build_submission(sample, WHALE_SPEC, ["Id"], Predictions(values, classes, "test"))
    assert written["Id"].tolist() == ["w_1 w_2 w_3 new_whale w_4", "w_5 new_whale w_1 w_2 w_3"]


def test_cross_validation_scores_a_set_as_the_grader_scores_the_file_written(tmp_path):
    """The CV of out-of-fold probabilities equals the grade of the submission the writer makes of them."""
    spec = load_spec("plant-pathology-2021")
    labels, truth = label_sets(PLANT["labels"])
    rng = np.random.default_rng(0)
    probabilities = np.clip(truth * 0.6 + rng.uniform(0, 0.5, truth.shape), 0, 1)
    cv = metrics.score("micro_f1", truth, probabilities)
    written = build_submission(PLANT.assign(labels=""), spec, ["labels"],
                               Predictions(probabilities, None, "test", labels=tuple(labels)))
    assert graded(tmp_path, spec, written, PLANT).score == pytest.approx(cv, abs=1e-5)


def test_a_threshold_tuned_on_out_of_fold_rows_does_at_least_as_well_as_the_default():
    rng = np.random.default_rng(1)
    truth = (rng.random((400, 6)) < 0.25).astype(float)
    truth[np.arange(400), rng.integers(0, 6, 400)] = 1
    probabilities = np.clip(truth * 0.35 + rng.uniform(0, 0.45, truth.shape), 0, 1)  # true labels sit low
    default = metrics.score("micro_f1", truth, probabilities)
    threshold, tuned = tune_threshold(metrics.METRICS["micro_f1"].score, False, truth, probabilities)
    assert tuned > default + 0.05 and threshold < 0.5  # the labels' probabilities are low: the cut comes down
    assert tuned == pytest.approx(metrics.score("micro_f1", truth, decided(probabilities, threshold)))


def test_labels_of_a_set_are_read_as_one_column_each():
    labels, matrix = label_sets(pd.Series(["b a", "", None, "c"]))
    assert labels == ["a", "b", "c"]
    assert matrix.tolist() == [[1, 1, 0], [0, 0, 0], [0, 0, 0], [0, 0, 1]]
