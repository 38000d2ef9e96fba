"""Unit processes and the fork server they come from: a start never waits long on a server that does not answer,
a kill reaches a unit whether or not it leads its own process group yet, and the run, as its units' subreaper,
waits on the orphans it adopts and nothing else. (Whole runs with a nemesis: tests/test_unanswering.py,
tests/test_orphans.py.)"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from runner.units import fork_server, processes


def sleep_with_a_child(seconds: float) -> None:
    """A unit that never calls os.setsid(): it stays in the fork server's group, with a child of its own."""
    subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
    time.sleep(seconds)


def gone(pid: int, within: float = 5.0) -> bool:
    until = time.monotonic() + within
    while time.monotonic() < until:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture()
def fresh_server():
    """This test's own server, and a fresh one for the tests after it."""
    fork_server.stop()
    yield
    fork_server.context(())
    fork_server.stop()


def test_a_stopped_fork_server_is_killed_and_replaced_at_once(fresh_server):
    fork_server.warm_up(())
    stopped = fork_server.server_pid()
    os.kill(stopped, signal.SIGSTOP)
    started = time.monotonic()
    said = fork_server.fork(time.sleep, (0.1,), "probe", (), seconds=30, keep=set())
    assert said == f"the fork server (pid {stopped}) is stopped: killed, a new one started"
    assert time.monotonic() - started < 5 and gone(stopped)
    assert fork_server.server_pid() != stopped and fork_server.killed(stopped)
    unit = fork_server.fork(time.sleep, (0.1,), "probe", (), seconds=60, keep=set())  # the new one serves
    unit.join(30)
    assert unit.exitcode == 0


