"""Leases: what one competition's run holds on a shared node for its whole life (its GPUs, a block of cores, a
share of the memory), so that runs side by side never plan for the same card or core.

A lease is held by a Prefect worker, not by a scheduler of ours: `make up` starts one process worker per lease
(`runner leases` prints them), each with its lease in its environment and `--limit 1`, so the work pool's own
concurrency makes the lease exclusive: a worker takes the next flow run only when its last one has ended. A
`compete` run reads its worker's lease (`Lease.from_environment`) and gives its container exactly that:
`DeviceRequest(device_ids=...)`, `cpuset_cpus`, `mem_limit` (or, run locally, `--gpus` and a CPU affinity).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from runner.common.errors import RunnerError
from runner.deploy.containers import MEMORY_SHARE
from runner.deploy.launch import parse_cores
from runner.deploy.launch import Launch
from runner.common.saved import Saved

GPU_QUEUE, CPU_QUEUE = "gpu", "cpu"  # the work queues: competitions that want a card, and the others
ENV_GPUS, ENV_CPUS, ENV_MEMORY = "RUNNER_LEASE_GPUS", "RUNNER_LEASE_CPUS", "RUNNER_LEASE_MEMORY_GB"


def cpuset_text(cores: tuple[int, ...]) -> str:
    """Cores as Docker's cpuset and Linux write them: "0-3,8"."""
    ranges, ordered = [], sorted(cores)
    for core in ordered:
        if ranges and core == ranges[-1][1] + 1:
            ranges[-1][1] = core
        else:
            ranges.append([core, core])
    return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in ranges)


@dataclass(frozen=True)
class Lease(Saved):
    name: str  # its worker's name: gpu-0, cpu-0
    queue: str  # the work queue its worker serves
    gpus: tuple[str, ...]  # card UUIDs (none for a CPU lease)
    cpus: tuple[int, ...]  # core numbers
    memory_gb: float

    def environment(self) -> dict[str, str]:
        return {ENV_GPUS: ",".join(self.gpus) or "none", ENV_CPUS: cpuset_text(self.cpus),
                ENV_MEMORY: f"{self.memory_gb:g}"}

    @classmethod
    def from_environment(cls, environ: dict[str, str]) -> Lease | None:
        """The lease a worker was started with, or None for a worker that holds none (a machine without GPUs)."""
        if ENV_CPUS not in environ:
            return None
        gpus = environ.get(ENV_GPUS, "none")
        gpus = () if gpus in ("", "none") else tuple(gpus.split(","))
        try:
            memory = float(environ.get(ENV_MEMORY, "0"))
        except ValueError:
            raise RunnerError(f"{ENV_MEMORY}={environ[ENV_MEMORY]!r}: not a number of GiB") from None
        return cls("leased", GPU_QUEUE if gpus else CPU_QUEUE, gpus, parse_cores(environ[ENV_CPUS]), memory)


def divide(cores: tuple[int, ...], gpus: tuple[str, ...], memory_bytes: int, cpu_leases: int = 1,
           gpus_per_lease: int = 1) -> list[Lease]:
    """The node cut into leases: one per `gpus_per_lease` cards, then `cpu_leases` for table competitions; the
    cores in contiguous blocks, as even as they divide (the remainder to the CPU leases), and MEMORY_SHARE of
    the memory in proportion to the cores. No card, core or byte is in two leases."""
    groups = [gpus[i:i + gpus_per_lease] for i in range(0, len(gpus) - gpus_per_lease + 1, gpus_per_lease)]
    count = len(groups) + cpu_leases
    if count == 0 or len(cores) < count:
        raise RunnerError(f"{len(cores)} core(s) cannot be split into {len(groups)} GPU and {cpu_leases} CPU "
                          "lease(s): give fewer CPU leases or more GPUs per lease")
    each = len(cores) // count
    blocks = [cores[i * each:(i + 1) * each] for i in range(len(groups))]
    rest = cores[len(groups) * each:]
    blocks += [rest[i * len(rest) // cpu_leases:(i + 1) * len(rest) // cpu_leases] for i in range(cpu_leases)]
    per_core = MEMORY_SHARE * memory_bytes / 2**30 / len(cores)
    leases = [Lease(f"gpu-{i}", GPU_QUEUE, group, tuple(block), round(per_core * len(block), 1))
              for i, (group, block) in enumerate(zip(groups, blocks))]
    leases += [Lease(f"cpu-{i}", CPU_QUEUE, (), tuple(block), round(per_core * len(block), 1))
               for i, block in enumerate(blocks[len(groups):])]
    return leases


def leased(launch: Launch, lease: Lease | None) -> Launch:
    """The launch within a lease: its cards (none for a CPU lease), its cores and its memory."""
    if lease is None:
        return launch
    return dataclasses.replace(launch, gpus=",".join(lease.gpus) or "none", cpuset=cpuset_text(lease.cpus),
                               cpus=float(len(lease.cpus)), memory_gb=lease.memory_gb or launch.memory_gb)


def this_node(cpu_leases: int = 1, gpus_per_lease: int = 1) -> list[Lease]:
    """This machine's leases: its GPUs (by UUID), the cores this process may use, its memory; none without GPUs
    (workers then hold no lease, as on a laptop)."""
    import psutil

    from runner.machine.hardware import probe_hardware

    gpus = tuple(g.device for g in probe_hardware(busy_seconds=0).gpus)
    if not gpus:
        return []
    return divide(tuple(sorted(os.sched_getaffinity(0))), gpus, psutil.virtual_memory().total, cpu_leases,
                  gpus_per_lease)
