"""The fork server units are forked from: started with the engines' libraries imported once, asked with a bounded
wait, killed and replaced when it does not answer.

Starting Python and importing pandas, scikit-learn and a booster takes ~1.8 s on a 2-core machine (torch and timm
several more), ten times what a fold of a small table trains; a fork from a server that imported them once costs
milliseconds. But every start goes through that one process, and multiprocessing waits for the new child's pid
with no timeout: a stopped or hung server would hold every start, and the run's exit too (multiprocessing joins
every child it started at exit, and learns that a child ended only from the server). So a start waits at most
the time it is given, less once the server is seen stopped or making no progress; then the server is killed (with
any child it forked for that start and never announced), a new one is started for later units, and the caller
starts its unit another way. `stop` ends the server when the run ends.

The server never runs a parallel region or touches CUDA, so forking from it is safe; each child sets its own
thread limits (threadpoolctl) and `CUDA_VISIBLE_DEVICES` before it computes.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from multiprocessing import forkserver
from pathlib import Path

import psutil

from runner.common.heap import tunables
from runner.common.stacks import SERVER_LOG

# the first module sets up the server's stderr and stack dumps before anything else is imported (and can hang)
BASE_PRELOAD = ("runner.units.fork_server_setup", "numpy", "pandas", "sklearn.model_selection", "sklearn.metrics",
                "runner.units.worker")
START_SECONDS = 60.0  # the first start waits for the server's imports: torch and timm take tens of seconds when busy
IDLE_SECONDS = 10.0  # a server that used no CPU this long while a start waited is not importing: it is stuck
GIVE_UP_AFTER = 2  # servers in a row that did not answer: then every unit starts as a process of its own
GONE_SECONDS = 2.0  # a killed server is a zombie within milliseconds (one inside a driver call may take longer)
POLL = 0.02
STUCK = {psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP, psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD}

_context = None
_log: Path | None = None  # where a server started from now on writes its stderr
_killed: set[int] = set()  # servers this process killed: the exit codes of their children are unknown
# children of a server killed with it (a unit forked for a start given up on): re-parented to this process where
# it is their subreaper (runner.units.processes), which then waits on them
abandoned: set[int] = set()
_failures = 0  # servers given up on since the last fork that worked
# the modules each server was started with, by pid: what every unit forked from it has imported already
_started_with: dict[int, frozenset[str]] = {}


def _modules(preload: tuple[str, ...]) -> list[str]:
    return list(dict.fromkeys(BASE_PRELOAD + preload))


def context(preload: tuple[str, ...]):
    """multiprocessing's fork-server context, its preload set to `preload` for a server started from now on."""
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
    _context.set_forkserver_preload(_modules(preload))
    return _context


def _noted(preload: tuple[str, ...]) -> None:
    """The running server, started with `preload` where it is one not seen before."""
    if (pid := server_pid()) is not None:
        _started_with.setdefault(pid, frozenset(_modules(preload)))


def lacking(preload: tuple[str, ...]) -> list[str]:
    """The modules of `preload` the running server was not started with (none where no server runs, or where
    what it was started with is unknown)."""
    pid = server_pid()
    if pid is None or pid in _killed or _gone(pid) or (known := _started_with.get(pid)) is None:
        return []
    return [module for module in _modules(preload) if module not in known]


def server_pid() -> int | None:
    """The running server's pid (None before one is started)."""
    return forkserver._forkserver._forkserver_pid


def killed(pid: int | None) -> bool:
    """Whether this process killed the server `pid`."""
    return pid in _killed


@contextlib.contextmanager
def main_hidden():
    """Hide the main module from multiprocessing while it prepares a child (a unit, a spawned worker): the child's
    code lives in this package, and otherwise every child would first re-import the main module (pytest's, a
    script's, or fail on a notebook's or stdin's)."""
    main = sys.modules["__main__"]
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.update(saved)
        if "__spec__" not in saved:
            main.__dict__.pop("__spec__", None)


@contextlib.contextmanager
def _server_environment():
    """The environment a server started meanwhile gets: the heap tunables (glibc reads them at exec) and the file
    its stderr goes to; this process's own environment is as it was afterwards."""
    added = {"GLIBC_TUNABLES": tunables(dict(os.environ)), **({SERVER_LOG: str(_log)} if _log else {})}
    saved = {k: os.environ.get(k) for k in added}
    os.environ.update(added)
    try:
        with main_hidden():
            yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def warm_up(preload: tuple[str, ...], log: Path | None = None, replace_lacking: bool = False,
            keep: set[int] = frozenset()) -> list[str]:
    """Start the server now (if none runs), so it imports its libraries while the run does other work; its
    stderr, and that of each unit until it reaches its own log, goes to `log`. With `replace_lacking`, a running
    server started without some of `preload` is killed (with any child of it not in `keep`) and a new one started
    (every unit forked from it would import them itself); returns the modules it lacked."""
    global _log
    _log = Path(log).resolve() if log else _log
    context(preload)
    missing = lacking(preload) if replace_lacking else []
    if missing:
        _kill_server(set(keep))
    with _server_environment():
        forkserver.ensure_running()
    _noted(preload)
    return missing


