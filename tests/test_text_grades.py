"""The metrics of the text competitions, graded as MLE-bench's graders grade them (values pinned from each
competition's own grader on the same inputs, built here), with their quirks: a constant column's NaN, the columns
a grader takes, an empty span and answer, an empty text, a cell id a notebook lacks, an answer that does not
parse; and cross-validation scoring what the grader scores of the file the writer makes."""
import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from runner.common import metrics
from runner.common.bias_metrics import best_cut, bias_auc
from runner.common.correlation_metrics import varied
from runner.common.order_metrics import inversions
from runner.competition.catalog import load_spec
from runner.competition.grade import compare, grade
from runner.results.submission import Predictions, build_submission, decision_values, validate_submission

QUEST = load_spec("google-quest")
IDENTITIES = ("male", "female", "homosexual_gay_or_lesbian", "christian", "jewish", "muslim", "black", "white",
              "psychiatric_or_mental_illness")


def graded(tmp_path, spec, submission: pd.DataFrame, answers, name: str | None = None):
    """The runner's grade of `submission` against `answers` (a frame, or JSON Lines records) in tmp_path."""
    name = name or spec.answers_file
    if isinstance(answers, pd.DataFrame):
        answers.to_csv(tmp_path / name, index=False)
    else:
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in answers))
    submission.to_csv(tmp_path / "submission.csv", index=False)
    return grade(tmp_path / "submission.csv", spec, tmp_path)


# --- fixed inputs, each also graded by MLE-bench's own grader for the values pinned below ---------------------------

def quest_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = np.arange(6)
    answers = pd.DataFrame({"qa_id": rows * 3,
                            **{c: ((rows * (j % 6 + 1)) % 7) / 6 for j, c in enumerate(QUEST.targets)}})
    submission = pd.DataFrame({"qa_id": rows[::-1] * 3, **{c: ((rows[::-1] * ((j + 3) % 6 + 1) + 2) % 7) / 6
                                                            for j, c in enumerate(QUEST.targets)}})
    return submission, answers


def patent_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    answers = pd.DataFrame({"id": list("abcdef"), "anchor": "x", "target": "y", "context": "A01",
                            "score": [0.0, 0.25, 0.5, 0.75, 1.0, 0.5]})
    submission = pd.DataFrame({"id": list("fedcba"), "score": [0.4, 0.9, 0.7, 0.3, 0.35, 0.1]})
    return submission, answers


def bias_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """40 comments: every identity's mentions hold toxic and civil ones, the predictions right on most."""
    n = 40
    rows = np.arange(n)
    toxicity = np.where(rows % 4 == 0, 0.8, np.where(rows % 7 == 0, 0.55, 0.1))
    answers = pd.DataFrame({"id": 7_000_000 + rows, "comment_text": "c", "toxicity": toxicity})
    for j, identity in enumerate(IDENTITIES):
        share = np.where((rows + j) % 3 == 0, 0.9, 0.0)
        share[(rows % 4 == 0) & ((rows + j) % 5 == 0)] = 0.6  # some toxic mentions
        answers[identity] = np.where(rows == 39, np.nan, share)
    prediction = np.where(rows % 4 == 0, 0.7, 0.2) + np.where(rows % 6 == 0, 0.35, 0.0)
    submission = pd.DataFrame({"id": answers["id"][::-1].to_numpy(), "prediction": prediction[::-1]})
    return submission, answers


TWEETS = pd.DataFrame({"textID": ["a1", "b2", "c3"], "text": ["I love it!", " so sad today", "going home"],
                       "selected_text": ["love it!", "sad", "going home"], "sentiment": ["positive", "negative",
                                                                                          "neutral"]})
CHAII = pd.DataFrame({"id": ["q1", "q2", "q3", "q4"],
                      "PredictionString": ["1867", "दिल्ली शहर", "கம்பர்", "Raja Ravi"]})
SENTENCES = pd.DataFrame({"id": [0, 1, 2], "sentence": ["The company said .", "Sales rose 3 per cent .",
                                                        "He said \" yes \" ."]})
ORDERS = pd.DataFrame({"id": ["nb1", "nb2"], "cell_order": ["a b c d e", "x y z"]})


