"""Where a unit was: every thread's stack, written by the unit itself when asked, and the function each was in.

Every unit dumps its threads' stacks on STACKS_SIGNAL (faulthandler: a C signal handler, so a thread deep in a
library call or holding the GIL does not stop it). A forked unit has the handler from its first instant: the
fork server registers it before it forks anything (`runner.units.fork_server_setup`), with the server's stderr in a file
of its own, so a unit that hangs before it reaches its log still writes its stacks somewhere the supervisor can
read them. A unit started as a process of its own registers it as the fold worker starts.

The supervisor asks before it kills a unit (at its deadline, or when the run stops) and when a unit stalls: it
finds where the unit's stderr goes (`/proc/PID/fd/2`), signals it (and, for a unit about to be killed, resumes a
stopped one so it can answer), waits until the dump stops growing, copies it into the unit's `fold.log` when it
landed elsewhere, and keeps the innermost frame of each thread for the report.
"""
from __future__ import annotations

import contextlib
import faulthandler
import os
import re
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

STACKS_SIGNAL = signal.SIGUSR1  # nothing else in a unit uses it; its default action would end a unit without a handler
SERVER_LOG = "RUNNER_FORK_SERVER_LOG"  # the fork server's stderr: where a forked unit writes until it has its log
STACKS_WAIT = 1.0  # seconds for the units asked together to write (milliseconds each, unless stopped or in the kernel)
SETTLED = 0.03  # a dump that has not grown for this long is complete (faulthandler writes it in one go)
POLL = 0.005
MOST_THREADS = 8  # threads named in the report per unit (loaders and pools can have dozens; the log has them all)
FRAME = re.compile(r'^\s+File "(?P<file>.+)", line (?P<line>\d+) in (?P<function>.+)$')
THREAD = re.compile(r"^(?P<current>Current thread|Thread) (?P<id>0x[0-9a-f]+)")


def register(file=None) -> None:
    """Dump every thread's stack to `file` (stderr) on STACKS_SIGNAL, from now on."""
    faulthandler.register(STACKS_SIGNAL, file=file or sys.stderr, all_threads=True, chain=False)


def catches(pid: int) -> bool:
    """Whether the process has a handler for STACKS_SIGNAL (without one the signal would end it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next((l.split()[1] for l in status.splitlines() if l.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) >> (STACKS_SIGNAL - 1) & 1)


def stderr_of(pid: int) -> Path | None:
    """The regular file the process's stderr writes to (None: a pipe, a terminal, or gone)."""
    try:
        target = Path(os.readlink(f"/proc/{pid}/fd/2"))
    except OSError:
        return None
    return target if target.is_file() else None


def innermost(dump: str) -> tuple[str, ...]:
    """'function (file:line)' for each thread of a faulthandler dump, the current thread marked: the frame each
    thread was in (the first listed: most recent call first)."""
    found, thread = [], None
    for line in dump.splitlines():
        if match := THREAD.match(line):
            thread = "current thread" if match["current"].startswith("Current") else f"thread {match['id']}"
        elif thread and (match := FRAME.match(line)):
            found.append(f"{thread}: {match['function']} ({Path(match['file']).name}:{match['line']})")
            thread = None
    return tuple(found[:MOST_THREADS]) + ((f"... {len(found) - MOST_THREADS} more thread(s)",)
                                          if len(found) > MOST_THREADS else ())


def _unasked(pid: int, source: Path | None) -> str:
    """Why a process was not asked for its stacks."""
    if not Path(f"/proc/{pid}").exists() or not catches(pid) and source is None:
        return "no stacks: it had ended"
    if not catches(pid):
        return "no stacks: it had no stack handler (it had not reached the runner's code)"
    return "no stacks: its stderr is not a file"


@dataclass
class _Asked:
    pid: int
    log: Path  # the unit's own log, where its stacks must end up
    source: Path  # where its stderr writes (its log, or the fork server's file)
    offset: int  # the source's size when asked
    size: int = -1  # its size when last looked at
    grew_at: float | None = None

    def done(self, now: float) -> bool:
        """Its dump has started and not grown for SETTLED seconds."""
        size = self.source.stat().st_size if self.source.exists() else 0
        if size != self.size and size > self.offset:
            self.grew_at = now
        self.size = size
        return self.grew_at is not None and now - self.grew_at >= SETTLED

    def dump(self) -> str:
        """What its stderr received since it was asked."""
        with contextlib.suppress(OSError), open(self.source, "rb") as handle:
            handle.seek(self.offset)
            return handle.read().decode(errors="replace")
        return ""


def _ask(asked: _Asked, resume: bool) -> None:
    try:
        os.kill(asked.pid, STACKS_SIGNAL)
        if resume:
            os.kill(asked.pid, signal.SIGCONT)  # a stopped process runs its handler only once it runs again
    except ProcessLookupError:
        pass


def _collect(group: list[_Asked], until: float, resume: bool) -> None:
    """Wait for the asked units' dumps to settle until `until`. `resume`: units about to be killed run only to
    write: each is resumed again while it has not (stopped anew meanwhile) and frozen once it has, so that it
    does nothing more before the kill."""
    waiting = list(group)
    while waiting and time.monotonic() < until:
        time.sleep(POLL)
        now = time.monotonic()
        for asked in [a for a in waiting if a.done(now)] if resume else ():
            with contextlib.suppress(OSError):
                os.kill(asked.pid, signal.SIGSTOP)
        waiting = [a for a in waiting if not a.done(now)]
        for asked in waiting if resume else ():
            with contextlib.suppress(OSError):
                os.kill(asked.pid, signal.SIGCONT)


def _append(log: Path, text: str) -> None:
    with contextlib.suppress(OSError), open(log, "a") as handle:
        handle.write(text)


def take(units: list[tuple[int, Path]], why: str, seconds: float = STACKS_WAIT,
         resume: bool = True) -> dict[int, tuple[str, ...]]:
    """Each unit's stacks into its log under a line saying `why`, and the function each thread was in, by pid.
    Units writing to their own logs are asked together; those still writing to the fork server's file one after
    another (their dumps would interleave there). `resume`: for units about to be killed, SIGCONT one that is
    stopped so it can answer, and SIGSTOP each once it has (otherwise stopping it was someone's choice, and a
    unit asked because it stalled runs on). At most `seconds` in all."""
    until = time.monotonic() + max(0.0, seconds)
    found: dict[int, tuple[str, ...]] = {}
    own, shared = [], []
    for pid, log in units:
        source = stderr_of(pid)
        if not catches(pid) or source is None:
            found[pid] = (_unasked(pid, source),)
            continue
        _append(log, f"\nrunner: pid {pid}'s threads, {why}:\n")
        asked = _Asked(pid, log, source, source.stat().st_size)
        (own if source.resolve() == log.resolve() else shared).append(asked)
    for asked in own:
        _ask(asked, resume)
    _collect(own, until, resume)
    for asked in shared:
        asked.offset = asked.source.stat().st_size  # now: the units before it have written theirs
        _ask(asked, resume)
        _collect([asked], until, resume)
        _append(asked.log, f"(written to {asked.source} before it reached this log)\n{asked.dump()}")
    for asked in own + shared:
        stacks = innermost(asked.dump())
        found[asked.pid] = stacks or ("no stacks: it did not answer in time (stopped, or inside the kernel)",)
    return found
