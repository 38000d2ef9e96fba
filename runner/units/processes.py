"""Unit processes: each unit of work runs in a fresh process of its own, in its own session, killed as a group.

Units are forked from a fork server that imported the engines' libraries once (`runner.units.fork_server`): a fork costs
milliseconds and still gives every unit a process of its own (leaks and crashes die with it, a kill takes only it).
A server that does not answer within the time a start is given is killed and replaced, and that unit starts as a
process of its own (`python -m runner.units.worker`) instead.

On a GPU box a unit that does not answer is normal: deep in a driver call, stopped, hung before its first line.
So nothing here waits on a unit: whether it runs is read from its pid (not from the fork server, which may be
the thing that stopped), a kill is SIGKILL to its group and, by pid, to it and every descendant (a unit hung
before `os.setsid()` leads no group yet), and `shutdown` leaves nothing for multiprocessing's exit join.

The supervisor is its descendants' subreaper (`adopt_orphans`): a unit whose fork server died, or a process whose
unit ended before it, is re-parented to the run rather than to init, so it stays in the run's process tree (the
watchdog's sweep and the monitor's memory see it), and the run waits on those that end (`reap`) so that none
stays a zombie.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from runner.units import fork_server
from runner.common import stacks
from runner.common.heap import tunables

ALLOWED = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM", "PYTHONPATH",
           "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "HF_HOME", "HF_HUB_OFFLINE",
           "HF_HUB_CACHE", "TORCH_HOME", "XDG_CACHE_HOME", "MPLCONFIGDIR", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"}
ALLOWED_PREFIXES = ("LC_", "RUNNER_", "OMP_", "MKL_", "OPENBLAS_", "CUDA_", "NVIDIA_", "NCCL_", "PYTORCH_",
                    "MALLOC_")
EXIT_CODE_WAIT = 0.2  # seconds for the fork server to pass on the exit code of a unit seen gone
ENDED = "it had already ended"  # what a signal to a unit that ended meanwhile reached
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h: orphaned descendants re-parent to this process instead of init
EXITS_KEPT = 1024  # exit codes of reaped units kept for their Child to read (a run's orphans are few)


def child_environment(environ: dict[str, str]) -> dict[str, str]:
    """What a child process may see of this one's environment: the variables it runs with (paths, locale, caches,
    math libraries, the runner's own), never the rest (API keys, credentials, a Prefect worker's settings)."""
    return {k: v for k, v in environ.items() if k in ALLOWED or k.startswith(ALLOWED_PREFIXES)}


def unit_environment(threads: int, device: str | None) -> dict[str, str]:
    """A unit's own settings: its thread limits, and its card (`device`: a UUID, or an index in PCI bus order,
    which is also how NVML and nvidia-smi number them) as the only GPU it sees."""
    env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads),
           "TORCHINDUCTOR_COMPILE_THREADS": str(threads),  # else up to 32 compile workers per fold
           "PYTHONUNBUFFERED": "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
           "HF_HUB_OFFLINE": "1",  # units read pretrained weights from the local cache only: no hub, ever
           "GLIBC_TUNABLES": tunables(dict(os.environ))}
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # an index means the same card to CUDA as to NVML
    env["CUDA_VISIBLE_DEVICES"] = device if device is not None else ""  # a CPU unit sees no GPU at all
    return env


def _child(task_path: str, log_path: str, env: dict[str, str], threads: int) -> None:
    """Body of a forked unit: its own session, its log on stdout and stderr, its environment and thread limits."""
    started = time.monotonic()
    os.setsid()
    with open(log_path, "ab", buffering=0) as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    sys.stdout.reconfigure(line_buffering=True)
    sys.stderr.reconfigure(line_buffering=True)
    stacks.register()  # the server's handler is inherited; again, in case a preloaded library took the signal
    os.environ.clear()
    os.environ.update(env)
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads)  # BLAS and OpenMP pools were sized when the fork server imported them
    from runner.units.worker import main

    code = main([task_path], started)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class Child:
    """A running unit process: forked by the fork server (a grandchild) or started (a child). It runs while its
    pid does (a zombie has ended); a forked one's exit code comes from the server when the server can give it."""

    def __init__(self, handle, note: str = ""):
        self.handle = handle  # multiprocessing.Process or subprocess.Popen
        self.note = note  # how it was started, when not as usual (the fork server did not answer)
        self.server = None if isinstance(handle, subprocess.Popen) else fork_server.server_pid()
        try:
            self.process = psutil.Process(handle.pid)  # its start time is kept: a reused pid is not this unit
        except psutil.Error:
            self.process = None  # ended before it could be looked at

    @property
    def pid(self) -> int:
        return self.handle.pid

    def alive(self) -> bool:
        if isinstance(self.handle, subprocess.Popen):
            return self.handle.poll() is None
        try:  # is_running: the pid is still this unit (its start time), not one reused since it was waited on
            return self.process is not None and self.process.is_running() and \
                self.process.status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
        except psutil.Error:
            return False

    def poll(self) -> int | None:
        """None while it runs; then its exit code (-1 when the fork server that forked it can no longer say)."""
        if self.alive():
            return None
        code = self.returncode
        return -1 if code is None else code

    @property
    def returncode(self) -> int | None:
        """Its exit code once ended, None while running or when unknown (its fork server stopped or was killed)."""
        if isinstance(self.handle, subprocess.Popen):
            return self.handle.poll()
        if self.pid in _exits:  # re-parented to this process (its server died) and waited on here
            return _exits[self.pid]
        if fork_server.killed(self.server):
            return None  # multiprocessing reads 255 from a dead server: not this unit's code
        self.handle.join(EXIT_CODE_WAIT)
        return self.handle.exitcode

    def leads_group(self) -> bool:
        try:
            return os.getpgid(self.pid) == self.pid
        except OSError:
            return False


