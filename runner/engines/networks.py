"""What the engines that train a network in epochs share (the timm CNN, the text fine-tuner, the U-Nets of pages
and masks, the centre-point detector): their settings and sizing, the batch probe and the back-off after running
out of memory, each fold's cap when folds share a card, the epoch count fitted to
the time left, and the line each epoch writes for the supervisor. torch is imported where it is used: planning
imports this module too.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

import numpy as np

from runner.engines.base import TARGET_MEMORY_FRACTION, Member, PlanContext, Settings
from runner.machine.card_memory import CUDA_RUNTIME_BYTES, is_oom  # light: a measuring process reads them

PROBE_TOLERANCE = 0.1  # a probed batch whose warm peak is within this of the target share is taken
USABLE_SHARE = 0.95  # of a GPU's memory, for the folds sharing it (contexts included)
WARMUP_SLOWER = 1.3  # a first epoch this much slower than the second paid for warm-up (loader start, cuDNN
# tuning, compiling): the fold's plan is fitted again to the second


class EpochSettings(Settings):
    """What a member training a network from scratch in epochs plans beside its own choices: its batch, rate and
    precision, the epochs it fits and how long it waits for a better one, how its folds share a card, and the pace
    its estimates were slowed to by a real epoch."""

    batch_size: int = 16
    # AdamW, warmed up over the first epoch, cosine to 1% of the peak: from random init a high rate learns fastest
    lr: float = 3e-3
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    epochs: float = 10.0  # estimated epochs a fold fits; each fold refits this after its first
    max_epochs: int = 200
    patience: int = 8
    per_gpu: int = 0
    fold_memory_bytes: int = 0
    memory_target: float = TARGET_MEMORY_FRACTION
    epoch_seconds: float = 0.0  # estimated
    slowdown: float = 1.0  # real epochs against the estimate, once one was timed (re-plans carry it)


@dataclass(frozen=True)
class Sizing:
    """A network member as sized for one run: its folds, each fold's epochs and batch, and what they cost."""

    folds: int
    epochs: float
    step: float  # seconds an epoch
    batch: int
    memory: int  # a fold's estimated GPU peak (0 on a CPU)
    predict: float  # seconds predicting the test rows


def network_member(name: str, settings: EpochSettings, sized: Sizing, context: PlanContext, startup: float,
                   decodes_per_core_second: float, gain: float) -> Member:
    """A member training a network from scratch in epochs (one thread a fold), from its sizing: a fold's start-up,
    epochs and test prediction, its prepare step decoding every image on the lane's cores."""
    data = context.data
    least = startup + sized.predict
    prepare_threads = max(1, context.cores)
    prepare = (data.n_train + data.n_test) * data.decode_each(decodes_per_core_second) / prepare_threads
    return Member(name=name, engine=name, slot="gpu" if settings.device == "cuda" else "cpu", settings=settings,
                  folds=sized.folds, threads=1, per_gpu=settings.per_gpu,
                  fold_seconds=round(least + sized.epochs * sized.step, 1),
                  min_fold_seconds=round(least + sized.step, 1), step_seconds=round(sized.step, 3),
                  startup_seconds=startup, prepare_threads=prepare_threads, prepare_seconds=round(prepare, 2),
                  expected_gain=gain, reasons=settings.reasons)


@dataclass
class EpochStats:
    """What one epoch of training saw: the loss, the samples, and the time spent waiting for the loader."""

    completed: bool = True
    loss: float = 0.0
    samples: int = 0
    seconds: float = 0.0
    wait_seconds: float = 0.0

    @property
    def data_wait(self) -> float:
        return self.wait_seconds / self.seconds if self.seconds else 0.0


class IllegalMemoryAccess(RuntimeError):
    """The CUDA context is broken: no retry in this process can help."""


def is_illegal_access(exc: BaseException) -> bool:
    return "illegal memory access" in str(exc).lower()


def decay_batch_step(batch: int) -> int:
    """The next smaller batch, stepping between powers of two (timm's: 256 -> 192 -> 128 -> 96 ... -> 1 -> 0);
    timm is imported here, where it is used, so planning never imports torch."""
    from timm.utils import decay_batch_step as timm_decay

    return timm_decay(batch)


@dataclass(frozen=True)
class ProbeResult:
    batch: int
    peak_bytes: int
    fraction: float  # peak / device memory
    tried: tuple[tuple[int, int | None], ...]  # (batch, warm peak or None for OOM)


