"""Memory estimate against the measured training peak on CPU: 3 timm models x 2 batch sizes.

Each figure is measured in a fresh process over three AdamW training steps, three ways:
- live tensors: the peak of tensor memory from torch's MemTracker. This is what the estimate models, and what a
  GPU's caching allocator has to hold at least.
- in use: the resident-set high-water mark minus the resident set before the model was built, with glibc told to
  give freed blocks of 128 KiB and more back to the system at once (MALLOC_MMAP_THRESHOLD_), so the resident set
  is the memory the process uses, oneDNN and thread pools included.
- resident: the same without that setting. glibc then keeps freed activations in its heap (its mmap threshold
  rises after the first large frees), so this also counts memory that is free but held; the difference between
  the two is that retention alone, since the computation is the same.
Estimate: runner.engines.timm.memory.estimate_memory (saved-tensor hooks at batch 2 and 4, parameters x 16
bytes); for the two resident-set measures plus one runtime constant for what any CPU process adds on its first
training step (oneDNN primitives, thread pools), measured with a one-layer network the same way, as the CUDA
context is a constant on a GPU. Nothing is calibrated per model.

    python bench/memory.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from _common import save

MODELS = ("resnet18", "mobilenetv3_small_100", "efficientnet_b0")
IMAGE_SIZE, BATCHES, PRECISION = 160, (16, 64), "fp32"
CHILD = r"""
import contextlib, json, os, resource, sys
import torch, timm
from torch.distributed._tools.mem_tracker import MemTracker
torch.set_num_threads(2)
name, size, batch, what = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def rss(): return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
before = rss()
if name == "one-layer":  # for the runtime constant: almost no parameters or activations of its own
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                                torch.nn.Linear(4, 120)).to(memory_format=torch.channels_last)
else:
    model = timm.create_model(name, num_classes=120).to(memory_format=torch.channels_last)
optimizer = torch.optim.AdamW(model.parameters())
x = torch.randn(batch, 3, size, size).contiguous(memory_format=torch.channels_last)
y = torch.randint(0, 120, (batch,))
tracker = MemTracker() if what == "tensors" else None
if tracker:
    tracker.track_external(model, optimizer, x, y)
with tracker or contextlib.nullcontext():
    for _ in range(3):
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step(); optimizer.zero_grad(set_to_none=True)
        if tracker:
            tracker.reset_mod_stats()
peak = (tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"] if tracker
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before)
print(json.dumps(dict(peak=peak)))
"""


RETURN_FREED = {"MALLOC_MMAP_THRESHOLD_": "131072"}
MEASURES = ("tensors", "in_use", "resident")


def measured_peak(model: str, batch: int, what: str) -> int:
    """Peak bytes of a fresh process's three training steps: live 'tensors', or resident-set growth with freed
    memory returned at once ('in_use') or kept by glibc ('resident')."""
    env = dict(os.environ, **(RETURN_FREED if what == "in_use" else {}))
    out = subprocess.run([sys.executable, "-c", CHILD, model, str(IMAGE_SIZE), str(batch), what],
                         capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])["peak"]


def error_pct(estimate: int, measured: int) -> float:
    return round(100 * (estimate - measured) / measured, 1)


def main() -> None:
    from runner.engines.timm.memory import estimate_memory

    rows = []
    runtime = {"tensors": 0, **{what: measured_peak("one-layer", 1, what) for what in ("in_use", "resident")}}
    print(f"CPU runtime constant: in use {runtime['in_use'] / 2**20:.0f} MiB, resident "
          f"{runtime['resident'] / 2**20:.0f} MiB", flush=True)
    for model in MODELS:
        estimate = estimate_memory(model, IMAGE_SIZE, PRECISION, classes=120)
        for batch in BATCHES:
            row = dict(model=model, image_size=IMAGE_SIZE, batch=batch, precision=PRECISION,
                       per_sample_mib=round(estimate.per_sample_bytes / 2**20, 2),
                       estimate_mib=round(estimate.total(batch) / 2**20))
            peaks = {what: measured_peak(model, batch, what) for what in MEASURES}
            for what, peak in peaks.items():
                row[f"{what}_mib"] = round(peak / 2**20)
                row[f"{what}_error_pct"] = error_pct(estimate.on_device(runtime[what]).total(batch), peak)
            row["retained_by_glibc_mib"] = round((peaks["resident"] - peaks["in_use"]) / 2**20)
            rows.append(row)
            print(f"{model:22s} batch {batch:3d}: estimate {row['estimate_mib']:5d} MiB; live tensors "
                  f"{row['tensors_mib']:5d} ({row['tensors_error_pct']:+.1f}%), in use {row['in_use_mib']:5d} "
                  f"({row['in_use_error_pct']:+.1f}%), resident {row['resident_mib']:5d} "
                  f"({row['resident_error_pct']:+.1f}%)", flush=True)
    worst = {what: max(abs(r[f"{what}_error_pct"]) for r in rows) for what in MEASURES}
    path = save("memory", rows, goal_pct=15, runtime_mib={k: round(v / 2**20) for k, v in runtime.items() if v},
                **{f"worst_error_{what}_pct": value for what, value in worst.items()})
    print(f"worst error: {worst['tensors']:.1f}% against live tensors, {worst['in_use']:.1f}% against memory in "
          f"use, {worst['resident']:.1f}% against the resident set (goal: within 15%); written {path}")


if __name__ == "__main__":
    main()
