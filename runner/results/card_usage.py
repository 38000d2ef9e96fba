"""How a run used its cards, for report.json, the console summary and the run page: for each card, the share of the
training window it ran kernels (the monitor's NVML samples), held a unit, and trained a fold; for each GPU member,
its steady speed beside the bare training loop's. Pure: from the report's records and the monitor's samples.

The window is the run's training window: from its start (data, measuring and start-up are what the card waits
through) to its cut, or to when training ended where folds ran past it. A run without a card has no figures
(None), never zeros.
"""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from runner.machine.monitor import busy_share
from runner.units.epoch_lines import SPEED_UNITS

GPU_LANE = "gpu "  # how the scheduler names a GPU slot's lane ("gpu 0")


class CardShare(BaseModel):
    """One card over the training window."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    card: int  # the run's GPU slot
    busy_share: float | None  # mean NVML utilisation over the window's samples (None: no sample gives it)
    samples: int  # monitor samples that gave its utilisation in the window
    held_seconds: float  # the union of the spans of the units on it (prepare steps and folds, start-up included)
    training_seconds: float  # the union of its folds' epochs: what the card trained
    window_seconds: float

    @property
    def held_share(self) -> float:
        return self.held_seconds / max(self.window_seconds, 1e-9)

    @property
    def training_share(self) -> float:
        return self.training_seconds / max(self.window_seconds, 1e-9)

    def say(self) -> str:
        busy = "busy unknown (NVML gave no utilisation)" if self.busy_share is None else \
            f"busy {self.busy_share:.0%}"
        return (f"card {self.card}: {busy}, held by units {self.held_share:.0%}, training {self.training_share:.0%} "
                f"({self.training_seconds:.0f} s) of the {self.window_seconds:.0f} s training window")


class MemberSpeed(BaseModel):
    """A GPU member's steady training speed, from its folds' epoch lines."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    member: str
    unit: str  # what its speed counts: images, rows
    per_second: float  # samples over seconds of its epochs after each fold's first (the warm-up)
    epochs: int  # the epochs counted
    warm_up_included: bool = False  # no fold got past its first epoch: those are counted
    # the bare training loop's speed for the same model and batch on the same card, as gpu-check measures it
    # (bench/gpu_check.py); None where the run was given no such measurement
    bare_loop_per_second: float | None = None

    def say(self) -> str:
        short = SPEED_UNITS.get(self.unit, self.unit)
        bare = "bare loop unknown" if self.bare_loop_per_second is None else \
            f"{self.per_second / self.bare_loop_per_second:.0%} of the bare loop's {self.bare_loop_per_second:,.0f}"
        warm = ", first epochs included" if self.warm_up_included else ""
        return f"{self.member}: {self.per_second:,.0f} {short}/s over {self.epochs} epochs{warm} ({bare})"


class CardUsage(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    window: tuple[float, float]  # seconds from the run's start
    cards: tuple[CardShare, ...]
    members: tuple[MemberSpeed, ...] = ()

    def say(self) -> list[str]:
        return [c.say() for c in self.cards] + [m.say() for m in self.members]


def union_seconds(spans: list[tuple[float, float]], window: tuple[float, float]) -> float:
    """Seconds of `window` covered by at least one span: folds side by side on a card count once."""
    clipped = sorted((max(a, window[0]), min(b, window[1])) for a, b in spans)
    total, reach = 0.0, window[0]
    for start, end in clipped:
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def training_span(unit: dict, result: dict | None, epochs: list[dict]) -> tuple[float, float]:
    """When a fold trained: its epochs (its result's training seconds, or the sum of its epoch lines for a fold
    killed before it wrote one) placed just before its prediction, within its unit's span. Epoch lines say how
    long each took, not when, and a fold's start-up (CUDA, weights, the batch probe) comes first, its prediction
    last."""
    result = result or {}
    trained = result.get("train_seconds") or sum(line.get("epoch_seconds", 0.0) for line in epochs)
    end = max(unit["start"], unit["end"] - (result.get("predict_seconds") or 0.0))
    return max(unit["start"], end - trained), end


def card_of(lane: str) -> int | None:
    return int(lane[len(GPU_LANE):]) if lane.startswith(GPU_LANE) and lane[len(GPU_LANE):].isdigit() else None


def card_share(card: int, window: tuple[float, float], units: list[dict], folds: list[dict], epochs: list[dict],
               samples: list[dict]) -> CardShare:
    """One card's figures over the window, from the units that ran on it (prepare steps have fold -1)."""
    on_card = [u for u in units if card_of(u["lane"]) == card]
    results = {(f["member"], f["fold"]): f for f in folds}
    trained = [training_span(u, results.get((u["member"], u["fold"])),
                             [e for e in epochs if e["member"] == u["member"] and e["fold"] == u["fold"]])
               for u in on_card if u["fold"] >= 0]
    busy, counted = busy_share(samples, card, *window)
    return CardShare(card=card, busy_share=busy, samples=counted,
                     held_seconds=round(union_seconds([(u["start"], u["end"]) for u in on_card], window), 2),
                     training_seconds=round(union_seconds(trained, window), 2),
                     window_seconds=round(window[1] - window[0], 2))


def member_speed(member: str, epochs: list[dict]) -> MemberSpeed | None:
    """The member's speed over its epochs after each fold's first (samples over seconds, so a long epoch counts
    for its length), or over all of them where none got further; None without an epoch that gives a speed."""
    lines = [e for e in epochs if e["member"] == member and e.get("seconds")]
    unit = next((u for u in SPEED_UNITS if any(f"{u}_per_second" in e for e in lines)), None)
    if unit is None:
        return None
    lines = [e for e in lines if f"{unit}_per_second" in e]
    steady = [e for e in lines if e["epoch"] > 1]
    counted = steady or lines
    seconds = sum(e["seconds"] for e in counted)
    samples = sum(e[f"{unit}_per_second"] * e["seconds"] for e in counted)
    return MemberSpeed(member=member, unit=unit, per_second=round(samples / seconds, 1), epochs=len(counted),
                       warm_up_included=not steady)


def card_usage(cards: int, window: tuple[float, float], units: tuple[dict, ...], folds: tuple[dict, ...],
               epochs: tuple[dict, ...], members: tuple[dict, ...], samples: list[dict]) -> CardUsage | None:
    """The run's card figures; None for a run without a card."""
    if cards <= 0:
        return None
    units, folds, epochs = list(units), list(folds), list(epochs)
    speeds = [member_speed(m["name"], epochs) for m in members if m.get("slot") == "gpu"]
    return CardUsage(window=(round(window[0], 2), round(window[1], 2)),
                     cards=tuple(card_share(c, window, units, folds, epochs, samples) for c in range(cards)),
                     members=tuple(s for s in speeds if s is not None))
