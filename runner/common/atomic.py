"""Write-then-rename, so readers and hard kills only ever see whole files."""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Iterator

import numpy as np


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()  # what open() would give: mkstemp's 0600 is not what the user's umask asks for


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it replaces `path` in one rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def write_json(path: Path, data: dict) -> None:
    with replacing(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, default=str))


def write_npy(path: Path, array: np.ndarray) -> None:
    with replacing(path) as tmp:
        with open(tmp, "wb") as handle:
            np.save(handle, array)
