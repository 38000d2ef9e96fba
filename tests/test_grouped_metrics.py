"""Metrics averaged over parts (groups of rows, columns, tracks), graded as MLE-bench grades champs, stanford-covid
and smartphone-decimeter: values pinned to its graders' on the fixed answers built here, with their quirks (an
answer merged with every repeat of its id; a mask aligned by row position; rows paired by order within a trip)."""
import numpy as np
import pandas as pd
import pytest

from runner.common import metrics
from runner.common.grouped_metrics import group_log_mae, haversine_m, mcrmse, track_error
from runner.competition.catalog import load_spec
from runner.competition.grade import edge, grade
from runner.results.blend import MemberPredictions, choose_blend

TYPES = ["1JHC", "2JHH", "3JHC", "1JHC", "2JHH", "3JHC", "1JHC", "3JHC"]


def couplings() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(answers, a submission) of eight atom pairs of three coupling types; the submission's rows shuffled."""
    answers = pd.DataFrame({"id": [10, 11, 12, 13, 14, 15, 16, 17], "molecule_name": ["m1"] * 4 + ["m2"] * 4,
                            "atom_index_0": [1, 2, 3, 4, 1, 2, 3, 4], "atom_index_1": [0, 1, 0, 1, 0, 1, 0, 1],
                            "type": TYPES,
                            "scalar_coupling_constant": [90.0, -10.0, 3.0, 95.0, -12.0, 4.5, 88.0, 2.0]})
    predicted = [92.0, -11.0, 3.5, 93.0, -12.5, 4.0, 90.0, 3.0]
    submission = pd.DataFrame({"id": answers["id"], "scalar_coupling_constant": predicted}).iloc[[3, 0, 7, 1, 5, 2,
                                                                                                  6, 4]]
    return answers, submission


def _graded(tmp_path, competition: str, answers: pd.DataFrame, answers_file: str, submission: pd.DataFrame):
    private = tmp_path / "private"
    private.mkdir(exist_ok=True)
    answers.to_csv(private / answers_file, index=False)
    submission.to_csv(tmp_path / "submission.csv", index=False)
    return grade(tmp_path / "submission.csv", load_spec(competition), private)


def test_group_log_mae_is_the_mean_of_each_groups_log_mae():
    y, pred = np.array([1.0, 2.0, 10.0, 14.0]), np.array([2.0, 2.0, 10.0, 10.0])
    # groups a: MAE 0.5, b: MAE 2 -> (log 0.5 + log 2) / 2 = 0, whatever the sizes
    assert group_log_mae(y, pred, np.array(["a", "a", "b", "b"])) == pytest.approx(0.0)
    assert metrics.score("group_log_mae", y[:, None], pred[:, None], np.array([0, 0, 1, 1])) == pytest.approx(0.0)
    assert metrics.score("group_log_mae", y, pred) == pytest.approx(np.log(1.25))  # no groups: one group
    assert group_log_mae(np.ones(2), np.ones(2), np.array(["a", "a"])) == -np.inf


def test_champs_is_graded_per_coupling_type_as_mle_bench(tmp_path):
    answers, submission = couplings()
    report = _graded(tmp_path, "champs-scalar-coupling", answers, "answers.csv", submission)
    assert report.valid_submission and report.score == pytest.approx(0.0, abs=1e-5)  # MLE-bench: 0.0
    repeated = pd.concat([submission, submission.iloc[:1].assign(scalar_coupling_constant=99.0)])
    report = _graded(tmp_path, "champs-scalar-coupling", answers, "answers.csv", repeated)
    assert report.valid_submission and report.score == pytest.approx(0.07438, abs=1e-5)  # MLE-bench: 0.07438
    report = _graded(tmp_path, "champs-scalar-coupling", answers, "answers.csv", submission.iloc[1:])
    assert not report.valid_submission and "missing" in report.error  # MLE-bench: invalid, an id missing


def test_a_grouped_metric_scores_resamples_and_blends_by_group(tmp_path):
    answers, submission = couplings()
    spec = load_spec("champs-scalar-coupling")
    worse = submission.assign(scalar_coupling_constant=submission["scalar_coupling_constant"] + 3.0)
    gained = edge(spec, submission, worse, answers, rounds=200)
    assert gained.value > 0 and gained.low > 0
    y = answers[["scalar_coupling_constant"]].to_numpy()
    groups = answers["type"].to_numpy()
    exact = MemberPredictions("exact", y + 0.1, np.ones(len(y), bool), y[:2])
    rough = MemberPredictions("rough", y + 5.0, np.ones(len(y), bool), y[:2])
    blend = choose_blend("group_log_mae", y, [rough, exact], y.mean(axis=0), groups)
    assert blend.start == "exact" and blend.cv == pytest.approx(np.log(0.1))


