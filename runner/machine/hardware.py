"""What this process may use: GPUs (NVML), CPUs (affinity and cgroup quota), RAM, shared memory, disk.

`probe_hardware()` is the only code here that touches the machine; everything downstream takes `Hardware` as data.
"""
from __future__ import annotations

import logging
import math
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from runner.machine.devices import visible
from runner.common.saved import Saved

GiB = 1024**3
BUSY_SAMPLE_SECONDS = 0.5  # long enough to see a core another process keeps busy, short next to any budget
BUSY_CORE = 0.7  # of a core's time used by other processes, from which it counts as theirs: OpenMP threads of ours
# sharing it spin at barriers for a peer that is not running, and a 2-thread fold trained 30x slower on 1 free core
CUDA_CHECK_SECONDS = 120  # a child importing torch and starting CUDA: seconds; a hung driver must not hold the run
CUDA_CHECK = "import torch; torch.cuda.init(); print(torch.cuda.get_device_name(0))"
IDLE_USED_BYTES = 1 * GiB  # what a driver itself holds on an idle card: more in use than this is someone else's
UNLIMITED_BYTES = 2**60  # a cgroup v1 limit this large (the page-rounded maximum) means no limit
# CPU flags (x86: AVX512-BF16, AMX; Arm: BF16) under which torch runs bf16 natively: without them it emulates bf16
# and a step takes about 10x fp32's (resnet18 at 64 px on an AVX2-only EPYC core: 6.8 s against 0.57 s)
CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
NO_CPU_BF16 = "this CPU has no native bf16 (AVX512-BF16, AMX or BF16): CPU models are timed and trained in fp32 only"
# dense bf16 tensor TFLOPS from the vendors' spec sheets, by a part of the name NVML gives (longest match wins):
# the planner's estimate of step time for a model no measurement timed on the card
SPEC_SHEET_TFLOPS = {"H200": 989.0, "H100": 989.0, "H100 PCIe": 756.0, "H100 NVL": 835.0, "A100": 312.0,
                     "A10": 125.0, "A10G": 70.0, "L4": 121.0, "L40": 181.0, "L40S": 362.0, "A40": 150.0,
                     "RTX A6000": 155.0, "V100": 0.0, "T4": 0.0}  # V100, T4: no bf16


def spec_sheet_tflops(name: str) -> float:
    found = [k for k in SPEC_SHEET_TFLOPS if k.lower() in name.lower()]
    return SPEC_SHEET_TFLOPS[max(found, key=len)] if found else 0.0


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_bytes: int
    free_bytes: int
    compute_capability: tuple[int, int]
    bf16_tflops: float = 0.0  # dense bf16 tensor throughput from the spec sheet (0: unknown)
    device: str = ""  # its UUID, what a fold process gets as CUDA_VISIBLE_DEVICES ("" in a named profile)

    @property
    def bf16(self) -> bool:
        return self.compute_capability >= (8, 0)

    @property
    def others_bytes(self) -> int:
        """Memory other processes held on the card when it was probed (this run holds none then)."""
        used = self.memory_bytes - self.free_bytes
        return used if used > IDLE_USED_BYTES else 0

    def memory_target(self, fraction: float) -> float:
        """The share of the card this run may plan for: `fraction` of it, less what others hold."""
        return max(0.0, fraction - self.others_bytes / self.memory_bytes)


@dataclass(frozen=True)
class Hardware(Saved):
    gpus: tuple[Gpu, ...]
    cpus: int
    ram_bytes: int
    shm_bytes: int
    disk_free_bytes: int
    busy_cpus: int = 0  # cores other processes kept busy when probed, already left out of `cpus`
    compiler: bool = True  # a C compiler and Python's headers: torch.compile's Triton builds its launcher with them
    cpu_bf16: bool = True  # the CPU runs bf16 natively (CPU_BF16_FLAGS): else no CPU candidate is timed in bf16
    notes: tuple[str, ...] = ()  # what the probe found wrong and worked around, for the plan's reasons

    @property
    def tightest_gpu(self) -> Gpu | None:
        """The card with the least memory free for this run (one plan serves every card), None without GPUs."""
        return min(self.gpus, key=lambda g: g.memory_target(1.0) * g.memory_bytes, default=None)



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


