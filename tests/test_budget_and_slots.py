import subprocess
import time

import numpy as np
import pytest

from runner.common.budget import Budget, parse_duration
from runner.common.errors import RunnerError
from runner.units.tasks import FoldResult, assign_folds
from runner.common.heap import HEAP_TUNABLES
from runner.units.processes import kill
from runner.units.deadlines import MIN_FIXED_SECONDS, MEASURED_SLACK, fold_deadline, fold_window, least_seconds
from runner.planning.registry import get_engine
from runner.planning.portfolio import Member


@pytest.mark.parametrize("text, seconds", [("2h", 7200), ("30m", 1800), ("1h30m", 5400), ("90s", 90), ("45", 45),
                                           ("0.5h", 1800)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "2d", "0s", "-5m"])
def test_bad_durations_name_the_flag(text):
    with pytest.raises(RunnerError, match="--budget"):
        parse_duration(text)


def test_budget_deadlines_are_absolute():
    budget = Budget(seconds=100, started=1000.0, cut=0.85)
    assert budget.deadline == 1100.0 and budget.training_deadline == 1085.0


def test_fold_deadline_is_an_equal_share_of_the_window_per_wave():
    assert fold_deadline(now=0, training_deadline=90, pending=3, slots=1) == 30
    assert fold_deadline(now=0, training_deadline=90, pending=3, slots=2) == 45  # two waves
    assert fold_deadline(now=60, training_deadline=90, pending=1, slots=1) == 90


def test_a_slot_is_counted_free_from_the_deadline_of_the_fold_running_in_it():
    """kuzushiji on 2 cores, 4 folds: its third fold started 2 s before its wave's second fold ended and counted
    that fold in its own wave: half the time left (9.6 s, 5 epochs), where the fourth, started beside no fold of
    its own, got the rest (18.8 s, 11 epochs). A running fold holds its slot until its deadline, no longer."""
    waves = [fold_deadline(now=0, training_deadline=50, pending=p, slots=2, busy_until=[25.0] * (4 - p))
             for p in (4, 3)]
    assert waves == [25.0, 25.0]  # one wave's folds share one deadline
    third = fold_deadline(now=25, training_deadline=50, pending=2, slots=2, busy_until=[27.0])
    assert third == 48.0  # the fourth fold gets the other slot from 27 s on: 23 s each
    assert fold_deadline(now=25, training_deadline=50, pending=3, slots=2, busy_until=[27.0]) == 37.5  # two waves
    assert fold_deadline(now=25, training_deadline=50, pending=2, slots=2, busy_until=[49.0]) == 37.5  # no room
    assert fold_deadline(now=0, training_deadline=90, pending=3, slots=2, need=50.0) == 90  # start-up: one wave


def test_a_cheap_fixed_time_fold_is_given_its_own_start_not_three_times_a_fit_of_a_second():
    """aptos' pixel member on a machine whose cores three test workers shared: folds planned at 0.8 s were cut at
    their 2.5 s deadline (three times the plan) with their 1 s fits done, their start on a busy core being part of
    their time. A fixed-time fold gets at least MIN_FIXED_SECONDS, never past the training deadline; a member whose
    folds are longer keeps its own plan and measured slack."""
    cheap = Member(name="pixels", engine="pixels", slot="cpu", settings=get_engine("pixels").Settings(), folds=5,
                   fold_seconds=0.83, min_fold_seconds=0.83, max_fold_seconds=2.5)
    deadline, need = fold_window(cheap, 10.0, 60.0, [], 5, 2)
    assert deadline == 10.0 + MIN_FIXED_SECONDS > 10.0 + cheap.max_fold_seconds and need >= cheap.min_fold_seconds
    assert fold_window(cheap, 58.0, 60.0, [], 1, 2)[0] == 60.0  # never past the window
    slow = cheap.model_copy(update=dict(max_fold_seconds=9.0))
    assert fold_window(slow, 10.0, 60.0, [], 5, 2)[0] == 19.0
    measured = [FoldResult(0, "completed", "pixels", train_seconds=7.9, wall_seconds=8.0, min_train_seconds=7.9)]
    assert fold_window(slow, 10.0, 60.0, measured, 4, 2)[0] == pytest.approx(10.0 + MEASURED_SLACK * 8.0)


def test_least_seconds_comes_from_usable_folds_only():
    done = FoldResult(0, "completed", startup_seconds=2, min_train_seconds=5, predict_seconds=1)
    failed = FoldResult(1, "failed", startup_seconds=0.1)
    assert least_seconds([failed]) is None
    assert least_seconds([done, failed]) == 8


def test_folds_are_stratified_when_every_class_can_be():
    y = np.array([0] * 30 + [1] * 6)
    ids = assign_folds(y, classification=True, folds=3, seed=0)
    assert all(((ids == k) & (y == 1)).sum() == 2 for k in range(3))


def test_folds_fall_back_to_plain_kfold_for_rare_classes():
    y = np.array([0] * 10 + [1])
    ids = assign_folds(y, classification=True, folds=3, seed=0)
    assert sorted(np.bincount(ids)) == [3, 4, 4]


def test_kill_takes_the_whole_process_group():
    process = subprocess.Popen(["bash", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    child = int(process.stdout.readline())
    kill(process)  # SIGKILL, not waited for
    process.wait(timeout=5)
    assert not alive(child)


def alive(pid: int) -> bool:
    """Running (a killed child may linger as a zombie until some parent reaps it: that counts as dead)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.1)
    return True


def test_units_fork_from_a_server_started_with_the_runners_heap_tunables(monkeypatch):
    import os
    from multiprocessing import forkserver

    from runner.units import processes

    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    processes.warm_up(())
    server = forkserver._forkserver._forkserver_pid  # glibc reads tunables at exec: the server's own environment
    environ, waited = b"", time.monotonic() + 10
    while not environ and time.monotonic() < waited:  # empty while the server is still between fork and exec
        environ = open(f"/proc/{server}/environ", "rb").read().replace(b"\0", b":")  # glibc splits it in place
        time.sleep(0.05)
    assert f"GLIBC_TUNABLES={HEAP_TUNABLES}:".encode() in environ
    assert "GLIBC_TUNABLES" not in os.environ  # the supervisor's own environment is as it was
    assert processes.unit_environment(2, None)["GLIBC_TUNABLES"] == HEAP_TUNABLES
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")  # a user's own setting wins
    assert processes.unit_environment(2, None)["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2"
