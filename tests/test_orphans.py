"""A unit whose fork server died stays in the run's process tree: the run is its subreaper, so the unit, re-parented
to the run rather than to init, is still watched, killed at its deadline and waited on. A whole run of the toy
engine (`runner run --engines toy`: its folds sleep past their deadlines, SIGTERM ignored) against a nemesis that
waits until a unit forked by the run's fork server is in its fold, then kills the server with SIGKILL."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from conftest import TOY_ENGINE, children
from pace import paced
from runner.common.stacks import stderr_of
from runner.competition.catalog import load_spec
from runner.competition.grade import grade

pytestmark = pytest.mark.slow  # a whole run in its own process

# seconds: start-up and a first wave of folds take 5-9 s (at 26 s, on a 1.7x slower CPU's shared core, no unit had
# reached its fold by the window's close; stretched by the machine's pace, tests/pace.py); each fold is killed 9 s
# after it starts
BUDGET = paced(34)
DEADLINE = 4  # seconds a fold is given (TOY_MAX_FOLD_SECONDS); it sleeps far past them, SIGTERM ignored
OVERRUN = {"TOY_SLEEP": "100", "TOY_OVERRUN": "1", "TOY_MAX_FOLD_SECONDS": str(DEADLINE)}
POLL = 0.05


def fork_server_of(run: int) -> psutil.Process | None:
    for child in children(run):
        try:
            if "multiprocessing.forkserver" in " ".join(child.cmdline()):
                return child
        except psutil.Error:
            continue
    return None


class KillTheForkServer(threading.Thread):
    """Waits until a unit forked by the run's fork server writes to its own fold.log (it is in its fold, in its own
    session), then SIGKILLs the server; from then on records the unit's parent and whether it was waited on (gone
    for good, not a zombie) while the run still ran."""

    def __init__(self, run: subprocess.Popen):
        super().__init__(daemon=True)
        self.run_process = run
        self.server: int | None = None
        self.orphan: psutil.Process | None = None
        self.parents: set[int] = set()  # the orphan's parent, each time it was looked at after the server died
        self.reaped = False  # the orphan was gone (waited on by its parent) before the run ended

    def run(self) -> None:
        while self.run_process.poll() is None and not self.reaped:
            self._watch() if self.orphan else self._strike()
            time.sleep(POLL)

    def _strike(self) -> None:
        server = fork_server_of(self.run_process.pid)
        units = children(server.pid) if server else []
        in_fold = [u for u in units if (log := stderr_of(u.pid)) is not None and log.name == "fold.log"]
        if in_fold:
            server.send_signal(signal.SIGKILL)
            self.server, self.orphan = server.pid, in_fold[0]

    def _watch(self) -> None:
        try:
            parent = self.orphan.ppid()
            if parent != self.server:  # the server's exit, and so the re-parenting, lags its SIGKILL on a busy core
                self.parents.add(parent)
        except psutil.NoSuchProcess:  # waited on by whoever its parent was
            self.reaped = self.run_process.poll() is None


@pytest.fixture(scope="module")
def orphaned(spaceship, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("orphaned") / "out"
    env = {**os.environ, **TOY_ENGINE, **OVERRUN}
    started = time.monotonic()
    # output to a file, not a pipe: the run is timed by its own exit, not by the last process holding its output
    # (a fold the test's nemesis orphaned inherits it; whether that one outlived the run is asserted below)
    log = out.parent / "run.err"
    with open(log, "w") as handle:
        run = subprocess.Popen([sys.executable, "-m", "runner.cli", "run", "spaceship", "--data",
                                str(spaceship / "prepared" / "public"), "--budget", f"{BUDGET}s", "--out", str(out),
                                "--engines", "toy"], env=env, stdout=subprocess.DEVNULL, stderr=handle)
    nemesis = KillTheForkServer(run)
    nemesis.start()
    try:
        run.wait(timeout=BUDGET + 30)
        stderr = log.read_text()
    finally:
        for child in psutil.Process(run.pid).children(recursive=True) if run.poll() is None else ():
            child.kill()  # what a runner that overran left behind
        if nemesis.orphan is not None and nemesis.orphan.is_running():
            nemesis.orphan.kill()  # an orphan the run lost: not left sleeping on this machine
    nemesis.join(5)
    return dict(code=run.returncode, wall=time.monotonic() - started, stderr=stderr, nemesis=nemesis, out=out,
                report=json.loads((out / "report.json").read_text()), run=run.pid, data=spaceship)


def test_a_unit_whose_fork_server_was_killed_stays_in_the_runs_tree_and_is_killed_at_its_deadline(orphaned):
    nemesis, report, out = orphaned["nemesis"], orphaned["report"], orphaned["out"]
    assert nemesis.orphan is not None, "no unit reached its fold while the nemesis watched"
    assert orphaned["code"] == 0, orphaned["stderr"][-3000:]
    assert orphaned["wall"] < BUDGET and report["wall_seconds"] < BUDGET
    private = orphaned["data"] / "prepared" / "private"
    assert grade(out / "submission.csv", load_spec("spaceship"), private).valid_submission
    # re-parented to the run, not to init: the run's own process tree still holds it
    assert nemesis.parents == {orphaned["run"]}, nemesis.parents
    [killed] = [k for k in report["killed"] if k["pid"] == nemesis.orphan.pid]
    assert killed["why"] == "at its deadline" and killed["how"].startswith("SIGKILL") and killed["at"] < BUDGET
    [unit] = [u for u in report["units"] if u["member"] == killed["member"] and u["fold"] == killed["fold"]]
    assert killed["at"] >= unit["start"] + DEADLINE  # at its deadline's grace, not before it
    assert any(s.startswith("current thread: ") for s in killed["stacks"]), killed  # where it was, from its log
    assert f"pid {killed['pid']}'s threads" in Path(killed["log"]).read_text()
    assert any(a["action"].startswith(f"killed {killed['member']} fold {killed['fold']}") for a in report["actions"])
    # and waited on by the run once killed: no zombie left in its tree
    assert nemesis.reaped
