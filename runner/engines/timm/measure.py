"""The measuring process: measured cost of training candidates on the device a run will use, seconds per sample
for a training step and for inference from a few real steps, plus FLOPs per sample for estimating devices we are
not on.

It runs on its own (`python -m runner.engines.timm.measure REQUEST.json OUT.json`) so CUDA state and memory never
stay in the supervisor, which starts it, hands it its request and reads what it wrote (`measuring`). The request
holds an absolute deadline (time.monotonic() is one clock for every process here); the process writes what it has
as it goes (the estimates first, then after each candidate's first step and each timed candidate, each time whole),
checks the deadline between steps too, not only between candidates, and says which candidate it is starting
before its first step: one stopped in that step (a first cuDNN search outlasting the window) leaves its start-up so
far, never nothing. Past the deadline it writes its own stacks to its log.

Started early (`--await`), it imports torch and timm and brings up the card while the run reads its data, then
waits for its request; it leaves at once if its run has gone first.

It imports only what it needs (torch, timm, and the costs' own plain dataclasses, written without pydantic): the
engines' shared helpers pull pandas and scikit-learn, and one measuring window on an H200 ended while it was still
importing them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import json
import math
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from runner.common.atomic import write_json
from runner.common.leaving import leave
from runner.engines.timm.cudnn import apply_policy
from runner.engines.timm.costs import Candidate, FirstStep, ImageCosts, StartUp, Throughput
from runner.engines.timm.estimates import estimate, forward_flops, ladder_estimates
from runner.machine.card_memory import CUDA_RUNTIME_BYTES, is_oom

WARMUP_STEPS = 2  # untimed: the allocator and oneDNN/cuDNN kernel selection happen in the first steps
MIN_STEPS = 3
MAX_STEPS = 20
MIN_TIMED_SECONDS = 0.5  # timed steps add up to at least this, so a fast model is not timed on noise
OUTLIER = 3.0  # FLOPs per second this many times off the other candidates': timed again, else left out
TIMING_BATCH_MAX = 256  # on a GPU: near the batches folds train at, where kernel launches no longer dominate a step
TIMING_MEMORY_SHARE = 0.5  # of the card a timing batch's estimate may take: an estimate off by half still fits
STACKS_SECONDS = 1.0  # past its deadline the process writes its own stacks to its log: where an overrun was
# seconds each training step waits before its backward pass, where a card's cold start spends them (a first cuDNN
# search): how tests give a real measuring process a step that outlasts its window. Unset in a run
STEP_WAIT_VARIABLE = "RUNNER_MEASURE_STEP_WAIT"
READY = "torch and timm imported"  # what an early process says once its imports are done
AWAIT_POLL_SECONDS = 0.02  # a measuring process started early looks for its request this often: a file's stat


class OutOfTime(Exception):
    """The next step would end past the measuring deadline: the candidate is left there."""


@dataclass
class Found:
    """What measuring has found so far, written whole after each change: the timed candidates, each started
    candidate's start-up, and the candidate in its first step now."""

    timed: list[Throughput] = field(default_factory=list)
    startup: list[StartUp] = field(default_factory=list)
    starting: FirstStep | None = None
    on_change: Callable[[Found], None] | None = None  # called with this after each change

    def changed(self) -> None:
        if self.on_change:
            self.on_change(self)


