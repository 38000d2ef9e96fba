import numpy as np
import pandas as pd
import pytest

from runner.common.errors import InvalidSubmissionError
from runner.competition.catalog import load_spec
from runner.results.submission import (
    Predictions, build_submission, prior_predictions, publish, sample_baseline, validate_submission)

DOG = load_spec("dog-breed")
SPACESHIP = load_spec("spaceship")
NOMAD = load_spec("nomad2018")
CACTUS = load_spec("aerial-cactus")


def dog_sample(n=4, classes=("a", "b", "c")):
    return pd.DataFrame({"id": [f"x{i}" for i in range(n)], **{c: 1 / len(classes) for c in classes}})


def test_probabilities_are_clipped_and_renormalised():
    sample = dog_sample()
    raw = np.array([[2.0, -1.0, 0.0], [0.2, 0.2, 0.2], [np.nan, 1.0, 0.0], [1e-30, 1.0, 1.0]])
    sub = build_submission(sample, DOG, ["a", "b", "c"], Predictions(raw, ("a", "b", "c"), "test"))
    validate_submission(sub, sample, DOG, ["a", "b", "c"])
    values = sub[["a", "b", "c"]].to_numpy()
    assert np.allclose(values.sum(axis=1), 1.0, atol=1e-12) and (values > 0).all() and (values <= 1).all()


@pytest.mark.parametrize("row, message", [
    ([0.5, 0.5, 0.1], "sum to"),
    ([1.2, -0.1, -0.1], "outside"),
    ([0.5, 0.5, np.nan], "empty"),
])
def test_invalid_probability_rows_are_rejected(row, message):
    sample = dog_sample(1)
    sub = sample.copy()
    sub[["a", "b", "c"]] = [row]
    with pytest.raises(InvalidSubmissionError, match=message):
        validate_submission(sub, sample, DOG, ["a", "b", "c"])


def test_sum_tolerance_is_one_millionth():
    sample = dog_sample(1)
    sub = sample.copy()
    sub[["a", "b", "c"]] = [[0.5, 0.3, 0.2 + 5e-7]]
    validate_submission(sub, sample, DOG, ["a", "b", "c"])
    sub[["a", "b", "c"]] = [[0.5, 0.3, 0.2 + 2e-6]]
    with pytest.raises(InvalidSubmissionError):
        validate_submission(sub, sample, DOG, ["a", "b", "c"])


def test_ids_must_keep_the_sample_order_and_columns():
    sample = dog_sample()
    with pytest.raises(InvalidSubmissionError, match="row 0"):
        validate_submission(sample.iloc[::-1].reset_index(drop=True), sample, DOG, ["a", "b", "c"])
    with pytest.raises(InvalidSubmissionError, match="columns"):
        validate_submission(sample[["id", "b", "a", "c"]], sample, DOG, ["a", "b", "c"])
    with pytest.raises(InvalidSubmissionError, match="rows"):
        validate_submission(sample.iloc[:2], sample, DOG, ["a", "b", "c"])


def test_spaceship_labels_are_written_as_booleans_like_the_sample(tmp_path):
    sample = pd.DataFrame({"PassengerId": ["0001_01", "0002_01"], "Transported": [False, False]})
    preds = Predictions(np.array([[0.2, 0.8], [0.9, 0.1]]), (False, True), "test")
    sub = build_submission(sample, SPACESHIP, ["Transported"], preds)
    publish(sub, sample, SPACESHIP, ["Transported"], tmp_path / "submission.csv")
    assert (tmp_path / "submission.csv").read_text().splitlines() == ["PassengerId,Transported", "0001_01,True",
                                                                      "0002_01,False"]


def test_labels_of_another_type_than_the_sample_are_rejected():
    sample = pd.DataFrame({"PassengerId": ["0001_01"], "Transported": [False]})
    with pytest.raises(InvalidSubmissionError, match="True/False"):
        validate_submission(sample.assign(Transported=["yes"]), sample, SPACESHIP, ["Transported"])


def test_rmsle_predictions_are_clipped_at_zero_and_negative_ones_rejected():
    sample = pd.DataFrame({"id": [1, 2], "formation_energy_ev_natom": 0.1, "bandgap_energy_ev": 1.0})
    columns = list(NOMAD.targets)
    sub = build_submission(sample, NOMAD, columns, Predictions(np.array([[-0.5, 2.0], [0.3, -1.0]]), None, "t"))
    assert (sub[columns].to_numpy() >= 0).all()
    with pytest.raises(InvalidSubmissionError, match="negative"):
        validate_submission(sample.assign(bandgap_energy_ev=[-1.0, 1.0]), sample, NOMAD, columns)


def test_binary_probability_column_uses_the_positive_class():
    sample = pd.DataFrame({"id": ["a.jpg", "b.jpg"], "has_cactus": 0.5})
    sub = build_submission(sample, CACTUS, ["has_cactus"], Predictions(np.array([[0.1, 0.9], [0.7, 0.3]]),
                                                                        (0, 1), "t"))
    assert sub["has_cactus"].round(6).tolist() == [0.9, 0.3]


