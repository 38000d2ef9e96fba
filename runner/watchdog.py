"""The run's last guard: whatever stage a run is in, it ends before its budget does, and no unit it started
outlives it (the supervisor's own threads into its log, every unit killed, the report marked stopped)."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from pathlib import Path

from runner.common.budget import Budget

WATCHDOG_MARGIN = 0.5  # seconds before the budget's end at which a run that is still going is stopped
# the unit processes' module, looked up by name, never imported from here: a run that never started a unit (a plan,
# a grade) has nothing to end and pays for no import (tests/test_layout.py holds the name to the module)
PROCESSES = "runner.units.processes"
# the monitor's samples the stopped report's card figures read at most, evenly spaced: a day's run writes 86,400,
# 0.8 s to parse on a slow core (0.12 s with 3,000 of them read), and the watchdog has 0.5 s
STOP_SAMPLES = 3000


def _own_stacks(log_path: Path | None) -> None:
    """The supervisor's own threads into its run.log (and stderr): where a run that overran its budget was."""
    import faulthandler

    print("runner: the supervisor's threads as the watchdog stopped it:", file=sys.stderr, flush=True)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    if log_path is not None:
        with contextlib.suppress(OSError), open(log_path, "a") as log:
            log.write("runner: the supervisor's threads as the watchdog stopped it:\n")
            log.flush()
            faulthandler.dump_traceback(file=log, all_threads=True)


def watchdog(budget: Budget, report_path: Path | None = None) -> threading.Timer:
    """Whatever stage the run is in, it ends before its budget does: WATCHDOG_MARGIN before, the supervisor's own
    stacks go to its log, every process it started is killed and it exits (124), leaving the last valid
    submission (every write is a rename) and a report that says it was stopped."""

    def end() -> None:
        print(f"runner: the budget ends in {WATCHDOG_MARGIN} s and the run has not: stopped, the last valid "
              "submission is kept", file=sys.stderr, flush=True)
        import psutil

        _own_stacks(report_path.with_name("run.log") if report_path else None)
        # units by pid first: one whose fork server died is this process's child only where the run is its subreaper
        if processes := sys.modules.get(PROCESSES):
            for child in processes.live():
                with contextlib.suppress(Exception):
                    processes.kill(child)

        with contextlib.suppress(Exception):  # the report as it stands, its status final (it may not exist yet)
            stopped_report(budget, report_path)

        for child in psutil.Process().children(recursive=True):  # orphans re-parented here (subreaper) too
            with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
                if os.getpgid(child.pid) == child.pid:  # a unit in its own session: its loaders too
                    os.killpg(child.pid, signal.SIGKILL)
                child.kill()
        os._exit(124)

    timer = threading.Timer(max(0.0, budget.left() - WATCHDOG_MARGIN), end)
    timer.daemon = True
    timer.start()
    return timer


def stopped_report(budget: Budget, report_path: Path) -> None:
    """The report as it stands, marked stopped, and with how the run used its cards where it planned any and had
    not said so yet: from the report's own records (the units, ended and running; the folds and epochs) and the
    monitor's samples beside it, over the window from the start to the stop. Files only: the supervisor's objects
    may be mid-change in the thread the watchdog stops, and nothing here may wait on them."""
    from runner.results.report import RunReport

    report = RunReport.load(report_path)
    changes = dict(status="stopped", wall_seconds=round(budget.elapsed(), 2),
                   stop_reason=f"the run's watchdog stopped it {WATCHDOG_MARGIN} s before the end of the budget; "
                               f"the last valid submission ({report.submission_source}) is kept")
    cards = int((report.plan or {}).get("gpus", 0))
    if cards and report.card_usage is None:
        # the figures are what a stopped run can still say; a record they cannot be read from must not cost the
        # report its stopped status
        with contextlib.suppress(Exception):
            changes["card_usage"] = _card_usage(report, cards, budget, report_path.with_name("monitor.jsonl"))
    RunReport.from_json({**report.to_json(), **changes}).save(report_path)


def _card_usage(report, cards: int, budget: Budget, monitor: Path) -> dict:
    from runner.machine.monitor import read_samples
    from runner.results.card_usage import card_usage
    from runner.units.scheduler import RUNNING

    now = round(budget.elapsed(), 2)
    ended = report.timings.get("training_done") or now
    # a unit the report last saw running ran until this stop, which kills it
    units = tuple({**u, "end": now} if u["status"] == RUNNING else u for u in report.units)
    usage = card_usage(cards, (0.0, max(budget.seconds * budget.cut, ended)), units, report.folds,
                       report.epochs, report.members, read_samples(monitor, STOP_SAMPLES))
    return usage.model_dump(mode="json")


def end_units() -> None:
    """Every unit a run started ended, and the fork server with them, before this process exits: multiprocessing's
    exit join waits on each child it started, and a unit that never answers would hold the exit forever."""
    if processes := sys.modules.get(PROCESSES):
        processes.shutdown()