@dataclass
class Watch:
    """One candidate's clock: the deadline checked before each step (the last step's length ahead of now), and
    its start-up once its first step ends. The first step is start-up, not pace (on a card it holds cuDNN's
    search, 47 s where the next took milliseconds), so the second is started whenever the deadline has not
    passed: a step that overruns costs at most the process's kill, and what it wrote stands."""

    candidate: Candidate
    device: str
    deadline: float
    found: Found
    began: float = 0.0  # time.monotonic() at its start (0: not started)
    last: float = 0.0  # seconds the last step took
    started: bool = False  # its first step ended (or it was left before): its start-up is said

    def start(self) -> None:
        """Says the candidate is starting, before it builds its model: a stop inside its first step counts. Its
        start stays the first one where it starts again at a smaller batch."""
        if not self.started and not self.began:
            self.began = time.monotonic()
            self.found.starting = FirstStep(self.candidate, self.device, self.began)
            self.found.changed()

    def check(self) -> None:
        if time.monotonic() + self.last > self.deadline:
            raise OutOfTime(f"{self.candidate.model}: the next step would end past the deadline")

    def stepped(self, seconds: float) -> None:
        if not self.started:  # the first step ended: the start-up is whole
            self._said(StartUp(self.candidate, self.device, round(time.monotonic() - self.began, 3)))
        else:
            self.last = seconds

    def stopped(self) -> None:
        """The candidate left before its first step ended (out of time, or failed): its start-up so far."""
        if not self.started and self.found.starting is not None:
            self._said(self.found.starting.stopped(time.monotonic()))

    def _said(self, startup: StartUp) -> None:
        self.started = True
        self.found.startup.append(startup)
        self.found.starting = None
        self.found.changed()


def step_wait() -> float:
    return float(os.environ.get(STEP_WAIT_VARIABLE) or 0.0)


