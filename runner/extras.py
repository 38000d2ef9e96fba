"""The extra-member policy of a live run: when a lane runs dry, another member for it while members still pay
(runner.bags decides which and why not), and the run's stop reason from what each lane said."""
from __future__ import annotations

import logging

from runner.bags import MemberState, extra_member, why_stop
from runner.ensemble import Ensemble
from runner.folds import FoldResult
from runner.portfolio import Member
from runner.deadlines import MIN_FOLD_SECONDS, lane_capacity
from runner.slots import EVERY_MEMBER_FINISHED, WINDOW_CLOSED, Scheduler

log = logging.getLogger("runner")


class ExtraMembers:
    """Extra members for lanes that ran dry, and why each lane took no more."""

    def __init__(self, states: dict[str, MemberState], results: list[FoldResult], ensemble: Ensemble, seed: int):
        self.states, self.results, self.ensemble, self.seed = states, results, ensemble, seed
        self.lane_closed: dict[str, str] = {}  # lane -> why no more members were added
        self.scheduler: Scheduler | None = None

    def more(self, lane: str) -> Member | None:
        """An extra member for this lane, or None (the reason kept for the report)."""
        budget, weights = self.ensemble.outputs.budget, self.ensemble.weights
        why = why_stop(lane, self.states, weights, self.results, budget.training_left(), MIN_FOLD_SECONDS,
                       lane_capacity(self.scheduler.plan, lane))
        if why:
            self.lane_closed[lane] = why
            log.info("no more %s members: %s", lane, why)
            return None
        member = extra_member(lane, self.states, weights, self.results, self.seed + len(self.states),
                              self.ensemble.outputs.spec.lower_is_better)
        self.states[member.name] = MemberState(member)
        log.info("adding %s: %s", member.name, member.reasons[0])
        return member

    def stop_reason(self, ended: str, cut: float) -> str:
        """The window closed, or why the lanes took no more members (and what was skipped)."""
        if ended == WINDOW_CLOSED:
            return f"the training window closed ({cut:.0%} of the budget)"
        parts = [f"{lane} lane: {why}" for lane, why in self.lane_closed.items()]
        return "; ".join(parts + ([ended] if ended != EVERY_MEMBER_FINISHED else [])) or EVERY_MEMBER_FINISHED
