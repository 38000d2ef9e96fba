"""Runs that are stopped: SIGTERM ends a run cleanly, SIGKILL leaves the last valid submission, and a run in the
same output folder takes up the folds the stopped one finished."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pace import paced
from runner.competition.grade import grade
from runner.units.scheduler import TOO_LATE
from runner.competition.catalog import load_spec

pytestmark = pytest.mark.slow  # whole runs through processes, containers or Prefect: the fast subset leaves them out


def start(root: Path, out: Path, budget: float, *options: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "runner.cli", "run", "spaceship", "--data",
                             str(root / "prepared" / "public"), "--budget", f"{budget}s", "--out", str(out), *options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def finished_folds(out: Path) -> int:
    return sum(1 for p in out.glob("members/*/*/manifest.json") if json.loads(p.read_text())["status"] == "completed")


def completed_manifests(out: Path) -> dict[Path, str]:
    """The finished folds' manifests, by path, as written (not a member's prepare step's)."""
    texts = {p: p.read_text() for p in out.glob("members/*/*/manifest.json") if p.parent.name.isdigit()}
    return {p: text for p, text in texts.items() if json.loads(text)["status"] == "completed"}


def wait_for_folds(out: Path, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + paced(timeout)
    while finished_folds(out) < count:
        assert time.monotonic() < deadline, "the run finished no folds"
        time.sleep(0.2)


def graded(root: Path, out: Path):
    return grade(out / "submission.csv", load_spec("spaceship"), root / "prepared" / "private")


def test_sigterm_ends_the_run_cleanly_with_a_valid_submission(spaceship, tmp_path):
    out = tmp_path / "out"
    process = start(spaceship, out, 60)
    wait_for_folds(out, 5)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=20)
    assert process.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert "resumes" in stderr
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "interrupted" and "stopped by signal 15" in report["stop_reason"]
    assert report["members"] and report["blend"]["weights"]
    assert graded(spaceship, out).valid_submission and graded(spaceship, out).score > 0.75


def test_a_sigterm_while_the_scheduler_runs_is_raised_between_its_steps_not_inside_a_library_call(tmp_path):
    """Raised inside numpy's np.load (the blend reading a fold's predictions), SIGTERM's Interrupted came out as a
    TypeError and the run ended with status 1, not its clean stop; outside the scheduler it is raised at once."""
    import numpy as np

    from runner.common.budget import interrupt, interrupts_between_steps, raise_if_interrupted
    from runner.common.errors import Interrupted

    np.save(tmp_path / "val.npy", np.arange(10.0))
    before = signal.signal(signal.SIGTERM, lambda number, _frame: interrupt(number))
    try:
        with pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs at the next bytecode
        with pytest.raises(Interrupted, match="signal 15"):
            with interrupts_between_steps():
                os.kill(os.getpid(), signal.SIGTERM)
                loaded = np.load(tmp_path / "val.npy")  # a step the signal does not break
                assert loaded.sum() == 45.0
                raise_if_interrupted()  # the scheduler's next step
                pytest.fail("the interruption was not raised between steps")
        with interrupts_between_steps():
            pass  # none pending: nothing raised, and a later step raises nothing
        raise_if_interrupted()
    finally:
        signal.signal(signal.SIGTERM, before)


FINISHED_BUDGET = paced(20)  # seconds (tests/pace.py): the finished run's, and the killed and resumed runs' each
# the finished run trains the planned members (five on one core at this budget), no extra ones, and ends (about 9 s
# of 20 on a quiet core), as the resumed run does. The killed run is not held to them: on a core shared with another
# test's run its five members had once finished fewer than the 8 folds the kill waits for, where extras bring more
MEMBERS = ("--max-members", "5")


@pytest.fixture(scope="module")
def finished_run(spaceship, tmp_path_factory) -> Path:
    """A run that ended by itself: the uninterrupted run a killed and resumed one scores as, read by another test,
    copied and taken up again by a third."""
    out = tmp_path_factory.mktemp("finished") / "out"
    start(spaceship, out, FINISHED_BUDGET, *MEMBERS).communicate(timeout=paced(90))
    return out


def test_a_killed_run_resumes_from_its_finished_folds_and_scores_as_an_uninterrupted_one(spaceship, finished_run,
                                                                                         tmp_path):
    out = tmp_path / "killed"
    process = start(spaceship, out, FINISHED_BUDGET)
    wait_for_folds(out, 8)
    os.killpg(process.pid, signal.SIGKILL)  # the whole run, as a container kill would
    process.wait()
    time.sleep(2)  # fold processes of their own session end by their deadlines
    assert graded(spaceship, out).valid_submission  # the last submission written stays valid
    finished = completed_manifests(out)
    resumed = start(spaceship, out, FINISHED_BUDGET, *MEMBERS)  # held to the finished run's members: it ends too
    _, stderr = resumed.communicate(timeout=paced(90))
    assert resumed.returncode == 0, stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["resumed"]["folds_reused"] >= min(len(finished), 8) and "resumed:" in stderr
    # a reused fold is taken as it was, not trained again (which folds the kill caught varies: on a busy core no
    # member had all its folds finished, so none of them has to be reused whole)
    reused = {(name, fold) for name, folds in report["resumed"]["members"].items() for fold in folds}
    assert reused and all(completed_manifests(out)[path] == text for path, text in finished.items()
                          if (path.parent.parent.name, int(path.parent.name)) in reused)
    folds_done = {m["name"]: m["folds_done"] for m in report["members"]}
    assert all(folds_done[name] >= len(folds) for name, folds in report["resumed"]["members"].items())
    assert all(m["status"] == "reused" for m in report["members"]
               if len(report["resumed"]["members"].get(m["name"], ())) == m["folds"])
    # against a run of the same budget that nobody stopped (one of its own: the module's finished run)
    assert abs(graded(spaceship, out).score - graded(spaceship, finished_run).score) <= 0.02


def test_only_folds_of_the_same_member_data_and_code_are_reused(spaceship, finished_run):
    from runner.results.resume import code_fingerprint, data_fingerprint, reusable, unit_fingerprint

    out = finished_run
    data = data_fingerprint(spaceship / "prepared" / "public", load_spec("spaceship").to_json())
    found = reusable(out, data, code_fingerprint())
    assert found and all(r.results for r in found)
    assert reusable(out, "other data", code_fingerprint()) == []
    assert reusable(out, data, "other code") == []
    member = found[0].member
    other = member.model_copy(update=dict(split_seed=member.split_seed + 1))
    assert unit_fingerprint(member, 0, data, "c") != unit_fingerprint(other, 0, data, "c")
    assert unit_fingerprint(member, 0, data, "c") != unit_fingerprint(member, 1, data, "c")


def test_a_run_whose_members_were_all_trained_goes_on_from_their_blend(spaceship, finished_run, tmp_path):
    """Every planned member finished in the earlier run: the new one still blends them and spends its budget on
    extra members (or says why not), instead of falling back to the baseline."""
    out = tmp_path / "out"
    shutil.copytree(finished_run, out)
    again = start(spaceship, out, 15)
    _, stderr = again.communicate(timeout=60)
    assert again.returncode == 0, stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["resumed"]["folds_reused"] > 0
    assert report["status"] == "trained" and report["blend"]["weights"], report["stop_reason"]
    # it stopped for the window (closed, or too little left for another bag) or for CV, never for want of members
    reason = report["stop_reason"]
    assert reason.startswith("the training window closed") or TOO_LATE in reason \
        or "CV no longer improving" in reason, reason
    assert graded(spaceship, out).valid_submission and graded(spaceship, out).score > 0.75
