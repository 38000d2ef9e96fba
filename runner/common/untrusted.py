"""Files the runner did not write itself: a competition's public folder (downloaded from anywhere) and what a run
left in its output folder (written by code that read that data, in a container the host does not trust).

- `inside(root, path)`: a path that stays inside its root when resolved, and is a regular file (or a folder),
  else a clear error naming it; `walk(root)` lists files without following links out of the root.
- `copy_out(run_dir, host_dir)`: the outputs a run left, copied into a folder only the host writes: each opened
  without following a link (O_NOFOLLOW, O_NONBLOCK so a FIFO cannot stall it), only regular files, only up to its
  size cap. The host grades and reads those copies, never the run's folder.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from runner.common.errors import InputError

MiB = 1024**2
# what the host takes from a run's folder, and the most of each it reads
OUTPUTS = {"submission.csv": 8 * 1024 * MiB, "report.json": 64 * MiB, "monitor.jsonl": 256 * MiB}
CHUNK = 4 * MiB


def inside(root: Path, path: Path, kind: str = "file") -> Path:
    """`path` resolved, when it stays inside `root` (links within the root are fine) and is a regular file (or a
    folder, `kind="folder"`); an InputError naming it otherwise."""
    root, path = Path(root).resolve(), Path(path)
    real = path.resolve()
    if real != root and root not in real.parents:
        raise InputError(f"{path}: refused: it leads outside {root} (to {real})")
    if not real.exists():
        raise InputError(f"{path}: not found")
    mode = real.stat().st_mode
    if (kind == "file" and not stat.S_ISREG(mode)) or (kind == "folder" and not stat.S_ISDIR(mode)):
        raise InputError(f"{path}: refused: not a regular {kind}")
    return real


def walk(root: Path, within: Path | None = None) -> list[Path]:
    """Every regular file under `root` whose real path stays inside `within` (default: `root`); links to
    folders are not followed, links to files outside are left out."""
    boundary = Path(within or root).resolve()
    found = []
    for folder, _, files in os.walk(root, followlinks=False):
        for name in files:
            path = Path(folder) / name
            real = path.resolve()
            if (real == boundary or boundary in real.parents) and real.is_file():
                found.append(path)
    return found


def _read_capped(path: Path, cap: int) -> bytes:
    """The bytes of a regular file at `path`, read without following a link; an error beyond `cap` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:  # ELOOP: the name is a link
        raise InputError(f"{path}: refused: {exc.strerror} (a link, or unreadable)") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{path}: refused: not a regular file")
        if info.st_size > cap:
            raise InputError(f"{path}: refused: {info.st_size} bytes, more than the {cap} allowed")
        chunks, total = [], 0
        while chunk := os.read(fd, CHUNK):
            total += len(chunk)
            if total > cap:  # it grew while read
                raise InputError(f"{path}: refused: more than the {cap} bytes allowed")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def copy_out(run_dir: Path, host_dir: Path) -> dict[str, str]:
    """Copy the outputs a run left in `run_dir` into `host_dir`; name -> "copied" or why it was not."""
    from runner.common.atomic import replacing

    outcome = {}
    for name, cap in OUTPUTS.items():
        source = Path(run_dir) / name
        if not os.path.lexists(source):
            outcome[name] = "missing"
            continue
        try:
            data = _read_capped(source, cap)
        except InputError as exc:
            outcome[name] = str(exc)
            continue
        with replacing(Path(host_dir) / name) as tmp:  # a rename over whatever is there, links included
            tmp.write_bytes(data)
        outcome[name] = "copied"
    return outcome
