"""Named machines to plan for when you are not on them (`--hardware a100-40gb`).

GPU figures are the vendors' published specs (memory, compute capability, dense bf16 tensor TFLOPS); CPU and RAM
are those of a typical cloud instance carrying that GPU. With no measurement on the device, the planner estimates
step time from a model's FLOPs and these TFLOPS.
"""
from __future__ import annotations

from runner.common.errors import RunnerError
from runner.machine.hardware import GiB, Gpu, Hardware

# name: (GPU name, memory GiB, compute capability, dense bf16 TFLOPS, CPUs, RAM GiB)
_PROFILES = {
    "a10-24gb": ("NVIDIA A10", 24, (8, 6), 125.0, 30, 200),
    "l4-24gb": ("NVIDIA L4", 24, (8, 9), 121.0, 8, 32),
    "a100-40gb": ("NVIDIA A100-SXM4-40GB", 40, (8, 0), 312.0, 30, 200),
    "a100-80gb": ("NVIDIA A100-SXM4-80GB", 80, (8, 0), 312.0, 32, 240),
    "h100-80gb": ("NVIDIA H100 80GB HBM3", 80, (9, 0), 989.0, 26, 200),
    "h200-141gb": ("NVIDIA H200", 141, (9, 0), 989.0, 16, 128),
}
PROFILES = ("cpu", *_PROFILES)


def profile(name: str) -> Hardware:
    """The Hardware of a named profile; 'cpu' is a 4-CPU, 16 GiB machine without a GPU (MLE-bench's default)."""
    key = name.strip().lower()
    if key == "cpu":
        return Hardware(gpus=(), cpus=4, ram_bytes=16 * GiB, shm_bytes=4 * GiB, disk_free_bytes=100 * GiB)
    if key not in _PROFILES:
        raise RunnerError(f"--hardware: unknown profile {name!r}; known: {', '.join(PROFILES)}")
    gpu_name, memory, cc, tflops, cpus, ram = _PROFILES[key]
    gpu = Gpu(gpu_name, memory * GiB, memory * GiB, cc, tflops)
    return Hardware(gpus=(gpu,), cpus=cpus, ram_bytes=ram * GiB, shm_bytes=8 * GiB, disk_free_bytes=500 * GiB)
