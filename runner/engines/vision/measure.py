"""Measured cost of training candidates on the device a run will use: seconds per sample for a training step and
for inference, from a few real steps, plus FLOPs per sample for estimating devices we are not on.

Runs in its own process (`python -m runner.engines.vision.measure REQUEST.json OUT.json`) so CUDA state and
memory never stay in the supervisor. The supervisor hands it an absolute deadline (time.monotonic() is one clock
for every process here), so its start and imports count; it writes what it has as it goes (the estimates first,
then after each timed candidate, each time whole), and the supervisor kills it OVERRUN_SECONDS past that deadline
and plans from what was written. A process that dies leaves the ladder's kept estimates, read without torch.
"""
from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from runner.atomic import write_json
from runner.heap import tunables
from runner.engines.vision.costs import Candidate, ImageCosts, Throughput
from runner.engines.vision.estimates import estimate, forward_flops, ladder_estimates

WARMUP_STEPS = 2  # untimed: the allocator and oneDNN/cuDNN kernel selection happen in the first steps
MIN_STEPS = 3
MAX_STEPS = 20
MIN_TIMED_SECONDS = 0.5  # timed steps add up to at least this, so a fast model is not timed on noise
OUTLIER = 3.0  # FLOPs per second this many times off the other candidates': timed again, else left out
TIMING_BATCH_MAX = 256  # on a GPU: near the batches folds train at, where kernel launches no longer dominate a step
TIMING_MEMORY_SHARE = 0.5  # of the card a timing batch's estimate may take: an estimate off by half still fits
MEASURE_LOG_LINES = 40  # of the measuring process's stderr kept in the run's log: a traceback's end fits
# past its deadline the measuring process is killed: a timing in progress (a first cuDNN search took 7 s on an H200)
# is not waited for, and what it wrote stands. 25 s of a 90 s run went to measuring when it could run to 2x its time
OVERRUN_SECONDS = 2.0
STACKS_SECONDS = 1.0  # past its deadline the process writes its own stacks to its log: where an overrun was
REAP_SECONDS = 1.0  # for a killed process to be reaped; one stuck in a driver call is left behind, never waited on

log = logging.getLogger("runner")


def time_candidate(candidate: Candidate, device: str, classes: int) -> Throughput:
    """Seconds per sample of training and of inference on `device`: WARMUP_STEPS untimed steps first (allocator,
    oneDNN/cuDNN kernel choice), then each step timed alone, until MIN_TIMED_SECONDS and MIN_STEPS are reached;
    the median step is what counts (one slow step, another process taking a core, does not)."""
    import contextlib

    import timm
    import torch
    import torch.nn.functional as F

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

    def train_step():
        with autocast:
            loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    def timed(step) -> float:
        for _ in range(WARMUP_STEPS):
            step()
        sync()
        seconds: list[float] = []
        while len(seconds) < MAX_STEPS and (len(seconds) < MIN_STEPS or sum(seconds) < MIN_TIMED_SECONDS):
            started = time.perf_counter()
            step()
            sync()
            seconds.append(time.perf_counter() - started)
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
    from runner.engines.networks import CUDA_RUNTIME_BYTES

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


def _timed_or_smaller(candidate: Candidate, device: str, classes: int, smaller: int) -> Throughput:
    """The candidate timed at its batch, or at `smaller` when that runs out of memory."""
    from runner.engines.networks import is_oom

    try:
        return time_candidate(candidate, device, classes)
    except Exception as exc:
        if not is_oom(exc) or candidate.batch <= smaller:
            raise
    import torch

    torch.cuda.empty_cache()
    return time_candidate(dataclasses.replace(candidate, batch=smaller), device, classes)


def measure(candidates: list[Candidate], device: str, classes: int, deadline: float,
            smaller: int = 32, flops: dict | None = None, on_timed=None) -> list[Throughput]:
    """Time candidates in order until the deadline (time.monotonic()) is near; an OOM at a candidate's batch is
    tried again at `smaller`, and one there too skips the candidate; `on_timed(results)` after each. Then
    cross-check them (`outliers`, from `flops` where given): one far off the others' FLOPs per second is timed
    again while there is time, and left out when it still is."""
    from runner.engines.networks import is_oom

    results, spent = [], []
    for candidate in candidates:
        expected = max(spent, default=0.0)
        if time.monotonic() + expected > deadline:
            break
        started = time.monotonic()
        try:
            results.append(_timed_or_smaller(candidate, device, classes, smaller))
        except Exception as exc:  # a candidate that cannot run here is simply not planned
            if not is_oom(exc):
                print(f"measure: {candidate.model} {candidate.precision}: {type(exc).__name__}: {exc}",
                      file=sys.stderr)
        spent.append(time.monotonic() - started)
        if on_timed:
            on_timed(results)
    flops = dict(flops or {})
    for t in results:  # a forward pass on the CPU for those not estimated already
        name = f"{t.candidate.model}@{t.candidate.image_size}"
        flops[name] = flops.get(name) or forward_flops(t.candidate.model, t.candidate.image_size, classes)
    for odd in outliers(results, flops):
        if time.monotonic() + max(spent, default=0.0) > deadline:
            break
        again = time_candidate(odd.candidate, device, classes)
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


