"""Sizing the CNN member for a run: a pure function of the hardware, the window, the data's shape and the measured
costs.

The ladder (`runner.engines.timm.ladder`) is listed best first; candidates with local pretrained weights come
before any from random init. The first whose folds (down to 2) each fit their minimum epochs wins, and its epochs
fill the window: a longer budget or a faster card moves up the ladder rather than leaving the window idle. Its
batch and the folds sharing each GPU fill the target share of device memory. An epoch takes the card's compute
shared by the member's folds side by side on it, and no less than their loader workers need to feed it. A
re-plan takes only a candidate that fits (`fitting_member`); when none does, the member goes on at the pace it
showed (`kept_member`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from runner.engines.timm.costs import ImageCosts
from runner.engines.timm.images import cache_side
from runner.engines.timm.ladder import (CPU_CANDIDATES, GPU_CANDIDATES, SCRATCH_LARGEST, SMALL_IMAGE, SMALL_MODELS,
                                         plannable, sized)
from runner.engines.timm.memory import MemoryEstimate
from runner.engines.timm.settings import (MAX_EPOCHS, MEMORY_TOLERANCE, TARGET_MEMORY_FRACTION, ImageSettings,
                                            useful_batch)
from runner.machine.card_memory import CUDA_RUNTIME_BYTES
from runner.machine.hardware import GiB, Gpu, Hardware
from runner.planning.portfolio import DataShape, Member, PlanContext

PRIOR_GAIN = 0.05  # the only engine on pixels: it leads on images
# share of the spec sheet's dense bf16 FLOPS an eager bf16 channels_last CNN training step (3 forward passes)
# reaches, measured on Hopper cards: resnet18 at 224 px, batch 128, alone on an H100, 8,721 img/s (9.6%);
# convnext_tiny at 224 px, batch 32, four folds sharing an H100, 1,850-2,400 img/s together (5-6.5%); resnet18 at
# 224 px, batch 48, one fold with its loaders on an H200, 3,560 img/s (3.9%). 35% planned the H100's convnext_tiny
# epoch at 0.26 s where it took 1.59 s. The first timed epoch re-plans from the real pace either way
GPU_EFFICIENCY = 0.06
# images a second one loader worker feeds a GPU fold through the whole path (a read of the decoded cache, shared
# memory, a pinned copy): on an H200 a resnet18 fold took 3,560 img/s from 3 workers with the card 17% busy, so at
# least ~1,200 each; the cache read alone ran at 8,000 (first pass) to 143,000 images a core-second
# (bench/results/loader.json). Folds sharing a card split the cores, so their loaders bound small models' epochs
LOADER_IMAGES_PER_WORKER_SECOND = 1200.0
# epochs a fold needs before it is worth planning. Measured on the dog-breed demo (bench/pretrained.py,
# efficientnet_lite0, one fold whose cosine spans 21-23 epochs): 90% of the fall in log loss took 5 epochs from
# ImageNet weights and 15 from random init. 15 does not hold as a planning rule from random init: it let the demo
# take resnet18 at 96 px for 17 epochs (log loss 3.38) over a smaller model for 30+ (1.72), so scratch keeps 30.
MIN_EPOCHS = {"scratch": 30, "pretrained": 5}
# process start, imports, data (and on a GPU the CUDA context and the batch probe): a convnext_tiny fold on an
# H100 spent 9.4 s outside training and predicting, and its first epoch 0.5 s over the next. A candidate whose
# measured start-up (its first training step in the measuring process, `ImageCosts.startup`) took longer plans that
STARTUP_SECONDS = {"cpu": 4.0, "cuda": 12.0}
PREDICT_MARGIN = 1.25  # test predictions over the inference pace, as a fold reserves for them (training.py)
EFFECTIVE_BATCH = 64  # smaller memory-bound batches accumulate gradients up to this
PREFETCH = 2  # batches each loader worker keeps ready: pinned host memory is rounded up to powers of two and kept
# for the process's life, so 4 per worker at a large batch held gigabytes page-locked per fold
CPU_BATCH = 64  # on a CPU, or fewer where an epoch would keep less than 20 steps (a few hundred images)
PINNED_RAM_SHARE = 0.25  # of RAM that pinned batches may hold before the plan warns: page-locked, never swapped
SHM_BYTES_PER_PIXEL = 3  # loaders ship uint8 RGB squares through shared memory (cropped and normalised on device)
DECODE_PER_CORE_SECOND = 300  # images decoded and resized per core per second (platform notes: 250-500 here)


@dataclass(frozen=True)
class _Option:
    model: str
    size: int
    precision: str
    train_s: float  # seconds per training sample
    infer_s: float
    source: str  # where the speed came from


def _gpu_speed(gpu: Gpu, costs: ImageCosts, model: str, size: int, precision: str) -> _Option | None:
    measured = costs.speed(model, size, precision)
    if measured:
        return _Option(model, size, precision, measured.train_seconds_per_sample,
                       measured.infer_seconds_per_sample, f"measured on {measured.device}")
    flops = costs.flops.get(f"{model}@{size}")
    if not flops or not gpu.bf16_tflops:
        return None
    per_sample = costs.slowdown * flops / (gpu.bf16_tflops * 1e12 * GPU_EFFICIENCY)
    return _Option(model, size, precision, 3 * per_sample, per_sample,
                   f"estimated from {flops / 1e9:.1f} GFLOPs at {GPU_EFFICIENCY:.0%} of {gpu.bf16_tflops:.0f} TFLOPS")


def _cpu_speed(costs: ImageCosts, model: str, size: int) -> _Option | None:
    """The faster measured precision: bf16 autocast wins for some models on some CPUs and loses for others."""
    options = [t for p in ("fp32", "bf16") if (t := costs.speed(model, size, p)) is not None]
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
    useful = useful_batch(data.n_train)

    def batch_for(slots: int) -> int:
        fits = memory.largest_batch(gpu.memory_target(TARGET_MEMORY_FRACTION) * gpu.memory_bytes / slots)
        fits = fits // 8 * 8 if fits >= 32 else fits  # multiples of 8 where rounding costs little memory
        return max(1, min(useful, fits))

    # the fewest folds side by side whose batches reach the target share (a batch the data limits leaves room
    # for another fold); past what the CPUs can feed or the folds there are, the fullest that fits
    most = max(1, min(folds, 4, max(1, cpus // 4)))
    fractions = {k: k * memory.total(batch_for(k)) / gpu.memory_bytes for k in range(1, most + 1)}
    target = gpu.memory_target(TARGET_MEMORY_FRACTION) - MEMORY_TOLERANCE
    slots = next((k for k, f in fractions.items() if f >= target), max(fractions, key=fractions.get))
    batch = batch_for(slots)
    share = memory.total(batch) / gpu.memory_bytes
    why = f"data ({data.n_train} rows: at least 20 steps an epoch)" if batch == useful else "memory"
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
    n_test: int
    startup: float
    workers: int  # loader workers of each fold (0: the fold reads the cache itself)
    slowdown: float = 1.0  # what the run has learnt: real epochs took this many times the estimate
    memory_reasons: tuple[str, ...] = ()  # why this batch and this many folds per GPU

    @property
    def sharing(self) -> int:
        """Folds of this member computing side by side on one card (1 on a CPU, whose fold has every core)."""
        return max(1, min(self.per_gpu, self.folds))

    def _fed(self, images: float) -> float:
        """Seconds the fold's loader workers need to hand over `images` (0 without workers); what the run learnt
        slows them as it slows compute: an epoch's real time does not say which of the two held it back."""
        return self.slowdown * images / (self.workers * LOADER_IMAGES_PER_WORKER_SECOND) if self.workers else 0.0

    @property
    def compute_seconds(self) -> float:
        """Train on (1 - 1/folds) of the rows, validate on the rest; folds sharing a GPU share its compute."""
        val = 1 / self.folds
        per_row = (1 - val) * self.option.train_s + val * self.option.infer_s
        return self.n_train * per_row * self.sharing

    @property
    def epoch_seconds(self) -> float:
        """The epoch's compute, and no faster than the fold's loaders feed it."""
        return max(self.compute_seconds, self._fed(self.n_train))

    @property
    def pace(self) -> str:
        """What sets the epoch's pace, in words."""
        if self.workers and self._fed(self.n_train) >= self.compute_seconds:
            return f"its {self.workers} loader workers' pace, {LOADER_IMAGES_PER_WORKER_SECOND:.0f} images a second " \
                "each"
        return f"the card's compute shared by {self.sharing} folds" if self.sharing > 1 else "compute"

    @property
    def predict_seconds(self) -> float:
        images = PREDICT_MARGIN * self.n_test
        return max(images * self.option.infer_s * self.sharing, self._fed(images))

    def fold_seconds(self, epochs: int) -> float:
        return self.startup + epochs * self.epoch_seconds + self.predict_seconds

    def waves(self, folds: int | None = None) -> int:
        return math.ceil((folds or self.folds) / self.slots)