@pytest.mark.parametrize("spec, sample, columns", [
    (DOG, dog_sample(), ["a", "b", "c"]),
    (SPACESHIP, pd.DataFrame({"PassengerId": ["1", "2"], "Transported": [False, False]}), ["Transported"]),
    (NOMAD, pd.DataFrame({"id": [1], "formation_energy_ev_natom": [-0.1], "bandgap_energy_ev": [None]}),
     ["formation_energy_ev_natom", "bandgap_energy_ev"]),
    (CACTUS, pd.DataFrame({"id": ["a", "b"], "has_cactus": [None, 3.0]}), ["has_cactus"]),
])
def test_sample_baseline_is_valid_even_from_an_odd_sample(spec, sample, columns):
    validate_submission(sample_baseline(sample, spec, columns), sample, spec, columns)


def test_prior_baseline_is_the_class_frequency():
    preds = prior_predictions(np.array([0, 0, 0, 1]), ["a", "b"], 3)
    assert preds.values.shape == (3, 2) and np.allclose(preds.values[0], [0.75, 0.25])


def test_an_invalid_submission_never_replaces_the_last_valid_one(tmp_path):
    sample = dog_sample()
    path = tmp_path / "submission.csv"
    publish(sample_baseline(sample, DOG, ["a", "b", "c"]), sample, DOG, ["a", "b", "c"], path)
    before = path.read_text()
    broken = sample.assign(a=5.0)
    with pytest.raises(InvalidSubmissionError):
        publish(broken, sample, DOG, ["a", "b", "c"], path)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["submission.csv"]  # no temporary file left behind


def test_a_file_that_reads_back_wrong_never_replaces_the_last_valid_one(tmp_path):
    """The written file is read back and checked before the rename: a check that fails leaves the old file."""
    from runner.results.submission import write_atomic

    path = tmp_path / "submission.csv"
    write_atomic(pd.DataFrame({"id": [1], "y": [0.5]}), path)
    with pytest.raises(InvalidSubmissionError):
        write_atomic(pd.DataFrame({"id": [1], "y": [0.9]}), path,
                     lambda written: (_ for _ in ()).throw(InvalidSubmissionError(f"{written} is wrong")))
    assert pd.read_csv(path)["y"].tolist() == [0.5] and [p.name for p in tmp_path.iterdir()] == ["submission.csv"]


def test_background_writes_keep_only_the_newest_version_and_flush_waits_for_it(tmp_path, caplog):
    import threading

    from runner.common.latest_writes import LatestWrites

    started, release, written = threading.Event(), threading.Event(), []

    def slow(version):
        def write():
            started.set()
            release.wait(5)
            written.append(version)
        return write

    writes = LatestWrites()
    writes.put(tmp_path / "a", slow(1))
    assert started.wait(5)  # version 1 is being written: 2 and 3 wait, and 3 replaces 2
    writes.put(tmp_path / "a", lambda: written.append(2))
    writes.put(tmp_path / "a", lambda: written.append(3))
    writes.put(tmp_path / "b", lambda: 1 / 0)  # a failing write is said, and the others go on
    assert not writes.flush(timeout=0.2)
    release.set()
    assert writes.flush(timeout=5) and written == [1, 3]
    assert any("b: not written" in r.message for r in caplog.records)


def test_a_large_submission_is_written_in_the_background_and_on_disk_when_the_run_flushes(spaceship, tmp_path,
                                                                                          monkeypatch):
    from runner.results import run_folder as outputs_module
    from runner.common.budget import Budget
    from runner.results.run_folder import RunOutputs

    monkeypatch.setattr(outputs_module, "BACKGROUND_CELLS", 0)  # the spaceship's sample counts as large
    out = RunOutputs(SPACESHIP, spaceship / "prepared" / "public", tmp_path, Budget.start(60))
    assert out.writes is not None
    n = len(out.sample)
    for share in (0.1, 0.2, 0.7):
        out.publish(Predictions(np.column_stack([1 - np.full(n, share), np.full(n, share)]), (False, True), "t"))
    with pytest.raises(InvalidSubmissionError):  # still checked at once, before anything is put
        out.publish(Predictions(np.full((n - 1, 2), 0.5), (False, True), "short"))
    out.flush()
    written = pd.read_csv(tmp_path / "submission.csv")
    assert len(written) == n and written["Transported"].all()  # the newest (0.7), not the earlier ones (under 0.5)


def test_the_prior_of_values_is_their_best_constant_the_median_under_an_absolute_error():
    from runner.results.submission import prior_predictions

    y = np.array([[1.0], [2.0], [3.0], [100.0]])
    assert prior_predictions(y, None, 2, metric="mae").values.tolist() == [[2.5], [2.5]]
    assert prior_predictions(y, None, 2, metric="rmse").values.tolist() == [[26.5], [26.5]]
    assert "median" in prior_predictions(y, None, 1, metric="mae_integer").source
