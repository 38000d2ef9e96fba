"""The one promise, whatever the layout: a run ends with a valid submission in the sample's columns and dtypes.
A fault anywhere leaves the best valid file and a report that says "failed" with its traceback; a string column
is never written as numbers; a sample that exists only inside a 7z archive is read where it lies; a competition
whose test rows no file describes gets the training labels' prior, not the sample back."""
import io
import json

import numpy as np
import pandas as pd
import py7zr
import pytest

from runner.common.budget import Budget
from runner.competition.spec import CompetitionSpec
from runner.machine.hardware import Hardware
from runner.results.submission import sample_baseline
from runner.supervisor import Supervisor, run_competition

ONE_CORE = Hardware(gpus=(), cpus=1, ram_bytes=4 * 2**30, shm_bytes=2**30, disk_free_bytes=10 * 2**30)


def table_competition(public, rows=60):
    public.mkdir(parents=True)
    rng = np.random.default_rng(0)
    x = rng.normal(size=rows)
    pd.DataFrame({"id": range(rows), "x": x, "y": 3 * x + 10}).to_csv(public / "train.csv", index=False)
    pd.DataFrame({"id": range(100, 120), "x": rng.normal(size=20)}).to_csv(public / "test.csv", index=False)
    pd.DataFrame({"id": range(100, 120), "y": 0.0}).to_csv(public / "sample_submission.csv", index=False)


def test_a_fault_anywhere_leaves_the_prior_and_a_report_that_says_failed_with_its_traceback(tmp_path, monkeypatch):
    table_competition(tmp_path / "public")

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a fault of the runner's own")

    monkeypatch.setattr(Supervisor, "make_plan", broken)  # after the prior is written, before anything trains
    report = run_competition("some-table", tmp_path / "public", Budget.start(60), tmp_path / "run",
                             hardware=ONE_CORE)
    assert report.status == "failed" and "ZeroDivisionError: a fault of the runner's own" in report.error
    assert "make_plan" in report.traceback or "broken" in report.traceback
    saved = json.loads((tmp_path / "run" / "report.json").read_text())
    assert saved["status"] == "failed" and saved["traceback"]  # on disk, not "running"
    written = pd.read_csv(tmp_path / "run" / "submission.csv")
    assert written["y"].round(6).nunique() == 1 and written["y"].iloc[0] == pytest.approx(10, abs=1.5)  # the mean


def test_a_text_column_is_never_written_as_a_number(tmp_path):
    """A mask written as run-length text, inferred without a spec: the most frequent training mask for every
    row, never the 0.0 a regression's fallback would write; and a fallback from the sample keeps its text."""
    public = tmp_path / "public"
    public.mkdir()
    masks = ["1 5 20 3", "", "7 2", "1 5 20 3", "30 4 40 4", "1 5 20 3"] * 10
    pd.DataFrame({"id": [f"i{k}" for k in range(60)], "rle_mask": masks}).to_csv(public / "train.csv", index=False)
    pd.DataFrame({"id": [f"t{k}" for k in range(8)], "rle_mask": "1 1"}).to_csv(public / "sample_submission.csv",
                                                                               index=False)
    report = run_competition("salt-like", public, Budget.start(60), tmp_path / "run", hardware=ONE_CORE)
    assert report.status in ("baseline", "trained") and report.error is None, report.error
    written = pd.read_csv(tmp_path / "run" / "submission.csv", keep_default_na=False)
    assert written["rle_mask"].tolist() == ["1 5 20 3"] * 8
    wrong = CompetitionSpec(id="w", task="tabular", metric="rmse", submission="regression", id_column="id",
                            targets=("rle_mask",))
    sample = pd.read_csv(public / "sample_submission.csv")
    assert sample_baseline(sample, wrong, ["rle_mask"])["rle_mask"].tolist() == ["1 1"] * 8


def test_a_sample_and_data_only_inside_7z_archives_end_valid(tmp_path):
    """statoil's layout: train.json.7z, test.json.7z and sample_submission.csv.7z, nothing unpacked."""
    public = tmp_path / "public"
    public.mkdir()
    rng = np.random.default_rng(0)

    def seven_zip(name, data: bytes):
        with py7zr.SevenZipFile(public / f"{name}.7z", "w") as archive:
            archive.writef(io.BytesIO(data), name)

    train = [{"id": f"a{k}", "band": rng.normal(size=4).tolist(), "inc_angle": float(rng.uniform(30, 45)),
              "is_iceberg": int(k % 3 == 0)} for k in range(60)]
    test = [{"id": f"b{k}", "band": rng.normal(size=4).tolist(), "inc_angle": "na"} for k in range(12)]
    seven_zip("train.json", json.dumps(train).encode())
    seven_zip("test.json", json.dumps(test).encode())
    seven_zip("sample_submission.csv", pd.DataFrame({"id": [r["id"] for r in test], "is_iceberg": 0.5})
              .to_csv(index=False).encode())
    report = run_competition("iceberg-like", public, Budget.start(60), tmp_path / "run", hardware=ONE_CORE,
                             engines=[])
    written = pd.read_csv(tmp_path / "run" / "submission.csv")
    assert report.status in ("baseline", "trained"), (report.error, report.traceback)
    assert written["id"].tolist() == [r["id"] for r in test]
    assert written["is_iceberg"].between(0, 1).all() and written["is_iceberg"].iloc[0] != 0.5  # the prior, 1/3


def test_test_rows_no_file_describes_get_the_training_labels_prior_not_the_sample(tmp_path, monkeypatch):
    table_competition(tmp_path / "public")
    (tmp_path / "public" / "test.csv").unlink()
    specs = tmp_path / "competitions" / "signal-like"
    specs.mkdir(parents=True)
    (specs / "spec.yaml").write_text("id: signal-like\ntask: tabular\nmetric: mae\nsubmission: regression\n"
                                     "id_column: id\ntargets: [y]\ntest_file: null\n")
    monkeypatch.setenv("RUNNER_COMPETITIONS", str(tmp_path / "competitions"))
    report = run_competition("signal-like", tmp_path / "public", Budget.start(60), tmp_path / "run",
                             hardware=ONE_CORE)
    assert report.status == "baseline" and "prior" in report.stop_reason
    written = pd.read_csv(tmp_path / "run" / "submission.csv")
    assert len(written) == 20 and written["y"].iloc[0] == pytest.approx(10, abs=1.5)  # the train mean, not 0.0