def natural_questions() -> list[dict]:
    def record(example_id, long_start, shorts, yes_no="NONE"):
        return {"example_id": example_id, "question_text": "q", "document_text": "d",
                "annotations": [{"yes_no_answer": yes_no, "short_answers": [
                    {"start_token": s, "end_token": e} for s, e in shorts], "annotation_id": 1,
                    "long_answer": {"start_token": long_start, "end_token": long_start + 10 if long_start >= 0 else -1,
                                    "candidate_index": 0 if long_start >= 0 else -1}}]}

    return [record("-101", 5, [(7, 8), (9, 11)]), record("202", -1, []), record("303", 20, [], "YES"),
            record("404", 40, [])]


NQ_SUBMISSION = pd.DataFrame({"example_id": ["202_long", "-101_short", "-101_long", "202_short", "303_short",
                                             "303_long", "404_short", "404_long"],
                              "PredictionString": ["", "9:11", "5:15", "", "NO", "20:30", "", "41:50"]})


# --- mean column Spearman (google-quest) -----------------------------------------------------------------------------

def test_mean_column_spearman_is_scored_as_mle_bench_scores_google_quest(tmp_path):
    submission, answers = quest_frames()
    report = graded(tmp_path, QUEST, submission, answers)
    assert report.valid_submission and report.score == pytest.approx(0.08571, abs=1e-5)  # MLE-bench: 0.08571


def test_a_constant_column_scores_nan_where_the_grader_does_and_the_writer_never_writes_one(tmp_path):
    submission, answers = quest_frames()
    constant = submission.assign(**{QUEST.targets[3]: 0.5})
    report = graded(tmp_path, QUEST, constant, answers)
    assert report.valid_submission and np.isnan(report.score)  # MLE-bench: nan
    extra = submission.assign(note=1.0)  # the grader takes exactly the id and the 30 targets
    assert not graded(tmp_path, QUEST, extra, answers).valid_submission  # MLE-bench: invalid
    # cross-validation counts the constant column as ranking nothing, not as NaN
    assert metrics.score("mean_column_spearman", answers[list(QUEST.targets)].to_numpy(),
                         constant[list(QUEST.targets)].to_numpy()) == pytest.approx(
        np.mean([0.0 if c == QUEST.targets[3] else pd.Series(answers[c].to_numpy()).corr(
            pd.Series(constant[c].to_numpy()), method="spearman") for c in QUEST.targets]))
    written = build_submission(submission, QUEST, list(QUEST.targets),
                               Predictions(np.full((6, 30), 0.25), None, "prior"))
    assert (written[list(QUEST.targets)].nunique() == 6).all()  # each column ordered by the rows, a hair apart
    assert np.abs(written[list(QUEST.targets)].to_numpy() - 0.25).max() < 1e-5
    assert graded(tmp_path, QUEST, written, answers).score == pytest.approx(0.0, abs=0.6)  # a finite score


def test_varied_spreads_only_constant_columns():
    values = np.array([[1.0, 2.0], [1.0, 3.0], [1.0, 4.0]])
    spread = varied(values)
    assert spread[:, 1].tolist() == [2.0, 3.0, 4.0] and np.ptp(spread[:, 0]) > 0 and np.ptp(spread[:, 0]) < 1e-5


# --- Pearson (us-patent) ----------------------------------------------------------------------------------------------

def test_pearson_is_scored_as_mle_bench_scores_us_patent(tmp_path):
    spec = load_spec("us-patent")
    submission, answers = patent_frames()
    report = graded(tmp_path, spec, submission.assign(extra="kept out"), answers)  # extra columns are ignored
    assert report.valid_submission and report.score == pytest.approx(0.94915, abs=1e-5)  # MLE-bench: 0.94915
    zeros = submission.assign(score=0)  # the sample: a constant
    assert np.isnan(graded(tmp_path, spec, zeros, answers).score)  # MLE-bench: nan
    assert metrics.score("pearson", answers[["score"]].to_numpy(), np.zeros((6, 1))) == 0.0


# --- the bias-weighted AUC of decisions (jigsaw-unintended) ----------------------------------------------------------

