"""What every group of bench/gpu_check.py's sections uses: the check itself (`Check`: the device, how much each
section runs as `Sizes`, FULL on a card or SMOKE on a CPU, the scratch folder and the sections' results so far),
the constants more than one group reads, the measuring helpers (`train_rate` on random batches, `monitored` with
NVML's figures, `probe_model` and `probed` for the batch probe), the environment of a child process, the dog-breed
demo written once per check, and the whole-run helpers (`runner_run` started as a user starts it, its report read,
its submission graded, the units it killed printed)."""
from __future__ import annotations

import ast
import gc
import json
import os
import re
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

import torch

CLASSES = 120  # the dog-breed demo's breeds: every section trains a head of this size
NEEDS_CUDA = {"skipped": "needs CUDA"}
MiB = 2**20
NVML_INTERVAL = 0.2  # seconds between monitor samples: several per second of work (NVML's own window is <= 1 s)
PROBE_CEILING = 1024  # probe_batch's default max_batch: a model whose batch reaches it never shows the target share
NOTE = re.compile(r"batch (\d+) probed: .*\(tried (\[.*\])\)")  # confirm_batch's note: the batch and its tries
BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
# seconds a whole run may end past its budget, timed from here: its budget's clock starts at its process's start, a
# moment after ours (and the guarded run is polled)
EXIT_SLACK = 1.0
RUN_GRACE = 60  # seconds past its budget before a whole run is killed from here (its own watchdog ends it first)


@dataclass(frozen=True)
class Sizes:
    """How much each section runs: the real check, or a CPU smoke run of the same code."""

    memory_models: tuple[tuple[str, int], ...]
    memory_batches: tuple[int, ...]
    speed_model: tuple[str, int]
    speed_batch: int
    speed_warmup: int  # untimed steps: allocator, cudnn.benchmark and compile happen in the first ones
    speed_steps: int
    monitor_seconds: float
    demo: dict  # write_demo options
    demo_size: int
    failure_images: int
    planned_images: int
    run_seconds: int  # the whole runs' budget: the guarded run's and the audio run's
    threads: int | None = None  # torch's CPU threads (None: its default)


FULL = Sizes(memory_models=(("resnet18", 224), ("convnext_tiny", 224), ("efficientnet_b0", 224)),
             memory_batches=(32, 128), speed_model=("resnet18", 224), speed_batch=128, speed_warmup=3,
             speed_steps=30, monitor_seconds=6.0, demo={}, demo_size=224, failure_images=2048, planned_images=8192,
             run_seconds=90)
SMOKE = Sizes(memory_models=(("resnet18", 64),), memory_batches=(4, 8), speed_model=("resnet18", 64),
              speed_batch=4, speed_warmup=1, speed_steps=2, monitor_seconds=1.0,
              demo=dict(train_per_breed=1, test_per_breed=1), demo_size=64, failure_images=32, planned_images=64,
              run_seconds=20, threads=1)  # one thread: on a shared CPU, OpenMP threads spin at barriers for a
# preempted peer (40x); 20 s: the fork server imports torch and timm (about 4 s here) before the first unit, and on
# a loaded machine (4 times slower) the prepare step ended at 14 s, so a 16 s run's window closed before any fold


def paced(sizes: Sizes, pace: float) -> Sizes:
    """`sizes` with the whole runs' budget `pace` times as long: on a machine that much slower their processes'
    imports alone took most of 20 s (an AVX2-only EPYC: 8.5 s of CPU for torch's and timm's against 3.5)."""
    return replace(sizes, run_seconds=round(sizes.run_seconds * max(1.0, pace)))


@dataclass
class Check:
    device: str  # cuda | cpu
    sizes: Sizes
    work: Path  # scratch folder, removed at the end
    results: dict  # sections done so far (the OOM section compares with the fresh probe)
    demo: Path | None = None  # the dog-breed demo's folder, as write_demo returned it, once a section wrote it

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    @property
    def low_precision(self) -> str:
        """What the planner trains in on this device: bf16 from compute capability 8.0, else fp16."""
        return "fp16" if self.cuda and torch.cuda.get_device_capability(0) < (8, 0) else "bf16"

    @property
    def precision(self) -> str:
        return self.low_precision if self.cuda else "fp32"


def mib(nbytes: float) -> float:
    return round(nbytes / MiB, 1)


def error_pct(estimate: float, measured: float) -> float:
    return round(100 * (estimate - measured) / measured, 1)