def covid_answers() -> pd.DataFrame:
    """Two sequences of four bases, the first two of each scored (`keep`)."""
    rng = np.random.default_rng(3)
    ids = [f"id_a_{j}" for j in range(4)] + [f"id_b_{j}" for j in range(4)]
    keep = [True, True, False, False] * 2
    values = {c: np.where(keep, np.round(rng.uniform(0, 2, 8), 4), 0.0)
              for c in ("reactivity", "deg_Mg_pH10", "deg_pH10", "deg_Mg_50C", "deg_50C")}
    return pd.DataFrame({"id_seqpos": ids, **values, "keep": keep})


def covid_submission(answers: pd.DataFrame) -> pd.DataFrame:
    noise = np.random.default_rng(4).normal(0, 0.3, (len(answers), 5))
    columns = ["reactivity", "deg_Mg_pH10", "deg_pH10", "deg_Mg_50C", "deg_50C"]
    return answers[["id_seqpos"]].assign(**{c: np.round(answers[c] + noise[:, k], 4) for k, c in enumerate(columns)})


def test_mcrmse_is_the_mean_of_each_columns_rmse():
    y = np.array([[0.0, 1.0], [0.0, 1.0]])
    assert mcrmse(y, np.array([[1.0, 1.0], [1.0, 3.0]])) == pytest.approx((1.0 + np.sqrt(2.0)) / 2)


def test_covid_scores_three_columns_on_kept_rows_by_their_place_in_the_file(tmp_path):
    answers = covid_answers()
    submission = covid_submission(answers)
    report = _graded(tmp_path, "stanford-covid-vaccine", answers, "test.csv", submission)
    assert report.valid_submission and report.score == pytest.approx(0.24449, abs=1e-5)  # MLE-bench: 0.24449
    # the rows reversed: MLE-bench keeps the rows in the answers' kept places, not the kept ids
    report = _graded(tmp_path, "stanford-covid-vaccine", answers, "test.csv", submission.iloc[::-1])
    assert report.valid_submission and report.score == pytest.approx(0.84653, abs=1e-5)  # MLE-bench: 0.84653
    report = _graded(tmp_path, "stanford-covid-vaccine", answers, "test.csv", submission.drop(columns="deg_50C"))
    assert not report.valid_submission  # MLE-bench: invalid, every column of the five is required


def trips() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(answers, a submission) of two trips, metres off north and east in turn."""
    lat, lon = 37.4, -122.1
    rows = 6
    answers = pd.DataFrame({"tripId": ["2020-01-01-US-MTV-1-Pixel4"] * rows + ["2020-01-02-US-SJC-1-Pixel5"] * 4,
                            "UnixTimeMillis": 1_600_000_000_000 + 1000 * np.arange(rows + 4),
                            "LatitudeDegrees": lat + 1e-4 * np.arange(rows + 4), "LongitudeDegrees": lon})
    off = np.array([1, 2, 3, 4, 5, 30, 2, 2, 2, 2], dtype=float)
    submission = answers.assign(LatitudeDegrees=answers["LatitudeDegrees"] + off / 111_195.0,
                                LongitudeDegrees=answers["LongitudeDegrees"])
    return answers, submission


def test_haversine_metres_between_two_points():
    assert haversine_m(0.0, 0.0, 0.0, 1.0) == pytest.approx(2 * np.pi * 6_371_000 / 360)


def test_track_error_averages_each_trips_median_and_95th_percentile(tmp_path):
    answers, submission = trips()
    y = answers[["LatitudeDegrees", "LongitudeDegrees"]].to_numpy()
    pred = submission[["LatitudeDegrees", "LongitudeDegrees"]].to_numpy()
    first = np.mean(np.quantile([1, 2, 3, 4, 5, 30], [0.5, 0.95]))
    assert track_error(y, pred, answers["tripId"].to_numpy()) == pytest.approx((first + 2.0) / 2, rel=1e-3)
    report = _graded(tmp_path, "smartphone-decimeter-2022", answers, "test.csv", submission)
    assert report.valid_submission and report.score == pytest.approx(7.81249, abs=1e-5)  # MLE-bench: 7.81249
    swapped = pd.concat([submission.iloc[6:], submission.iloc[:6]])  # trips in another order: rows still pair
    assert _graded(tmp_path, "smartphone-decimeter-2022", answers, "test.csv", swapped).score == report.score
    reversed_trip = pd.concat([submission.iloc[:6].iloc[::-1], submission.iloc[6:]])  # paired by order within a trip
    report = _graded(tmp_path, "smartphone-decimeter-2022", answers, "test.csv", reversed_trip)
    assert report.score == pytest.approx(29.17648, abs=1e-5)  # MLE-bench: 29.17648
    moved = submission.assign(tripId=[submission["tripId"].iloc[6]] + list(submission["tripId"].iloc[1:]))
    report = _graded(tmp_path, "smartphone-decimeter-2022", answers, "test.csv", moved)
    assert not report.valid_submission and "rows" in report.error  # MLE-bench: invalid, a trip's row count