def test_bias_auc_is_scored_as_mle_bench_scores_jigsaw_unintended(tmp_path):
    spec = load_spec("jigsaw-unintended")
    submission, answers = bias_frames()
    report = graded(tmp_path, spec, submission, answers)
    assert report.valid_submission and report.score == pytest.approx(0.78778, abs=1e-5)  # MLE-bench: 0.78778
    as_answers = submission.rename(columns={"prediction": "toxicity"})  # the grader takes its own column name too
    assert graded(tmp_path, spec, as_answers, answers).score == report.score
    assert graded(tmp_path, spec, submission.assign(prediction=0.0), answers).score == 0.5  # MLE-bench: 0.5
    assert not graded(tmp_path, spec, submission.drop(columns="prediction"), answers).valid_submission


def test_a_subgroup_of_one_class_scores_nan(tmp_path):
    spec = load_spec("jigsaw-unintended")
    submission, answers = bias_frames()
    answers["muslim"] = np.where(answers["toxicity"] >= 0.5, 0.0, answers["muslim"])  # mentions by civil ones only
    report = graded(tmp_path, spec, submission, answers)
    assert report.valid_submission and np.isnan(report.score)  # MLE-bench: nan


def test_the_decision_writer_puts_the_tuned_cut_on_the_graders_half_and_cv_scores_that_file(tmp_path):
    """Probabilities cut at the threshold where out-of-fold balanced accuracy peaks: the file the writer makes of
    them grades (with no subgroups) as cross-validation scored them."""
    rng = np.random.default_rng(0)
    y = (rng.random(300) < 0.15).astype(int)
    p = np.clip(0.1 + 0.3 * y + rng.normal(0, 0.12, 300), 0, 1)
    probabilities = np.column_stack([1 - p, p])
    cut, balanced = best_cut(y, p)
    assert cut < 0.5 and metrics.score("bias_auc", y, probabilities) == pytest.approx(balanced)
    mapped = decision_values(p, cut)
    assert ((mapped >= 0.5) == (p >= cut)).all() and (np.diff(mapped[np.argsort(p)]) >= 0).all()
    spec = dataclasses.replace(load_spec("jigsaw-unintended"), subgroup_columns=())  # the overall term alone
    sample = pd.DataFrame({"id": np.arange(300), "prediction": 0.0})
    written = build_submission(sample, spec, ["prediction"], Predictions(probabilities, (0, 1), "blend", (cut,)))
    validate_submission(written, sample, spec, ["prediction"])
    answers = pd.DataFrame({"id": np.arange(300), "toxicity": y * 0.9})
    assert graded(tmp_path, spec, written, answers).score == pytest.approx(balanced, abs=1e-5)


