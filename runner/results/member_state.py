"""MemberState: what a member of the plan has done so far (its folds, seconds, CV, gain, status): the ledger the
supervisor, the ensemble and the controller keep, one per member."""
from __future__ import annotations

from dataclasses import dataclass

from runner.planning.portfolio import Member


@dataclass
class MemberState:
    """What a member has done so far."""

    member: Member
    folds_done: int = 0
    units_ended: int = 0
    seconds: float = 0.0  # wall of its units
    cv: float | None = None  # its own score on the rows its finished folds cover
    gain: float | None = None  # measured: relative improvement of the blend's CV error it brought
    record: bool = False  # its own CV beat every earlier member of its engine
    status: str = "queued"  # queued | running | done | skipped
    # put in place of another member by a re-plan: its own first step only sets what its later folds expect (a
    # re-plan of a re-plan chased one epoch's noise: 15 in a row alternating between two models were seen)
    replanned: bool = False

    @property
    def ended(self) -> bool:
        return self.units_ended >= self.member.folds

    @property
    def extra(self) -> bool:
        return self.member.bag_of is not None or self.member.repeat_of is not None
