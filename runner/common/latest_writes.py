"""Writes that must not hold the supervisor: a submission of millions of rows takes seconds to format, and the
supervisor re-blends at every fold. Each file's newest version is written by one background thread; a version put
while an older one waits replaces it (only the newest is worth writing), and `flush` waits for the last. Every
write replaces its file atomically, so a reader sees the previous version until the next is whole."""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable

log = logging.getLogger("runner")


class LatestWrites:
    def __init__(self):
        self._pending: dict[Path, Callable[[], None]] = {}
        self._writing = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="writes", daemon=True)
        self._thread.start()

    def put(self, path: Path, write: Callable[[], None]) -> None:
        """Write `path` with `write` soon; an earlier version of it not yet started is dropped."""
        with self._changed:
            self._pending[Path(path)] = write
            self._changed.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every version put has been written (False if `timeout` passed first)."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._pending and not self._writing, timeout)

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._pending)
                path = next(iter(self._pending))
                write, self._writing = self._pending.pop(path), True
            try:
                write()
            except Exception as exc:  # the previous version stays in place, as with a write in the foreground
                log.error("%s: not written, the previous version stays: %s", path, exc)
            finally:
                with self._changed:
                    self._writing = False
                    self._changed.notify_all()
