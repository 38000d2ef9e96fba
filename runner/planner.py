"""Plan: engine, model, image size, batch, precision, folds, epochs and slots, each with a reason.

`make_plan` is a pure function of the spec, the hardware, the training window, the data's shape and the costs
(measured throughput, memory estimates, FLOPs), so tests can plan for an H100 on a laptop. Image models are chosen
as the best expected quality whose folds x epochs fit the window: candidates are listed best first (ImageNet top-1
of the architecture as the quality proxy), and the first that fits wins.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

from runner.hardware import GiB, Gpu, Hardware
from runner.measure import Candidate, Costs, RoundCost
from runner.memory import CUDA_RUNTIME_BYTES, MemoryEstimate
from runner.spec import CompetitionSpec

ENGINES = {"tabular": "lightgbm", "image": "timm", "text": "tfidf_linear", "unsupported": "none"}

# best expected quality first: (model, image size)
GPU_CANDIDATES = (("convnext_small", 224), ("convnext_tiny", 224), ("efficientnet_b0", 224), ("resnet18", 224),
                  ("resnet18", 128))
CPU_CANDIDATES = (("resnet18", 96), ("mobilenetv3_small_100", 96), ("mobilenetv3_small_100", 64))
TARGET_MEMORY_FRACTION = 0.8
GPU_EFFICIENCY = 0.35  # share of the spec sheet's dense bf16 FLOPS a CNN training step reaches (estimate only)
MIN_EPOCHS = {"scratch": 30, "pretrained": 6}
MAX_EPOCHS = {"scratch": 100, "pretrained": 20}
STARTUP_SECONDS = {"cpu": 4.0, "cuda": 12.0}  # process start, imports, CUDA context, data
EFFECTIVE_BATCH = 64  # smaller memory-bound batches accumulate gradients up to this
SMALL_TABLE_CELLS = 2_000_000  # unmeasured: below this, one LightGBM thread per fold and folds side by side
MAX_ROUNDS = 5000
GBM_LEARNING_RATE = 0.05
FULL_RATE_ROUNDS = 1000  # rounds that GBM_LEARNING_RATE needs; fewer affordable rounds get a higher rate
GBM_STARTUP_SECONDS = 3.0  # fold process start, imports, data


@dataclass(frozen=True)
class DataShape:
    n_train: int
    n_test: int
    n_features: int = 0
    classes: int = 0
    targets: int = 1  # regression targets (one booster each)


@dataclass(frozen=True)
class Plan:
    engine: str
    folds: int
    slots: int  # fold processes running at once (all devices)
    threads: int  # CPU threads per fold process
    device: str  # "cpu" or "cuda"
    slots_per_gpu: int = 0
    model: str | None = None
    image_size: int | None = None
    batch_size: int | None = None
    accumulation: int = 1
    precision: str = "fp32"  # fp32 | bf16 | fp16
    channels_last: bool = False
    compile: bool = False
    num_workers: int = 0
    prefetch_factor: int | None = None
    pin_memory: bool = False
    epochs: int = 0  # estimated epochs per fold (the fold refits this to its first timed epoch)
    max_epochs: int = 0  # hard cap
    max_rounds: int = 0  # boosting rounds (LightGBM)
    learning_rate: float = 0.0  # LightGBM's (set by the planner; image folds schedule their own)
    patience: int = 0  # epochs or rounds without improvement before a fold stops
    fold_memory_bytes: int = 0  # estimated peak of one fold on its device
    gpu_memory_fraction: float = 0.0  # planned peak of all slots on a GPU / its memory
    epoch_seconds: float = 0.0  # estimated
    fold_seconds: float = 0.0  # estimated, start-up and test prediction included
    training_seconds: float = 0.0  # estimated, all folds
    seed: int = 0
    reasons: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Plan":
        return cls(**{**data, "reasons": tuple(data.get("reasons", ()))})

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2))


def image_candidates(hardware: Hardware) -> list[Candidate]:
    """What to measure or estimate for this hardware: each model at each precision worth trying."""
    if hardware.gpus:
        precision = "bf16" if hardware.gpus[0].bf16 else "fp16"
        return [Candidate(m, s, precision, 32) for m, s in GPU_CANDIDATES]
    # cheapest first, so a short measuring window still covers the models a short budget can afford
    return [Candidate(m, s, p, 32) for m, s in reversed(CPU_CANDIDATES) for p in ("fp32", "bf16")]


# --- image plans -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Option:
    model: str
    size: int
    precision: str
    train_s: float  # seconds per training sample
    infer_s: float
    source: str  # where the speed came from


def _gpu_speed(gpu: Gpu, costs: Costs, model: str, size: int, precision: str) -> _Option | None:
    measured = costs.speed(model, size, precision)
    if measured:
        return _Option(model, size, precision, measured.train_seconds_per_sample,
                       measured.infer_seconds_per_sample, f"measured on {measured.device}")
    flops = costs.flops.get(f"{model}@{size}")
    if not flops or not gpu.bf16_tflops:
        return None
    per_sample = flops / (gpu.bf16_tflops * 1e12 * GPU_EFFICIENCY)
    return _Option(model, size, precision, 3 * per_sample, per_sample,
                   f"estimated from {flops / 1e9:.1f} GFLOPs at {GPU_EFFICIENCY:.0%} of {gpu.bf16_tflops:.0f} TFLOPS")


def _cpu_speed(costs: Costs, model: str, size: int) -> _Option | None:
    """The faster measured precision: bf16 autocast wins for some models on some CPUs and loses for others."""
    options = [costs.speed(model, size, p) for p in ("fp32", "bf16")]
    options = [t for t in options if t is not None]
    if not options:
        return None
    best = min(options, key=lambda t: t.train_seconds_per_sample)
    other = [t for t in options if t is not best]
    note = f"measured {1 / best.train_seconds_per_sample:.0f} img/s"
    if other:
        note += f" ({best.candidate.precision}) vs {1 / other[0].train_seconds_per_sample:.0f} img/s " \
                f"({other[0].candidate.precision})"
    return _Option(model, size, best.candidate.precision, best.train_seconds_per_sample,
                   best.infer_seconds_per_sample, note)


def _batch_and_slots(gpu: Gpu, memory: MemoryEstimate, data: DataShape, folds: int, cpus: int,
                     reasons: list[str]) -> tuple[int, int]:
    """Largest batch within the target share of memory (a multiple of 8, no larger than is useful for the data),
    and how many folds fit on the GPU at once at that batch."""
    memory = memory.on_device(CUDA_RUNTIME_BYTES)
    useful = max(16, min(512, (data.n_train // 20) // 8 * 8))  # keep >= 20 steps per epoch
    fits = memory.largest_batch(TARGET_MEMORY_FRACTION * gpu.memory_bytes) // 8 * 8
    batch = max(8, min(useful, fits)) if fits >= 8 else max(1, fits)
    share = memory.total(batch) / gpu.memory_bytes
    slots = max(1, min(folds, 4, max(1, cpus // 4), int(TARGET_MEMORY_FRACTION // share)))
    why = "memory" if fits < useful else f"data ({data.n_train} rows: at least 20 steps an epoch)"
    reasons.append(f"batch {batch}: limited by {why}; estimated peak {memory.total(batch) / GiB:.1f} GiB "
                   f"= {share:.0%} of {gpu.memory_bytes / GiB:.0f} GiB")
    if slots > 1:
        reasons.append(f"{slots} folds share each GPU: together they plan {slots * share:.0%} of its memory, and a "
                       "fold loading or validating leaves the GPU to the others")
    return batch, slots


@dataclass(frozen=True)
class _Fit:
    """One candidate sized for this run."""

    option: _Option
    init: str  # scratch | pretrained
    batch: int
    per_gpu: int  # folds sharing each GPU (0 on CPU)
    slots: int
    folds: int
    n_train: int
    predict_seconds: float
    startup: float
    memory_reasons: tuple[str, ...] = ()  # why this batch and this many folds per GPU

    @property
    def epoch_seconds(self) -> float:
        """Train on (1 - 1/folds) of the rows, validate on the rest; folds sharing a GPU share its compute."""
        val = 1 / self.folds
        per_row = (1 - val) * self.option.train_s + val * self.option.infer_s
        return self.n_train * per_row * max(1, self.per_gpu)

    def fold_seconds(self, epochs: int) -> float:
        return self.startup + epochs * self.epoch_seconds + self.predict_seconds

    def waves(self, folds: int | None = None) -> int:
        return math.ceil((folds or self.folds) / self.slots)


def _size(option: _Option, init: str, spec: CompetitionSpec, hardware: Hardware, data: DataShape,
          costs: Costs) -> _Fit | None:
    gpu = hardware.gpus[0] if hardware.gpus else None
    if gpu:
        memory = costs.memory_of(option.model, option.size, option.precision)
        if memory is None:
            return None
        why: list[str] = []
        batch, per_gpu = _batch_and_slots(gpu, memory, data, spec.folds, hardware.cpus, why)
        slots = per_gpu * len(hardware.gpus)
    else:
        batch, per_gpu, slots, why = 64, 0, 1, []
    return _Fit(option, init, batch, per_gpu, slots, spec.folds, data.n_train, 1.25 * data.n_test * option.infer_s,
                STARTUP_SECONDS["cuda" if gpu else "cpu"], tuple(why))


def _choose(fits: list[_Fit], window: float, reasons: list[str]) -> _Fit:
    """The first (best) candidate whose folds, down to 2, each get the minimum epochs; else the cheapest with 2."""
    for fit in fits:
        for folds in range(fit.folds, 1, -1):
            sized = dataclasses.replace(fit, folds=folds)
            if sized.waves() * sized.fold_seconds(MIN_EPOCHS[fit.init]) <= window:
                return sized
        reasons.append(f"not {fit.option.model} at {fit.option.size} px: 2 folds x {MIN_EPOCHS[fit.init]} epochs "
                       f"of {fit.epoch_seconds:.1f} s do not fit {window:.0f} s")
    reasons.append("no candidate fits its minimum epochs: the cheapest, with as many epochs as fit in 2 folds")
    return dataclasses.replace(fits[-1], folds=2)


def _options(hardware: Hardware, costs: Costs, models: tuple) -> list[_Option]:
    gpu = hardware.gpus[0] if hardware.gpus else None
    if gpu:
        precision = "bf16" if gpu.bf16 else "fp16"
        found = [_gpu_speed(gpu, costs, m, s, precision) for m, s in models]
    else:
        found = [_cpu_speed(costs, m, s) for m, s in models]
    return [o for o in found if o is not None]


def _image_plan(spec: CompetitionSpec, hardware: Hardware, window: float, data: DataShape, costs: Costs,
                pretrained: frozenset, models: tuple, reasons: list[str]) -> dict:
    gpu = hardware.gpus[0] if hardware.gpus else None
    fits = [f for o in _options(hardware, costs, models)
            if (f := _size(o, "pretrained" if o.model in pretrained else "scratch", spec, hardware, data, costs))]
    if not fits:
        model, size = models[-1]
        reasons.append(f"model {model} at {size} px: nothing was measured or could be estimated, so the smallest")
        return dict(model=model, image_size=size, batch_size=32, precision="fp32", channels_last=True,
                    max_epochs=MAX_EPOCHS["scratch"], patience=10, folds=min(spec.folds, 3), slots=1,
                    threads=hardware.cpus)
    fit = _choose(fits, window, reasons)
    option = fit.option
    epochs = int((window / fit.waves() - fit.fold_seconds(0)) // fit.epoch_seconds)
    epochs = max(1, min(MAX_EPOCHS[fit.init], epochs))  # an estimate: folds refit it to their first epoch
    reasons.append(f"model {option.model} at {option.size} px ({fit.init}): the best candidate whose {fit.folds} "
                   f"folds x {MIN_EPOCHS[fit.init]}+ epochs fit the {window:.0f} s window; {option.source}")
    reasons.append(f"about {epochs} epochs of {fit.epoch_seconds:.1f} s per fold (each fold refits its schedule "
                   f"to its first timed epoch, up to {MAX_EPOCHS[fit.init]})")
    reasons.append(f"precision {option.precision}: " + (f"compute capability {gpu.compute_capability}" if gpu
                                                         else "the faster one measured on this CPU"))
    memory = costs.memory_of(option.model, option.size, option.precision)
    reasons.extend(fit.memory_reasons)
    memory_bound = gpu and memory.on_device(CUDA_RUNTIME_BYTES).largest_batch(
        TARGET_MEMORY_FRACTION * gpu.memory_bytes) < EFFECTIVE_BATCH
    accumulation = math.ceil(EFFECTIVE_BATCH / fit.batch) if memory_bound else 1
    if accumulation > 1:
        reasons.append(f"gradient accumulation {accumulation}: effective batch {fit.batch * accumulation}")
    threads = max(1, hardware.cpus // fit.slots)
    workers = max(1, min(8, threads - 1)) if gpu else 0
    reasons.append(f"{workers} loader workers of {threads} CPUs per fold, pinned memory, prefetch 4" if gpu else
                   "0 loader workers: pixels come from the decoded cache and the cores are needed for compute")
    fold_time = fit.fold_seconds(epochs)
    compile_model = bool(gpu) and fold_time > 1200
    reasons.append("torch.compile on: folds are long enough to repay compiling" if compile_model else
                   "torch.compile off: compiling costs more than it saves at this fold length" if gpu else
                   "torch.compile off: on CPU, compiled training steps measured slower than eager ones "
                   "(bench/throughput.py)")
    fold_memory = memory.on_device(CUDA_RUNTIME_BYTES if gpu else 0).total(fit.batch) if memory else 0
    return dict(model=option.model, image_size=option.size, batch_size=fit.batch, accumulation=accumulation,
                precision=option.precision, channels_last=True, compile=compile_model, num_workers=workers,
                prefetch_factor=4 if workers else None, pin_memory=bool(gpu), epochs=epochs,
                max_epochs=MAX_EPOCHS[fit.init], patience=10,
                folds=fit.folds, slots=fit.slots, slots_per_gpu=fit.per_gpu, threads=threads,
                fold_memory_bytes=fold_memory,
                gpu_memory_fraction=round(fit.per_gpu * fold_memory / gpu.memory_bytes, 3) if gpu else 0.0,
                epoch_seconds=round(fit.epoch_seconds, 2), fold_seconds=round(fold_time, 1),
                training_seconds=round(fit.waves() * fold_time, 1))


# --- the plan ----------------------------------------------------------------------------------------------

def _cpu_engine_slots(engine: str, data: DataShape, folds: int, cpus: int, reasons: list[str]) -> tuple[int, int]:
    """(slots, threads) when nothing was measured: small tables and text fit one thread per fold, so folds run
    side by side; large tables take every core in one fold at a time."""
    small = engine == "tfidf_linear" or data.n_train * max(1, data.n_features) < SMALL_TABLE_CELLS
    if small:
        slots = max(1, min(folds, cpus))
        reasons.append(f"{slots} folds side by side with 1 thread each: {data.n_train} rows are too few to "
                       "split across threads")
        return slots, 1
    reasons.append(f"1 fold at a time with {cpus} threads: {data.n_train} x {data.n_features} is large")
    return 1, cpus


def _round_seconds(cost: RoundCost, data: DataShape, folds: int) -> float:
    """Seconds per round of one fold's boosters (one per regression target), scaled from the timed rows to a
    fold's training rows (histogram building is linear in rows)."""
    fold_rows = data.n_train * (folds - 1) / folds
    return max(1e-6, cost.seconds_per_round) * max(1.0, fold_rows / cost.rows) * max(1, data.targets)


