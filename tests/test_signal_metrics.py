"""The metrics of the signal competitions, scored as MLE-bench's graders score them (values pinned from
freesound-audio-tagging-2019's, hms-harmful-brain-activity-classification's, icecube-neutrinos-in-deep-ice's and
predict-volcanic-eruptions-ingv-oe's graders on the same inputs), with the graders' checks; and cross-validation
scoring what the writer makes of the engines' output as the grader scores the file."""
import numpy as np
import pandas as pd
import pytest

from runner.common import metrics
from runner.common.direction_metrics import angles, unit_vectors
from runner.common.distribution_metrics import shares
from runner.competition.catalog import load_spec
from runner.competition.grade import grade
from runner.demo import replica
from runner.results.submission import Predictions, build_submission, validate_submission

VOTES = ["seizure_vote", "lpd_vote", "gpd_vote", "lrda_vote", "grda_vote", "other_vote"]


def graded(tmp_path, competition: str, submission: pd.DataFrame, answers: pd.DataFrame):
    spec = load_spec(competition)
    answers.to_csv(tmp_path / spec.answers_file, index=False)
    submission.to_csv(tmp_path / "submission.csv", index=False)
    return grade(tmp_path / "submission.csv", spec, tmp_path)


# --- lwlrap: freesound-audio-tagging-2019 ----------------------------------------------------------------------------

CLASSES = list(replica("freesound-audio-tagging-2019").CLASSES)
TAGS = {"a.wav": [0], "b.wav": [1, 2], "c.wav": [79], "d.wav": [3, 40]}
TAG_ANSWERS = pd.DataFrame([[name, *(int(j in tags) for j in range(80))] for name, tags in TAGS.items()],
                           columns=["fname", *CLASSES])


def tag_scores(names: list[str]) -> pd.DataFrame:
    """Scores with many ties: (7 j + 3 i) mod 11, tenths."""
    scores = np.array([[((j * 7 + i * 3) % 11) / 10 for j in range(80)] for i in range(len(names))])
    return pd.concat([pd.DataFrame({"fname": names}), pd.DataFrame(scores, columns=CLASSES)], axis=1)


def test_lwlrap_is_scored_as_mle_bench_scores_freesound_with_its_ties_and_checks(tmp_path):
    submission = tag_scores(["d.wav", "b.wav", "a.wav", "c.wav"])  # rows in another order
    report = graded(tmp_path, "freesound-audio-tagging-2019", submission, TAG_ANSWERS)
    assert report.valid_submission and report.score == pytest.approx(0.06819, abs=1e-5)  # MLE-bench: 0.06819
    shifted = submission.assign(**{c: submission[c] * 100 - 30 for c in CLASSES})  # any numbers: only the order
    assert graded(tmp_path, "freesound-audio-tagging-2019", shifted, TAG_ANSWERS).score == report.score
    swapped = submission[["fname", CLASSES[1], CLASSES[0], *CLASSES[2:]]]
    assert not graded(tmp_path, "freesound-audio-tagging-2019", swapped, TAG_ANSWERS).valid_submission  # MLE: None
    assert not graded(tmp_path, "freesound-audio-tagging-2019", submission[:3], TAG_ANSWERS).valid_submission
    tied = submission.assign(**{c: 0.5 for c in CLASSES})  # every class tied: counted against the truth
    assert graded(tmp_path, "freesound-audio-tagging-2019", tied, TAG_ANSWERS).score == pytest.approx(
        (1 / 80 + 2 * 2 / 80 + 1 / 80 + 2 * 2 / 80) / 6, abs=1e-5)


def test_lwlrap_of_engine_output_equals_the_grade_of_the_file_written(tmp_path):
    spec = load_spec("freesound-audio-tagging-2019")
    truth = TAG_ANSWERS[CLASSES].to_numpy(dtype=float)
    probabilities = np.clip(truth * 0.3 + np.linspace(0, 0.6, 80)[None, :] * np.array([[1], [0.5], [0.2], [0.9]]),
                            0, 1)
    cv = metrics.score("lwlrap", truth, probabilities)
    assert metrics.fast_score("lwlrap", truth, probabilities) == pytest.approx(cv)
    sample = TAG_ANSWERS.assign(**{c: 0 for c in CLASSES})
    written = build_submission(sample, spec, CLASSES, Predictions(probabilities, None, "test"))
    validate_submission(written, sample, spec, CLASSES)
    assert graded(tmp_path, spec.id, written, TAG_ANSWERS).score == pytest.approx(cv, abs=1e-5)


# --- KL divergence: hms-harmful-brain-activity-classification --------------------------------------------------------

VOTED = pd.DataFrame([[11, 3, 0, 0, 1, 0, 0], [11, 2, 0, 0, 2, 0, 0], [22, 0, 5, 5, 0, 0, 0], [33, 0, 0, 0, 0, 0, 7]],
                     columns=["eeg_id", *VOTES])  # an EEG's id repeated, as test.csv repeats it
GUESS = {11: [0.5, 0.1, 0.1, 0.2, 0.05, 0.05], 22: [0.0, 0.6, 0.3, 0.05, 0.05, 0.0], 33: [0.1] * 5 + [0.5]}