def gather_costs(candidates: list[Candidate], device: str, classes: int, threads: int, seconds: float,
                 time_them: bool, work_dir: Path, card: str = "") -> ImageCosts:
    """Costs from a measuring process (supervisor side: no torch here), on `card` (a UUID) when it measures on a
    GPU, within `seconds` from now, its start included (killed OVERRUN_SECONDS past them). What it wrote stands;
    when it died or was stopped, the ladder's kept estimates fill in what it did not write, and the costs say
    why. What the process said on stderr goes to the run's log either way."""
    deadline = time.monotonic() + seconds
    estimated = device != "cpu" or not time_them
    request, out, said = work_dir / "measure_request.json", work_dir / "measured_costs.json", work_dir / "measure.log"
    out.unlink(missing_ok=True)
    write_json(request, dict(candidates=[dataclasses.asdict(c) for c in candidates], device=device,
                             classes=classes, threads=threads, deadline=deadline, estimate=estimated,
                             time=time_them))
    env = {**os.environ, "GLIBC_TUNABLES": tunables(dict(os.environ))}  # as units will run
    if device == "cuda" and card:  # the run's own card, as its folds will see it
        env.update(CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES=card)
    failure = _run([sys.executable, "-m", "runner.engines.vision.measure", str(request), str(out)], env, said,
                   deadline, seconds)
    _said(said.read_text(errors="replace") if said.exists() else "")
    costs = _written(out)
    if failure:
        log.warning("measuring %s", failure)
        return _completed(costs, candidates, f"measuring {failure}", estimated)
    return costs or ImageCosts()


def _run(command: list[str], env: dict, said: Path, deadline: float, seconds: float) -> str:
    """Run the measuring process to `deadline` + OVERRUN_SECONDS at most; how it failed ('' when it did not)."""
    with open(said, "w") as stderr:
        try:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                                       start_new_session=True, env=env)
        except OSError as exc:
            return f"could not start: {exc}"
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


def _completed(costs: ImageCosts | None, candidates: list[Candidate], failure: str, estimated: bool) -> ImageCosts:
    """What measuring wrote before `failure`, its missing estimates from the ladder's kept ones (when it was to
    estimate), and a note for the plan."""
    costs = costs or ImageCosts()
    timed = len(costs.throughput)
    if not estimated:
        return dataclasses.replace(costs, note=f"{failure}: {timed} candidate(s) timed before")
    kept = estimated_costs(candidates, failure)
    have = {(m.model, m.image_size, m.precision) for m in costs.memory}
    memory = costs.memory + tuple(m for m in kept.memory if (m.model, m.image_size, m.precision) not in have)
    return dataclasses.replace(costs, memory=memory, flops={**kept.flops, **costs.flops},
                               note=f"{failure}: {timed} candidate(s) timed, the others planned from the ladder's "
                                    "memory and FLOPs estimates; the first timed epoch re-plans")


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
    for line in lines[start:start + MEASURE_LOG_LINES]:
        log.info("measure: %s", line)


def main(argv: list[str]) -> int:
    """REQUEST.json: candidates, device, classes, threads, deadline (time.monotonic()), estimate (bool), time
    (bool). OUT.json is rewritten whole after each step, so whatever moment the process is killed at, what it
    measured until then stands."""
    request, out = json.loads(Path(argv[0]).read_text()), Path(argv[1])
    deadline = request["deadline"]
    faulthandler.dump_traceback_later(max(0.1, deadline + STACKS_SECONDS - time.monotonic()), exit=False)
    candidates = [Candidate(**c) for c in request["candidates"]]
    estimating = request.get("estimate")
    kept = ladder_estimates(candidates) if estimating else ((), {})
    _write(out, ImageCosts((), *kept))  # before torch's import: a crash in it still leaves these
    import torch

    torch.set_num_threads(request["threads"])
    memory, flops = estimate(candidates, request["classes"], deadline) if estimating else kept
    _write(out, ImageCosts((), memory, flops))
    if request["device"].startswith("cuda"):
        torch.backends.cudnn.benchmark = True  # as folds train: cuDNN's fastest kernels for the fixed shapes
        candidates = timing_batches(candidates, memory, torch.cuda.get_device_properties(0).total_memory)
    if request.get("time"):
        timed = measure(candidates, request["device"], request["classes"], deadline, flops=flops,
                        on_timed=lambda done: _write(out, ImageCosts(tuple(done), memory, flops)))
        _write(out, ImageCosts(tuple(timed), memory, flops))
    faulthandler.cancel_dump_traceback_later()
    return 0


def _write(out: Path, costs: ImageCosts) -> None:
    write_json(out, costs.to_json())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