def failed(exc: BaseException) -> dict:
    return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000],
            "traceback": traceback.format_exception(exc)[-3:]}


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def release() -> None:
    """Between measurements: compiled graphs dropped (dynamo counts recompiles of one forward across model
    instances, so one section's compiles would count against the next's) and the cached memory returned."""
    torch._dynamo.reset()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def image_settings(check: Check, model: str, size: int, batch: int, **changes):
    from runner.engines.timm.settings import ImageSettings

    fields = dict(model=model, image_size=size, batch_size=batch, precision=check.precision, device=check.device,
                  threads=torch.get_num_threads())
    return ImageSettings(**{**fields, **changes})


def random_batch(settings) -> tuple[torch.Tensor, torch.Tensor]:
    """Random uint8 squares of the cached side, as the loader ships them and `_warm_peak` builds them, already on
    the device: what the step itself costs, no loading."""
    from runner.engines.timm.images import cache_side

    side, batch = cache_side(settings.image_size), settings.batch_size
    return (torch.randint(0, 255, (batch, 3, side, side), dtype=torch.uint8, device=settings.device),
            torch.randint(0, CLASSES, (batch,), device=settings.device))


def train_rate(settings, warmup: int, steps: int) -> dict:
    """Training images/s of `Trainer.train_epoch` on one random batch after `warmup` untimed steps; with the
    device's peak memory."""
    from runner.engines.timm.training import Trainer

    trainer = Trainer(settings, None, CLASSES)
    x, y = random_batch(settings)
    started = time.perf_counter()
    trainer.train_epoch([(x, y)] * warmup, stop_at=float("inf"))
    sync(settings.device)
    warm = time.perf_counter() - started
    started = time.perf_counter()
    stats = trainer.train_epoch([(x, y)] * steps, stop_at=float("inf"))
    sync(settings.device)
    rate = stats.samples / (time.perf_counter() - started)
    out = dict(images_per_second=round(rate, 1), warmup_seconds=round(warm, 2))
    if settings.device == "cuda":
        out["peak_reserved_mib"] = mib(torch.cuda.max_memory_reserved())
    return out


def gpu_busy(samples: list[dict]) -> dict:
    """NVML's figures over monitor samples: how many had GPU fields, the busiest GPU's utilisation (percent of
    time a kernel ran) and the most memory in use."""
    with_gpu = [s for s in samples if s.get("gpus")]
    util = [max(g["util"] for g in s["gpus"] if g.get("util") is not None) for s in with_gpu
            if any(g.get("util") is not None for g in s["gpus"])]
    used = [max(g["used"] / g["total"] for g in s["gpus"] if g.get("used") is not None) for s in with_gpu
            if any(g.get("used") is not None for g in s["gpus"])]
    return dict(samples=len(samples), gpu_samples=len(with_gpu),
                gpu_util_mean=round(sum(util) / len(util), 1) if util else None,
                gpu_util_max=max(util, default=None),
                gpu_memory_used_max=round(max(used), 3) if used else None)


def monitored(check: Check, label: str, run) -> tuple[object, dict]:
    """run() with the runner's monitor sampling beside it; its result and NVML's figures over that time."""
    from runner.machine.monitor import Monitor, read_samples

    path = check.work / f"monitor-{label}.jsonl"
    with Monitor(path, time.monotonic(), interval=NVML_INTERVAL):
        result = run()
    return result, gpu_busy(read_samples(path))


# --- the probe's model and its note (confirm_batch, oom_backoff, shared_gpu) ---------------------------------

