"""Resuming a run: what an earlier run in the same output folder finished, and may be used again.

Every unit's manifest carries a fingerprint of what produced it: its member (engine, settings, split, folds),
its fold, the data (every file of the public folder by name, size and modification time, and the spec) and the
code (the runner package's sources). A finished fold is reused only when the fingerprint it wrote is the one the
same member, fold, data and code give now; anything else is trained again.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from runner import PACKAGE
from runner.units.tasks import PREPARE, FoldResult
from runner.planning.portfolio import Member



def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


def data_fingerprint(data_dir: Path, spec_json: dict) -> str:
    """Every file of the public folder by relative name, size and modification time, and the spec."""
    files = sorted(p for p in Path(data_dir).rglob("*") if p.is_file())
    listing = [f"{p.relative_to(data_dir)}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files]
    return _digest(json.dumps(spec_json, sort_keys=True, default=str), *listing)


@cache
def code_fingerprint(package: Path = PACKAGE) -> str:
    """The runner package's sources, each by its path in the package and its text: a change to any of them, or a
    module moved to another subpackage, invalidates what earlier runs trained."""
    return _digest(*(f"{p.relative_to(package)}:{p.read_text()}" for p in sorted(package.rglob("*.py"))))


def unit_fingerprint(member: Member, fold: int, data: str, code: str) -> str:
    settings = member.settings.model_dump(mode="json", exclude={"reasons"})
    what = dict(engine=member.engine, settings=settings, folds=member.folds, split_seed=member.split_seed)
    return _digest(json.dumps(what, sort_keys=True), str(fold), data, code)


@dataclass(frozen=True)
class Reused:
    """A member an earlier run trained, and the folds of it that can be used again."""

    member: Member
    results: tuple[FoldResult, ...]

    @property
    def folds(self) -> set[int]:
        return {r.fold for r in self.results}


def resumed_members(planned: list[Member], reused: dict[str, Reused], most: int) -> tuple[list[Member], str]:
    """The members a resumed run trains, and why any planned one is left out: those the earlier run did not finish
    first (their folds must agree with the ones kept), then the new plan's others while the reused and these stay
    within `most` (`--max-members`: the reused count, as they do for extra members)."""
    unfinished = [r.member for r in reused.values() if len(r.folds) < r.member.folds]
    fresh = [m for m in planned if m.name not in reused]
    kept = fresh[:max(0, most - len(reused))]
    left = [m.name for m in fresh[len(kept):]]
    why = f"not {', '.join(left)}: at most {most} member(s), {len(reused)} of them reused" if left else ""
    return unfinished + kept, why


def reusable(out_dir: Path, data: str, code: str) -> list[Reused]:
    """The earlier run's finished folds in `out_dir` whose fingerprints match the data and code now, by member,
    in the order the earlier run started them."""
    found: dict[str, list] = {}
    for manifest in sorted(Path(out_dir).glob("members/*/*/manifest.json"), key=lambda p: p.stat().st_mtime):
        folder = manifest.parent
        if folder.name == "prepare" or not (folder / "val.npy").is_file() or not (folder / "test.npy").is_file():
            continue
        try:
            result = FoldResult.load(manifest)
            member = Member.model_validate(json.loads((folder / "task.json").read_text())["member"])
        except (OSError, ValueError, KeyError):  # a torn or foreign folder: train it again
            continue
        if result.usable and result.fold != PREPARE and \
                result.fingerprint == unit_fingerprint(member, result.fold, data, code):
            found.setdefault(member.name, [member, []])[1].append(result)
    return [Reused(member, tuple(results)) for member, results in found.values()]
