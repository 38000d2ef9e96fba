"""The typed costs the image planner reads: candidates, their measured throughput on a device, and the
device-independent memory and FLOPs estimates, saved as JSON between the measuring process and the supervisor."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from runner.engines.vision.memory import MemoryEstimate
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
class ImageCosts(Saved):
    """What the image planner knows about its candidates: measured throughput on this device (may be empty), and
    device-independent memory estimates and forward FLOPs per sample, keyed by 'model@size'."""

    throughput: tuple[Throughput, ...] = ()
    memory: tuple[MemoryEstimate, ...] = ()
    flops: dict = dataclasses.field(default_factory=dict)  # 'model@size' -> forward FLOPs per sample
    slowdown: float = 1.0  # real epochs took this many times what was measured or estimated (learnt in a run)
    note: str = ""  # why these costs are all there is (measuring failed or was stopped): said in the plan

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
