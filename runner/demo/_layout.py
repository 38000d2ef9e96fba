"""What every replica writes the same way, and how each is sized."""
from __future__ import annotations

import math
from pathlib import Path

from runner.errors import RunnerError

REAL = "real"  # a scale: as many rows, images, clips, pages and tokens as the real competition has


def parse_scale(text: str | float) -> float | str:
    """`runner demo-data --scale`: 'real', or a positive factor of the replica's own size ('4', '0.5')."""
    if isinstance(text, (int, float)) or text != REAL:
        try:
            factor = float(text)
        except (TypeError, ValueError):
            factor = 0.0
        if not math.isfinite(factor) or factor <= 0:
            raise RunnerError(f"--scale: {text!r} is neither {REAL!r} nor a positive factor (e.g. 4, 0.5)")
        return factor
    return REAL


def scaled(replica: int, real: int, scale: float | str, least: int = 1) -> int:
    """How many of something a replica writes at `scale`: the real competition's count, or the replica's own
    times the factor (at least `least`, so every class or split keeps a member)."""
    return real if scale == REAL else max(least, round(replica * float(scale)))


def describe(public: Path, title: str, *lines: str) -> None:
    """description.md, as MLE-bench puts one in every public folder: the title, what to predict, the metric."""
    (public / "description.md").write_text(f"# {title} (synthetic replica)\n\n" + "\n".join(lines) + "\n",
                                           encoding="utf-8")
