"""The engine interface: what the supervisor, the slots and the fold worker may ask of any engine.

An engine owns one model family's whole life: what to `measure` before planning, its typed `Settings` (with
the reasons for each choice), the members it proposes for a run (`plan`), what to `prepare` once for all its
folds (an image cache, text embeddings), and `train_fold`. Engine modules import their libraries inside methods,
so planning never pays for torch or catboost imports.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ClassVar

import numpy as np

from runner.common.atomic import write_json
# TARGET_MEMORY_FRACTION is the plan's; engines take it from here, beside the interface they implement
from runner.planning.portfolio import TARGET_MEMORY_FRACTION, Member, PlanContext, Settings  # noqa: F401
from runner.competition.spec import CompetitionSpec

if TYPE_CHECKING:
    from runner.data.dataset import Dataset
    from runner.machine.hardware import Hardware

MEASURE_CAP = 30.0  # seconds any one engine may spend measuring, whatever the budget
EPOCH_LOG = "epochs.jsonl"  # per-epoch lines a running fold may write into its folder, read by the supervisor
# written once by a fold when its start-up is over and its first epoch begins: the supervisor's stall clock starts
# there, and what came before is start-up, never an epoch's pace
READY_FILE = "ready.json"
SHAPES = ("pixels", "boxes", "points")  # what a spec may be learned as that only an engine made for it learns (`learns`)


@dataclass
class FoldData:
    """One fold's rows, in the input kind its engine reads (see `Engine.inputs`)."""

    spec: CompetitionSpec
    classes: list | None
    x_train: object  # DataFrame, list of texts, image cache rows, or an embedding matrix
    y_train: np.ndarray
    x_val: object
    y_val: np.ndarray
    x_test: object
    image_cache: str | None = None

    @property
    def n_outputs(self) -> int:
        return len(self.classes) if self.classes is not None else self.y_train.shape[1]


@dataclass(frozen=True)
class EngineResult:
    val_pred: np.ndarray  # (n_val, k) probabilities or (n_val, t) values, from the best checkpoint
    test_pred: np.ndarray
    checkpoint: Path
    epochs: int  # epochs or boosting rounds done
    best_epoch: int
    epoch_seconds: float  # mean seconds per epoch (per round for boosters, the whole fit for one-shot engines)
    min_train_seconds: float  # the least training that still gives a usable model (one epoch, a few rounds)
    train_seconds: float
    predict_seconds: float
    stopped_by_deadline: bool
    message: str = ""
    changes: dict = field(default_factory=dict)  # settings the member's later folds should take (a smaller batch)


def replanned(again: Member, step_seconds: float, expected: float, window: float) -> Member:
    """A member planned again after a real epoch, the re-plan's reason first in its reasons and its settings'.

    `expected` is 0 for a member planned without a step time (nothing to compare against): no ratio is given then."""
    ratio = f" ({step_seconds / expected:.2f}x)" if expected > 0 else ""
    reason = (f"re-planned after a real epoch of {step_seconds:.1f} s where {expected:.1f} s was expected"
              f"{ratio}, for the {window:.0f} s left")
    return again.model_copy(update=dict(reasons=(reason, *again.reasons), settings=again.settings.model_copy(
        update=dict(reasons=(reason, *again.settings.reasons)))))


def replanned_at_pace(plan_member: Callable[[PlanContext, float], Member], context: PlanContext, member: Member,
                      step_seconds: float) -> Member | None:
    """`member` planned again by `plan_member(context, slowdown)` for the window left, its estimates slowed by what
    a real epoch took against them (times what earlier re-plans found: its settings' `slowdown`); None when nothing
    was estimated, or when the window left no longer holds it."""
    expected = member.step_seconds
    if expected <= 0 or member.left_out:
        return None
    again = plan_member(replace(context, folds=context.spec_folds), step_seconds / expected * member.settings.slowdown)
    return None if again.left_out else replanned(again, step_seconds, expected, context.window)


def say_ready(out_dir: Path, probe_seconds: float = 0.0) -> None:
    """The fold's start-up is over (its process, data, device, weights and batch): what follows is training. Said
    once, on the monotonic clock every process shares: when (`at`), since when (`started`: this process's start,
    so a wait for the fork server before it is not counted), and what of it the batch probe took."""
    from runner.common.budget import process_start

    path = Path(out_dir) / READY_FILE
    if not path.exists():
        write_json(path, dict(at=time.monotonic(), started=process_start(), probe_seconds=round(probe_seconds, 2)))


class DeadlineReached(Exception):
    """The fold's deadline arrived before anything usable was trained."""