_live: dict[int, Child] = {}  # every unit this process started that may still run
# every unit this process started, by pid: True for one started as a process of its own (its Popen waits on it).
# A unit leads its own session, so a process in one of these sessions, or one of these forked units, that has
# become this process's child is an orphan of the run: nothing else here waits on it
_units: dict[int, bool] = {}
_exits: dict[int, int] = {}  # forked units waited on here (their server had died): their exit codes


def _family(child: Child) -> list[psutil.Process]:
    """The unit's process and its descendants while it runs, listed before any is killed (a killed parent's
    children move to another parent)."""
    if child.process is None or not child.alive():
        return []
    try:
        return [child.process, *child.process.children(recursive=True)]
    except psutil.Error:
        return []


def _signal(child: Child, sig: int) -> str:
    """`sig` to the unit's group when it leads one, and by pid to it and every descendant; how, in words."""
    family = _family(child)
    leads = child.leads_group()
    if leads:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, sig)
    for process in family:  # by pid: all of them, or those that left its group (once each: a signal is no count)
        with contextlib.suppress(psutil.Error, OSError):
            if not leads or os.getpgid(process.pid) != child.pid:
                process.send_signal(sig)  # psutil checks the pid is still that process
    name = signal.Signals(sig).name
    if not family:
        return f"{name}: {ENDED}"
    if leads:
        return f"{name} to its process group ({len(family)} process(es))"
    return f"{name} by pid (it led no process group yet) to {len(family)} process(es)"


def ask_to_stop(child) -> None:
    """SIGTERM: a fold ends at its next epoch or round and writes what it has."""
    _signal(child if isinstance(child, Child) else Child(child), signal.SIGTERM)


def kill(child) -> str:
    """SIGKILL to the unit's group and, by pid, to it and every descendant; no wait (a process inside a driver call
    dies when the call returns). Returns how, in words."""
    child = child if isinstance(child, Child) else Child(child)
    how = _signal(child, signal.SIGKILL)
    _live.pop(child.pid, None)
    return how


def live() -> list[Child]:
    """The units this process started that still run."""
    for pid, child in list(_live.items()):
        if not child.alive():
            del _live[pid]
    return list(_live.values())


def warm_up(preload: tuple[str, ...], log: Path | None = None, replace_lacking: bool = False) -> list[str]:
    """Start the fork server now, so it imports its libraries while the run does other work; `log` takes its
    stderr (and a unit's until it reaches its own log). With `replace_lacking`, a server already running without
    some of `preload` is replaced (the units running now are kept); returns what it lacked."""
    return fork_server.warm_up(preload, log, replace_lacking, keep=set(_live))


def fork_context(preload: tuple[str, ...]):
    """multiprocessing's context whose fork server imports `preload`."""
    return fork_server.context(preload)