def _start(process, failed: list) -> None:
    try:
        with _server_environment():
            process.start()
    except BaseException as exc:  # noqa: BLE001 - reported by the waiting caller
        failed.append(exc)


def _cpu(pid: int) -> float | None:
    try:
        times = psutil.Process(pid).cpu_times()
        return times.user + times.system
    except psutil.Error:
        return None


def _gone(pid: int) -> bool:
    """Whether `pid` has ended: for a child of this process, once it can be waited on (multiprocessing starts a
    new server only then; a killed server shows as a zombie while its threads are still being torn down, and a
    start meanwhile connected to it and read nothing); for another process, once it is a zombie or gone."""
    with contextlib.suppress(ChildProcessError):  # not this process's child, or reaped already
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    try:
        return psutil.Process(pid).status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.Error:
        return True


def _stuck(pid: int | None) -> str | None:
    """Why the server cannot answer now (stopped, dead), or None; one this process killed is no answer expected
    from (the next start replaces it)."""
    if pid is None or pid in _killed:
        return None
    try:
        status = psutil.Process(pid).status()
    except psutil.Error:
        return f"the fork server (pid {pid}) is gone"
    return f"the fork server (pid {pid}) is {status}" if status in STUCK else None


def _awaited(thread: threading.Thread, seconds: float) -> str | None:
    """None once the start ends; else why it was given up on: the server stopped or gone, no CPU used for
    IDLE_SECONDS (not importing, not forking), or `seconds` passed."""
    started = time.monotonic()
    busy_at, cpu = started, None
    while True:
        thread.join(POLL)
        if not thread.is_alive():
            return None
        pid, now = server_pid(), time.monotonic()
        if why := _stuck(pid):
            return why
        if (used := _cpu(pid) if pid and pid not in _killed else None) != cpu:
            busy_at, cpu = now, used
        if now - busy_at > IDLE_SECONDS:
            return f"the fork server (pid {pid}) used no CPU for {IDLE_SECONDS:.0f} s while a unit waited to start"
        if now - started > seconds:
            return f"the fork server (pid {pid}) did not answer in {seconds:.0f} s"


def fork(target, args: tuple, name: str, preload: tuple[str, ...], seconds: float, keep: set[int]):
    """A process running `target(*args)`, forked by the server within `seconds`; or, when the server cannot give
    one, why not (the server is then killed, with any child of it not in `keep`, and a new one started; after
    GIVE_UP_AFTER servers in a row gave none, no server is asked again: a preload that hangs hangs every one)."""
    global _failures
    if _failures >= GIVE_UP_AFTER:
        return f"{_failures} fork servers in a row did not answer"
    if why := _stuck(server_pid()):
        _failures += 1
        replace(preload, keep)
        return f"{why}: killed, a new one started"
    process = context(preload).Process(target=target, args=args, name=name)
    failed: list[BaseException] = []
    thread = threading.Thread(target=_start, args=(process, failed), name=f"start {name}", daemon=True)
    thread.start()
    if (gave_up := _awaited(thread, seconds)) is not None:
        _failures += 1
        _kill_server(keep)
        thread.join(GONE_SECONDS)  # its wait for the pid ends as the server dies, and it puts the environment back
        warm_up(preload)
        return f"{gave_up}: killed, a new one started"
    if failed:
        return f"forking failed: {type(failed[0]).__name__}: {failed[0]}"
    _failures = 0
    _noted(preload)
    return process


def _kill_server(keep: set[int]) -> None:
    """SIGKILL the server and any child of it not in `keep` (a unit forked for a start that was given up on, whose
    pid never came back), and wait until it is dead (not reaped: multiprocessing reaps it when it starts the next)."""
    pid = server_pid()
    if pid is None or _gone(pid):
        return
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(pid).children():
            if child.pid not in keep:
                child.kill()
                abandoned.add(child.pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _killed.add(pid)
    _started_with.pop(pid, None)
    until = time.monotonic() + GONE_SECONDS
    while time.monotonic() < until and not _gone(pid):
        time.sleep(POLL)


def replace(preload: tuple[str, ...], keep: set[int]) -> None:
    """The server killed (see `_kill_server`) and a new one started for later units."""
    _kill_server(keep)
    warm_up(preload)


def stop(keep: set[int] = frozenset()) -> None:
    """The server killed (if one runs): at a run's end, so that multiprocessing's exit join, which learns from the
    server that a child ended, waits on nothing. The next start begins afresh."""
    global _failures
    _kill_server(set(keep))
    _failures = 0
