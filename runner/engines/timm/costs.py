"""The typed costs the image planner reads: candidates, their measured throughput and start-up on a device, and
the device-independent memory and FLOPs estimates, saved as JSON between the measuring process and the supervisor
(the measuring process writes them as plain dataclasses; the supervisor reads them back validated)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from runner.engines.timm.memory import MemoryEstimate
from runner.common.saved import Saved


@dataclass(frozen=True)
class Candidate:
    model: str
    image_size: int
    precision: str  # fp32 | bf16 | fp16
    batch: int
    channels_last: bool = True


@dataclass(frozen=True)
class Throughput(Saved):
    candidate: Candidate
    device: str
    train_seconds_per_sample: float
    infer_seconds_per_sample: float


@dataclass(frozen=True)
class StartUp(Saved):
    """A candidate's start-up on a device: seconds from its start (model built and moved there: on a card the CUDA
    context, the first time) to the end of its first training step (the allocator's growth, cuDNN's search for
    each shape: ~47 s on an H200 for efficientnet_lite0). `ended` False: measuring stopped inside that step, so
    the start-up is at least `seconds`."""

    candidate: Candidate
    device: str
    seconds: float
    ended: bool = True


@dataclass(frozen=True)
class FirstStep:
    """The candidate the measuring process is starting now, since `since` (time.monotonic(): one clock for every
    process here), so whoever stops the process knows how long its start-up ran."""

    candidate: Candidate
    device: str
    since: float

    def stopped(self, at: float) -> StartUp:
        return StartUp(self.candidate, self.device, round(max(0.0, at - self.since), 3), ended=False)


@dataclass(frozen=True)
class ImageCosts(Saved):
    """What the image planner knows about its candidates: measured throughput on this device (may be empty), and
    device-independent memory estimates and forward FLOPs per sample, keyed by 'model@size'."""

    throughput: tuple[Throughput, ...] = ()
    memory: tuple[MemoryEstimate, ...] = ()
    flops: dict = dataclasses.field(default_factory=dict)  # 'model@size' -> forward FLOPs per sample
    slowdown: float = 1.0  # real epochs took this many times what was measured or estimated (learnt in a run)
    note: str = ""  # why these costs are all there is (measuring failed or was stopped): said in the plan
    startup: tuple[StartUp, ...] = ()  # each started candidate's start-up, ended or not
    starting: FirstStep | None = None  # in the measuring process's file only: the candidate in its first step now

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

    def startup_of(self, model: str, size: int, precision: str) -> StartUp | None:
        """The candidate's measured start-up, the longest where it was started more than once."""
        found = [s for s in self.startup
                 if (s.candidate.model, s.candidate.image_size, s.candidate.precision) == (model, size, precision)]
        return max(found, key=lambda s: s.seconds, default=None)