def start(task_path: Path, log: Path, threads: int, device: str | None, preload: tuple[str, ...] = (),
          fork: bool = True, wait: float = fork_server.START_SECONDS) -> Child:
    """Start one unit (`python -m runner.units.worker TASK.json` in effect), logging to `log`. The child gets this
    process's environment as it is now (the fork server's dates from its start) plus the unit's settings. A fork
    server that cannot give a process within `wait` seconds is replaced and this unit started as its own process;
    the Child's `note` says so."""
    env = {**child_environment(dict(os.environ)), **unit_environment(threads, device)}
    log.write_bytes(b"")
    note = ""
    if fork:
        forked = fork_server.fork(_child, (str(task_path), str(log), env, threads), f"unit {task_path.parent.name}",
                                  preload, wait, keep=set(_live))
        if not isinstance(forked, str):
            return track(Child(forked))
        note = f"{forked}; this unit started as a process of its own"
    with open(log, "a") as handle:  # appends: the supervisor adds stack headers
        popen = subprocess.Popen([sys.executable, "-m", "runner.units.worker", str(task_path)], stdout=handle,
                                 stderr=subprocess.STDOUT, start_new_session=True, env=env)
    return track(Child(popen, note))


def track(child: Child) -> Child:
    """Kept until it is seen ended (a unit's Process holds pipes: thousands of small folds must not keep theirs),
    and known as a unit for good: its orphans are this process's to wait on."""
    live()
    _live[child.pid] = child
    _units[child.pid] = isinstance(child.handle, subprocess.Popen)
    _exits.pop(child.pid, None)  # a pid used again: the code waited on was an earlier process's
    fork_server.abandoned.discard(child.pid)
    return child


def adopt_orphans(on: bool = True) -> str | None:
    """Make this process (the supervisor) the subreaper of everything it starts (Linux's PR_SET_CHILD_SUBREAPER;
    `on=False` undoes it): a process whose parent dies is re-parented to the nearest living subreaper above it,
    and without one a unit whose fork server died leaves the run's tree for init's. Returns why it could not be
    one (None when it is): then such a unit is still watched and killed by its pid, but not waited on here."""
    if not sys.platform.startswith("linux"):
        return f"no child subreaper on {sys.platform}"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
            return f"prctl(PR_SET_CHILD_SUBREAPER) failed: {os.strerror(ctypes.get_errno())}"
    except (OSError, AttributeError) as exc:
        return f"prctl is not available: {exc}"
    return None


def _orphan(pid: int) -> bool:
    """Whether a child of this process is a unit's orphan: a forked unit (born to the fork server, so here only
    once that died; or one forked for a start given up on, killed with its server) or a process in a unit's
    session (a unit's descendant whose parent died). A unit started as its own process is not: its Popen waits on
    it."""
    if pid in fork_server.abandoned:
        return True
    if pid in _units:
        return not _units[pid]
    try:
        return os.getsid(pid) in _units
    except OSError:
        return False


def _children() -> list[int]:
    """This process's children, from the kernel's per-thread lists (0.1 ms: the scheduler asks 20 times a second,
    and psutil's way reads every process on the machine); psutil's where the kernel keeps no such lists."""
    lists = list(Path("/proc/self/task").glob("*/children"))
    if not lists:
        with contextlib.suppress(psutil.Error):
            return [c.pid for c in psutil.Process().children()]
        return []
    found = []
    for path in lists:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            found += [int(pid) for pid in path.read_text().split()]
    return found


def orphans() -> list[int]:
    """The units' processes re-parented to this process (its subreaper role), running or ended."""
    return [pid for pid in _children() if _orphan(pid)]


def reap() -> list[int]:
    """Wait on every unit's orphan that has ended, without blocking; their pids. Called from the scheduler's loop
    (SIGCHLD-free polling: a handler would interrupt the supervisor's every system call). By pid, never
    `waitpid(-1)`, which would also take the exit status of children that others in this process wait on: the
    fork server (multiprocessing reaps it), a unit started as its own process (its Popen), the measuring process
    (its Popen). A forked unit's exit code is kept: its dead server can no longer pass it on."""
    reaped = []
    for orphan in orphans():
        with contextlib.suppress(ChildProcessError):
            pid, status = os.waitpid(orphan, os.WNOHANG)  # 0 while it runs
            if pid:
                reaped.append(pid)
                fork_server.abandoned.discard(pid)  # its pid may serve another process now
                if pid in _units:
                    _exits[pid] = os.waitstatus_to_exitcode(status)
    while len(_exits) > EXITS_KEPT:
        del _exits[next(iter(_exits))]
    return reaped


def shutdown() -> None:
    """Before this process exits: every unit still running killed and the fork server with them, so that
    multiprocessing's exit join (it waits on every child it started, and hears of their ends from the server) has
    nothing left to wait on; and whatever a unit left behind that was re-parented here (a process its fold started
    and outlived), so nothing the run started outlives it."""
    for child in live():
        kill(child)
    for orphan in orphans():
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(orphan)
            for left in [process, *process.children(recursive=True)]:
                left.kill()
    fork_server.stop()
    reap()
