"""The machine's pace: how much slower than the one the tests' time limits were set on this machine starts a run.

A whole run's clock is the wall clock, and every process of it (the fork server, a fold, the measuring step)
imports torch and timm before its first step. On the Intel machine with AVX-512 and AMX that the budgets were set on
that took about 3.5 s of CPU; on an AVX2-only EPYC 8.5 s, and there ten whole-run tests missed their windows on a
shared core (a measuring process still importing when its window closed, a container's run that trained nothing in
12 s). The session measures it once, in a process `pytest_configure` starts in the controller, while the workers
start and collect (waiting for it had held their start for its 8 s of a core): the measuring writes it to a file
the environment names, and each worker puts it in its environment before its first test. The time-bound tests
stretch their budgets, windows and waits by it (`paced`), so each keeps the room its assertions had where they were
set. What a run is held to (ends by its budget, a model learned, units killed at their deadlines) does not change,
only the seconds it has. `TEST_PACE=1` (or any number) sets it
instead of measuring.
"""
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARIABLE = "TEST_PACE"
# the file the session's measuring writes the pace to, for the processes started before it has ended
FILE_VARIABLE = "TEST_PACE_FILE"
# how long a process waits for that file: the measuring is one interpreter's import of torch and timm
WAIT_SECONDS = 300.0
# CPU seconds a fresh interpreter took to import torch and timm on the machine the budgets were set on
REFERENCE_IMPORT_SECONDS = 3.5
# past this a machine is too slow for stretched budgets to mean what they meant (and the suite would take an hour)
MAX_PACE = 3.0
IMPORTS = "import torch, timm"


def import_cpu_seconds() -> float:
    """CPU seconds (user and system) a fresh interpreter takes for torch's and timm's import, its start and exit
    and whatever it starts included: CPU time, not wall, so that other processes busy at the moment (the workers
    collecting) do not count."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", IMPORTS], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def pace_of(import_seconds: float) -> float:
    """The pace for an import that took `import_seconds` of CPU: never below 1 (a faster machine keeps the budgets
    as set), never above MAX_PACE."""
    return round(min(MAX_PACE, max(1.0, import_seconds / REFERENCE_IMPORT_SECONDS)), 2)


def settle() -> None:
    """The session's pace: the environment's when set, else measured by a fresh interpreter started here, which
    writes it to the file FILE_VARIABLE names for the workers (and every process they start) to read."""
    if os.environ.get(VARIABLE) or os.environ.get(FILE_VARIABLE):
        return
    fd, file = tempfile.mkstemp(prefix="pytest-pace-")
    os.close(fd)
    os.unlink(file)  # written whole, by rename, once measured
    os.environ[FILE_VARIABLE] = file
    subprocess.Popen([sys.executable, os.path.abspath(__file__), file])


def known() -> bool:
    """Whether the pace is in this environment (or `pace()` would wait for the measuring)."""
    return bool(os.environ.get(VARIABLE)) or not os.environ.get(FILE_VARIABLE)


def pace() -> float:
    """The pace; where it is being measured, once the measuring has written it (it is then in this environment)."""
    if not os.environ.get(VARIABLE) and os.environ.get(FILE_VARIABLE):
        file, end = Path(os.environ[FILE_VARIABLE]), time.monotonic() + WAIT_SECONDS
        while not file.exists():
            if time.monotonic() > end:
                raise RuntimeError(f"tests/pace.py: the machine's pace was not written to {file} within "
                                   f"{WAIT_SECONDS:.0f} s (`{IMPORTS}` in a fresh interpreter); set {VARIABLE}")
            time.sleep(0.1)
        os.environ[VARIABLE] = file.read_text().strip()
    return float(os.environ.get(VARIABLE) or 1.0)


def paced(seconds: float) -> float:
    """`seconds` of a time limit set on the reference machine, as long as it is on this one."""
    return round(seconds * pace(), 1)


if __name__ == "__main__":  # the session's measuring (settle): its own import, the pace written whole to argv[1]
    from runner.common.atomic import replacing

    with replacing(Path(sys.argv[1])) as written:
        written.write_text(str(pace_of(import_cpu_seconds())))