def probe_model(check: Check, slots: int = 1) -> tuple[str, int, int]:
    """The cheapest GPU ladder rung whose estimated batch at the target share stays under half the probe's ceiling
    (a lighter model reaches the ceiling first and cannot show the target), and that batch as the planner
    rounds it."""
    from runner.engines.timm import estimates as ladder
    from runner.engines.timm.ladder import GPU_CANDIDATES
    from runner.engines.timm.settings import TARGET_MEMORY_FRACTION
    from runner.engines.networks import CUDA_RUNTIME_BYTES
    from runner.engines.timm.memory import estimate_memory

    share = TARGET_MEMORY_FRACTION * torch.cuda.get_device_properties(0).total_memory / slots
    table = ladder.known()
    for model, size in reversed(GPU_CANDIDATES):
        estimate = ladder.memory_of(model, size, check.precision, table) or \
            estimate_memory(model, size, check.precision, CLASSES)
        batch = estimate.on_device(CUDA_RUNTIME_BYTES).largest_batch(share)
        if batch <= PROBE_CEILING // 2:
            return model, size, max(1, batch // 8 * 8 if batch >= 32 else batch)
    return model, size, max(1, batch)


def probed(settings, note: str, slots: int = 1) -> dict:
    """The confirmed batch, its warm peak's share of the device (or of this fold's part of it), and the batches
    tried, from confirm_batch's note."""
    from runner.engines.timm.settings import MEMORY_TOLERANCE, TARGET_MEMORY_FRACTION

    match = NOTE.search(note)
    tried = ast.literal_eval(match.group(2)) if match else []
    device_bytes = torch.cuda.get_device_properties(0).total_memory // slots
    peak = dict(tried).get(settings.batch_size)
    fraction = round(peak / device_bytes, 3) if peak else None
    return dict(batch=settings.batch_size, fraction=fraction, tried=tried, note=note,
                within_target=fraction is not None and abs(fraction - TARGET_MEMORY_FRACTION) <= MEMORY_TOLERANCE)


# --- child processes -----------------------------------------------------------------------------------------

def absolute_paths(value: str) -> list[str]:
    """PYTHONPATH's entries made absolute against this process's folder: a child started in another folder (every
    `runner run`, from the project's) must find the same packages (those installed beside it offline)."""
    return [os.path.abspath(entry) for entry in value.split(os.pathsep) if entry]


def child_env(*first: Path, **extra: str) -> dict:
    """This environment for a child process: `first` (the project and bench/ unless given) ahead of our own
    PYTHONPATH, every entry absolute; `extra` variables added."""
    paths = [str(p) for p in first or (REPO, BENCH)] + absolute_paths(os.environ.get("PYTHONPATH", ""))
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)), **extra}


# --- the dog-breed demo (planned_vs_failure, fork_safety, leased_gpus) ---------------------------------------

def dog_breed_demo(check: Check) -> Path:
    """The dog-breed demo at this check's size, written once per process and scratch folder (planned_vs_failure
    times its photos, the guarded run and the refused one read them): its folder, as write_demo returned it."""
    from runner.demo import write_demo

    if check.demo is None or not check.demo.is_dir():
        check.demo = write_demo("dog-breed", check.work / "demo-data", **check.sizes.demo)
    return check.demo


# --- whole runs, as a user starts them ----------------------------------------------------------------------------

def read_report(out: Path) -> dict:
    """A run's report.json; {} when it wrote none."""
    path = out / "report.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def runner_run(competition: str, public: Path, out: Path, budget: int, *options: str):
    """`runner run` in its own process, started from the project's folder: its exit and output, its report.json and
    its wall seconds timed from here (killed RUN_GRACE seconds past its budget: a TimeoutExpired error)."""
    logs = out.with_name(out.name + ".out"), out.with_name(out.name + ".err")
    started = time.monotonic()
    # output to files, not pipes: a unit outliving the run would hold a pipe open, and be timed as the run
    with open(logs[0], "w") as stdout, open(logs[1], "w") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "runner.cli", "run", competition, "--data", str(public),
                                    "--budget", f"{budget}s", "--out", str(out), *options], cwd=REPO, env=child_env(),
                                   stdout=stdout, stderr=stderr)
    try:
        process.wait(timeout=budget + RUN_GRACE)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    wall = round(time.monotonic() - started, 1)
    done = subprocess.CompletedProcess(process.args, process.returncode, *(log.read_text() for log in logs))
    return done, read_report(out), wall


def folds_started(report: dict, member: str) -> int:
    """The folds of `member` the run started (its units; fold -1 is the member's prepare step)."""
    return sum(u["member"] == member and u["fold"] >= 0 for u in report.get("units") or [])


def graded(submission: Path, competition: str, private: Path) -> float | None:
    """The submission's score on the private answers; None when it is missing or invalid."""
    from runner.competition.grade import grade
    from runner.competition.catalog import load_spec

    return grade(submission, load_spec(competition), private).score if submission.is_file() else None


def killed_lines(killed: list[dict]) -> list[str]:
    """Each unit the run killed (report.json's `killed`): member, fold, why and when, then the stack of each of its
    threads as the kill found them, a line each."""
    lines = []
    for unit in killed:
        lines.append(f"killed {unit.get('member')} fold {unit.get('fold')} at {unit.get('at')} s: {unit.get('why')} "
                     f"({unit.get('how')}; full stacks in {unit.get('log')})")
        lines.extend(f"  {stack}" for stack in unit.get("stacks") or [])
    return lines


def with_killed(result: dict, report: dict) -> dict:
    """`result` with the units the run killed, in the JSON and as lines printed under the section's own."""
    killed = report.get("killed") or []  # runners that do not record it have no field
    result.update(killed=killed, details=killed_lines(killed))
    return result
