"""Measured cost of training candidates on the device a run will use: seconds per sample for a training step and
for inference, from a few real steps, plus FLOPs per sample for estimating devices we are not on.

Runs in its own process (`python -m runner.measure REQUEST.json OUT.json`) so CUDA state and memory never stay
in the supervisor, and stops measuring at its time limit, returning what it has.
"""
from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from runner.budget import process_start

WARMUP_STEPS = 2  # untimed: the allocator and oneDNN/cuDNN kernel selection happen in the first steps
MIN_STEPS = 3
MAX_STEPS = 20
MIN_TIMED_SECONDS = 0.5  # timed steps add up to at least this, so a fast model is not timed on noise
OUTLIER = 3.0  # FLOPs per second this many times off the other candidates': timed again, else left out
from runner.memory import MemoryEstimate, estimate_memory


@dataclass(frozen=True)
class Candidate:
    model: str
    image_size: int
    precision: str  # fp32 | bf16 | fp16
    batch: int
    channels_last: bool = True


@dataclass(frozen=True)
class Throughput:
    candidate: Candidate
    device: str
    train_seconds_per_sample: float
    infer_seconds_per_sample: float

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Throughput":
        return cls(**{**data, "candidate": Candidate(**data["candidate"])})


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


@dataclass(frozen=True)
class ImageCosts:
    """What the image planner knows about its candidates: measured throughput on this device (may be empty), and
    device-independent memory estimates and forward FLOPs per sample, keyed by 'model@size'."""

    throughput: tuple[Throughput, ...] = ()
    memory: tuple[MemoryEstimate, ...] = ()
    flops: dict = dataclasses.field(default_factory=dict)  # 'model@size' -> forward FLOPs per sample
    slowdown: float = 1.0  # real epochs took this many times what was measured or estimated (learnt in a run)

    def speed(self, model: str, size: int, precision: str) -> Throughput | None:
        """The candidate's throughput, corrected by what the run has learnt."""
        found = next((t for t in self.throughput if (t.candidate.model, t.candidate.image_size,
                                                     t.candidate.precision) == (model, size, precision)), None)
        if found is None or self.slowdown == 1.0:
            return found
        return dataclasses.replace(found, train_seconds_per_sample=found.train_seconds_per_sample * self.slowdown,
                                   infer_seconds_per_sample=found.infer_seconds_per_sample * self.slowdown)

    def memory_of(self, model: str, size: int, precision: str) -> MemoryEstimate | None:
        return next((m for m in self.memory if (m.model, m.image_size, m.precision) == (model, size, precision)),
                    None)

    def to_json(self) -> dict:
        return dict(throughput=[t.to_json() for t in self.throughput], memory=[m.to_json() for m in self.memory],
                    flops=self.flops, slowdown=self.slowdown)

    @classmethod
    def from_json(cls, data: dict) -> "ImageCosts":
        return cls(tuple(Throughput.from_json(t) for t in data.get("throughput", ())),
                   tuple(MemoryEstimate(**m) for m in data.get("memory", ())), dict(data.get("flops", {})),
                   data.get("slowdown", 1.0))


def forward_flops(model_name: str, image_size: int, classes: int) -> int:
    """FLOPs of one sample's forward pass, counted by torch's FlopCounterMode on CPU."""
    import timm
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    model = timm.create_model(model_name, num_classes=classes).eval()
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(torch.randn(1, 3, image_size, image_size))
    return int(counter.get_total_flops())


def estimate(candidates: list[Candidate], classes: int) -> tuple[tuple[MemoryEstimate, ...], dict]:
    """Memory estimates and FLOPs for each distinct candidate (CPU work, no GPU needed); the ladder's own come
    from the estimates kept with the code (`runner.ladder`)."""
    from runner import ladder

    memory, flops, kept = {}, {}, ladder.known()
    for c in candidates:
        key = (c.model, c.image_size, c.precision)
        if key not in memory:
            memory[key] = ladder.memory_of(c.model, c.image_size, c.precision, kept) if c.channels_last else None
            memory[key] = memory[key] or estimate_memory(c.model, c.image_size, c.precision, classes,
                                                         c.channels_last)
        if f"{c.model}@{c.image_size}" not in flops:
            flops[f"{c.model}@{c.image_size}"] = ladder.flops_of(c.model, c.image_size, kept) or \
                forward_flops(c.model, c.image_size, classes)
    return tuple(memory.values()), flops


def measure(candidates: list[Candidate], device: str, classes: int, deadline: float) -> list[Throughput]:
    """Time candidates in order until the deadline (time.monotonic()) is near; an OOM skips a candidate. Then
    cross-check them (`outliers`): one far off the others' FLOPs per second is timed again, and left out when it
    still is."""
    from runner.memory import is_oom

    results, spent = [], []
    for candidate in candidates:
        expected = max(spent, default=0.0)
        if time.monotonic() + expected > deadline:
            break
        started = time.monotonic()
        try:
            results.append(time_candidate(candidate, device, classes))
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
                 time_them: bool, work_dir: Path) -> ImageCosts:
    """Costs from a measuring process (supervisor side: no torch here). A failed or late measurement gives the
    costs it managed, or none; the planner then falls back to the smallest model."""
    import subprocess

    request, out = work_dir / "measure_request.json", work_dir / "costs.json"
    request.write_text(json.dumps(dict(candidates=[dataclasses.asdict(c) for c in candidates], device=device,
                                       classes=classes, threads=threads, seconds=seconds,
                                       estimate=device != "cpu" or not time_them, time=time_them)))
    try:
        from runner.processes import tunables

        subprocess.run([sys.executable, "-m", "runner.measure", str(request), str(out)], check=True,
                       timeout=2 * seconds + 5, capture_output=True, text=True, start_new_session=True,
                       env={**os.environ, "GLIBC_TUNABLES": tunables(dict(os.environ))})  # as units will run
        return ImageCosts.from_json(json.loads(out.read_text()))
    except (subprocess.SubprocessError, OSError, ValueError) as exc:
        print(f"measuring failed: {exc}", file=sys.stderr)
        return ImageCosts()


def main(argv: list[str]) -> int:
    """REQUEST.json: candidates, device, classes, threads, seconds, estimate (bool), time (bool)."""
    request = json.loads(Path(argv[0]).read_text())
    import torch

    torch.set_num_threads(request["threads"])
    candidates = [Candidate(**c) for c in request["candidates"]]
    deadline = process_start() + request["seconds"]
    memory, flops = estimate(candidates, request["classes"]) if request.get("estimate") else ((), {})
    timed = measure(candidates, request["device"], request["classes"], deadline) if request.get("time") else []
    Path(argv[1]).write_text(json.dumps(ImageCosts(tuple(timed), memory, flops).to_json(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
