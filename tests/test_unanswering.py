"""A unit that does not answer never holds the run. Whole runs of the toy engine (`runner run --engines toy`: its
folds sleep, so the run's timing is the scheduler's alone) against a nemesis that pauses part of the run's
process tree once the run reaches a point it waits for, in the manner of Jepsen's pause: every unit once a fold
has completed, the fork server once it has forked a unit, a unit before its first line once the server is up. Each
run must exit 0 by its budget with a valid submission, and its report must name each unit it killed, why, how,
when, and the function each of its threads was in.

The nemesis waits for its event rather than acting at a fixed second: on a core shared with another process the
runs' start-up takes twice as long, and a nemesis on the clock stopped a unit still importing (so no fold
completed) or raised its flag too late."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from conftest import EXIT_SLACK, TESTS, TOY_ENGINE, alive, children
from pace import paced
from runner.common.budget import Budget
from runner.competition.grade import grade
from runner.machine.hardware import GiB, Hardware
from runner.supervisor import run_competition
from runner.units.running import FINAL_SECONDS, GRACE_SECONDS
from runner.competition.catalog import load_spec
from runner.common.stacks import STACKS_WAIT

# seconds: the three runs start on one core together, so their first units start at 7 s and a first fold completes
# by 14 s (12 s and 20 s on a core shared with another process); a unit stopped after that is killed by its
# deadline's grace (9 s after its start) or the last moment the budget spares (2 s before its end). 26 s left a
# busy core's runs 2 s of window past their first fold, and the run whose server was stopped none for a later unit;
# 30 s did the same on a CPU 1.7x slower (an AVX2-only EPYC, its core to itself): first units at 18 s. Stretched by
# the machine's pace (tests/pace.py): at 38 s that EPYC's shared core still found no unit after a stopped server
BUDGET = paced(38)
FOLD = {"TOY_SLEEP": "2", "TOY_MAX_FOLD_SECONDS": "4"}  # each fold sleeps 2 s within a deadline 4 s after its start
# an after-fork hook the fork server inherits (every Python process of the run reads this file at start): the
# first unit forked once the flag file exists hangs there, after the fork and before the unit's own code, so
# before it calls os.setsid()
HANG_BEFORE_SETSID = '''
import multiprocessing.util, os, time

class _Hook:
    pass

_hook = _Hook()

def hang_before_setsid(_):
    try:
        os.unlink(os.environ["TOY_HANG_FLAG"])  # one unit only: whoever removes the flag
    except (KeyError, OSError):
        return
    while True:
        time.sleep(0.1)

multiprocessing.util.register_after_fork(_hook, hang_before_setsid)
'''


def tree(run: int) -> tuple[psutil.Process | None, list[psutil.Process]]:
    """The run's fork server and its units (children of the server, or started as `runner.units.worker`)."""
    cmdlines = {}
    for child in children(run):
        try:
            cmdlines[child] = child.cmdline()
        except psutil.Error:
            cmdlines[child] = []
    server = next((c for c, line in cmdlines.items() if "multiprocessing.forkserver" in " ".join(line)), None)
    units = [c for c, line in cmdlines.items() if line[1:3] == ["-m", "runner.units.worker"]]
    if server is not None:
        units += children(server.pid)
    return server, units


FOLD_COMPLETED = re.compile(r" fold \d+ completed: ")


class Nemesis(threading.Thread):
    """Once `ready(run pid, out)` holds (polled every 20 ms), does `act(run pid)` every 50 ms until the run ends."""

    def __init__(self, process: subprocess.Popen, out: Path, ready, act):
        super().__init__(daemon=True)
        self.process, self.out, self.ready, self.act, self.started = process, out, ready, act, time.monotonic()
        self.ready_at: float | None = None  # seconds into the run when its event came
        self.acted_at: float | None = None
        self.stopped: set[int] = set()  # the units it stopped

    def run(self) -> None:
        while self.process.poll() is None and self.ready_at is None:
            if self.ready(self.process.pid, self.out):
                self.ready_at = time.monotonic() - self.started
            else:
                time.sleep(0.02)
        while self.process.poll() is None:
            acted = self.act(self.process.pid, self.stopped) if self.act is stop_units else self.act(self.process.pid)
            if acted and self.acted_at is None:
                self.acted_at = time.monotonic() - self.started
            time.sleep(0.05)