def cgroup_memory_limit(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Bytes the cgroup lets this process tree use (v2 `memory.max`, else v1 `memory.limit_in_bytes`); None when
    unlimited. A container's --memory is here, while psutil still reports the host's memory."""
    v2, v1 = cgroup_root / "memory.max", cgroup_root / "memory" / "memory.limit_in_bytes"
    text = v2.read_text().strip() if v2.is_file() else v1.read_text().strip() if v1.is_file() else "max"
    limit = None if text == "max" else int(text)
    return limit if limit is not None and limit < UNLIMITED_BYTES else None


def available_memory(told: int | None = None, cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:
    """Memory this run may use: the machine's, within its cgroup's limit and what it was told (`runner run
    --memory`, a lease's share)."""
    limits = [psutil.virtual_memory().total, cgroup_memory_limit(cgroup_root), told]
    return int(min(x for x in limits if x))


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


def _nvml():
    """NVML, started; None where no driver or library answers (a CPU machine)."""
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


def _card(nvml, uuid: str) -> Gpu:
    handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
    try:  # a MIG instance answers memory itself, its name and compute capability through its parent
        whole = nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
    except nvml.NVMLError:
        whole = handle
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    name = nvml.nvmlDeviceGetName(whole)
    name = name.decode() if isinstance(name, bytes) else name
    return Gpu(name, int(memory.total), int(memory.free), tuple(nvml.nvmlDeviceGetCudaComputeCapability(whole)),
               bf16_tflops=spec_sheet_tflops(name), device=uuid)


def _probe_gpus(gpus: str | None = None) -> tuple[Gpu, ...]:
    """The cards this run may use (`gpus` as `runner run --gpus` gives it, else CUDA_VISIBLE_DEVICES, else all)."""
    nvml = _nvml()
    try:
        return tuple(_card(nvml, uuid) for uuid in visible(gpus, dict(os.environ), nvml))
    finally:
        if nvml is not None:
            nvml.nvmlShutdown()


def cuda_fails(device: str) -> str | None:
    """Why torch cannot start CUDA on `device` (a UUID or index), or None when it can. Asked of a child process:
    this one must never start CUDA (its units are forked from it), and NVML seeing a card does not mean this torch
    can use it (a driver older than the wheel's CUDA, typically)."""
    env = {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": device}
    try:
        done = subprocess.run([sys.executable, "-c", CUDA_CHECK], capture_output=True, text=True, env=env,
                              timeout=CUDA_CHECK_SECONDS)
    except subprocess.TimeoutExpired:
        return f"starting CUDA took over {CUDA_CHECK_SECONDS} s"
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else f"exit code {done.returncode}"


def usable(gpus: tuple[Gpu, ...], why_not: str | None) -> tuple[tuple[Gpu, ...], tuple[str, ...]]:
    """The cards to plan for, and a note when NVML's cards are dropped because torch cannot start CUDA on them."""
    if not gpus or why_not is None:
        return gpus, ()
    import torch

    note = (f"NVML sees {len(gpus)} GPU(s) ({gpus[0].name}) but torch {torch.__version__} (built for CUDA "
            f"{torch.version.cuda}) cannot start CUDA on them: {why_not}; planning for the CPU (is the driver new "
            "enough for this CUDA?)")
    logging.getLogger("runner").warning(note)
    return (), (note,)


def cpu_runs_bf16(cpuinfo: str) -> bool:
    """Whether a CPU with this /proc/cpuinfo text runs bf16 natively (True when it lists no flags at all: the
    measuring step then times bf16 and keeps it only where it is faster)."""
    flags = [line.partition(":")[2].split() for line in cpuinfo.splitlines()
             if line.split(":")[0].strip() in ("flags", "Features")]
    return not flags or bool(CPU_BF16_FLAGS.intersection(flags[0]))


def cpu_bf16_here() -> bool:
    """Whether this machine's CPU runs bf16 natively (cpu_runs_bf16 on its /proc/cpuinfo; True off Linux)."""
    try:
        return cpu_runs_bf16(Path("/proc/cpuinfo").read_text())
    except OSError:  # not Linux
        return True


def has_compiler() -> bool:
    """A C compiler and Python.h: what Triton needs to build its CUDA launcher on torch.compile's first call."""
    return any(shutil.which(c) for c in ("cc", "gcc", "clang")) and \
        Path(sysconfig.get_paths()["include"], "Python.h").is_file()


def probe_hardware(work_dir: Path = Path("."), busy_seconds: float = BUSY_SAMPLE_SECONDS,
                   gpus: str | None = None, memory: int | None = None) -> Hardware:
    """The machine as this process finds it now: cores other processes keep busy are left out, so no fold runs
    more threads than there are cores to run them; only the GPUs `gpus` (or CUDA_VISIBLE_DEVICES) name; the
    memory within the cgroup's limit and `memory` (bytes the run was told it has)."""
    shm = shutil.disk_usage("/dev/shm").total if Path("/dev/shm").exists() else 0
    allowed = available_cpus()
    free = len(os.sched_getaffinity(0)) - (busy_elsewhere(busy_seconds) if busy_seconds > 0 else 0)
    cpus = max(1, min(allowed, free))  # a quota under the affinity count is ours whatever else runs beside it
    found = _probe_gpus(gpus)
    cards, notes = usable(found, cuda_fails(found[0].device) if found else None)
    bf16 = cpu_bf16_here()
    if not bf16 and not cards:
        notes += (NO_CPU_BF16,)
    return Hardware(gpus=cards, cpus=cpus, ram_bytes=available_memory(memory), shm_bytes=shm,
                    disk_free_bytes=shutil.disk_usage(work_dir).free, busy_cpus=allowed - cpus,
                    compiler=has_compiler(), cpu_bf16=bf16, notes=notes)
