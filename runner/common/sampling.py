"""What a run trains on when its data is more than its budget or memory affords: the part kept, of how much, how it
was drawn and why. One value per input cut: the dataset carries it, the plan repeats it, the report keeps it and
the run page shows it, so a score is never read without knowing it came from a share of the data."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

# the seed every draw of a part of the data starts from: fixed, so a run is repeatable, and not 0, the seed the
# replicas' generators draw their labels from (the same stream once picked a table's rows by their label)
SAMPLING_SEED = 20_211_201


class Sampled(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    what: str  # what was counted: training rows, training pixels, training tokens, training images
    kept: int  # how many the engines learn from
    of: int  # how many there were (or were read, where reading stopped early: `how` says so)
    how: str  # how they were drawn: evenly through the file, whole sentences at random, ...
    why: str  # what bounded them: the budget, the memory, the time a prepare step may take
    source: str = ""  # the file or folder they came from

    @property
    def share(self) -> float:
        return self.kept / max(1, self.of)

    def say(self) -> str:
        where = f"{self.source}: " if self.source else ""
        return f"{where}trains on {self.kept:,} of {self.of:,} {self.what} ({self.share:.1%}, {self.how}): {self.why}"