def test_bias_auc_of_one_subgroup_by_hand():
    """Four rows, one identity: overall, subgroup, BPSN and BNSP balanced accuracies, a power mean of one each; an
    AUC of 0 has no negative power, and the grader fails there."""
    truth = np.array([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    # decisions 1, 1, 1, 0: overall 0.75; subgroup (rows 0, 1) 0.5; BPSN (rows 1, 2) 0.5; BNSP (rows 0, 3) 1.0
    assert bias_auc(truth, np.array([0.9, 0.6, 0.6, 0.1])) == pytest.approx(0.6875)  # MLE-bench: 0.6875
    with pytest.raises(ValueError):  # decisions 1, 1, 0, 0: BPSN's rows 1 and 2 both wrong, an AUC of 0
        bias_auc(truth, np.array([0.9, 0.6, 0.2, 0.1]))  # MLE-bench: invalid (ZeroDivisionError)


# --- spans and texts ------------------------------------------------------------------------------------------------

def test_word_jaccard_is_scored_as_mle_bench_scores_tweets(tmp_path):
    spec = load_spec("tweet-sentiment")
    submission = pd.DataFrame({"textID": ["c3", "a1", "b2"], "selected_text": ["Going home", "I love it", ""]})
    report = graded(tmp_path, spec, submission, TWEETS)
    assert report.valid_submission and report.score == pytest.approx(0.41667, abs=1e-5)  # MLE-bench: 0.41667
    both_empty = TWEETS.assign(selected_text=["love it!", "", "going home"])
    assert not graded(tmp_path, spec, submission, both_empty).valid_submission  # MLE-bench: invalid (0 / 0)


def test_word_jaccard_samples_is_scored_as_mle_bench_scores_chaii(tmp_path):
    spec = load_spec("chaii")
    submission = pd.DataFrame({"id": ["q4", "q3", "q2", "q1"],
                               "PredictionString": ["raja", "", "दिल्ली", "1867 AD"]})
    report = graded(tmp_path, spec, submission, CHAII)
    assert report.valid_submission and report.score == pytest.approx(0.375, abs=1e-5)  # MLE-bench: 0.375
    empty = CHAII.assign(PredictionString=["", "x", "y", "z"])
    blank = submission.assign(PredictionString=["a", "b", "c", ""])  # both empty: 0, no error
    assert graded(tmp_path, spec, blank, empty).score == 0.0  # MLE-bench: 0.0
    numbers = submission.assign(PredictionString=[1867, 2, 3, 4])  # read back as numbers: not lower-cased
    assert not graded(tmp_path, spec, numbers, CHAII).valid_submission  # MLE-bench: invalid


def test_mean_levenshtein_is_scored_as_mle_bench_scores_billion_word(tmp_path):
    spec = load_spec("billion-word")
    submission = pd.DataFrame({"id": [2, 0, 1], "sentence": ["He said yes .", "The company said .",
                                                             "Sales rose 3 cent ."]})
    report = graded(tmp_path, spec, submission, SENTENCES)
    assert report.valid_submission and report.score == pytest.approx(2.66667, abs=1e-5)  # MLE-bench: 2.66667
    assert not graded(tmp_path, spec, submission.assign(sentence=["", "a", "b"]), SENTENCES).valid_submission


# --- orderings (AI4Code) --------------------------------------------------------------------------------------------

def test_kendall_tau_is_scored_as_mle_bench_scores_ai4code(tmp_path):
    spec = load_spec("ai4code")
    submission = pd.DataFrame({"id": ["nb2", "nb1"], "cell_order": ["y x z", "a c b e d"]})
    report = graded(tmp_path, spec, submission, ORDERS)
    assert report.valid_submission and report.score == pytest.approx(0.53846, abs=1e-5)  # MLE-bench: 0.53846
    assert inversions(np.array([2, 0, 1])) == 2 and inversions(np.array([0])) == 0
    unknown = submission.assign(cell_order=["y x w", "a c b e d"])
    assert not graded(tmp_path, spec, unknown, ORDERS).valid_submission  # MLE-bench: invalid
    short = submission.assign(cell_order=["y x", "a c b e d"])
    assert not graded(tmp_path, spec, short, ORDERS).valid_submission  # MLE-bench: invalid


# --- answers found in documents (tensorflow2-question-answering) -----------------------------------------------------

def test_found_answers_are_scored_as_mle_bench_scores_natural_questions(tmp_path):
    spec = load_spec("tf2-qa")
    report = graded(tmp_path, spec, NQ_SUBMISSION, natural_questions())
    assert report.valid_submission and report.score == pytest.approx(0.75, abs=1e-5)  # MLE-bench: 0.75
    blank = NQ_SUBMISSION.assign(PredictionString="")
    assert graded(tmp_path, spec, blank, natural_questions()).score == pytest.approx(0.375)  # MLE-bench: 0.375
    odd = NQ_SUBMISSION.assign(PredictionString=["", "9-11", "", "", "", "", "", ""])
    assert not graded(tmp_path, spec, odd, natural_questions()).valid_submission  # MLE-bench: invalid
    missing = NQ_SUBMISSION.iloc[1:]
    assert not graded(tmp_path, spec, missing, natural_questions()).valid_submission  # MLE-bench: invalid


def test_an_edge_is_measured_on_answers_read_from_json_lines(tmp_path):
    spec = load_spec("tf2-qa")
    graded(tmp_path, spec, NQ_SUBMISSION, natural_questions())
    NQ_SUBMISSION.assign(PredictionString="").to_csv(tmp_path / "blank.csv", index=False)
    found = compare(tmp_path / "submission.csv", tmp_path / "blank.csv", spec, tmp_path)
    assert found.value == pytest.approx(0.375) and found.low <= found.value <= found.high
