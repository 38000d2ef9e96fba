"""A pytest plugin for `bench/suite_cpu.py`: each test's wall and CPU, the CPU of every process it started included.

Each worker moves itself into a control group of its own (cgroup v2, or v1's cpuacct) at its first test; every
process it starts is born there and stays there, re-parented or killed alike, so a test's CPU is the group's usage
before and after it (the kernel's own count, where `RUSAGE_CHILDREN` misses children nobody waited on and the fork
servers a run kills). Where no group can be made (not root, no cgroup file system) the worker's own CPU and its
waited-on children's stand in, said as `"counted": "rusage"`. The containers' processes belong to the Docker
engine's groups and are not counted. Loaded with `-p suite_cpu_plugin`; writes one JSON line a test to
`$SUITE_CPU_OUT/<worker>.jsonl`.
"""
from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest

OUT_VARIABLE = "SUITE_CPU_OUT"  # the folder the lines go to
GROUP_VARIABLE = "SUITE_CPU_GROUP"  # the prefix of the groups' names: one measured suite's
V2_ROOT = Path("/sys/fs/cgroup")
V1_ROOT = Path("/sys/fs/cgroup/cpuacct")
REMOVE_WAIT_SECONDS = 5.0  # for a group's last processes to exit before it is removed


def group_root() -> tuple[Path, str] | None:
    """Where groups are made and how they count: v2's unified tree, else v1's cpuacct; None without either."""
    if (V2_ROOT / "cgroup.controllers").exists():
        return V2_ROOT, "cgroup v2"
    if (V1_ROOT / "cpuacct.usage").exists():
        return V1_ROOT, "cgroup v1 cpuacct"
    return None


def group_usage(group: Path) -> float:
    """CPU seconds the group's processes used, from the kernel's count."""
    if (group / "cpuacct.usage").exists():
        return int((group / "cpuacct.usage").read_text()) / 1e9
    stat = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
    return int(stat["usage_usec"]) / 1e6


def remove_groups(prefix: str, wait: float = REMOVE_WAIT_SECONDS) -> list[Path]:
    """The groups named `prefix`-*, removed once their processes have ended (a process that has just said it is done
    may still be exiting: each is tried again for `wait` seconds); returns those left."""
    found, left = group_root(), []
    for group in found[0].glob(f"{prefix}-*") if found else ():
        end = time.monotonic() + wait
        while True:
            try:
                group.rmdir()
                break
            except OSError:
                if time.monotonic() > end:
                    left.append(group)
                    break
                time.sleep(0.05)
    return left


def rusage_cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class Counter:
    """This worker's CPU count: its group's where it could join one, else rusage."""

    def __init__(self, worker: str):
        self.group, self.counted = None, "rusage"
        found = group_root()
        if found:
            group = found[0] / f"{os.environ.get(GROUP_VARIABLE, 'suite-cpu')}-{worker}"
            try:
                group.mkdir(exist_ok=True)
                (group / "cgroup.procs").write_text(str(os.getpid()))
                self.group, self.counted = group, found[1]
            except OSError:
                pass

    def cpu(self) -> float:
        return group_usage(self.group) if self.group else rusage_cpu()


_worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
_counter: Counter | None = None
_lines = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _counter, _lines
    if _counter is None:
        _counter = Counter(_worker)
        out = Path(os.environ.get(OUT_VARIABLE, "suite-cpu"))
        out.mkdir(parents=True, exist_ok=True)
        _lines = open(out / f"{_worker}.jsonl", "a")
    cpu, start = _counter.cpu(), time.time()
    yield
    _lines.write(json.dumps({"test": item.nodeid, "start": start, "end": time.time(), "cpu": _counter.cpu() - cpu,
                             "worker": _worker, "counted": _counter.counted}) + "\n")
    _lines.flush()
