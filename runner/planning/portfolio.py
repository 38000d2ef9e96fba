"""The plan as a portfolio: members (an engine with settings, a slot kind, folds, expected seconds and gain),
ordered by expected gain per second, and what an engine's `plan` sees when it proposes members.

Every type here round-trips to JSON (`plan.json`); a member's settings are parsed by its engine's own Settings.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, SerializeAsAny, model_validator

from runner.planning.registry import get_engine
from runner.machine.hardware import Hardware
from runner.common.sampling import Sampled
from runner.common.saved import Saved
from runner.competition.spec import CompetitionSpec

TARGET_MEMORY_FRACTION = 0.8  # of a GPU's memory a plan aims its folds at: room for the allocator's slack

# members a run trains at most, extra ones included: each is a blend candidate, and choosing weights grows with their
# number (`runner run --max-members` asks for fewer)
MAX_MEMBERS = 100


class Settings(BaseModel):
    """What one member of an engine trains with. Each engine subclasses it with its own fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    device: str = "cpu"  # where the fold computes: cpu | cuda
    threads: int = 1  # compute threads of one fold
    seed: int = 0
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class DataShape:
    n_train: int
    n_test: int
    n_features: int = 0  # table columns (0: no table)
    classes: int = 0
    targets: int = 1  # regression targets (one booster each)
    inputs: frozenset[str] = frozenset({"table"})  # the Dataset views present: table, text, image
    text_chars: int = 0  # characters of all texts, train and test (what an encoder has to read)
    image_side: int = 0  # the training images' median shorter side in pixels (0: no images, or unknown)
    text_long_chars: int = 0  # the 95th percentile of a text's characters (0: no texts): what a max length covers
    train_pixels: int = 0  # image to image: every pixel of the training pages (0: another task)
    decode_seconds: float = 0.0  # one core's seconds to decode one image or clip, measured on a few (0: not measured)
    data_bytes: int = 0  # the dataset's size in memory, every view's train and test inputs (0: not known)

    def decode_each(self, per_core_second: float) -> float:
        """One core's seconds to decode one image or clip: measured where the data has it, else an engine's usual
        rate."""
        return self.decode_seconds or 1 / per_core_second


class Member(BaseModel):
    """One model of the portfolio, trained as `folds` cross-validation folds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str  # unique within a run: lightgbm, catboost, lightgbm-bag1, ...
    engine: str
    slot: Literal["gpu", "cpu"]  # the kind of slot its folds take
    settings: SerializeAsAny[Settings]
    folds: int
    split_seed: int = 0  # fold assignment; bags use another split, so their out-of-fold rows differ
    threads: int = 1  # cores one fold holds while it runs: compute threads plus loader workers
    per_gpu: int = 0  # folds of this member that may share one GPU (gpu slots only)
    fold_seconds: float = 0.0  # expected wall of one fold: start-up, training and test prediction
    min_fold_seconds: float = 0.0  # the least wall that still ends with a usable fold
    max_fold_seconds: float = 0.0  # the longest a fold may take (0: a share of the window, as for epochs)
    step_seconds: float = 0.0  # expected seconds per epoch, round or fit (0: not estimated), against the actual
    # expected start-up of one fold starting alone on its card or cores (process, data, device, weights, batch
    # probe), part of fold_seconds and min_fold_seconds; folds starting on one card at once each pay more
    # (runner.units.deadlines.startup_on_card). 0: not planned apart from the fold
    startup_seconds: float = 0.0
    prepare_threads: int = 0  # cores its prepare step holds (0: it has none, or the same as a fold)
    prepare_seconds: float = 0.0  # expected wall of its prepare step
    # where its prepare step computes: "gpu" takes a whole GPU (embeddings through a network); "cpu" takes cores
    # (an image cache's decoding), whatever slot its folds take
    prepare_slot: Literal["gpu", "cpu"] = "cpu"
    expected_gain: float = 0.0  # expected relative improvement of the blend's CV error (a prior until measured)
    bag_of: str | None = None  # an extra member: another configuration of this one's engine
    repeat_of: str | None = None  # an extra member: this one's settings on another split of the rows
    left_out: str = ""  # why its engine cannot train it in this window: the planner drops it and says this
    reasons: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _typed_settings(cls, data):
        """Settings as the engine's own type, whether given as that type or as JSON."""
        if isinstance(data, dict) and isinstance(data.get("settings"), dict):
            data = {**data, "settings": get_engine(data["engine"]).Settings.model_validate(data["settings"])}
        return data

    @property
    def core_seconds(self) -> float:
        """Expected cores x seconds of its prepare step and all its folds: what it costs the lane it runs in."""
        return (self.folds * max(self.fold_seconds, 1e-3) * max(1, self.threads)
                + self.prepare_seconds * max(1, self.prepare_threads))

    @property
    def gain_per_second(self) -> float:
        return self.expected_gain / self.core_seconds


class Plan(Saved, BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    members: tuple[Member, ...]
    folds: int
    cpus: int  # cores the run may use
    gpus: int = 0
    devices: tuple[str, ...] = ()  # the GPUs' UUIDs, by slot: what each GPU slot's folds get as CUDA_VISIBLE_DEVICES
    window_seconds: float = 0.0  # the training window the plan was made for
    lane_cores: dict[str, int] = {}  # lane -> the cores its engines planned for (gpu: incl. loaders)
    seed: int = 0
    reasons: tuple[str, ...] = ()
    sampled: tuple[Sampled, ...] = ()  # what the members learn from only a part of (the dataset's), and why
    unit_bytes: int = 0  # memory one unit (a fold, a prepare step) is expected to hold (0: not bounded)
    memory_bytes: int = 0  # memory the run's units may hold together (0: not bounded)
    max_members: int = MAX_MEMBERS  # the most members the run trains, planned and extra (`runner run --max-members`)

    def member(self, name: str) -> Member:
        return next(m for m in self.members if m.name == name)

    def save(self, path: Path) -> None:
        from runner.common.atomic import write_json

        write_json(path, self.to_json())


@dataclass(frozen=True)
class PlanContext:
    """What an engine's `plan` sees: pure data, so plans for an H100 can be made on a laptop."""

    spec: CompetitionSpec
    hardware: Hardware
    window: float  # seconds of training left
    data: DataShape
    costs: object | None  # the engine's own measured costs (None when nothing was measured)
    folds: int
    cores: int  # cores its lane may use: all of them, less what GPU folds hold for their loaders
    gpu_members: bool = False  # whether GPU members hold the GPU slots (cpu members then run beside them)
    pretrained: frozenset[str] = frozenset()  # image models with local weights

    @property
    def spec_folds(self) -> int:
        """The spec's folds, at most one a training item (vesuvius' two fragments make two)."""
        return min(self.spec.folds, self.data.n_train) if self.data.n_train >= 2 else self.spec.folds

    def waves(self, threads: int) -> int:
        """Rounds of folds needed when each fold holds `threads` of the lane's cores."""
        return math.ceil(self.folds / max(1, self.cores // max(1, threads)))
