"""What every replica writes the same way, and how each is sized."""
from __future__ import annotations

import math
from pathlib import Path

from runner.common.errors import RunnerError

REAL = "real"  # a scale: as many rows, images, clips, pages and tokens as the real competition has


class Real(float):
    """A share of the real competition's counts (`--scale real/8` is Real(0.125), `real` is Real(1.0)): the
    counts shrink by the share while pixel sizes, clip lengths and every other real-only choice stay as at
    `real`, so a benchmark can grow towards the real size one step at a time. A float subclass so the counts
    are plain arithmetic; told apart from a factor of the replica's own counts by its type, never its value."""

    def __repr__(self) -> str:
        return REAL if self == 1.0 else f"{REAL}/{1 / self:.12g}"

    __str__ = __repr__


def is_real(scale: float | str) -> bool:
    """Whether `scale` ('real/8', a parsed Real, ...) is a share of the real counts, so the real pixel sizes,
    lengths and layout apply: by its type, as Real(1.0) equals the factor 1.0."""
    return isinstance(parse_scale(scale), Real)


def _share(divisor: str) -> Real | None:
    """'8' of 'real/8' as the share 1/8; None unless that is a positive, finite share."""
    try:
        share = 1 / float(divisor)
    except (ValueError, ZeroDivisionError):
        return None
    return Real(share) if 0 < share < math.inf else None


def parse_scale(text: str | float) -> float:
    """`runner demo-data --scale`: 'real', 'real/N' (a share of the real counts, e.g. real/8), or a positive
    factor of the replica's own size ('4', '0.5'). Idempotent: a Real comes back as itself."""
    if isinstance(text, Real):
        return text
    if text == REAL:
        return Real(1.0)
    share = _share(text[len(REAL) + 1:]) if isinstance(text, str) and text.startswith(REAL + "/") else None
    if share is not None:
        return share
    try:
        factor = float(text)  # 'real/0' and other bad shares fail here too, and are refused below
    except (TypeError, ValueError):
        factor = 0.0
    if not math.isfinite(factor) or factor <= 0:
        raise RunnerError(f"--scale: {text!r} is neither {REAL!r}, {REAL}/N (a share of the real counts, e.g. "
                          f"{REAL}/8) nor a positive factor (e.g. 4, 0.5)")
    return factor


def scaled(replica: int, real: int, scale: float | str, least: int = 1) -> int:
    """How many of something a replica writes at `scale`: the real competition's count times a share of it, or
    the replica's own times the factor (at least `least` either way, so every class or split keeps a member)."""
    scale = parse_scale(scale)
    return max(least, round((real if is_real(scale) else replica) * scale))


def describe(public: Path, title: str, *lines: str) -> None:
    """description.md, as MLE-bench puts one in every public folder: the title, what to predict, the metric."""
    (public / "description.md").write_text(f"# {title} (synthetic replica)\n\n" + "\n".join(lines) + "\n",
                                           encoding="utf-8")
