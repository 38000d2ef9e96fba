"""Start-up kept apart from epochs: a fold is starting until it says it is ready (CUDA up, weights in, batch
confirmed), and what its start-up takes revises its member's start-up estimate, never its epoch pace.

A fold still starting long past its member's estimate (with the folds starting on its card at once) raises the
estimate and its folds' least time to what it has taken so far, once, with where it was; a fold that said it is
ready after a start-up far from the estimate gives later folds what it took, its share alone on its card.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from runner.common import stacks
from runner.control.rules import Change, startup_measured, startup_overran, with_startup
from runner.planning.portfolio import Member
from runner.units.deadlines import startup_on_card
from runner.units.epoch_lines import ready_at
from runner.units.running import Running

log = logging.getLogger("runner")
STALL_STACKS_SECONDS = 0.5  # the supervisor's loop waits this long at most for a stalled fold's stacks


class StartupWatch:
    """The folds still starting, read against their member's start-up; changes go to `apply`."""

    def __init__(self, apply: Callable[[Change], None]):
        self.apply = apply
        self.together: dict[str, int] = {}  # unit -> the most folds seen starting on its card at once with it
        self.overran: set[str] = set()  # units whose start-up overran the estimate before they were ready
        self.readied: set[str] = set()  # units whose start-up was measured when they said they were ready

    def count_starting(self, folds: list[Running]) -> None:
        """For each fold not ready yet, the most folds seen starting on its card at once (itself included; one on
        the CPU): what its start-up is read against."""
        starting = [item for item in folds if ready_at(item) is None]
        for item in starting:
            together = sum(1 for o in starting if o.unit.on_gpu and o.task.gpu == item.task.gpu) \
                if item.unit.on_gpu else 1
            self.together[item.unit.name] = max(together, self.together.get(item.unit.name, 1))

    def watch(self, item: Running, member: Member) -> None:
        """A fold still starting is held against its member's start-up; one that just said it is ready gives what
        its start-up took."""
        if ready_at(item) is None:
            self._starting(item, member)
        elif item.unit.name not in self.readied:
            self._ready(item, member)

    def _starting(self, item: Running, member: Member) -> None:
        """A fold not ready long past its member's start-up (with the folds starting on its card at once): the
        member's start-up estimate and its folds' least time rise to what it has taken so far (a lower bound), its
        epoch pace stays and it is not timed by it; where it was goes into its log. Once a fold."""
        name, waited = item.unit.name, time.monotonic() - item.started
        together = self.together.get(name, 1)
        if name in self.overran or not startup_overran(member, waited, together):
            return
        self.overran.add(name)
        where = stacks.take([(item.process.pid, item.log)], f"start-up: not ready after {waited:.0f} s",
                            STALL_STACKS_SECONDS, resume=False)[item.process.pid]
        log.warning("%s fold %d: not ready after %.0f s where its start-up was expected to take %.1f s; it was "
                    "in %s (stacks in %s)", member.name, item.unit.fold, waited, member.startup_seconds,
                    "; ".join(where[:3]), item.log)
        self._revise(member, waited / startup_on_card(1.0, together),
                     f"{member.name} fold {item.unit.fold}: not ready after {waited:.0f} s", together)

    def _ready(self, item: Running, member: Member) -> None:
        """A fold said its start-up is over: where it took far from the member's estimate, later folds expect
        what it took (its share alone on its card)."""
        self.readied.add(item.unit.name)
        seconds, together = item.startup, self.together.get(item.unit.name, 1)
        alone = startup_measured(member, seconds, together)
        if alone is not None:
            self._revise(member, alone, f"{member.name} fold {item.unit.fold}: ready after {seconds:.1f} s",
                         together)

    def _revise(self, member: Member, alone: float, what: str, together: int) -> None:
        revised = with_startup(member, alone)
        at_once = f" ({together} folds starting on its card at once)" if together > 1 else ""
        self.apply(Change(revised, f"{what}{at_once}: later folds expect {alone:.1f} s of start-up alone (was "
                                   f"{member.startup_seconds:.1f} s) and need at least {revised.min_fold_seconds:.1f} "
                                   f"s; its epochs stay {member.step_seconds:.3g} s"))