def _size(option: _Option, init: str, context: PlanContext, costs: ImageCosts) -> _Fit | None:
    hardware, data = context.hardware, context.data
    gpu = hardware.tightest_gpu
    if gpu:
        memory = costs.memory_of(option.model, option.size, option.precision)
        if memory is None:
            return None
        why: list[str] = []
        batch, per_gpu = _batch_and_slots(gpu, memory, data, context.folds, context.cores, why)
        slots = per_gpu * len(hardware.gpus)
        workers = max(1, context.cores // slots - 1)  # the fold's share of the cores but its own thread
    else:
        batch, per_gpu, slots, workers, why = min(CPU_BATCH, useful_batch(data.n_train)), 0, 1, 0, []
    return _Fit(option, init, batch, per_gpu, slots, context.folds, data.n_train, data.n_test,
                _startup(costs, option, "cuda" if gpu else "cpu"), workers, costs.slowdown, tuple(why))


def _startup(costs: ImageCosts, option: _Option, device: str) -> float:
    """A fold's start-up: the usual one, or the candidate's measured start-up where that took longer (a card's
    first cuDNN search for each shape, which every fold process pays again; one stopped inside it counts as far
    as it went)."""
    measured = costs.startup_of(option.model, option.size, option.precision)
    return max(STARTUP_SECONDS[device], measured.seconds if measured else 0.0)


def _startup_reason(costs: ImageCosts, fit: _Fit) -> list[str]:
    """Where the fold's start-up came from, when it was measured longer than the usual one."""
    measured = costs.startup_of(fit.option.model, fit.option.size, fit.option.precision)
    if not measured or measured.seconds < fit.startup:  # the usual start-up was the longer
        return []
    how = "took" if measured.ended else "had not ended after"
    return [f"start-up {fit.startup:.0f} s a fold: {fit.option.model}'s first training step when measured {how} "
            f"{measured.seconds:.1f} s (CUDA context, the allocator, cuDNN's search), which each fold pays again"]


def _choose(fits: list[_Fit], window: float, reasons: list[str], fallback: bool = True) -> _Fit | None:
    """The first (best) candidate whose folds, down to 2, each get the minimum epochs; else the cheapest with 2
    (None when there is no `fallback`). Candidates with pretrained weights go first, each group in ladder order."""
    fits = sorted(fits, key=lambda f: f.init != "pretrained")  # stable: the ladder's order within each group
    for fit in fits:
        for folds in range(fit.folds, 1, -1):
            sized = dataclasses.replace(fit, folds=folds)
            if sized.waves() * sized.fold_seconds(MIN_EPOCHS[fit.init]) <= window:
                return sized
        reasons.append(f"not {fit.option.model} at {fit.option.size} px: 2 folds x {MIN_EPOCHS[fit.init]} epochs "
                       f"of {dataclasses.replace(fit, folds=2).epoch_seconds:.1f} s do not fit {window:.0f} s")
    if not fallback:
        return None
    reasons.append("no candidate fits its minimum epochs: the cheapest, with as many epochs as fit in 2 folds")
    return dataclasses.replace(fits[-1], folds=2)


def _options(hardware: Hardware, costs: ImageCosts, models: tuple) -> list[_Option]:
    gpu = hardware.tightest_gpu
    if gpu:
        precision = "bf16" if gpu.bf16 else "fp16"
        found = [_gpu_speed(gpu, costs, m, s, precision) for m, s in models]
    else:
        found = [_cpu_speed(costs, m, s) for m, s in models]
    return [o for o in found if o is not None]


def _prepare_seconds(context: PlanContext) -> float:
    """The first decode of every image on the lane's cores: at the measured cost of one where the data has it."""
    images = context.data.n_train + context.data.n_test
    return round(images * context.data.decode_each(DECODE_PER_CORE_SECOND) / max(1, context.cores), 1)


def _member(context: PlanContext, settings: ImageSettings, folds: int, per_gpu: int, threads: int,
            fold_seconds: float, min_fold_seconds: float, reasons: list[str], startup: float | None = None) -> Member:
    """The CNN member; its expected seconds per epoch are the settings' estimate (0 when nothing was measured), its
    folds' start-up the one its fit planned (the measured one where that was longer), else the usual one."""
    gpu = bool(context.hardware.gpus)
    settings = settings.model_copy(update=dict(reasons=tuple(reasons)))
    return Member(name="timm", engine="timm", slot="gpu" if gpu else "cpu", settings=settings, folds=folds,
                  threads=threads, per_gpu=per_gpu, fold_seconds=round(fold_seconds, 1),
                  min_fold_seconds=round(min_fold_seconds, 1), step_seconds=settings.epoch_seconds,
                  startup_seconds=startup or STARTUP_SECONDS["cuda" if gpu else "cpu"], prepare_threads=context.cores,
                  prepare_seconds=_prepare_seconds(context), expected_gain=PRIOR_GAIN, reasons=tuple(reasons))


def _unmeasured_on_gpu(context: PlanContext, gpu: Gpu, model: str, size: int, reasons: list[str]) -> Member:
    """The smallest model on the GPU when nothing could be timed or estimated: still the card's precision, loader
    workers and pinned memory (one CPU thread decoding for a GPU would leave it waiting), one fold per card at a
    time, each probing its own batch."""
    workers = max(1, context.cores - 1)
    precision = "bf16" if gpu.bf16 else "fp16"
    reasons.append(f"on the GPU all the same: {precision}, {workers} loader workers, pinned memory, one fold per "
                   "card; each fold probes its batch towards its share of memory")
    settings = ImageSettings(model=model, image_size=size, source_side=context.data.image_side, device="cuda",
                             precision=precision, threads=1,
                             num_workers=workers, prefetch_factor=PREFETCH, pin_memory=True, per_gpu=1,
                             batch_size=min(CPU_BATCH, useful_batch(context.data.n_train)),
                             memory_target=round(gpu.memory_target(TARGET_MEMORY_FRACTION), 3))
    folds = min(context.folds, 3)
    return _member(context, settings, folds, 1, 1 + workers, context.window / folds, STARTUP_SECONDS["cuda"],
                   reasons)


def _size_reasons(side: int, listed: tuple, rungs: list[tuple[str, int]]) -> list[str]:
    """What the images' own size did to the ladder, if anything."""
    if side and side <= SMALL_IMAGE:
        small = ", ".join(f"{m} at {s} px" for m, s in rungs if m in SMALL_MODELS)
        return [f"images of {side} px: rungs made for small images at their own size ({small}) instead of "
                "ImageNet rungs that upscale them"]
    if side and any(s > side for _, s in listed):
        return [f"images of {side} px: from random init no rung trains above that size"]
    return []


def image_member(context: PlanContext, models: tuple | None = None) -> Member:
    """The CNN member for this hardware, window and data (`models` replaces the candidate list, best first); when
    no candidate fits its minimum epochs, the cheapest all the same."""
    return _image_member(context, models, fallback=True)


def fitting_member(context: PlanContext) -> Member | None:
    """The CNN member whose folds, down to 2, each fit their minimum epochs in the window; None when none does (a
    re-plan then keeps what runs rather than start folds that could not train)."""
    return _image_member(context, None, fallback=False)


def kept_member(member: Member, step_seconds: float, window: float) -> Member:
    """`member` as it is, at the pace a real epoch showed: its start-up stays, an epoch takes `step_seconds` and its
    test predictions as much longer as the epoch did, so a later fold starts only with time for start-up, an epoch
    and its predictions (the scheduler's least time for a fold is `min_fold_seconds`)."""
    startup = member.startup_seconds or STARTUP_SECONDS["cuda" if member.settings.device == "cuda" else "cpu"]
    planned = member.step_seconds
    pace = step_seconds / planned if planned > 0 else 1.0
    predict = max(0.0, member.min_fold_seconds - startup - planned) * pace
    least = startup + step_seconds + predict
    epochs = max(1, min(member.settings.epochs, int((window - startup - predict) // max(step_seconds, 1e-3))))
    why = (f"no candidate's folds (down to 2) fit their minimum epochs in the {window:.0f} s left at that pace: "
           f"{member.settings.model} goes on, its running folds keep training, and a later fold starts only with "
           f"{least:.0f} s left (start-up, an epoch and its test predictions)")
    settings = member.settings.model_copy(update=dict(epochs=epochs, epoch_seconds=round(step_seconds, 3),
                                                      reasons=(why, *member.settings.reasons)))
    return member.model_copy(update=dict(
        settings=settings, step_seconds=round(step_seconds, 6), min_fold_seconds=round(least, 1),
        fold_seconds=round(startup + epochs * step_seconds + predict, 1), reasons=(why, *member.reasons)))


def _image_member(context: PlanContext, models: tuple | None, fallback: bool) -> Member | None:
    hardware, window = context.hardware, context.window
    costs = context.costs if isinstance(context.costs, ImageCosts) else ImageCosts()
    gpu = hardware.tightest_gpu
    models = models or (GPU_CANDIDATES if gpu else CPU_CANDIDATES)
    reasons: list[str] = [costs.note] if costs.note else []
    side = context.data.image_side
    allowed = sized(plannable(models, context.pretrained), side, context.pretrained)
    fits = [f for o in _options(hardware, costs, tuple(allowed))
            if (f := _size(o, "pretrained" if o.model in context.pretrained else "scratch", context, costs))]
    too_large = set(models[:models.index(SCRATCH_LARGEST)]) if SCRATCH_LARGEST in models else set()
    if too_large and not context.pretrained & {m for m, _ in too_large}:
        reasons.append(f"no local weights for the ladder above {SCRATCH_LARGEST[0]} at {SCRATCH_LARGEST[1]} px: "
                       "larger models from random init do not pay at this data size (`runner weights pull`)")
    reasons.extend(_size_reasons(side, models, allowed))
    if not fits:
        return _unmeasured(context, allowed[-1], reasons) if fallback else None
    fit = _choose(fits, window, reasons, fallback)
    return _sized_member(context, fit, costs, reasons) if fit else None


def _unmeasured(context: PlanContext, rung: tuple[str, int], reasons: list[str]) -> Member:
    """The smallest rung when nothing was measured or could be estimated."""
    model, size = rung
    gpu = context.hardware.tightest_gpu
    reasons.append(f"model {model} at {size} px: nothing was measured or could be estimated, so the smallest")
    if gpu:
        return _unmeasured_on_gpu(context, gpu, model, size, reasons)
    settings = ImageSettings(model=model, image_size=size, source_side=context.data.image_side, threads=context.cores,
                             device="cpu", batch_size=min(CPU_BATCH, useful_batch(context.data.n_train)))
    folds = min(context.folds, 3)
    return _member(context, settings, folds, 0, context.cores, context.window / folds, STARTUP_SECONDS["cpu"],
                   reasons)


def _loader_warnings(hardware: Hardware, fit: _Fit, side: int) -> list[str]:
    """What the folds' loaders may hold that the machine may not give: shared memory, page-locked RAM."""
    warnings = []
    batch_bytes = fit.batch * side ** 2 * SHM_BYTES_PER_PIXEL
    shm_needed = fit.slots * fit.workers * PREFETCH * batch_bytes
    if hardware.shm_bytes < shm_needed:
        warnings.append(f"warning: /dev/shm is {hardware.shm_bytes / 2**20:.0f} MB, less than the "
                        f"{shm_needed / 2**20:.0f} MB {fit.slots * fit.workers} loader workers may keep in flight: "
                        "give the container more (docker run --shm-size 8g) or loaders may fail")
    pinned = fit.slots * fit.workers * PREFETCH * 2 ** math.ceil(math.log2(max(1, batch_bytes)))
    if pinned > PINNED_RAM_SHARE * hardware.ram_bytes:
        warnings.append(f"warning: pinned batches may hold {pinned / GiB:.1f} GiB of the machine's "
                        f"{hardware.ram_bytes / GiB:.0f} GiB page-locked for the folds' lives (each rounded up to a "
                        "power of two): a container's memory limit counts them")
    return warnings


def _sized_member(context: PlanContext, fit: _Fit, costs: ImageCosts, reasons: list[str]) -> Member:
    """The member for the chosen candidate: its epochs fill the window, its batch and loaders as sized."""
    hardware, window, side = context.hardware, context.window, context.data.image_side
    gpu = hardware.tightest_gpu
    option = fit.option
    # as many epochs as fill the window (an estimate: folds refit it to their first epoch); the ladder already
    # chose the largest model that fits, so a long window means more epochs, never an idle card
    fill = max(1, int((window / fit.waves() - fit.fold_seconds(0)) // fit.epoch_seconds))
    # from random init the ladder stops at SCRATCH_LARGEST, and epochs past MAX_EPOCHS would only run into the
    # patience: such a window's rest goes to repeats of the member on other splits (runner.control.extra_members), not idle epochs
    epochs = fill if fit.init == "pretrained" else min(fill, MAX_EPOCHS["scratch"])
    if epochs < fill:
        reasons.append(f"{epochs} epochs, not the {fill} the window holds: from random init more do not pay "
                       "(the patience would end them); the time left goes to repeats on other splits")
    max_epochs = max(MAX_EPOCHS[fit.init], epochs)
    reasons.append(f"model {option.model} at {option.size} px ({fit.init}): the best candidate whose {fit.folds} "
                   f"folds x {MIN_EPOCHS[fit.init]}+ epochs fit the {window:.0f} s window; {option.source}")
    reasons.append(f"about {epochs} epochs of {fit.epoch_seconds:.1f} s per fold ({fit.pace}): {fit.waves()} waves "
                   f"fill {fit.waves() * fit.fold_seconds(epochs) / window:.0%} of the window (each fold refits its "
                   f"schedule to its first timed epoch, up to {max_epochs})")
    if side and option.size > side:
        reasons.append(f"{option.size} px from {side} px images: {option.model}'s pretrained weights were learned at "
                       "that size")
    reasons.append(f"precision {option.precision}: " + (f"compute capability {gpu.compute_capability}" if gpu
                                                         else "the faster one measured on this CPU"))
    memory = costs.memory_of(option.model, option.size, option.precision)
    reasons.extend(fit.memory_reasons)
    reasons.extend(_startup_reason(costs, fit))
    memory_bound = gpu and memory.on_device(CUDA_RUNTIME_BYTES).largest_batch(
        gpu.memory_target(TARGET_MEMORY_FRACTION) * gpu.memory_bytes) < EFFECTIVE_BATCH
    accumulation = math.ceil(EFFECTIVE_BATCH / fit.batch) if memory_bound else 1
    if accumulation > 1:
        reasons.append(f"gradient accumulation {accumulation}: effective batch {fit.batch * accumulation}")
    threads = max(1, context.cores // fit.slots)
    workers = fit.workers  # on a GPU the fold's whole CPU quota but its own thread
    reasons.append(f"{workers} loader workers of {threads} CPUs per fold, pinned memory, prefetch {PREFETCH}"
                   if gpu else
                   "0 loader workers: pixels come from the decoded cache and the cores are needed for compute")
    if gpu:
        reasons.extend(_loader_warnings(hardware, fit, cache_side(option.size, side)))
    fold_time = fit.fold_seconds(epochs)
    compile_model = bool(gpu) and fold_time > 1200 and hardware.compiler
    reasons.append("torch.compile on: folds are long enough to repay compiling" if compile_model else
                   "torch.compile off: no C compiler or Python.h here, which Triton needs to build its launcher"
                   if gpu and fold_time > 1200 else
                   "torch.compile off: compiling costs more than it saves at this fold length" if gpu else
                   "torch.compile off: on CPU, compiled training steps measured slower than eager ones "
                   "(bench/throughput.py)")
    fold_memory = memory.on_device(CUDA_RUNTIME_BYTES if gpu else 0).total(fit.batch) if memory else 0
    settings = ImageSettings(
        model=option.model, image_size=option.size, source_side=side, init=fit.init, batch_size=fit.batch,
        accumulation=accumulation,
        precision=option.precision, channels_last=True, compile=compile_model, num_workers=workers,
        prefetch_factor=PREFETCH if workers else None, pin_memory=bool(gpu), epochs=epochs, max_epochs=max_epochs,
        device="cuda" if gpu else "cpu", threads=1 if gpu else threads, per_gpu=fit.per_gpu,
        fold_memory_bytes=fold_memory,
        gpu_memory_fraction=round(fit.per_gpu * fold_memory / gpu.memory_bytes, 3) if gpu else 0.0,
        memory_target=round(gpu.memory_target(TARGET_MEMORY_FRACTION), 3) if gpu else TARGET_MEMORY_FRACTION,
        epoch_seconds=round(fit.epoch_seconds, 3))
    held = 1 + workers if gpu else threads  # a GPU fold's main thread and its loaders; a CPU fold computes on all
    return _member(context, settings, fit.folds, fit.per_gpu, held, fold_time, fit.fold_seconds(1), reasons,
                   startup=fit.startup)