def fold_completed(run: int, out: Path) -> bool:
    """A fold of the run completed (its log says so once the supervisor has collected it)."""
    try:
        return bool(FOLD_COMPLETED.search((out / "run.log").read_text(errors="replace")))
    except OSError:
        return False


def server_up(run: int, out: Path) -> bool:
    """The run's fork server is running (it starts while the run loads its data, before any unit)."""
    return tree(run)[0] is not None


def server_forked(run: int, out: Path) -> bool:
    """The run's fork server has forked a unit."""
    server, _ = tree(run)
    return server is not None and bool(children(server.pid))


def stop_units(run: int, stopped: set) -> bool:
    """SIGSTOP to every unit; the pids it reached go into `stopped`."""
    for unit in tree(run)[1]:
        try:
            unit.send_signal(signal.SIGSTOP)
            stopped.add(unit.pid)
        except psutil.Error:
            pass
    return bool(stopped)


def stop_server_once(state: dict):
    def act(run: int) -> bool:
        server, _ = tree(run)
        if state.get("stopped") or server is None:
            return False
        server.send_signal(signal.SIGSTOP)
        state["stopped"] = server.pid
        return True
    return act


def raise_flag(flag: Path):
    def act(run: int) -> bool:
        if not flag.exists() and "raised" not in act.__dict__:
            flag.touch()
            act.raised = True
            return True
        return False
    return act


def toy_start(spaceship: Path, out: Path, ready, act, env: dict | None = None):
    """The toy's whole run started, with the nemesis beside it (waiting for `ready`, then doing `act`), and a
    thread that reads its output and notes when it ended: each run's end is seen as it comes, not once the runs
    collected before it have ended too."""
    env = {**os.environ, **TOY_ENGINE, **FOLD, **(env or {})}
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "runner.cli", "run", "spaceship", "--data",
                                str(spaceship / "prepared" / "public"), "--budget", f"{BUDGET}s", "--out", str(out),
                                "--engines", "toy"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    nemesis = Nemesis(process, out, ready, act)
    nemesis.start()
    ended: dict = {}

    def wait() -> None:
        try:
            ended["stderr"] = process.communicate(timeout=BUDGET + 30)[1]
        except subprocess.TimeoutExpired:
            pass
        ended["wall"] = time.monotonic() - started

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    return process, nemesis, waiter, ended, out


def toy_end(process: subprocess.Popen, nemesis: Nemesis, waiter: threading.Thread, ended: dict, out: Path):
    """(exit code, wall seconds, report, stderr, nemesis, out) once the run ends."""
    waiter.join()
    if "stderr" not in ended:  # a runner that overran: it and what it left behind, stopped
        for child in psutil.Process(process.pid).children(recursive=True):
            child.kill()
        process.kill()
        ended["stderr"] = process.communicate()[1]
    return process.returncode, ended["wall"], json.loads((out / "report.json").read_text()), ended["stderr"], \
        nemesis, out


def assert_kept_its_promise(code, wall, report, stderr, spaceship, out):
    assert code == 0, stderr[-3000:]
    assert report["wall_seconds"] < BUDGET and wall < BUDGET + EXIT_SLACK, (report["wall_seconds"], wall)
    assert grade(out / "submission.csv", load_spec("spaceship"), spaceship / "prepared" / "private").valid_submission
    assert_killed_only_when_due(report)


def assert_killed_only_when_due(report):
    """No unit was killed before its deadline's grace (its deadline: its longest fold after its start, at most the
    training window's end), or the last moment the budget spares. A unit the nemesis stopped is killed then; so is
    one that was only slow, as on a busy core a unit still importing past its grace is (named with its stacks)."""
    started = {(u["member"], u["fold"]): u["start"] for u in report["units"]}
    window, last = Budget(BUDGET, 0.0).training_deadline, BUDGET - FINAL_SECONDS - STACKS_WAIT
    for killed in report["killed"]:
        deadline = min(started[(killed["member"], killed["fold"])] + float(FOLD["TOY_MAX_FOLD_SECONDS"]), window)
        assert killed["at"] >= min(deadline + GRACE_SECONDS, last) - 0.05, (killed, report["units"])


