"""The machine's pace: how much slower than the one the tests' time limits were set on this machine starts a run.

A whole run's clock is the wall clock, and every process of it (the fork server, a fold, the measuring step)
imports torch and timm before its first step. On the Intel machine with AVX-512 and AMX that the budgets were set on
that took about 3.5 s of CPU; on an AVX2-only EPYC 8.5 s, and there ten whole-run tests missed their windows on a
shared core (a measuring process still importing when its window closed, a container's run that trained nothing in
12 s). The session measures it once, in the process that starts the workers, before it starts them: a fresh
interpreter's import on each of two cores at once, the least of their CPU seconds kept. Measured beside the workers'
collecting, the same import had read 1.7x its quiet figure (pace 2.36 where the quiet machine read 1.3-1.5), and
every paced budget of the suite stretched with it. The workers, and every process they start, inherit it in their
environment. The time-bound tests stretch their budgets, windows and waits by it (`paced`), so each keeps the room
its assertions had where they were set. What a run is held to (ends by its budget, a model learned, units killed at
their deadlines) does not change, only the seconds it has. `TEST_PACE=1` (or any number) sets it instead of
measuring.
"""
import os
import subprocess
import sys

VARIABLE = "TEST_PACE"
# CPU seconds a fresh interpreter took to import torch and timm on the machine the budgets were set on
REFERENCE_IMPORT_SECONDS = 3.5
# past this a machine is too slow for stretched budgets to mean what they meant (and the suite would take an hour)
MAX_PACE = 3.0
IMPORTS = "import torch, timm"
# imports measured at once, each on a core of its own: the least is the machine's, the rest what else ran there (on
# a 2-core EPYC one import alone read 4.5-6.5 s from one try to the next; two at once, pinned, 4.4-5.5 s each)
READINGS = 2


def import_cpu_seconds(cores: list[int]) -> list[float]:
    """CPU seconds (user and system) a fresh interpreter takes for torch's and timm's import on each of `cores`,
    all started at once, its start and exit included: CPU time, not wall, so that a process busy on another core
    does not count."""
    started = [subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{core}}}); {IMPORTS}"])
               for core in cores]
    seconds = []
    for process in started:  # each waited for, the failed ones too
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds.append(usage.ru_utime + usage.ru_stime)
    failed = [process.returncode for process in started if process.returncode]
    if failed:
        raise RuntimeError(f"tests/pace.py: `{IMPORTS}` failed in a fresh interpreter (exit {failed[0]}); "
                           f"set {VARIABLE} to skip the measuring")
    return seconds


def pace_of(import_seconds: float) -> float:
    """The pace for an import that took `import_seconds` of CPU: never below 1 (a faster machine keeps the budgets
    as set), never above MAX_PACE."""
    return round(min(MAX_PACE, max(1.0, import_seconds / REFERENCE_IMPORT_SECONDS)), 2)


def settle() -> None:
    """The session's pace in this environment: kept where it is set, else measured here (about one import's wall),
    before the workers that inherit it start."""
    if not os.environ.get(VARIABLE):
        cores = sorted(os.sched_getaffinity(0))[:READINGS]
        os.environ[VARIABLE] = str(pace_of(min(import_cpu_seconds(cores))))


def pace() -> float:
    """The session's pace (1 where none was settled: the limits as set)."""
    return float(os.environ.get(VARIABLE) or 1.0)


def paced(seconds: float) -> float:
    """`seconds` of a time limit set on the reference machine, as long as it is on this one."""
    return round(seconds * pace(), 1)
