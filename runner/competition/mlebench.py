"""The MLE-bench data layout and files: where a competition's folders are, splits, and grading input."""
from __future__ import annotations

import json
import re
from pathlib import Path

from runner.common.errors import InputError, SpecError
from runner.competition.catalog import competitions_dir, find_spec


def competition_dirs(data_root: Path, competition: str) -> tuple[Path, Path | None]:
    """(prepared/public, prepared/private or None) of a competition under an MLE-bench data root."""
    spec = find_spec(competition)
    name = spec.id if spec else competition
    public = Path(data_root) / name / "prepared" / "public"
    if not public.is_dir():
        raise InputError(f"{public}: no prepared data (run `mlebench prepare -c {name}` or `runner demo-data`)")
    private = public.parent / "private"
    return public, private if private.is_dir() else None


def read_split(name: str) -> list[str]:
    """Competition ids of a split, by its name in competitions/splits/ (demo, mle-bench-lite): a name only, not a
    path (a flow parameter must not read files of its choosing), and ids only (lines that are no id are left out)."""
    known = sorted(p.stem for p in (competitions_dir() / "splits").glob("*.txt"))
    if name not in known:
        raise SpecError(f"split {name!r} not found; known: {', '.join(known)}")
    lines = (competitions_dir() / "splits" / f"{name}.txt").read_text().splitlines()
    return [line.strip() for line in lines if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", line.strip())]


SPLITS = ("low", "medium", "high", "dev")  # MLE-bench's complexity splits (low is Lite), and its dev split


def split_of(competition: str) -> str:
    """The MLE-bench split a competition is in (low, medium, high, dev), or "" for one in none."""
    return next((s for s in SPLITS if competition in read_split(s)), "")


def deployment_name(competition: str) -> str:
    """`compete/<alias>`: the first alias of the spec, else the id."""
    spec = find_spec(competition)
    return f"compete/{spec.aliases[0] if spec and spec.aliases else competition}"


def write_grading_jsonl(rows: list[dict], path: Path) -> Path:
    """Lines `{"competition_id", "submission_path"}`: what `mlebench grade --submission` reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"competition_id": r["competition_id"],
                                        "submission_path": r["submission_path"]}) + "\n" for r in rows))
    return path