def assert_named_with_stacks(report, function: str = ""):
    """Every killed unit in the report with why, how, when, and its threads; `function` among them."""
    assert report["killed"], report["actions"]
    for killed in report["killed"]:
        assert killed["why"] and killed["how"].startswith("SIGKILL") and killed["at"] < BUDGET
        assert killed["stacks"] and not any(s.startswith("no stacks") for s in killed["stacks"]), killed
        assert all(s.startswith(("current thread: ", "thread 0x")) for s in killed["stacks"]), killed
        assert f"pid {killed['pid']}'s threads" in Path(killed["log"]).read_text()
        assert any(a["action"].startswith(f"killed {killed['member']} fold {killed['fold']}")
                   for a in report["actions"])
    assert any(function in s for k in report["killed"] for s in k["stacks"]), report["killed"]


def hang_hooks(folder: Path, flag: Path) -> dict:
    """The environment of a run whose first unit forked after `flag` appears hangs before os.setsid()."""
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(HANG_BEFORE_SETSID)
    return {"PYTHONPATH": os.pathsep.join([str(folder), str(TESTS)]), "TOY_HANG_FLAG": str(flag)}


@pytest.fixture(scope="module")
def paused(spaceship, tmp_path_factory) -> dict:
    """The three whole runs with their nemeses, side by side (their folds sleep: one core runs them all): every
    unit stopped once a fold has completed; the fork server stopped once it has forked a unit; a unit hung before
    it leads its own group, the first forked once the server is up."""
    root, state = tmp_path_factory.mktemp("paused"), {}
    flag = root / "hang-flag"
    runs = {"units stopped": (fold_completed, stop_units, None),
            "server stopped": (server_forked, stop_server_once(state), None),
            "hung before setsid": (server_up, raise_flag(flag), hang_hooks(root / "hooks", flag))}
    started = {name: toy_start(spaceship, root / name.replace(" ", "-"), ready, act, env)
               for name, (ready, act, env) in runs.items()}
    done = {name: toy_end(*run) for name, run in started.items()}
    return {**done, "server": state, "flag": flag, "data": spaceship}


@pytest.mark.slow
def test_a_run_whose_units_are_all_stopped_once_a_fold_completed_ends_on_time(paused):
    """Every unit alive once a fold had completed was stopped and never answered: each had its stacks taken at its
    deadline's grace and was killed, unless, resumed just long enough to write them, it finished meanwhile (its
    sleep was over): it is then collected as any unit that ended. None outlives the run."""
    code, wall, report, stderr, nemesis, out = paused["units stopped"]
    assert nemesis.ready_at is not None, "no fold completed"
    assert nemesis.stopped, "the nemesis stopped no unit"
    assert_kept_its_promise(code, wall, report, stderr, paused["data"], out)
    assert not [pid for pid in nemesis.stopped if alive(pid)]
    logs = [log.read_text() for log in out.glob("members/*/*/fold.log")]
    asked = [log for log in logs if "threads, before it is killed at its deadline:" in log]
    assert asked and all('  File "' in log for log in asked), logs
    if report["killed"]:
        assert_named_with_stacks(report)
    assert all(k["why"] == "at its deadline" for k in report["killed"])  # and none before it was due
    before = [f for f in report["folds"] if f["status"] == "completed"]
    assert before and report["status"] == "trained"  # what it learnt is its submission


@pytest.mark.slow
def test_a_run_whose_fork_server_stops_starts_its_units_another_way(paused):
    code, wall, report, stderr, nemesis, out = paused["server stopped"]
    assert nemesis.acted_at is not None, "the fork server forked no unit"
    assert_kept_its_promise(code, wall, report, stderr, paused["data"], out)
    stopped = paused["server"]["stopped"]
    replaced = [a for a in report["actions"] if f"fork server (pid {stopped}) is stopped" in a["action"]]
    assert replaced and "started as a process of its own" in replaced[0]["action"], report["actions"]
    member, fold = replaced[0]["action"].split(":")[0].split("/")  # the unit that found the server stopped
    first = next(u["start"] for u in report["units"] if (u["member"], u["fold"]) == (member, int(fold)))
    later = [u for u in report["units"] if u["start"] >= first and u["status"] == "completed"]
    assert later, report["units"]  # units went on starting and finishing after the server stopped