def time_candidate(candidate: Candidate, device: str, classes: int, watch: Watch | None = None) -> Throughput:
    """Seconds per sample of training and of inference on `device`: WARMUP_STEPS untimed steps first (allocator,
    oneDNN/cuDNN kernel choice), then each step timed alone, until MIN_TIMED_SECONDS and MIN_STEPS are reached;
    the median step is what counts (one slow step, another process taking a core, does not). `watch` checks the
    deadline before each step (OutOfTime) and takes the start-up when the first step ends."""
    import timm
    import torch
    import torch.nn.functional as F

    watch = watch or Watch(candidate, device, math.inf, Found())
    watch.start()  # after the imports: a fold's process has them before its start-up begins
    memory_format = torch.channels_last if candidate.channels_last else torch.contiguous_format
    model = timm.create_model(candidate.model, num_classes=classes).to(device, memory_format=memory_format)
    optimizer = torch.optim.AdamW(model.parameters())
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(candidate.precision)
    autocast = torch.autocast(torch.device(device).type, dtype=dtype) if dtype else contextlib.nullcontext()
    scaler = torch.amp.GradScaler(torch.device(device).type, enabled=candidate.precision == "fp16")
    size = candidate.image_size
    x = torch.randn(candidate.batch, 3, size, size, device=device).contiguous(memory_format=memory_format)
    y = torch.randint(0, classes, (candidate.batch,), device=device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    wait = step_wait()

    def train_step():
        with autocast:
            loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        time.sleep(wait)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    def run(step) -> float:
        watch.check()
        started = time.perf_counter()
        step()
        sync()
        seconds = time.perf_counter() - started
        watch.stepped(seconds)
        return seconds

    def timed(step) -> float:
        for _ in range(WARMUP_STEPS):
            run(step)
        seconds: list[float] = []
        while len(seconds) < MAX_STEPS and (len(seconds) < MIN_STEPS or sum(seconds) < MIN_TIMED_SECONDS):
            seconds.append(run(step))
        return statistics.median(seconds) / candidate.batch

    train = timed(train_step)
    model.eval()
    with torch.inference_mode(), autocast:
        infer = timed(lambda: model(x))
    return Throughput(candidate, device, train, infer)


def timing_batches(candidates: list[Candidate], memory, total_bytes: int) -> list[Candidate]:
    """On a GPU, each candidate at the largest batch (a multiple of 8, from its own up to TIMING_BATCH_MAX) whose
    memory estimate fits TIMING_MEMORY_SHARE of the card: at batch 32 a small model's step on a large card is
    mostly kernel launches, several times slower per sample than the batch its folds will train at."""
    estimates = {(m.model, m.image_size, m.precision): m for m in memory}
    out = []
    for candidate in candidates:
        estimate = estimates.get((candidate.model, candidate.image_size, candidate.precision))
        if estimate is None:
            out.append(candidate)
            continue
        fits = estimate.on_device(CUDA_RUNTIME_BYTES).largest_batch(TIMING_MEMORY_SHARE * total_bytes) // 8 * 8
        out.append(dataclasses.replace(candidate, batch=max(candidate.batch, min(TIMING_BATCH_MAX, fits))))
    return out


def _timed_or_smaller(candidate: Candidate, device: str, classes: int, smaller: int, watch: Watch) -> Throughput:
    """The candidate timed at its batch, or at `smaller` when that runs out of memory."""
    try:
        return time_candidate(candidate, device, classes, watch)
    except Exception as exc:
        if not is_oom(exc) or candidate.batch <= smaller:
            raise
    import torch

    torch.cuda.empty_cache()
    return time_candidate(dataclasses.replace(candidate, batch=smaller), device, classes, watch)


def measure(candidates: list[Candidate], device: str, classes: int, deadline: float,
            smaller: int = 32, flops: dict | None = None, found: Found | None = None) -> list[Throughput]:
    """Time candidates in order until the deadline (time.monotonic()) is near, checked before each step; an OOM
    at a candidate's batch is tried again at `smaller`, and one there too skips the candidate. `found` holds what
    was timed and each started candidate's start-up (calling its `on_change` after each). Then cross-check them
    (`outliers`, from `flops` where given): one far off the others' FLOPs per second is timed again while there
    is time, and left out when it still is."""
    found = found or Found()
    results, spent = found.timed, []
    for candidate in candidates:
        expected = max(spent, default=0.0)
        if time.monotonic() + expected > deadline:
            break
        started, watch = time.monotonic(), Watch(candidate, device, deadline, found)
        try:
            results.append(_timed_or_smaller(candidate, device, classes, smaller, watch))
        except OutOfTime:
            print(f"measure: {candidate.model} at {candidate.image_size} px ({candidate.precision}) left at the "
                  "deadline", file=sys.stderr)
            watch.stopped()
            break
        except Exception as exc:  # a candidate that cannot run here is simply not planned
            if not is_oom(exc):
                print(f"measure: {candidate.model} {candidate.precision}: {type(exc).__name__}: {exc}",
                      file=sys.stderr)
        watch.stopped()
        spent.append(time.monotonic() - started)
        found.changed()
    flops = dict(flops or {})
    for t in results:  # a forward pass on the CPU for those not estimated already
        name = f"{t.candidate.model}@{t.candidate.image_size}"
        flops[name] = flops.get(name) or forward_flops(t.candidate.model, t.candidate.image_size, classes)
    for odd in outliers(results, flops):
        if time.monotonic() + max(spent, default=0.0) > deadline:
            break
        try:
            again = time_candidate(odd.candidate, device, classes, Watch(odd.candidate, device, deadline, Found()))
        except OutOfTime:
            break
        results[results.index(odd)] = again
        if again in outliers(results, flops):
            results.remove(again)
            print(f"measure: {odd.candidate.model} at {odd.candidate.image_size} px ({odd.candidate.precision}) "
                  f"left out: timed twice more than {OUTLIER}x off the others' FLOPs per second", file=sys.stderr)
    return results


def flop_rate(throughput: Throughput, flops: dict) -> float:
    """Training FLOPs per second the timing implies (a step is about 3 forward passes)."""
    return 3 * flops[f"{throughput.candidate.model}@{throughput.candidate.image_size}"] / \
        throughput.train_seconds_per_sample


def outliers(timed: list[Throughput], flops: dict) -> list[Throughput]:
    """Candidates whose FLOPs per second are more than OUTLIER times off the median of the others at the same
    precision (a timing disturbed by warm-up or another process); at least 3 are needed to tell."""
    odd = []
    for t in timed:
        others = [flop_rate(o, flops) for o in timed if o is not t and o.candidate.precision == t.candidate.precision]
        if len(others) >= 2:
            typical = statistics.median(others)
            if not typical / OUTLIER <= flop_rate(t, flops) <= typical * OUTLIER:
                odd.append(t)
    return odd


def main(argv: list[str]) -> int:
    """REQUEST.json: candidates, device, classes, threads, deadline (time.monotonic()), estimate (bool), time
    (bool). OUT.json is rewritten whole after each step, so whatever moment the process is killed at, what it
    measured until then stands. With `--await=UNTIL:PID` the request is not there yet: the process imports what
    it times with first, then waits for it (`prestart`)."""
    if len(argv) > 2 and argv[2].startswith("--await="):
        until, parent = argv[2].removeprefix("--await=").split(":")
        _awaited(Path(argv[0]), float(until), int(parent))
    request, out = json.loads(Path(argv[0]).read_text()), Path(argv[1])
    deadline = request["deadline"]
    _stacks_past(deadline)
    candidates = [Candidate(**c) for c in request["candidates"]]
    estimating = request.get("estimate")
    kept = ladder_estimates(candidates) if estimating else ((), {})
    _write(out, ImageCosts((), *kept))  # before torch's import: a crash in it still leaves these
    import torch

    torch.set_num_threads(request["threads"])
    memory, flops = estimate(candidates, request["classes"], deadline) if estimating else kept
    _write(out, ImageCosts((), memory, flops))
    if request["device"].startswith("cuda"):
        apply_policy()  # as folds train
        candidates = timing_batches(candidates, memory, torch.cuda.get_device_properties(0).total_memory)
    if request.get("time"):
        found = Found(on_change=lambda now: _write(out, ImageCosts(tuple(now.timed), memory, flops,
                                                                   startup=tuple(now.startup),
                                                                   starting=now.starting)))
        timed = measure(candidates, request["device"], request["classes"], deadline, flops=flops, found=found)
        _write(out, ImageCosts(tuple(timed), memory, flops, startup=tuple(found.startup)))
    faulthandler.cancel_dump_traceback_later()
    return 0


def _awaited(request: Path, until: float, parent: int) -> None:
    """torch and timm imported (on a card, CUDA brought up) while a thread looks for `request`; returns once both
    are done. Once the request is there its deadline holds, the stacks written past it even where the imports
    outlast it; where `until` (time.monotonic()) passes first, or the process `parent` that started this one has
    gone, the process leaves at once, imports unfinished: no run is left to ask."""
    began, arrived = time.monotonic(), threading.Event()

    def look() -> None:
        while not request.exists():
            if time.monotonic() > until or os.getppid() != parent:
                print("measure: no request came; leaving", file=sys.stderr, flush=True)
                os._exit(0)
            time.sleep(AWAIT_POLL_SECONDS)
        _stacks_past(json.loads(request.read_text())["deadline"])
        arrived.set()

    threading.Thread(target=look, daemon=True, name="request").start()
    import timm  # noqa: F401  (its import paid before the request)
    import torch

    if torch.cuda.is_available():
        torch.cuda.init()
    ready = time.monotonic()
    # said when it happens (flushed), not once the request came: the run's log tells an early process's imports
    # from its wait, and a test can wait for this line instead of a window that covers imports on any core
    print(f"measure: {READY} in {ready - began:.1f} s", file=sys.stderr, flush=True)
    arrived.wait()
    print(f"measure: the request came after {max(0.0, time.monotonic() - ready):.1f} s waiting", file=sys.stderr)


def _stacks_past(deadline: float) -> None:
    """This process's stacks into its log STACKS_SECONDS past `deadline`: where an overrun was."""
    faulthandler.dump_traceback_later(max(0.1, deadline + STACKS_SECONDS - time.monotonic()), exit=False)


def _write(out: Path, costs: ImageCosts) -> None:
    """As plain dataclasses (the supervisor reads them back validated): no pydantic in this process."""
    write_json(out, dataclasses.asdict(costs))


if __name__ == "__main__":
    leave(main(sys.argv[1:]))  # its costs are written whole: a teardown would only hold the plan