def probe_batch(warm_peak: Callable[[int], int], start: int, device_bytes: int, target: float = 0.8,
                max_batch: int = 1024, tries: int = 6) -> ProbeResult:
    """Find a batch whose measured warm peak is near `target` of the device's memory.

    `warm_peak(batch)` runs a few real steps under the final settings and returns the peak bytes of the last
    ones (the first steps of cudnn.benchmark or compile peak far higher). An OOM steps the batch down; an
    illegal memory access is raised at once."""
    batch, tried, ceiling = max(1, start), [], max_batch + 1
    best: tuple[int, int] | None = None
    for _ in range(tries):
        try:
            peak = warm_peak(batch)
        except Exception as exc:
            if is_illegal_access(exc):
                raise IllegalMemoryAccess(str(exc)) from exc
            if not is_oom(exc):
                raise
            tried.append((batch, None))
            ceiling = min(ceiling, batch)
            batch = decay_batch_step(batch)
            if batch == 0:
                raise
            continue
        tried.append((batch, peak))
        fraction = peak / device_bytes
        # what stops the search is what may be kept: a peak a little over the target is as good as one under it
        if fraction <= target + PROBE_TOLERANCE and (best is None or batch > best[0]):
            best = (batch, peak)
        if abs(fraction - target) <= PROBE_TOLERANCE or (fraction < target and batch >= min(max_batch, ceiling - 1)):
            break
        # linear in batch: the next guess aims at the target, staying below any batch that ran out of memory
        per_sample = peak / batch
        guess = int(target * device_bytes / per_sample)
        guess = min(guess, ceiling - 1, max_batch)
        if fraction > target + PROBE_TOLERANCE:
            guess = min(guess, decay_batch_step(batch))
        if guess == batch or guess < 1:
            break
        batch = guess
    if best is None:
        raise RuntimeError(f"no batch fitted in {target:.0%} of device memory; tried {tried}")
    return ProbeResult(best[0], best[1], best[1] / device_bytes, tuple(tried))


def warm_peak_bytes(step: Callable[[], object], steps: int = 4) -> int:
    """Bytes reserved on the GPU at the peak of training steps 3 to `steps` (the first steps of cudnn.benchmark
    or compile peak far higher), plus the CUDA runtime the allocator never sees."""
    import torch

    for k in range(steps):
        if k == 2:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_reserved() + CUDA_RUNTIME_BYTES


def shared_fraction(slots: int, total_bytes: int, others: float = 0.0) -> float:
    """Each of `slots` folds' cap on the GPU's memory: together 95% of it less the share `others` held when the
    run was planned, less their CUDA contexts, which live outside the caching allocator that the cap limits."""
    return ((USABLE_SHARE - others) * total_bytes - slots * CUDA_RUNTIME_BYTES) / (slots * total_bytes)


def fold_share_of_card(per_gpu: int, memory_target: float) -> int:
    """Bytes of its card a fold's batch probe may aim within: the card split among the `per_gpu` folds sharing it.
    Where folds share it, or others held some of it when the run was planned (`memory_target` below
    TARGET_MEMORY_FRACTION), the process is capped: free memory one process sees is not reserved for it."""
    import torch

    slots = max(1, per_gpu)
    total = torch.cuda.get_device_properties(0).total_memory
    others = max(0.0, TARGET_MEMORY_FRACTION - memory_target)  # the card's share others held when planned
    if slots > 1 or others > 0:
        torch.cuda.set_per_process_memory_fraction(shared_fraction(slots, total, others))
    return total // slots


def smaller_batch(exc: BaseException, batch: int) -> int:
    """The next batch after running out of memory (timm's power-of-two decay); re-raises anything else, an
    illegal memory access (the CUDA context is gone), or a batch of 1 that did not fit."""
    from timm.utils import check_batch_size_retry

    smaller = decay_batch_step(batch)
    if not is_oom(exc) or not check_batch_size_retry(str(exc)) or smaller < 1:
        raise exc
    return smaller


def epoch_seconds(times: list[float]) -> float:
    """What a coming epoch will take: the mean of those after the first when the first paid for warm-up."""
    if len(times) > 1 and times[0] > WARMUP_SLOWER * float(np.mean(times[1:])):
        return float(np.mean(times[1:]))
    return float(np.mean(times))


def refitted_epochs(times: list[float], done: int, planned: int, seconds_left: float, most: int) -> int:
    """Epochs to plan after the second one, when the first was a warm-up: more than `planned` where the faster
    epochs fit more before the deadline, never fewer (the deadline itself ends a fold that is late)."""
    if len(times) != 2 or times[0] <= WARMUP_SLOWER * times[1]:
        return planned
    return max(planned, min(most, done + int(seconds_left // times[1])))


def device_memory(device) -> tuple[float, float]:
    """(GiB reserved at peak, its share of the device) on a GPU; zeros on CPU."""
    import torch

    if device.type != "cuda":
        return 0.0, 0.0
    peak = torch.cuda.max_memory_reserved(device)
    return peak / 2**30, peak / torch.cuda.get_device_properties(device).total_memory


def log_epoch(path: Path, epoch: int, stats: EpochStats, score: float, device, epoch_seconds: float,
              unit: str = "images", score_name: str = "") -> None:
    """One line per epoch: training loss, validation score (`score_name` where it is not the competition's metric),
    speed (`unit` a second), time waiting on the loader, device memory."""
    memory, share = device_memory(device)
    line = dict(epoch=epoch, loss=round(stats.loss, 5), score=round(score, 5), seconds=round(stats.seconds, 2),
                **({"score_name": score_name} if score_name else {}),
                epoch_seconds=round(epoch_seconds, 3),
                **{f"{unit}_per_second": round(stats.samples / max(stats.seconds, 1e-9), 1)},
                data_wait=round(stats.data_wait, 3), device_memory_gb=round(memory, 2),
                device_memory_share=round(share, 3))
    with open(path, "a") as handle:
        handle.write(json.dumps(line) + "\n")
