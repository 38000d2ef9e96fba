"""Archives as competitions ship them: zip, 7z, tar (plain, gzip, bz2 or xz) and a single gzipped file, each told
from its first bytes, never its name (inaturalist's `.tar.gz` is a plain tar). Their members are listed with their
sizes, one is read into memory, and chosen ones are extracted within bounds checked before anything is written:
how many, how much they expand, and the disk they need.
"""
from __future__ import annotations

import gzip
import io
import shutil
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable

from runner.common.errors import InputError

SEVEN_ZIP = b"7z\xbc\xaf\x27\x1c"
ZIP = b"PK\x03\x04"
GZIP = b"\x1f\x8b"
MAX_MEMBERS = 2_000_000  # files one extraction may write
DISK_MARGIN = 0.8  # of the free disk an extraction may fill
TAR_PEEK = 512  # a tar's first header block


@dataclass(frozen=True)
class Member:
    """One file of an archive: its path inside (always '/'-separated), its size once extracted and packed."""

    name: str
    size: int
    packed: int


def kind(path: Path) -> str | None:
    """'zip', '7z', 'tar' or 'gzip' (a single compressed file) from the file's first bytes; None for no archive."""
    with open(path, "rb") as handle:
        start = handle.read(8)
    if start.startswith(ZIP):
        return "zip"
    if start.startswith(SEVEN_ZIP):
        return "7z"
    if _is_tar(path):
        return "tar"
    if start.startswith(GZIP):
        return "gzip"
    return None


def _is_tar(path: Path) -> bool:
    """A tar, compressed or not: tarfile reads its first member's header."""
    try:
        with tarfile.open(path, "r:*") as archive:
            return archive.next() is not None
    except (tarfile.TarError, OSError, EOFError):
        return False


def _safe(name: str) -> bool:
    """A member that extracts inside its target: no absolute path, no '..'."""
    parts = PurePosixPath(name).parts
    return bool(parts) and not PurePosixPath(name).is_absolute() and ".." not in parts


def members(path: Path) -> list[Member]:
    """The files of an archive (folders, links and unsafe names left out), with their sizes."""
    found = kind(path)
    try:
        if found == "zip":
            with zipfile.ZipFile(path) as archive:
                items = [Member(m.filename, m.file_size, m.compress_size) for m in archive.infolist() if not m.is_dir()]
        elif found == "7z":
            import py7zr

            with py7zr.SevenZipFile(path) as archive:
                items = [Member(m.filename, m.uncompressed, m.compressed or 0) for m in archive.list()
                         if not m.is_directory]
        elif found == "tar":
            with tarfile.open(path, "r:*") as archive:
                items = [Member(m.name, m.size, m.size) for m in archive.getmembers() if m.isfile()]
        elif found == "gzip":
            items = [Member(Path(path).name.removesuffix(".gz"), _gzip_size(path), Path(path).stat().st_size)]
        else:
            raise InputError(f"{path}: not an archive (zip, 7z, tar or gzip)")
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as exc:
        raise InputError(f"{path}: cannot read the archive: {exc}") from exc
    except Exception as exc:  # py7zr's own errors (Bad7zFile, unsupported methods)
        if type(exc).__module__.startswith("py7zr"):
            raise InputError(f"{path}: cannot read the 7z archive: {exc}") from exc
        raise
    return [m for m in items if _safe(m.name)]


def _gzip_size(path: Path) -> int:
    """A gzip's content size from its trailer (modulo 4 GiB), at least the file's own size."""
    size = Path(path).stat().st_size
    with open(path, "rb") as handle:
        handle.seek(-4, 2)
        stored = int.from_bytes(handle.read(4), "little")
    return stored + -(-max(0, size - stored) // 2**32) * 2**32


def read_member(path: Path, name: str | None = None) -> bytes:
    """One member's bytes (the archive's only file when `name` is None)."""
    found = members(path)
    if name is None:
        if len(found) != 1:
            raise InputError(f"{path}: expected one file inside, found {len(found)} ({[m.name for m in found[:5]]})")
        name = found[0].name
    elif name not in {m.name for m in found}:
        raise InputError(f"{path}: no member {name!r}")
    archive_kind = kind(path)
    if archive_kind == "zip":
        with zipfile.ZipFile(path) as archive:
            return archive.read(name)
    if archive_kind == "7z":
        import py7zr

        with py7zr.SevenZipFile(path) as archive:
            factory = py7zr.io.BytesIOFactory(limit=2**40)
            archive.extract(targets=[name], factory=factory)
            return factory.get(name).read()
    if archive_kind == "tar":
        with tarfile.open(path, "r:*") as archive:
            return archive.extractfile(name).read()
    with gzip.open(path, "rb") as handle:
        return handle.read()


def open_member(path: Path, name: str | None = None) -> io.BytesIO:
    return io.BytesIO(read_member(path, name))


def check_room(source: Path, chosen: list[Member], target: Path, max_ratio: float | None = None) -> None:
    """Refuse (before anything is written) an extraction of too many files, of files that expand more than
    `max_ratio` times their packed size (a bomb), or of more than DISK_MARGIN of the target's free disk."""
    if len(chosen) > MAX_MEMBERS:
        raise InputError(f"{source}: refused: {len(chosen)} files, more than {MAX_MEMBERS}")
    expanded, packed = sum(m.size for m in chosen), sum(m.packed for m in chosen)
    if max_ratio is not None and packed and expanded > max_ratio * packed:
        raise InputError(f"{source}: refused: its files expand {expanded / packed:.0f} times "
                         f"({expanded / 2**30:.1f} GiB), more than the {max_ratio:g} times they can")
    target.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(target).free
    if expanded > DISK_MARGIN * free:
        raise InputError(f"{source}: refused: its files need {expanded / 2**30:.1f} GiB, {target} has "
                         f"{free / 2**30:.1f} GiB free")


def extract(source: Path, target: Path, wanted: Callable[[str], bool] = lambda name: True,
            max_ratio: float | None = None) -> Path:
    """The members `wanted` says of an archive extracted under `target`, once: a target marked complete (a file
    beside it, so the folder holds the archive's files alone) is reused. Bounds are checked first (`check_room`)."""
    done = target.parent / f".{target.name}.complete"
    if done.exists():
        return target
    chosen = [m for m in members(source) if wanted(m.name)]
    check_room(source, chosen, target, max_ratio)
    names = {m.name for m in chosen}
    archive_kind = kind(source)
    try:
        if archive_kind == "zip":
            with zipfile.ZipFile(source) as archive:
                archive.extractall(target, members=sorted(names))
        elif archive_kind == "7z":
            import py7zr

            with py7zr.SevenZipFile(source) as archive:
                archive.extract(path=target, targets=sorted(names))
        elif archive_kind == "tar":
            with tarfile.open(source, "r:*") as archive:
                archive.extractall(target, members=[m for m in archive.getmembers() if m.name in names],
                                   filter="data")
        else:
            (target / chosen[0].name).write_bytes(read_member(source))
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as exc:
        raise InputError(f"{source}: cannot extract: {exc}") from exc
    done.touch()
    return target
