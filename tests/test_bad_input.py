"""Bad input: a clear message naming the file or field, and a valid submission whenever the test ids are readable."""
import json
import shutil

import numpy as np
import pandas as pd
import pytest

from conftest import TOY_ENGINE, run_cli
from pace import paced
from runner.competition.catalog import load_spec
from runner.results.submission import validate_submission
from runner.data.targets import value_columns

pytestmark = pytest.mark.slow  # whole runs through processes, containers or Prefect: the fast subset leaves them out

SPACESHIP = load_spec("spaceship")


@pytest.fixture
def public(spaceship, tmp_path):
    """A private copy of the spaceship demo's public folder that a test may damage."""
    target = tmp_path / "public"
    shutil.copytree(spaceship / "prepared" / "public", target)
    return target


# A run that ends at its error (or with nothing to learn) ends seconds in, whatever its budget: the budget only has to
# outlast its start and its baseline on a busy core (at 8 s the watchdog once fired while a slow start still wrote it)
ENDS = "60s"
# A run that must train (what survives the damage is what a model learns from): one engine, LightGBM, which trained
# first in every run here anyway, and one member (`--max-members 1`): the run ends once its folds are trained (4 s on
# a quiet 2-core machine, 6 s on one core; 16.5 s of 20 when bags filled the window), so the budget is only a
# ceiling for a busy core. There the run had planned at 4.3 s, its first fold waited for the server's imports and
# stopped having learned nothing at 7-7.6 s, and the second learned in 0.5 s; at 8 s with every table engine such
# runs trained nothing, at 10 s half of them; at 12 s, with four test workers on two cores, four of nine ended with
# the baseline (the window closed at 10.2 s before a fold learned): 20 s, stretched by the machine's pace
# (tests/pace.py; a ceiling: the run ends once its member is trained): on a CPU whose imports took 2.7x as long a
# fold was stopped before it learned at 20 s
TRAINS = f"{paced(20)}s"
# A run whose point is the submission's rows (the sample found under another name, the test file's ids without
# one): planned with the tests' engine that plans nothing (conftest.TOY_ENGINE), it ends once its baseline is written
NO_MEMBERS = dict(engines="toyprep", env=TOY_ENGINE)


def run(public, tmp_path, budget=ENDS, competition="spaceship", engines: str | None = None, env: dict | None = None,
        options: tuple[str, ...] = ()):
    out = tmp_path / "out"
    result = run_cli("run", competition, "--data", str(public), "--budget", budget, "--out", str(out),
                     *(["--engines", engines] if engines else []), *options, env=env)
    return result, out


def trained_run(public, tmp_path, competition="spaceship"):
    """A run that is to train a model on the damaged input: one LightGBM member, and it ends."""
    return run(public, tmp_path, TRAINS, competition, "lightgbm", options=("--max-members", "1"))


def assert_learned(report):
    """A model learned from what the damage left: the run trained its one member and ended, its blend is the
    submission, and its CV is above the class prior's (a fold stopped before it learned scores the prior, and the
    run then keeps the baseline)."""
    assert report["status"] == "trained", (report["status"], report["error"], report["stop_reason"])
    assert "1 member is the most this run trains" in report["stop_reason"] or \
        report["stop_reason"].startswith("the training window closed"), report["stop_reason"]
    assert report["submission_source"].startswith("blend:"), report["submission_source"]
    assert report["cv_score"] > report["baseline_cv_score"], (report["cv_score"], report["baseline_cv_score"])


def assert_valid_submission(public, out):
    sample = pd.read_csv(public / "sample_submission.csv")
    validate_submission(pd.read_csv(out / "submission.csv"), sample, SPACESHIP, value_columns(SPACESHIP, sample))


def test_missing_train_file_is_named_and_a_baseline_is_still_written(public, tmp_path):
    (public / "train.csv").unlink()
    result, out = run(public, tmp_path)
    assert result.returncode == 2
    assert "train.csv" in result.stderr and "not found" in result.stderr
    assert_valid_submission(public, out)
    assert json.loads((out / "report.json").read_text())["status"] == "error"


def test_unreadable_train_file_is_named(public, tmp_path):
    (public / "train.csv").write_bytes(b"PK\x03\x04 not really a zip")
    result, out = run(public, tmp_path)
    assert result.returncode == 2 and "train.csv" in result.stderr and "cannot read" in result.stderr
    assert_valid_submission(public, out)


