"""Measured cost of training candidates on the device a run will use: seconds per sample for a training step and
for inference, from a few real steps, plus FLOPs per sample for estimating devices we are not on.

Runs in its own process (`python -m runner.engines.vision.measure REQUEST.json OUT.json`) so CUDA state and
memory never stay in the supervisor, and stops measuring at its time limit, returning what it has.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path

from runner.budget import process_start
from runner.heap import tunables
from runner.engines.vision.costs import Candidate, ImageCosts, Throughput
from runner.engines.vision.estimates import estimate, forward_flops

WARMUP_STEPS = 2  # untimed: the allocator and oneDNN/cuDNN kernel selection happen in the first steps
MIN_STEPS = 3
MAX_STEPS = 20
MIN_TIMED_SECONDS = 0.5  # timed steps add up to at least this, so a fast model is not timed on noise
OUTLIER = 3.0  # FLOPs per second this many times off the other candidates': timed again, else left out
TIMING_BATCH_MAX = 256  # on a GPU: near the batches folds train at, where kernel launches no longer dominate a step
TIMING_MEMORY_SHARE = 0.5  # of the card a timing batch's estimate may take: an estimate off by half still fits
MEASURE_LOG_LINES = 40  # of the measuring process's stderr kept in the run's log: a traceback's end fits

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
            smaller: int = 32) -> list[Throughput]:
    """Time candidates in order until the deadline (time.monotonic()) is near; an OOM at a candidate's batch is
    tried again at `smaller`, and one there too skips the candidate. Then
    cross-check them (`outliers`): one far off the others' FLOPs per second is timed again, and left out when it
    still is."""
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
    flops = {f"{t.candidate.model}@{t.candidate.image_size}": forward_flops(t.candidate.model, t.candidate.image_size,
                                                                          classes) for t in results}
    for odd in outliers(results, flops):
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
    GPU. A failed or late measurement gives the costs it managed, or none; the planner then falls back to the
    smallest model. What the process said on stderr goes to the run's log either way."""
    import subprocess

    request, out = work_dir / "measure_request.json", work_dir / "costs.json"
    request.write_text(json.dumps(dict(candidates=[dataclasses.asdict(c) for c in candidates], device=device,
                                       classes=classes, threads=threads, seconds=seconds,
                                       estimate=device != "cpu" or not time_them, time=time_them)))
    env = {**os.environ, "GLIBC_TUNABLES": tunables(dict(os.environ))}  # as units will run
    if device == "cuda" and card:  # the run's own card, as its folds will see it
        env.update(CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES=card)
    try:
        done = subprocess.run([sys.executable, "-m", "runner.engines.vision.measure", str(request), str(out)],
                              check=True, timeout=2 * seconds + 5, capture_output=True, text=True,
                              start_new_session=True, env=env)
        _said(done.stderr)
        return ImageCosts.from_json(json.loads(out.read_text()))
    except (subprocess.SubprocessError, OSError, ValueError) as exc:
        _said(getattr(exc, "stderr", None))
        log.warning("measuring failed: %s", exc)
        return ImageCosts()


def _said(stderr: str | bytes | None) -> None:
    """The measuring process's own lines (a candidate left out, a CUDA error) into the run's log."""
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr or ""
    for line in text.splitlines()[-MEASURE_LOG_LINES:]:
        log.info("measure: %s", line)


def main(argv: list[str]) -> int:
    """REQUEST.json: candidates, device, classes, threads, seconds, estimate (bool), time (bool)."""
    request = json.loads(Path(argv[0]).read_text())
    import torch

    torch.set_num_threads(request["threads"])
    candidates = [Candidate(**c) for c in request["candidates"]]
    deadline = process_start() + request["seconds"]
    memory, flops = estimate(candidates, request["classes"]) if request.get("estimate") else ((), {})
    if request["device"].startswith("cuda"):
        torch.backends.cudnn.benchmark = True  # as folds train: cuDNN's fastest kernels for the fixed shapes
        candidates = timing_batches(candidates, memory, torch.cuda.get_device_properties(0).total_memory)
    timed = measure(candidates, request["device"], request["classes"], deadline) if request.get("time") else []
    Path(argv[1]).write_text(json.dumps(ImageCosts(tuple(timed), memory, flops).to_json(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
