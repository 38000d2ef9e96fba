"""The heap settings every process a run starts takes (fold units, the fork server, measuring processes)."""
from __future__ import annotations

# glibc hands each freed block above its mmap threshold (32 MiB at most by default) back to the kernel and gets it
# again zero-filled, page by page: a CPU training step's activations, every step. Kept in the heap, resnet18 at
# 224 px trained 12-21% faster on this project's 2-core machine (bench/throughput.py). Tunables are read when a
# process starts: they go to the fork server and the measuring process, and forked units inherit them.
HEAP_TUNABLES = "glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=4294967296"


def tunables(environ: dict[str, str]) -> str:
    """GLIBC_TUNABLES for the processes a run starts: the user's own when set, else HEAP_TUNABLES."""
    return environ.get("GLIBC_TUNABLES", HEAP_TUNABLES)
