"""Every competition beyond Lite, as its replica lays it out: the files its spec names are where MLE-bench's
prepare.py puts them, and a run that trains nothing (no engine asked for) still ends with a valid submission and a
report that says why, in seconds: the one promise, for every layout and every submission shape. The Lite ones are
run whole by tests/test_lite.py; MLE-bench's own graders score all of them in bench/mlebench.py."""
from pathlib import Path

import pandas as pd
import pytest

from runner.common.budget import Budget
from runner.common.csvfiles import find_sample, read_csv_file
from runner.competition.catalog import load_spec
from runner.competition.grade import grade
from runner.demo import replicas, write_demo
from runner.machine.hardware import Hardware
from runner.supervisor import run_competition

SPLITS = Path(__file__).resolve().parent.parent / "competitions" / "splits"
LITE = set((SPLITS / "low.txt").read_text().split()) | {"spaceship-titanic"}
BEYOND_LITE = sorted(set(replicas()) - LITE)
ONE_CORE = Hardware(gpus=(), cpus=1, ram_bytes=4 * 2**30, shm_bytes=2**30, disk_free_bytes=10 * 2**30)  # no card
BUDGET_SECONDS = 60  # the prior is written in a few seconds of it: nothing trains


def named_files(spec) -> list[str]:
    """The public files and folders a spec names."""
    return [n for n in (spec.train_file, spec.test_file, spec.image_dir, spec.test_image_dir, spec.items_file,
                        spec.test_items_file, spec.labels_file, spec.names_file, *spec.feature_files) if n]


@pytest.mark.parametrize("competition", BEYOND_LITE)
def test_each_replica_lays_out_its_files_and_its_prior_is_a_valid_submission(competition, tmp_path):
    spec = load_spec(competition)
    root = write_demo(competition, tmp_path / "data")
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    assert (public / "description.md").is_file() and (private / spec.answers_file).is_file()
    for name in named_files(spec):
        assert (public / name).exists(), f"{competition}: {name} is not in the replica's public folder"
    report = run_competition(competition, public, Budget.start(BUDGET_SECONDS), tmp_path / "run",
                             hardware=ONE_CORE, engines=[])
    assert report.status in ("baseline", "trained"), (report.status, report.error, report.traceback)
    assert report.stop_reason, "a run that trains nothing says why"
    graded = grade(tmp_path / "run" / "submission.csv", spec, private)
    assert graded.valid_submission, graded.error
    sample = find_sample(public, spec.sample_submission)
    if sample is not None:  # the submission keeps the sample's rows and columns
        written = pd.read_csv(tmp_path / "run" / "submission.csv", keep_default_na=False)
        given = read_csv_file(sample, literal=True)  # the sample as the competition ships it (a 7z, a zip...)
        assert list(written.columns) == list(given.columns) and len(written) == len(given)
