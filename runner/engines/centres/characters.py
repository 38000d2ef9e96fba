"""The `Characters` engine: the centre-point network read as a reader of characters on pages (kuzushiji), for
`points` submissions. One heatmap finds characters whatever their code, and the embedding at each peak names its
code among the fold's codes; a page's row of points (runner.common.point_rows) holds its likeliest peaks. It is
sized as the detector is (`planning.centres_member`), at a larger side: a page holds hundreds of characters, each
some 2-3% of its height. Training and prediction live in `reading`."""
from __future__ import annotations

from pathlib import Path

from runner.engines.base import FoldData, replanned_at_pace
from runner.engines.centres.engine import Centres
from runner.engines.centres.planning import CentreSettings, Kind, centres_member
from runner.planning.portfolio import Member, PlanContext

NAME = "characters"
# the reader's input side: on a CPU the replica's pages are 96-112 x 128-144 px and their characters 9-12 px, so
# 128 puts each character some 3 cells from the next at stride 4; on a GPU the real pages (2,000-3,900 px, the
# characters 50-100 px) at 1024 px give 5-8 cells a character
SIDE = {"cpu": 128, "cuda": 1024}


class CharacterSettings(CentreSettings):
    side: int = SIDE["cpu"]
    flips: bool = False  # a mirrored character is another shape (or none)


READER = Kind(NAME, CharacterSettings, SIDE,
              ("centre-point reader of characters", "one heatmap (a character, whatever its code), its size and "
               "offset, and a code embedding a cell, named at each peak among the fold's codes",
               "each page its likeliest peaks as points, from the confidence (peak x code) tuned on out-of-fold "
               "pages"))


def characters_member(context: PlanContext, slowdown: float = 1.0) -> Member:
    return centres_member(context, slowdown, READER)


class Characters(Centres):
    """The detector's engine with a reader's member, pages and folds (its flags and weights are the detector's)."""

    name = NAME
    learns = "points"  # a page's characters as points in slots: it takes points submissions alone
    Settings = CharacterSettings
    # imported once by the fork server: a fold that imports torch and timm itself starts seconds later
    preload = ("torch", "timm", "runner.engines.centres.reading")

    def plan(self, context: PlanContext) -> list[Member]:
        return [characters_member(context)]

    def replan(self, context: PlanContext, member: Member, step_seconds: float) -> Member | None:
        """Planned again for the window left, at the pace a real epoch showed."""
        return replanned_at_pace(characters_member, context, member, step_seconds)

    def prepare_key(self, settings: CharacterSettings) -> str:
        from runner.engines.centres.images import cache_name

        return cache_name(settings.side, "pages")

    def prepare(self, settings: CharacterSettings, dataset, work: Path, threads: int):
        from runner.engines.centres.images import prepare_pages

        return prepare_pages(dataset, settings.side, work, threads)

    def train_fold(self, settings: CharacterSettings, data: FoldData, out_dir: Path, deadline: float):
        from runner.engines.centres.reading import train

        return train(settings, data, out_dir, deadline)