def test_a_fork_server_hung_in_its_imports_is_given_up_on_and_the_unit_started_as_its_own_process(
        fresh_server, tmp_path, monkeypatch):
    (tmp_path / "hangs_at_import.py").write_text("import time\nwhile True:\n    time.sleep(1)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setattr(fork_server, "IDLE_SECONDS", 1.0)
    task, log = tmp_path / "task.json", tmp_path / "fold.log"
    task.write_text(json.dumps({"not": "a task"}))  # the unit fails on it: how it was started is what counts
    started = time.monotonic()
    child = processes.start(task, log, 1, None, preload=("hangs_at_import",), wait=30)
    assert time.monotonic() - started < 10
    assert "used no CPU for 1 s while a unit waited to start: killed, a new one started; this unit started as a " \
           "process of its own" in child.note
    assert isinstance(child.handle, subprocess.Popen)
    child.handle.wait(60)
    assert child.handle.args[1:3] == ["-m", "runner.units.worker"]
    said = log.read_text()
    assert child.poll() == 1 and ("task.json" in said or "Error" in said)  # it ran, and failed on the task


def test_a_unit_that_leads_no_group_is_killed_by_pid_with_its_descendants(fresh_server):
    fork_server.warm_up(())
    forked = fork_server.fork(sleep_with_a_child, (60,), "no group", (), seconds=60, keep=set())
    unit = processes.Child(forked)
    until = time.monotonic() + 10
    while len(unit.process.children()) < 1 and time.monotonic() < until:
        time.sleep(0.05)
    [grandchild] = unit.process.children()
    assert not unit.leads_group()
    os.kill(unit.pid, signal.SIGSTOP)  # stopped, too: SIGKILL needs no answer
    how = processes.kill(unit)
    assert how == "SIGKILL by pid (it led no process group yet) to 2 process(es)"
    assert gone(unit.pid) and gone(grandchild.pid)
    assert processes.kill(unit) == f"SIGKILL: {processes.ENDED}"


def test_after_two_servers_in_a_row_do_not_answer_units_start_without_asking_a_third(fresh_server):
    fork_server.warm_up(())
    for _ in range(fork_server.GIVE_UP_AFTER):
        os.kill(fork_server.server_pid(), signal.SIGSTOP)
        assert "is stopped: killed, a new one started" in fork_server.fork(time.sleep, (0,), "probe", (), 30, set())
    started = time.monotonic()
    assert fork_server.fork(time.sleep, (0,), "probe", (), 30, set()) == "2 fork servers in a row did not answer"
    assert time.monotonic() - started < 0.5


def exit_later(code: int, seconds: float) -> None:
    """A unit in its own session that exits with `code` after `seconds`."""
    os.setsid()
    time.sleep(seconds)
    os._exit(code)


def leave_a_straggler(pid_file: str) -> None:
    """A unit that starts a process in its session and ends at once, leaving it running."""
    os.setsid()
    straggler = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    Path(pid_file).write_text(str(straggler.pid))
    os._exit(0)


def until(condition, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def parent(pid: int) -> int | None:
    try:
        return psutil.Process(pid).ppid()
    except psutil.Error:
        return None


def zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.fixture()
def subreaper():
    """This test process as its descendants' subreaper, as the supervisor is; not after the test."""
    assert processes.adopt_orphans() is None  # Linux: it can be one
    yield
    processes.adopt_orphans(False)
    processes.reap()


def test_an_orphaned_unit_is_waited_on_with_its_exit_code_and_no_other_child_is(fresh_server, subreaper, tmp_path):
    fork_server.warm_up(())
    server = fork_server.server_pid()
    unit = processes.track(processes.Child(fork_server.fork(exit_later, (3, 1.0), "orphan", (), 60, set())))
    task, log = tmp_path / "task.json", tmp_path / "fold.log"
    task.write_text(json.dumps({"not": "a task"}))  # it exits with 1
    started = processes.start(task, log, 1, None, fork=False)  # a unit its Popen waits on
    os.kill(server, signal.SIGKILL)
    assert until(lambda: parent(unit.pid) == os.getpid())  # re-parented here, not to init
    assert until(lambda: zombie(unit.pid) and zombie(started.pid) and zombie(server), within=60)
    assert processes.reap() == [unit.pid]
    assert not psutil.pid_exists(unit.pid) and unit.poll() == 3  # its own code, though its server is dead
    assert zombie(server)  # left to multiprocessing, which waits on its server
    assert started.handle.wait(5) == 1  # left to its Popen: its code, not a stolen status read as 0


def test_what_a_unit_left_running_is_killed_when_the_run_ends(fresh_server, subreaper, tmp_path):
    fork_server.warm_up(())
    pid_file = tmp_path / "straggler"
    unit = fork_server.fork(leave_a_straggler, (str(pid_file),), "straggler", (), 60, set())
    processes.track(processes.Child(unit))
    assert until(lambda: pid_file.exists() and pid_file.read_text() != "")
    straggler = int(pid_file.read_text())
    assert until(lambda: parent(straggler) == os.getpid())  # its unit ended: it is the run's now
    processes.shutdown()
    assert gone(straggler)
    assert until(lambda: processes.reap() is not None and not psutil.pid_exists(straggler))  # and waited on


def has_colorsys(out: str) -> None:
    """A unit that writes whether its fork server had imported colorsys (nothing in the runner imports it)."""
    Path(out).write_text(str("colorsys" in sys.modules))


def test_a_server_started_without_a_module_asked_for_is_replaced_only_when_asked(fresh_server, tmp_path):
    """A fork server started before the plan is known (the data not read yet) may lack a library the plan's
    members train with: every unit forked from it would import it again. Asked to, `warm_up` replaces it with one
    that has it; a server that has every module asked for, or one not asked to be replaced, stays."""
    assert fork_server.warm_up(("json",)) == []
    first = fork_server.server_pid()
    assert fork_server.warm_up(("json",), replace_lacking=True) == [] and fork_server.server_pid() == first
    assert fork_server.warm_up(("colorsys",)) == [] and fork_server.server_pid() == first  # not asked to
    assert fork_server.warm_up(("json", "colorsys"), replace_lacking=True) == ["colorsys"]
    second = fork_server.server_pid()
    assert second != first and gone(first) and fork_server.killed(first)
    assert fork_server.lacking(("colorsys",)) == [] and fork_server.lacking(("json", "wave")) == ["wave"]
    unit = fork_server.fork(has_colorsys, (str(tmp_path / "said"),), "probe", ("colorsys",), seconds=60, keep=set())
    unit.join(30)
    assert unit.exitcode == 0 and (tmp_path / "said").read_text() == "True"
    assert fork_server.server_pid() == second


# a process that leaves as the runner's own processes do once their work is written: a buffered line on stdout, an
# exit handler, a thread still writing and a log file handler, each of which a normal exit honours; and an object
# whose finaliser runs only in the interpreter's teardown, which leaving skips
LEAVES = """import atexit, logging, sys, threading, time
from pathlib import Path
from runner.common.leaving import leave
out = Path(sys.argv[1])
class TornDown:
    def __del__(self):
        (out / "torn-down").write_text("teardown ran")
kept = TornDown()
atexit.register(lambda: (out / "atexit").write_text("ran"))
threading.Thread(target=lambda: (time.sleep(0.3), (out / "thread").write_text("ended"))).start()
logging.basicConfig(filename=out / "run.log", level=logging.INFO)
logging.getLogger("runner").info("the last line of the log")
sys.stdout.write("no newline, not flushed")
leave(3)
"""


def test_a_process_that_leaves_keeps_what_a_normal_exit_keeps_but_the_teardown(tmp_path):
    """The measuring process, a unit started on its own and the command line leave without the interpreter's
    teardown (2.5 s of CPU after torch's and timm's import on a 2-core EPYC): their exit status, output, exit
    handlers, threads and log are as a normal exit leaves them."""
    done = subprocess.run([sys.executable, "-c", LEAVES, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "no newline, not flushed"
    assert (tmp_path / "atexit").read_text() == "ran" and (tmp_path / "thread").read_text() == "ended"
    assert "the last line of the log" in (tmp_path / "run.log").read_text()
    assert not (tmp_path / "torn-down").exists()  # what leaving saves: the teardown never ran

