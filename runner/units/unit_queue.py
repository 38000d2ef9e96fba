"""Units of work and the queue of those not yet started: a member's prepare step and its folds, in plan order, with
what each prepare step has reached and why a member's remaining units were skipped."""
from __future__ import annotations

from dataclasses import dataclass, field

from runner.planning.registry import get_engine
from runner.units.tasks import PREPARE
from runner.planning.portfolio import Member


@dataclass(frozen=True)
class Unit:
    member: Member
    fold: int  # PREPARE for the member's prepare step

    @property
    def name(self) -> str:
        return f"{self.member.name}/{'prepare' if self.fold == PREPARE else self.fold}"

    @property
    def on_gpu(self) -> bool:
        return self.member.prepare_slot == "gpu" if self.fold == PREPARE else self.member.slot == "gpu"

    @property
    def threads(self) -> int:
        return (self.member.prepare_threads or self.member.threads) if self.fold == PREPARE else self.member.threads


def prepare_key(member: Member) -> str | None:
    """Members with the same key share one prepared dataset (None: nothing to prepare)."""
    return get_engine(member.engine).prepare_key(member.settings)


@dataclass
class UnitQueue:
    """The units waiting to start, in order."""

    reused: dict[str, set[int]] = field(default_factory=dict)  # member -> folds an earlier run already finished
    waiting: list[Unit] = field(default_factory=list)
    prepared: dict[str, str] = field(default_factory=dict)  # prepare key -> queued | running | done | failed
    skipped: dict[str, str] = field(default_factory=dict)  # member -> why its remaining units did not start

    def add(self, member: Member) -> None:
        """Queue a member's prepare step (unless its key is prepared or queued) and the folds not yet done."""
        folds = [k for k in range(member.folds) if k not in self.reused.get(member.name, set())]
        key = prepare_key(member)
        if folds and key is not None and key not in self.prepared:
            self.prepared[key] = "queued"
            self.waiting.append(Unit(member, PREPARE))
        self.waiting.extend(Unit(member, k) for k in folds)

    def revise(self, name: str, member: Member) -> int:
        """A member's units not yet started take its new version (settings the run learnt it should have);
        those running or finished keep theirs. Returns how many were revised."""
        revised = [i for i, u in enumerate(self.waiting) if u.member.name == name]
        for i in revised:
            self.waiting[i] = Unit(member, self.waiting[i].fold)
        return len(revised)

    def ready(self, unit: Unit) -> bool:
        """A fold whose member's prepared dataset exists, or a prepare step."""
        key = prepare_key(unit.member)
        return unit.fold == PREPARE or key is None or self.prepared.get(key) == "done"

    def take(self, unit: Unit) -> None:
        """The unit starts now."""
        self.waiting.remove(unit)
        if unit.fold == PREPARE:
            self.prepared[prepare_key(unit.member)] = "running"

    def drop(self, member: str, why: str) -> list[Unit]:
        """The member's waiting units leave the queue, the first reason kept; returns its folds among them."""
        dropped = [u for u in self.waiting if u.member.name == member]
        for unit in dropped:
            self.waiting.remove(unit)
        self.skipped.setdefault(member, why)
        return [u for u in dropped if u.fold != PREPARE]

    def prepare_ended(self, unit: Unit, usable: bool) -> list[str]:
        """A prepare step ended; when it failed, the members waiting on its dataset (to be dropped)."""
        key = prepare_key(unit.member)
        self.prepared[key] = "done" if usable else "failed"
        return [] if usable else sorted({u.member.name for u in self.waiting if prepare_key(u.member) == key})

    def pending(self, member: str) -> int:
        """The member's folds still waiting."""
        return sum(1 for u in self.waiting if u.member.name == member and u.fold != PREPARE)
