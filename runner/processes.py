"""Unit processes: each unit of work runs in a fresh process of its own, in its own session, killed as a group.

Starting Python and importing pandas, scikit-learn and a boosting library takes ~1.8 s on a 2-core machine,
ten times what a fold of a small table trains. So units are forked from multiprocessing's fork server, which
has imported the libraries the plan's engines name (`Engine.preload`) once: a fork costs milliseconds and still
gives every unit a process of its own (leaks and crashes die with it, a kill takes only it). The fork server
never runs a parallel region or touches CUDA, so forking from it is safe; each child sets its own thread
limits (threadpoolctl) and `CUDA_VISIBLE_DEVICES` before it computes.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from runner.heap import tunables

ALLOWED = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM", "PYTHONPATH",
           "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "HF_HOME", "HF_HUB_OFFLINE",
           "HF_HUB_CACHE", "TORCH_HOME", "XDG_CACHE_HOME", "MPLCONFIGDIR", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"}
ALLOWED_PREFIXES = ("LC_", "RUNNER_", "OMP_", "MKL_", "OPENBLAS_", "CUDA_", "NVIDIA_", "NCCL_", "PYTORCH_",
                    "MALLOC_")
BASE_PRELOAD = ("numpy", "pandas", "sklearn.model_selection", "sklearn.metrics", "runner.fold_worker")
KILL_WAITS = ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0))  # polite first: a fold ends its epoch and writes


@contextlib.contextmanager
def _heap_tunables():
    """GLIBC_TUNABLES in this process's environment while multiprocessing may start its fork server from it."""
    had = "GLIBC_TUNABLES" in os.environ
    os.environ["GLIBC_TUNABLES"] = tunables(dict(os.environ))
    try:
        yield
    finally:
        if not had:
            del os.environ["GLIBC_TUNABLES"]


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
    os.environ.clear()
    os.environ.update(env)
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads)  # BLAS and OpenMP pools were sized when the fork server imported them
    from runner.fold_worker import main

    code = main([task_path], started)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class Child:
    """A running unit process: a forked one (multiprocessing) or a started one (subprocess)."""

    def __init__(self, handle):
        self.handle = handle

    @property
    def pid(self) -> int:
        return self.handle.pid

    def poll(self) -> int | None:
        """The exit code, or None while it runs."""
        if isinstance(self.handle, subprocess.Popen):
            return self.handle.poll()
        return None if self.handle.is_alive() else self.handle.exitcode

    def wait(self, timeout: float) -> bool:
        """True when it ended within `timeout` seconds."""
        if isinstance(self.handle, subprocess.Popen):
            try:
                self.handle.wait(timeout)
                return True
            except subprocess.TimeoutExpired:
                return False
        self.handle.join(timeout)
        return not self.handle.is_alive()

    @property
    def returncode(self) -> int | None:
        return self.poll()


def ask_to_stop(child) -> None:
    """SIGTERM to the group: a fold ends at its next epoch or round and writes what it has."""
    child = child if isinstance(child, Child) else Child(child)
    try:
        os.killpg(child.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


def kill(child) -> None:
    """Kill the process group of a Child (or a subprocess.Popen): SIGTERM, then SIGKILL."""
    child = child if isinstance(child, Child) else Child(child)
    for sig, wait in KILL_WAITS:
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        if child.wait(wait):
            return


_context = None


def fork_server(preload: tuple[str, ...]):
    """The multiprocessing context whose fork server has imported `preload` (set once per process)."""
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(list(dict.fromkeys(BASE_PRELOAD + preload)))
    return _context


@contextlib.contextmanager
def _without_main():
    """Hide the main module from multiprocessing while it prepares a child: the unit's code lives in this package,
    and otherwise every unit would first re-import the main module (pytest's, a script's, or fail on a notebook's
    or stdin's)."""
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


def warm_up(preload: tuple[str, ...]) -> None:
    """Start the fork server now, so it imports its libraries while the run loads data and measures."""
    fork_server(preload).Process  # the context exists
    from multiprocessing import forkserver

    with _without_main(), _heap_tunables():
        forkserver.ensure_running()


def start(task_path: Path, log: Path, threads: int, device: str | None, preload: tuple[str, ...] = (),
          fork: bool = True) -> Child:
    """Start one unit (`python -m runner.fold_worker TASK.json` in effect), logging to `log`. The child gets this
    process's environment as it is now (the fork server's dates from its start) plus the unit's settings."""
    env = {**child_environment(dict(os.environ)), **unit_environment(threads, device)}
    log.write_bytes(b"")
    if fork:
        process = fork_server(preload).Process(target=_child, args=(str(task_path), str(log), env, threads),
                                               name=f"unit {task_path.parent.name}")
        with _without_main(), _heap_tunables():
            process.start()
        return Child(process)
    with open(log, "w") as handle:
        return Child(subprocess.Popen([sys.executable, "-m", "runner.fold_worker", str(task_path)], stdout=handle,
                                      stderr=subprocess.STDOUT, start_new_session=True, env=env))

