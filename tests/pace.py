"""The machine's pace: how much slower than the one the tests' time limits were set on this machine starts a run.

A whole run's clock is the wall clock, and every process of it (the fork server, a fold, the measuring step)
imports torch and timm before its first step. On the Intel machine with AVX-512 and AMX that the budgets were set on
that took about 3.5 s of CPU; on an AVX2-only EPYC 8.5 s, and there ten whole-run tests missed their windows on a
shared core (a measuring process still importing when its window closed, a container's run that trained nothing in
12 s). The session measures it once, before the workers start (`pytest_configure` in the controller), and hands it
to them in the environment: the time-bound tests stretch their budgets, windows and waits by it (`paced`), so each
keeps the room its assertions had where they were set. What a run is held to (ends by its budget, a model learned,
units killed at their deadlines) does not change, only the seconds it has. `TEST_PACE=1` (or any number) sets it
instead of measuring.
"""
import os
import resource
import subprocess
import sys

VARIABLE = "TEST_PACE"
# CPU seconds a fresh interpreter took to import torch and timm on the machine the budgets were set on
REFERENCE_IMPORT_SECONDS = 3.5
# past this a machine is too slow for stretched budgets to mean what they meant (and the suite would take an hour)
MAX_PACE = 3.0
IMPORTS = "import torch, timm"


def import_cpu_seconds() -> float:
    """CPU seconds (user and system) a fresh interpreter takes for torch's and timm's import: CPU time, not wall, so
    that another process busy at the moment does not count."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", IMPORTS], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def pace_of(import_seconds: float) -> float:
    """The pace for an import that took `import_seconds` of CPU: never below 1 (a faster machine keeps the budgets
    as set), never above MAX_PACE."""
    return round(min(MAX_PACE, max(1.0, import_seconds / REFERENCE_IMPORT_SECONDS)), 2)


def settle() -> float:
    """The session's pace: the environment's when set, else measured here and put there for the workers (and
    every process they start) to read."""
    if not os.environ.get(VARIABLE):
        os.environ[VARIABLE] = str(pace_of(import_cpu_seconds()))
    return pace()


def pace() -> float:
    return float(os.environ.get(VARIABLE) or 1.0)


def paced(seconds: float) -> float:
    """`seconds` of a time limit set on the reference machine, as long as it is on this one."""
    return round(seconds * pace(), 1)