def test_kl_divergence_is_scored_as_mle_bench_scores_hms_with_its_checks(tmp_path):
    submission = pd.DataFrame([[k, *GUESS[k]] for k in (33, 11, 22, 11)], columns=["eeg_id", *VOTES])
    report = graded(tmp_path, "hms-harmful-brain-activity-classification", submission, VOTED)
    assert report.valid_submission and report.score == pytest.approx(0.41886, abs=1e-5)  # MLE-bench: 0.41886
    nearly = submission.assign(other_vote=submission["other_vote"] + 4e-6)  # sums to 1 at 5 decimals: valid
    assert graded(tmp_path, "hms-harmful-brain-activity-classification", nearly, VOTED).valid_submission
    off = submission.assign(other_vote=submission["other_vote"] + 0.01)
    assert not graded(tmp_path, "hms-harmful-brain-activity-classification", off, VOTED).valid_submission
    zero_extra = submission.assign(extra=0.0)  # Kaggle's metric reads it as a probability: 0 keeps the sums
    assert graded(tmp_path, "hms-harmful-brain-activity-classification", zero_extra, VOTED).score == report.score
    extra = submission.assign(extra=0.2)  # MLE-bench: None (the rows no longer add to one)
    assert not graded(tmp_path, "hms-harmful-brain-activity-classification", extra, VOTED).valid_submission
    missing = submission.drop(columns="grda_vote")
    assert not graded(tmp_path, "hms-harmful-brain-activity-classification", missing, VOTED).valid_submission


def test_kl_divergence_of_engine_output_equals_the_grade_of_the_distribution_written(tmp_path):
    """Values learned per class (a regression may give a negative one) are shared out by the writer, and the
    metric scores them as written."""
    spec = load_spec("hms-harmful-brain-activity-classification")
    truth = shares(VOTED[VOTES].to_numpy())
    learned = np.array([[0.6, 0.1, -0.05, 0.3, 0.0, 0.1]] * 2 + [[0.0, 0.5, 0.5, 0.1, 0.0, 0.0], [0.1] * 6])
    cv = metrics.score("kl_divergence", truth, learned)
    sample = VOTED.assign(**{v: 1 / 6 for v in VOTES})
    written = build_submission(sample, spec, VOTES, Predictions(learned, None, "test"))
    validate_submission(written, sample, spec, VOTES)
    assert np.allclose(written[VOTES].sum(axis=1), 1) and (written[VOTES] > 0).all().all()
    assert graded(tmp_path, spec.id, written, VOTED).score == pytest.approx(cv, abs=1e-5)


# --- mean angular error: icecube-neutrinos-in-deep-ice ---------------------------------------------------------------

DIRECTIONS = pd.DataFrame({"event_id": [5, 7, 9, 12], "azimuth": [0.1, 3.0, 5.5, 1.2], "zenith": [0.2, 1.5, 2.9, 0.0]})


def test_mean_angular_error_is_scored_as_mle_bench_scores_icecube_with_its_checks(tmp_path):
    # angles past their nominal ranges are directions too
    submission = pd.DataFrame({"event_id": [12, 9, 7, 5], "azimuth": [4.0, -0.8, 3.1, 6.3],
                               "zenith": [0.3, 3.3, 1.4, -0.2]})
    report = graded(tmp_path, "icecube-neutrinos-in-deep-ice", submission, DIRECTIONS)
    assert report.valid_submission and report.score == pytest.approx(0.31013, abs=1e-5)  # MLE-bench: 0.31013
    assert not graded(tmp_path, "icecube-neutrinos-in-deep-ice", submission.assign(extra=1), DIRECTIONS) \
        .valid_submission  # MLE-bench: None (the columns must be exactly these three)
    gap = submission.astype({"zenith": float})
    gap.loc[0, "zenith"] = np.nan
    assert not graded(tmp_path, "icecube-neutrinos-in-deep-ice", gap, DIRECTIONS).valid_submission
    words = submission.astype({"azimuth": object})
    words.loc[1, "azimuth"] = "north"
    assert not graded(tmp_path, "icecube-neutrinos-in-deep-ice", words, DIRECTIONS).valid_submission


def test_learned_vectors_are_written_as_the_angles_they_point_along(tmp_path):
    spec = load_spec("icecube-neutrinos-in-deep-ice")
    truth = unit_vectors(DIRECTIONS[["azimuth", "zenith"]].to_numpy())
    assert np.allclose(unit_vectors(angles(truth)), truth)  # angles and back
    learned = truth * np.array([[2.0], [0.5], [1.0], [3.0]]) + np.array([[0.1, -0.2, 0.0]])  # any length
    cv = metrics.score("mean_angular_error", truth, learned)
    sample = DIRECTIONS.assign(azimuth=1, zenith=1)
    written = build_submission(sample, spec, ["azimuth", "zenith"], Predictions(learned, None, "test"))
    validate_submission(written, sample, spec, ["azimuth", "zenith"])
    assert graded(tmp_path, spec.id, written, DIRECTIONS).score == pytest.approx(cv, abs=1e-5)
    assert metrics.score("mean_angular_error", truth, np.zeros((4, 3))) == pytest.approx(
        metrics.score("mean_angular_error", truth, np.tile([0.0, 0.0, 1.0], (4, 1))))  # no length: straight up


# --- MAE rounded: predict-volcanic-eruptions-ingv-oe -----------------------------------------------------------------

def test_mae_is_rounded_to_a_whole_number_half_to_even_as_mle_bench_rounds_volcanic(tmp_path):
    answers = pd.DataFrame({"segment_id": [101, 202, 303, 404], "time_to_eruption": [1000, 2000, 3000, 4000]})
    for errors, expected in (([1, 0, 1, 0], 0.0), ([3, 0, 3, 0], 2.0), ([5, 0, 0, 0], 1.0)):  # MLE: 0, 2, 1
        submission = answers.assign(time_to_eruption=answers["time_to_eruption"] + errors).iloc[::-1]
        assert graded(tmp_path, "predict-volcanic-eruptions-ingv-oe", submission, answers).score == expected
    assert not graded(tmp_path, "predict-volcanic-eruptions-ingv-oe", answers[:3], answers).valid_submission
