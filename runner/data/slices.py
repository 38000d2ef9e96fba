"""Series of image slices in nested folders whose file names carry their size, as uw-madison's MRI scans lie:
`<folder>/<case>/<case>_<day>/scans/slice_<nnnn>_<width>_<height>_<spacing>_<spacing>.png`, each slice's id
`<case>_<day>_slice_<nnnn>`: the series is its `<case>_<day>` folder, the slice's depth its number there.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SLICE_NAME = re.compile(r"^(slice_\d+)_(\d+)_(\d+)(?:_[\d.]+)*$")  # slice_0001_266_266_1.50_1.50


@dataclass(frozen=True)
class SliceFile:
    """One slice: its file, its series' name, its number in the series and its size."""

    path: Path
    series: str
    number: int
    height: int
    width: int


def slice_files(folder: Path) -> dict[str, SliceFile]:
    """Every slice below `folder` by its id (`<series folder>_slice_<nnnn>`); names that are no slice's are
    left out."""
    found = {}
    for path in sorted(Path(folder).rglob("*.png")):
        match = SLICE_NAME.match(path.stem)
        if not match:
            continue
        series = path.parent.parent.name if path.parent.name == "scans" else path.parent.name
        name, width, height = match.group(1), int(match.group(2)), int(match.group(3))
        found[f"{series}_{name}"] = SliceFile(path, series, int(name.split("_")[1]), height, width)
    return found


def depths(slices: dict[str, SliceFile]) -> dict[str, float]:
    """Each slice's depth in its series as a share: 0 for its first slice, 1 for its last (0.5 for a series of
    one)."""
    bounds: dict[str, tuple[int, int]] = {}
    for s in slices.values():
        low, high = bounds.get(s.series, (s.number, s.number))
        bounds[s.series] = (min(low, s.number), max(high, s.number))
    out = {}
    for key, s in slices.items():
        low, high = bounds[s.series]
        out[key] = (s.number - low) / (high - low) if high > low else 0.5
    return out


def neighbours(path: Path) -> list[Path]:
    """The slice before `path` in its folder, the slice itself and the one after (itself where there is none)."""
    match = SLICE_NAME.match(Path(path).stem)
    if not match:
        return [Path(path)] * 3
    name = match.group(1)
    digits = name.split("_")[1]
    found = []
    for step in (-1, 1):
        beside = sorted(Path(path).parent.glob(f"slice_{int(digits) + step:0{len(digits)}d}_*.png"))
        found.append(beside[0] if beside else Path(path))
    return [found[0], Path(path), found[1]]