class Engine:
    """Base class: the defaults are those of an engine that measures nothing and prepares nothing."""

    name: ClassVar[str]
    inputs: ClassVar[str]  # the Dataset view it trains on: table | text | image
    # what one row's outputs are: "rows" (its classes or values) or one of SHAPES ("pixels": its masks, a
    # probability per pixel)
    learns: ClassVar[str] = "rows"
    Settings: ClassVar[type[Settings]] = Settings
    fills_window: ClassVar[bool] = False  # its folds stretch to the time they are given (epochs), not a fixed fit
    # its folds call `say_ready` themselves once device, weights and batch are in place; for the others the fold
    # worker says it when the fold's data is read
    says_ready: ClassVar[bool] = False
    measure_share: ClassVar[float] = 0.0  # of the budget that `measure` may take (capped at MEASURE_CAP seconds)
    accelerated: ClassVar[bool] = False  # on a machine with GPUs its members take GPU slots
    steps: ClassVar[str] = "epochs"  # what a fold's `epochs` counts: epochs, rounds, fits
    preload: ClassVar[tuple[str, ...]] = ()  # modules the fold fork server imports once (runner.units.processes)
    time_scaled: ClassVar[tuple[str, ...]] = ()  # settings a re-plan may change without making it another model
    search_space: ClassVar[dict[str, tuple]] = {}  # setting -> its values in order; bags step between neighbours
    # a member that costs next to nothing and goes before the lead: a lead that fills its window (the CNN on a
    # CPU) would otherwise leave it no time at all, and it is in the blend within seconds
    cheap_first: ClassVar[bool] = False

    def measure_seconds(self, budget_seconds: float, hardware: Hardware, here: bool) -> float:
        """Seconds `measure` may take: its share of the budget, at most MEASURE_CAP."""
        return min(MEASURE_CAP, self.measure_share * budget_seconds)

    def applies(self, spec: CompetitionSpec, dataset_inputs: frozenset[str]) -> bool:
        """Whether this engine can train on a competition with these input kinds and what it learns: a row's
        classes or values ("rows"), or one of the shapes only an engine made for it learns (SHAPES)."""
        learned = spec.learned_as if spec.learned_as in SHAPES else "rows"
        return self.inputs in dataset_inputs and learned == self.learns

    def prestart(self, spec: CompetitionSpec, hardware: Hardware, budget_seconds: float, work: Path,
                 until: float) -> Callable[[], None] | None:
        """What this engine starts before the run reads its data, where it will `measure` on this machine (a
        measuring process importing its libraries meanwhile), to end by `until` (time.monotonic()); returns what
        ends it once the plan is made (None: nothing started)."""
        return None

    def measure(self, dataset: Dataset, hardware: Hardware, seconds: float, work: Path,
                here: bool = True) -> object | None:
        """Costs the planner needs, timed within `seconds` (None: nothing measured; the plan then uses the engine's
        unmeasured rule). `here` is False when `hardware` is a named machine we are not on."""
        return None

    def plan(self, context: PlanContext) -> list[Member]:
        """The members this engine proposes, each with settings, expected seconds and reasons. Pure."""
        raise NotImplementedError

    def variant(self, settings: Settings, bag: int, wide: bool = False) -> Settings:
        """The settings of the `bag`-th extra member bagged from `settings`: another seed, and a neighbouring
        configuration in `search_space`: one or two settings moved one step along their values (a value not in
        the list is drawn from it). A local search, as FLAML's, around whatever configuration does best.
        `wide`: every setting drawn anew from its values instead, a global restart (as BlendSearch pairs its local
        search with a global one): a local search that starts at the defaults may never walk to a far corner such
        as a heavily regularised tree that a small, noisy table wants."""
        rng = np.random.default_rng(1000 * settings.seed + bag)
        keys = list(self.search_space)
        if wide:
            moved = {key: values[int(rng.integers(len(values)))] for key, values in self.search_space.items()}
            return settings.model_copy(update={**moved, "seed": settings.seed + bag})
        moved = {}
        for key in rng.choice(keys, size=min(len(keys), int(rng.integers(1, 3))), replace=False) if keys else []:
            values, current = self.search_space[key], getattr(settings, key)
            if current in values:
                index = values.index(current) + int(rng.choice((-1, 1)))
                moved[key] = values[min(len(values) - 1, max(0, index))]
            else:
                moved[key] = values[int(rng.integers(len(values)))]
        return settings.model_copy(update={**moved, "seed": settings.seed + bag})

    def step_cost(self, settings: Settings, rows: int) -> float:
        """A step's cost under `settings` on `rows` training rows, relative to other settings of this engine: it
        carries a step measured under one configuration to a neighbouring one (the same: nothing it searches
        changes a step's work)."""
        return 1.0

    def replan(self, context: PlanContext, member: Member, step_seconds: float) -> Member | None:
        """The member planned again for the window left in `context`, now that one of its epochs, rounds or fits
        took `step_seconds` (None: nothing of it depends on how long a step takes)."""
        return None

    def weights(self) -> tuple[str, ...]:
        """The models this engine can start from pretrained weights (what `runner weights list` shows)."""
        return ()

    def pretrained(self) -> frozenset[str]:
        """Those of `weights()` whose weights are in the local cache, found from file names alone."""
        from runner.common.weights import find_weights

        return frozenset(m for m in self.weights() if find_weights(m))

    def useful_batch(self, rows: int) -> int:
        """The largest batch `rows` training rows make useful (0: its members have no batch to grow)."""
        return 0

    def prepare_key(self, settings: Settings) -> str | None:
        """Members whose settings give the same key share one prepared dataset; None: nothing to prepare."""
        return None

    def prepare(self, settings: Settings, dataset: Dataset, work: Path, threads: int) -> Dataset:
        """What all folds of a member share, computed once in its own process with `threads` cores (an image
        cache, embeddings); the dataset it returns is what those folds read."""
        return dataset

    def train_fold(self, settings: Settings, data: FoldData, out_dir: Path, deadline: float) -> EngineResult:
        raise NotImplementedError
