"""The plays' video files (`<game_play>_{All29,Endzone,Sideline}.mp4`) as the smallest valid MP4s: a file-type box
and a movie header of the play's duration, no track (no engine reads the videos; the replica keeps their names
and their count, so a reader of the folder finds what the real one holds), written without a video library."""
from __future__ import annotations

import struct
from pathlib import Path

TIMESCALE = 1000  # movie-header time units a second
IDENTITY = (0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000)  # the header's display matrix: no transform


def _box(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", 8 + len(payload)) + kind + payload


def write_movie(path: Path, seconds: float) -> None:
    """An MP4 of `seconds` with no track: `ftyp` then `moov` holding its `mvhd`."""
    brands = _box(b"ftyp", b"isom" + struct.pack(">I", 0x200) + b"isomiso2mp41")
    header = struct.pack(">I", 0) + struct.pack(">IIII", 0, 0, TIMESCALE, round(seconds * TIMESCALE)) \
        + struct.pack(">IH", 0x00010000, 0x0100) + bytes(10) + struct.pack(">9I", *IDENTITY) + bytes(24) \
        + struct.pack(">I", 1)
    path.write_bytes(brands + _box(b"moov", _box(b"mvhd", header)))