def test_a_bad_row_is_skipped_and_named_by_its_line(public, tmp_path):
    lines = (public / "train.csv").read_text().splitlines()
    lines.insert(3, lines[3] + ",1,2")  # line 4 of the file: two fields too many
    (public / "train.csv").write_text("\n".join(lines) + "\n")
    result, out = trained_run(public, tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert any("train.csv: skipped line 4" in w for w in report["warnings"])
    assert_learned(report)
    assert_valid_submission(public, out)


@pytest.mark.parametrize("damage, warning", [
    (lambda text: text.encode("latin-1"), "not UTF-8; read as latin-1"),
    (lambda text: text.replace(",", ";").encode(), "separated by ';'"),
])
def test_an_unknown_competition_with_a_latin1_or_semicolon_train_file_is_still_trained(public, tmp_path, damage,
                                                                                        warning):
    """Inference reads the train file before anything else is trained: it reads what the loader reads."""
    train = pd.read_csv(public / "train.csv")
    train.loc[0, "Name"] = "Zoë Ångström"  # a letter UTF-8 and Latin-1 write differently
    (public / "train.csv").write_bytes(damage(train.to_csv(index=False)))
    result, out = trained_run(public, tmp_path, competition="my-own-spaceship")
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert any(warning in w for w in report["warnings"])
    assert_learned(report)
    assert_valid_submission(public, out)


def test_a_sample_submission_under_another_name_is_found(public, tmp_path):
    (public / "sample_submission.csv").rename(public / "sampleSubmission.csv")
    result, out = run(public, tmp_path, **NO_MEMBERS)
    assert result.returncode == 0, result.stderr
    sample = pd.read_csv(public / "sampleSubmission.csv")
    validate_submission(pd.read_csv(out / "submission.csv"), sample, SPACESHIP, value_columns(SPACESHIP, sample))


def test_a_known_competition_without_its_sample_submits_the_test_files_ids(public, tmp_path):
    sample = pd.read_csv(public / "sample_submission.csv")
    (public / "sample_submission.csv").unlink()
    result, out = run(public, tmp_path, **NO_MEMBERS)
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert any("sample_submission.csv not found: the submission's rows are test.csv's" in w for w in report["warnings"])
    validate_submission(pd.read_csv(out / "submission.csv"), sample, SPACESHIP, value_columns(SPACESHIP, sample))


def test_an_unknown_competition_whose_train_file_cannot_be_read_keeps_the_sample_submission(public, tmp_path):
    (public / "train.csv").write_bytes(b"\x1f\x8b broken gzip")
    result, out = run(public, tmp_path, competition="my-own-spaceship")
    assert result.returncode == 2 and "train.csv" in result.stderr and "cannot read" in result.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "error" and "train.csv" in report["spec"]["note"]  # inference said so too
    assert_valid_submission(public, out)


def test_labels_of_one_class_give_a_constant_prediction_and_say_so(public, tmp_path):
    train = pd.read_csv(public / "train.csv")
    train["Transported"] = True
    train.to_csv(public / "train.csv", index=False)
    result, out = run(public, tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "baseline" and "nothing to learn" in report["stop_reason"]
    assert "Traceback" not in result.stderr
    assert_valid_submission(public, out)
    assert pd.read_csv(out / "submission.csv")["Transported"].eq(True).all()


def test_truncated_train_file_keeps_its_whole_rows(public, tmp_path):
    text = (public / "train.csv").read_text()
    (public / "train.csv").write_text(text[: len(text) // 2])  # cut in the middle of a row
    result, out = trained_run(public, tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert_learned(report)
    assert any("train.csv" in w and "Transported" in w for w in report["warnings"])
    assert_valid_submission(public, out)


def test_labels_with_gaps_are_dropped_with_a_warning(public, tmp_path):
    train = pd.read_csv(public / "train.csv")
    train["Transported"] = train["Transported"].astype(object)
    train.loc[:9, "Transported"] = None
    train.to_csv(public / "train.csv", index=False)
    result, out = trained_run(public, tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert any("dropped 10 row(s)" in w and "Transported" in w for w in report["warnings"])
    assert_learned(report)


def test_a_label_column_with_no_value_is_an_error_naming_it(public, tmp_path):
    train = pd.read_csv(public / "train.csv")
    train["Transported"] = None
    train.to_csv(public / "train.csv", index=False)
    result, out = run(public, tmp_path)
    assert result.returncode == 2 and "Transported" in result.stderr
    assert_valid_submission(public, out)


def test_test_file_missing_ids_is_named(public, tmp_path):
    test = pd.read_csv(public / "test.csv")
    test.iloc[5:].to_csv(public / "test.csv", index=False)
    result, out = run(public, tmp_path)
    assert result.returncode == 2 and "test.csv" in result.stderr and "id(s)" in result.stderr
    assert_valid_submission(public, out)


def test_unreadable_sample_submission_is_named_and_nothing_is_written(public, tmp_path):
    (public / "sample_submission.csv").write_text("")
    result, out = run(public, tmp_path)
    assert result.returncode == 2 and "sample_submission.csv" in result.stderr
    assert not (out / "submission.csv").exists()


def test_unknown_competition_without_data_lists_the_known_ones(tmp_path):
    result, _ = run(tmp_path / "nowhere", tmp_path, competition="not-a-competition")
    assert result.returncode == 2
    assert "not-a-competition" in result.stderr and "spaceship-titanic" in result.stderr
    assert "Traceback" not in result.stderr


def test_unknown_competition_with_data_is_inferred_and_trained(public, tmp_path):
    result, out = trained_run(public, tmp_path, competition="my-own-spaceship")
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["spec"]["inferred"]
    assert_learned(report)
    assert_valid_submission(public, out)


def test_the_sample_as_given_is_the_first_submission_but_never_replaces_an_earlier_runs(public, tmp_path):
    from runner.results.submission import write_given_sample

    out = tmp_path / "out"
    write_given_sample(public, out)  # before anything else is read: a fresh folder gets the sample as it is
    assert (out / "submission.csv").read_text() == pd.read_csv(public / "sample_submission.csv").to_csv(index=False)
    (out / "submission.csv").write_text("an earlier run's submission")
    write_given_sample(public, out)  # a resumed run keeps it until its own checked baseline replaces it
    assert (out / "submission.csv").read_text() == "an earlier run's submission"


def _duplicate_train_rows(public):
    train = pd.read_csv(public / "train.csv")
    pd.concat([train, train.head(50)]).to_csv(public / "train.csv", index=False)


def _infinite_features(public):
    for name in ("train.csv", "test.csv"):
        frame = pd.read_csv(public / name)
        frame.loc[::7, "Age"] = float("inf")
        frame.loc[::11, "RoomService"] = float("-inf")
        frame.loc[::5, "Spa"] = None
        frame.to_csv(public / name, index=False)


def _header_only(name):
    def damage(public):
        pd.read_csv(public / name).head(0).to_csv(public / name, index=False)
    return damage


@pytest.mark.parametrize("damage, trains, says", [
    (_duplicate_train_rows, True, None),
    (_infinite_features, True, None),
    (_header_only("train.csv"), False, "train.csv: train file has no rows"),
    (_header_only("test.csv"), False, "test.csv: test file has no rows"),
])
def test_a_corpus_of_damaged_inputs_each_says_what_and_keeps_a_valid_submission(public, tmp_path, damage, trains,
                                                                               says):
    damage(public)
    result, out = trained_run(public, tmp_path) if trains else run(public, tmp_path)
    report = json.loads((out / "report.json").read_text())
    assert "Traceback" not in result.stderr
    assert_valid_submission(public, out)
    if trains:
        assert result.returncode == 0, result.stderr[-2000:]
        assert_learned(report)
    else:
        assert result.returncode == 2 and report["status"] == "error" and says in report["error"], report["error"]


def test_infinite_feature_values_reach_the_engines_as_missing(public, tmp_path):
    from runner.data.loading import load_dataset

    _infinite_features(public)
    train, test = load_dataset(SPACESHIP, public, tmp_path).views["table"]
    for frame in (train, test):
        numbers = frame.select_dtypes("number").to_numpy()
        assert not np.isinf(numbers).any() and np.isnan(frame["Age"]).sum() >= len(frame) // 7