@pytest.mark.slow
def test_a_unit_hung_before_it_leads_its_own_process_group_is_killed_by_pid(paused):
    code, wall, report, stderr, nemesis, out = paused["hung before setsid"]
    assert nemesis.acted_at is not None and not paused["flag"].exists()  # a unit took the flag and hung
    assert_kept_its_promise(code, wall, report, stderr, paused["data"], out)
    assert_named_with_stacks(report, "hang_before_setsid (sitecustomize.py")
    # the unit that took the flag; on a busy core another may be killed at its deadline too (a unit slower than
    # its deadline's grace is overdue whatever it is doing), each named with its stacks above
    [hung] = [k for k in report["killed"] if any("hang_before_setsid" in s for s in k["stacks"])]
    assert "by pid (it led no process group yet)" in hung["how"] and hung["why"] == "at its deadline"


@pytest.mark.slow
def test_several_units_ignoring_sigterm_at_the_cut_are_killed_at_once(spaceship, tmp_path, monkeypatch):
    """Three units at once (the run is handed three cores as data), each sleeping past its deadline with SIGTERM
    ignored, as folds deep in a library call do: they are killed together, not one after another."""
    for key, value in {**TOY_ENGINE, "TOY_SLEEP": "100", "TOY_OVERRUN": "1", "TOY_MAX_FOLD_SECONDS": "60"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(TESTS))
    hardware = Hardware(gpus=(), cpus=3, ram_bytes=8 * GiB, shm_bytes=GiB, disk_free_bytes=50 * GiB)
    seconds, out = 12.0, tmp_path / "out"
    budget = Budget.start(seconds)
    report = run_competition("spaceship", spaceship / "prepared" / "public", budget, out, hardware=hardware,
                             engines=["toy"])
    assert budget.elapsed() < seconds
    assert grade(out / "submission.csv", load_spec("spaceship"), spaceship / "prepared" / "private").valid_submission
    assert len(report.killed) == 3, report.killed
    assert_named_with_stacks(report.to_json(), "train_fold (toy_engine.py")
    times = [k["at"] for k in report.killed]
    assert max(times) - min(times) < 0.5  # together
    started = time.time() - budget.elapsed()
    assert all(gone(k["pid"], started + k["at"]) for k in report.killed)


def gone(pid: int, killed_at: float) -> bool:
    """The killed unit is no more: its pid free, a zombie, or (the run reaps what it kills, so the pid may serve
    again) a process started after the kill."""
    try:
        process = psutil.Process(pid)
        return process.status() == psutil.STATUS_ZOMBIE or process.create_time() > killed_at
    except psutil.NoSuchProcess:
        return True


def test_an_import_the_supervisor_waits_on_never_holds_the_run_past_its_window(spaceship, tmp_path, monkeypatch):
    """The supervisor's scikit-learn import (its first result needs it) is waited for with the training window's
    close as its deadline: here one of the modules hangs, as an import on a busy core once held a 6 s run until its
    watchdog stopped it (exit 124); the run ends within its budget, exit 0, its baseline kept and the import named."""
    (tmp_path / "hung_scoring_import.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr("runner.supervisor.SCORING_MODULES", ("hung_scoring_import", "sklearn.metrics"))
    seconds, out = 6.0, tmp_path / "out"
    budget = Budget.start(seconds)
    report = run_competition("spaceship", spaceship / "prepared" / "public", budget, out, engines=["linear"],
                             max_members=1)
    assert budget.elapsed() < seconds
    assert report.status == "baseline" and "still importing hung_scoring_import" in report.stop_reason, report
    assert grade(out / "submission.csv", load_spec("spaceship"), spaceship / "prepared" / "private").valid_submission