def _gbm_plan(data: DataShape, folds: int, cpus: int, window: float, costs: Costs, reasons: list[str]) -> dict:
    """Threads per fold and rounds from measured seconds per round: the split of cores that gets a round done in
    every fold soonest (waves of folds x seconds per round), then as many rounds as a fold's share of the window
    holds."""
    if not costs.rounds:
        slots, threads = _cpu_engine_slots("lightgbm", data, folds, cpus, reasons)
        reasons.append(f"LightGBM up to {MAX_ROUNDS} rounds at learning rate {GBM_LEARNING_RATE} (rounds not "
                       "measured); early stopping and a deadline callback end each fold")
        return dict(slots=slots, threads=threads, max_rounds=MAX_ROUNDS, patience=100,
                    learning_rate=GBM_LEARNING_RATE)

    def time_per_round_of_all_folds(cost: RoundCost) -> float:
        return math.ceil(folds / min(folds, cost.boosters)) * _round_seconds(cost, data, folds)

    best = min(costs.rounds, key=time_per_round_of_all_folds)
    measured = ", ".join(f"{c.seconds_per_round * 1e3:.1f} ms for {c.boosters} at once with {c.threads} "
                         f"thread{'s' * (c.threads > 1)} each" for c in costs.rounds)
    slots = min(folds, best.boosters)
    reasons.append(f"{slots} fold{'s' * (slots > 1)} at a time with {best.threads} thread{'s' * (best.threads > 1)} "
                   f"each: all folds get their rounds done soonest (seconds per round measured on {best.rows} "
                   f"rows: {measured})")
    per_round = _round_seconds(best, data, folds)
    waves = math.ceil(folds / slots)
    fold_seconds = window / waves - GBM_STARTUP_SECONDS
    affordable = int(0.8 * max(0.0, fold_seconds) / per_round)
    rounds = max(10, min(MAX_ROUNDS, affordable))
    rate = GBM_LEARNING_RATE if rounds >= FULL_RATE_ROUNDS else \
        round(min(0.3, GBM_LEARNING_RATE * FULL_RATE_ROUNDS / rounds), 3)
    reasons.append(f"LightGBM up to {rounds} rounds at learning rate {rate}: a fold's {fold_seconds:.0f} s hold "
                   f"{affordable} rounds of {per_round * 1e3:.1f} ms" + ("" if rate == GBM_LEARNING_RATE else
                   f" (fewer than {FULL_RATE_ROUNDS}, so a higher rate)") + "; early stopping after 100 rounds "
                   "without improvement, and a callback that stops before a round would cross the deadline")
    fold_time = min(fold_seconds, rounds * per_round) + GBM_STARTUP_SECONDS
    return dict(slots=slots, threads=best.threads, max_rounds=rounds, patience=100, learning_rate=rate,
                epoch_seconds=round(per_round, 4), fold_seconds=round(fold_time, 1),
                training_seconds=round(waves * fold_time, 1))


