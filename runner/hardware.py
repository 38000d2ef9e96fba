"""What this process may use: GPUs (NVML), CPUs (affinity and cgroup quota), RAM, shared memory, disk.

`probe_hardware()` is the only code here that touches the machine; everything downstream takes `Hardware` as data.
"""
from __future__ import annotations

import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from runner.saved import Saved

GiB = 1024**3
BUSY_SAMPLE_SECONDS = 0.5  # long enough to see a core another process keeps busy, short next to any budget
BUSY_CORE = 0.7  # of a core's time used by other processes, from which it counts as theirs: OpenMP threads of ours
# sharing it spin at barriers for a peer that is not running, and a 2-thread fold trained 30x slower on 1 free core


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_bytes: int
    free_bytes: int
    compute_capability: tuple[int, int]
    bf16_tflops: float = 0.0  # dense bf16 tensor throughput from the spec sheet (0: unknown)

    @property
    def bf16(self) -> bool:
        return self.compute_capability >= (8, 0)


@dataclass(frozen=True)
class Hardware(Saved):
    gpus: tuple[Gpu, ...]
    cpus: int
    ram_bytes: int
    shm_bytes: int
    disk_free_bytes: int
    busy_cpus: int = 0  # cores other processes kept busy when probed, already left out of `cpus`



def cgroup_cpu_quota(cgroup_root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs allowed by the cgroup's quota (v2 `cpu.max`, else v1 `cpu.cfs_quota_us`); None when unlimited."""
    v2 = cgroup_root / "cpu.max"
    if v2.is_file():
        quota, _, period = v2.read_text().strip().partition(" ")
        return None if quota == "max" else int(quota) / int(period or 100000)
    quota_file, period_file = cgroup_root / "cpu" / "cpu.cfs_quota_us", cgroup_root / "cpu" / "cpu.cfs_period_us"
    if quota_file.is_file() and period_file.is_file():
        quota = int(quota_file.read_text())
        return None if quota <= 0 else quota / int(period_file.read_text())
    return None


def available_cpus(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:
    """CPUs this process can really use: its affinity mask, capped by the cgroup quota (a container's --cpus)."""
    count = len(os.sched_getaffinity(0))
    quota = cgroup_cpu_quota(cgroup_root)
    return max(1, min(count, math.floor(quota))) if quota else count


def _tree_cpu_seconds(process: psutil.Process) -> float:
    """CPU seconds of a process tree, counting what its ended children used: a fold that ends while the cores are
    sampled leaves the tree, and its time moves into its parent's `children_*` times (without them, a run of
    sub-second folds once counted itself as another process keeping a core busy)."""
    total = 0.0
    for p in [process, *process.children(recursive=True)]:
        try:
            times = p.cpu_times()
        except psutil.Error:  # ended meanwhile
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def busy_elsewhere(seconds: float = BUSY_SAMPLE_SECONDS) -> int:
    """How many of the CPUs this process may run on other processes keep busy: their busy time over `seconds`
    less this process tree's own, in whole cores counted from BUSY_CORE."""
    mine, me = sorted(os.sched_getaffinity(0)), psutil.Process()
    before, own = psutil.cpu_times(percpu=True), _tree_cpu_seconds(me)
    time.sleep(seconds)
    after, own = psutil.cpu_times(percpu=True), _tree_cpu_seconds(me) - own

    def busy(t) -> float:
        return sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)

    used = sum(busy(after[i]) - busy(before[i]) for i in mine if i < len(after)) - own
    return max(0, math.floor(used / seconds + 1 - BUSY_CORE))


def _probe_gpus() -> tuple[Gpu, ...]:
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:  # no driver, no library: a CPU machine
        return ()
    try:
        gpus = []
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        indices = range(pynvml.nvmlDeviceGetCount())
        if visible is not None:
            indices = [int(i) for i in visible.split(",") if i.strip().isdigit()]
        for index in indices:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            gpus.append(Gpu(name.decode() if isinstance(name, bytes) else name, int(memory.total),
                            int(memory.free), tuple(pynvml.nvmlDeviceGetCudaComputeCapability(handle))))
        return tuple(gpus)
    finally:
        pynvml.nvmlShutdown()


def probe_hardware(work_dir: Path = Path("."), busy_seconds: float = BUSY_SAMPLE_SECONDS) -> Hardware:
    """The machine as this process finds it now: cores other processes keep busy are left out, so no fold runs
    more threads than there are cores to run them."""
    shm = shutil.disk_usage("/dev/shm").total if Path("/dev/shm").exists() else 0
    allowed = available_cpus()
    free = len(os.sched_getaffinity(0)) - (busy_elsewhere(busy_seconds) if busy_seconds > 0 else 0)
    cpus = max(1, min(allowed, free))  # a quota under the affinity count is ours whatever else runs beside it
    return Hardware(gpus=_probe_gpus(), cpus=cpus, ram_bytes=psutil.virtual_memory().total,
                    shm_bytes=shm, disk_free_bytes=shutil.disk_usage(work_dir).free, busy_cpus=allowed - cpus)
