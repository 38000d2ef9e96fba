"""The supervisor's side of measuring (no torch here): it starts the measuring process (`measure`), before the data
is read where a run asks (`prestart`) or when the planner needs costs, hands it its request with an absolute deadline
(time.monotonic() is one clock for every process here), so its start and imports count, kills it OVERRUN_SECONDS
past that deadline, and plans from what it wrote. A process that dies leaves the ladder's kept estimates, read
without torch.

A run starts it before reading its data: it imports torch and timm and brings up the card meanwhile, and
`gather_costs` hands it the request instead of starting another, so the measuring window is spent timing, not
importing (an H200's audio run's window had ended inside the import). One never asked is killed once the plan is
made; one whose run has gone leaves by itself.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from runner.common.atomic import write_json
from runner.common.heap import tunables
from runner.engines.timm.costs import Candidate, ImageCosts
from runner.engines.timm.estimates import ladder_estimates

MODULE = "runner.engines.timm.measure"  # the measuring process's own module
MEASURE_LOG_LINES = 40  # of the measuring process's stderr kept in the run's log: a traceback's end fits
# past its deadline the measuring process is killed: a timing in progress (a first cuDNN search took 7 s on an H200)
# is not waited for, and what it wrote stands. 25 s of a 90 s run went to measuring when it could run to 2x its time
PREFIX = "measure: "  # how the run's log marks the measuring process's lines
OVERRUN_SECONDS = 2.0
REAP_SECONDS = 1.0  # for a killed process to be reaped; one stuck in a driver call is left behind, never waited on

log = logging.getLogger("runner")


def gather_costs(candidates: list[Candidate], device: str, classes: int, threads: int, seconds: float,
                 time_them: bool, work_dir: Path, card: str = "") -> ImageCosts:
    """Costs from a measuring process (supervisor side: no torch here), on `card` (a UUID) when it measures on a
    GPU, within `seconds` from now, its start included (killed OVERRUN_SECONDS past them): the one `prestart`
    started for `work_dir` where it is still waiting, else a new one. What it wrote stands; when it died or was
    stopped, the ladder's kept estimates fill in what it did not write, and the costs say why. What the process
    said on stderr goes to the run's log either way."""
    deadline = time.monotonic() + seconds
    estimated = device != "cpu" or not time_them
    request, out, said = _request_of(work_dir), _out_of(work_dir), _said_of(work_dir)
    waiting = _adopted(work_dir, device, card)
    out.unlink(missing_ok=True)
    write_json(request, dict(candidates=[dataclasses.asdict(c) for c in candidates], device=device,
                             classes=classes, threads=threads, deadline=deadline, estimate=estimated,
                             time=time_them))
    if waiting is not None:
        log.info("measuring in the process started %.1f s before its request, while the data was read",
                 time.monotonic() - waiting.started)
        process = waiting.process
    else:
        process = _start([sys.executable, "-m", MODULE, str(request), str(out)], _environment(device, card), said)
    failure = process if isinstance(process, str) else _wait(process, deadline, seconds)
    ended = time.monotonic()
    _said(said.read_text(errors="replace") if said.exists() else "")
    costs = _with_startup(_written(out), ended)
    if failure:
        log.warning("measuring %s", failure)
        return _completed(costs, candidates, f"measuring {failure}", estimated)
    return costs or ImageCosts()


@dataclass
class Waiting:
    """A measuring process started before its request (`prestart`), for one device and card."""

    process: subprocess.Popen
    device: str
    card: str
    started: float  # time.monotonic() at its start


_waiting: dict[Path, Waiting] = {}  # by the run folder it was started for


def prestart(device: str, work_dir: Path, until: float, card: str = "") -> Callable[[], None]:
    """A measuring process for `work_dir`'s run started now, on `device` (`card`, a UUID, on a GPU): it imports
    torch and timm (and on a card brings up CUDA) while the run reads its data, then waits for the request
    `gather_costs` writes. It leaves by itself once `until` (time.monotonic()) passes or the process that started
    it has gone. Returns what kills it where it was never asked (nothing where it was)."""
    work_dir = Path(work_dir)
    release(work_dir)
    _request_of(work_dir).unlink(missing_ok=True)
    command = [sys.executable, "-m", MODULE, str(_request_of(work_dir)), str(_out_of(work_dir)),
               f"--await={until!r}:{os.getpid()}"]
    process = _start(command, _environment(device, card), _said_of(work_dir))
    if not isinstance(process, str):  # one that cannot start leaves the planner to start one as before
        _waiting[work_dir] = Waiting(process, device, card, time.monotonic())
    return lambda: release(work_dir)


def release(work_dir: Path) -> None:
    """The process `prestart` started for `work_dir`, killed where no request was handed to it."""
    waiting = _waiting.pop(Path(work_dir), None)
    if waiting is not None:
        _kill(waiting.process)


def _adopted(work_dir: Path, device: str, card: str) -> Waiting | None:
    """The process waiting for `work_dir`'s request where it still runs and measures where asked; None else (one
    for another device is killed)."""
    waiting = _waiting.pop(Path(work_dir), None)
    if waiting is None:
        return None
    if waiting.process.poll() is None and (waiting.device, waiting.card) == (device, card):
        return waiting
    _kill(waiting.process)
    return None