def make_plan(spec: CompetitionSpec, hardware: Hardware, window_seconds: float, data: DataShape,
              costs: Costs = Costs(), pretrained: frozenset = frozenset(), seed: int = 0,
              image_models: tuple | None = None) -> Plan:
    """The plan for one run; `window_seconds` is the training time left (the budget up to its cut, less what
    has already been spent); `pretrained` names the models with local weights; `image_models` replaces the
    candidate (model, image size) pairs, best first."""
    reasons: list[str] = []
    engine = ENGINES[spec.task]
    if engine == "none":
        return Plan(engine="none", folds=0, slots=0, threads=hardware.cpus, device="cpu", seed=seed,
                    reasons=(f"task {spec.task}: {spec.note or 'nothing to train'}; the sample submission is used",))
    if engine == "timm":
        models = image_models or (GPU_CANDIDATES if hardware.gpus else CPU_CANDIDATES)
        settings = _image_plan(spec, hardware, window_seconds, data, costs, pretrained, models, reasons)
        device = "cuda" if hardware.gpus else "cpu"
        return Plan(engine=engine, device=device, seed=seed, reasons=tuple(reasons), **settings)
    folds = spec.folds if window_seconds >= 30 else min(spec.folds, 3)
    reasons.append(f"folds {folds}" + ("" if folds == spec.folds else f" (not {spec.folds}): "
                                       f"{window_seconds:.0f} s leave too little for more"))
    if engine == "lightgbm":
        settings = _gbm_plan(data, folds, hardware.cpus, window_seconds, costs, reasons)
    else:
        slots, threads = _cpu_engine_slots(engine, data, folds, hardware.cpus, reasons)
        settings = dict(slots=slots, threads=threads)
    return Plan(engine=engine, folds=folds, device="cpu", seed=seed, reasons=tuple(reasons), **settings)
