"""Wall-clock budget: absolute monotonic deadlines measured from the start of a run.

time.monotonic() is one system-wide clock on Linux, so deadlines can be handed to child processes as numbers.
"""
from __future__ import annotations

import contextlib
import re
import signal
import threading
import time
from dataclasses import dataclass

import psutil

from runner.common.errors import Interrupted, RunnerError

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0}
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([BKMGT])?(?:i?B)?$", re.IGNORECASE)
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?$")


def parse_size(text: str) -> int:
    """'8G', '8GiB', '512M', '2T' or plain bytes -> bytes (binary units: what memory limits are given in)."""
    match = _SIZE.match(str(text).strip())
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a size: give e.g. 8G or 512M")
    return int(float(match.group(1)) * 1024 ** "BKMGT".index((match.group(2) or "B").upper()))


def parse_duration(text: str) -> float:
    """'2h', '30m', '1h30m', '90s' or plain seconds ('90') -> seconds."""
    match = _DURATION.match(text.strip().lower())
    if not text.strip() or not match or not any(match.groups()):
        raise RunnerError(f"--budget: cannot read duration {text!r}; use e.g. 2h, 30m, 1h30m, 90s")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise RunnerError(f"--budget: duration {text!r} must be positive")
    return total


@dataclass(frozen=True)
class Budget:
    """A run's time budget. `cut` is the fraction of it after which no training may continue."""

    seconds: float
    started: float  # time.monotonic() at the start of the run
    cut: float = 0.85

    @classmethod
    def start(cls, seconds: float, cut: float = 0.85) -> "Budget":
        return cls(seconds=seconds, started=time.monotonic(), cut=cut)

    @property
    def deadline(self) -> float:
        return self.started + self.seconds

    @property
    def training_deadline(self) -> float:
        return self.started + self.seconds * self.cut

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def training_left(self) -> float:
        return self.training_deadline - time.monotonic()


def process_start() -> float:
    """time.monotonic() at this process's start, so start-up and imports count against budgets too."""
    age = time.time() - psutil.Process().create_time()
    return time.monotonic() - max(0.0, age)


# --- stopping early on request (SIGTERM: what Docker and Prefect send first) -----------------------------------

_stop = threading.Event()


def stop_requested() -> bool:
    """Whether this process was asked to stop: its training then ends at the next epoch or round, as at a
    deadline, keeping its best checkpoint and writing what it has."""
    return _stop.is_set()


def stop_on_sigterm() -> None:
    """Make SIGTERM a request to stop (see stop_requested) instead of an immediate end."""
    signal.signal(signal.SIGTERM, lambda *_: _stop.set())


def past(deadline: float) -> bool:
    """The deadline has passed, or a stop was requested."""
    return time.monotonic() > deadline or _stop.is_set()


# --- the supervisor's own SIGTERM: raised at once, or where the scheduler can take it ---------------------------

_deferred: list[int] = []  # signals that arrived while the scheduler runs, not yet raised
_deferring = threading.Event()


def interrupt(signal_number: int) -> None:
    """The supervisor's handler: Interrupted at once, except while the scheduler runs (`interrupts_between_steps`),
    where it waits for the scheduler's next step. Raised inside a library's C code it can come out as another error
    (numpy's fromfile turned it into a TypeError), and the run then ended without its clean stop."""
    if not _deferring.is_set():
        raise Interrupted(signal_number)
    _deferred.append(signal_number)


def raise_if_interrupted() -> None:
    if _deferred:
        raise Interrupted(_deferred.pop(0))


@contextlib.contextmanager
def interrupts_between_steps():
    _deferring.set()
    try:
        yield
    finally:
        _deferring.clear()
    raise_if_interrupted()  # one that came while leaving