def _request_of(work_dir: Path) -> Path:
    return Path(work_dir) / "measure_request.json"


def _out_of(work_dir: Path) -> Path:
    return Path(work_dir) / "measured_costs.json"


def _said_of(work_dir: Path) -> Path:
    return Path(work_dir) / "measure.log"


def _environment(device: str, card: str) -> dict:
    env = {**os.environ, "GLIBC_TUNABLES": tunables(dict(os.environ))}  # as units will run
    if device == "cuda" and card:  # the run's own card, as its folds will see it
        env.update(CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES=card)
    return env


def _start(command: list[str], env: dict, said: Path) -> subprocess.Popen | str:
    """The measuring process, leading its own group, its output into `said`; why not, where it could not start."""
    with open(said, "w") as stderr:
        try:
            return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                                    start_new_session=True, env=env)
        except OSError as exc:
            return f"could not start: {exc}"


def _wait(process: subprocess.Popen, deadline: float, seconds: float) -> str:
    """The measuring process waited for to `deadline` + OVERRUN_SECONDS at most; how it failed ('' when it did
    not)."""
    try:
        code = process.wait(timeout=max(0.0, deadline + OVERRUN_SECONDS - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill(process)
        return f"stopped at its deadline ({seconds:.1f} s, its start included)"
    except BaseException:  # the supervisor interrupted: the process must not outlive the wait
        _kill(process)
        raise
    if code < 0:
        return f"died with {_signal_name(-code)}"
    return f"exited with code {code}" if code else ""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _kill(process: subprocess.Popen) -> None:
    """SIGKILL to the process's group (it leads one from its start); reaped if it dies within REAP_SECONDS."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=REAP_SECONDS)


def _written(out: Path) -> ImageCosts | None:
    """What the measuring process wrote last (whole: it writes by rename), None when nothing."""
    try:
        return ImageCosts.from_json(json.loads(out.read_text()))
    except (OSError, ValueError):
        return None


def _with_startup(costs: ImageCosts | None, ended: float) -> ImageCosts | None:
    """The candidate the process was starting when it ended (stopped or died inside its first step): its start-up
    until `ended` (time.monotonic()), at least that long, instead of nothing."""
    if costs is None or costs.starting is None:
        return costs
    return dataclasses.replace(costs, startup=costs.startup + (costs.starting.stopped(ended),), starting=None)


def _unended(costs: ImageCosts) -> str:
    """The start-ups measuring was stopped inside, in words ('' when none)."""
    return "".join(f"; {s.candidate.model} at {s.candidate.image_size} px had not ended its first step after "
                   f"{s.seconds:.1f} s (its start-up is at least that)" for s in costs.startup if not s.ended)


def _completed(costs: ImageCosts | None, candidates: list[Candidate], failure: str, estimated: bool) -> ImageCosts:
    """What measuring wrote before `failure`, its missing estimates from the ladder's kept ones (when it was to
    estimate), and a note for the plan."""
    costs = costs or ImageCosts()
    timed, unended = len(costs.throughput), _unended(costs)
    if not estimated:
        return dataclasses.replace(costs, note=f"{failure}: {timed} candidate(s) timed before{unended}")
    kept = estimated_costs(candidates, failure)
    have = {(m.model, m.image_size, m.precision) for m in costs.memory}
    memory = costs.memory + tuple(m for m in kept.memory if (m.model, m.image_size, m.precision) not in have)
    return dataclasses.replace(costs, memory=memory, flops={**kept.flops, **costs.flops},
                               note=f"{failure}: {timed} candidate(s) timed, the others planned from the ladder's "
                                    f"memory and FLOPs estimates; the first timed epoch re-plans{unended}")


def estimated_costs(candidates: list[Candidate], why: str) -> ImageCosts:
    """The candidates' memory and FLOPs from the ladder's kept estimates (no torch, no process), saying `why`."""
    memory, flops = ladder_estimates(candidates)
    return ImageCosts(memory=memory, flops=flops,
                      note=f"{why}: planned from the ladder's memory and FLOPs estimates; the first timed epoch "
                           "re-plans")


def _said(stderr: str | bytes | None) -> None:
    """The measuring process's own lines (a candidate left out, a CUDA error) into the run's log: its last
    MEASURE_LOG_LINES (a traceback's end says what failed), or, where its stacks were dumped before those, from the
    dump's first line on (a dump lists the innermost frame first: where the process was, e.g. deep in an import)."""
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr or ""
    lines = text.splitlines()
    start = max(0, len(lines) - MEASURE_LOG_LINES)
    dump = next((i for i, line in enumerate(lines) if line.endswith("(most recent call first):")), None)
    if dump is not None and dump - 1 < start:
        start = max(0, dump - 1)  # its "Timeout (...)!" line first
    for line in lines[start:start + MEASURE_LOG_LINES]:  # its own lines say "measure:" already
        log.info("%s", line if line.startswith(PREFIX) else PREFIX + line)
