"""One core kept busy, as another process on a shared machine keeps it: a pure-Python spin pinned to a chosen core,
for a given time or until killed (`make test-busy` runs the suite beside it on core 0; docs/testing.md).

    python bench/busy_core.py --core 0 [--seconds 600]      # SIGTERM or SIGINT stops it, or its parent's end

A test file run pinned to the same core (`taskset -c 0 python -m pytest ...`) then shares its core with it, as an
xdist worker does when another process uses its core.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)


def spin(core: int | None = None, seconds: float | None = None) -> None:
    """Keep `core` (None: wherever this process may run) busy for `seconds` (None: until killed, or until the
    process that started it ends: an interrupted `make test-busy` leaves nothing spinning)."""
    if core is not None:
        os.sched_setaffinity(0, {core})
    parent = os.getppid()
    end = None if seconds is None else time.monotonic() + seconds
    while (end is None or time.monotonic() < end) and os.getppid() == parent:
        for _ in range(100_000):  # pure Python: no sleeping, no I/O, one core's worth of work
            pass


def start(core: int | None = None, seconds: float | None = None) -> subprocess.Popen:
    """The spin as a process of its own (stop it with .kill())."""
    args = [sys.executable, HERE] + (["--core", str(core)] if core is not None else []) + \
        (["--seconds", str(seconds)] if seconds is not None else [])
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--core", type=int, default=None, help="the core to keep busy (default: not pinned)")
    parser.add_argument("--seconds", type=float, default=None, help="how long (default: until killed)")
    args = parser.parse_args()
    if args.core is not None and args.core not in os.sched_getaffinity(0):
        parser.error(f"core {args.core} is not among this process's cores {sorted(os.sched_getaffinity(0))}")
    try:
        spin(args.core, args.seconds)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
