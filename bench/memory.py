"""Memory estimate against the measured training peak on CPU: 3 timm models x 2 batch sizes.

Measured peak: in a fresh process, the resident-set high-water mark over three AdamW training steps minus the
resident set before the model was built. Estimate: runner.memory.estimate_memory (saved-tensor hooks at batch 2
and 4, parameters x 16 bytes), plus one runtime constant for what any CPU process adds on its first training step
(oneDNN primitives, thread pools): measured once with a one-layer network, the way the CUDA context is a constant
on a GPU. Nothing is calibrated per model.

A second measurement, in another fresh process, is the peak of live tensors over the same steps, from torch's
MemTracker: what a GPU's caching allocator would have to hold, without the freed memory glibc's heap keeps in the
resident set. The estimate is compared with both.

    python bench/memory.py
"""
from __future__ import annotations

import json
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


def measured_peak(model: str, batch: int, what: str = "resident") -> int:
    """Peak bytes of a fresh process's three training steps: 'resident' set growth, or live 'tensors'."""
    out = subprocess.run([sys.executable, "-c", CHILD, model, str(IMAGE_SIZE), str(batch), what],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["peak"]


def main() -> None:
    from runner.memory import estimate_memory

    rows = []
    runtime = measured_peak("one-layer", 1)
    print(f"CPU runtime constant: {runtime / 2**20:.0f} MiB", flush=True)
    for model in MODELS:
        estimate = estimate_memory(model, IMAGE_SIZE, PRECISION, classes=120).on_device(runtime)
        for batch in BATCHES:
            peak = measured_peak(model, batch)
            tensors = measured_peak(model, batch, "tensors")
            predicted = estimate.total(batch)
            row = dict(model=model, image_size=IMAGE_SIZE, batch=batch, precision=PRECISION,
                       estimate_mib=round(predicted / 2**20), measured_mib=round(peak / 2**20),
                       runtime_mib=round(estimate.runtime_bytes / 2**20),
                       per_sample_mib=round(estimate.per_sample_bytes / 2**20, 2),
                       error_pct=round(100 * (predicted - peak) / peak, 1),
                       tensor_peak_mib=round(tensors / 2**20),
                       error_vs_tensors_pct=round(100 * (estimate.on_device(0).total(batch) - tensors) / tensors, 1))
            rows.append(row)
            print(f"{model:24s} batch {batch:3d}: estimate {row['estimate_mib']:5d} MiB, measured "
                  f"{row['measured_mib']:5d} MiB, error {row['error_pct']:+.1f}%; live-tensor peak "
                  f"{row['tensor_peak_mib']:5d} MiB, estimate without the runtime constant "
                  f"{row['error_vs_tensors_pct']:+.1f}%", flush=True)
    worst = max(abs(r["error_pct"]) for r in rows)
    worst_tensors = max(abs(r["error_vs_tensors_pct"]) for r in rows)
    path = save("memory", rows, worst_error_pct=worst, goal_pct=15, runtime_mib=round(runtime / 2**20),
                worst_error_vs_tensors_pct=worst_tensors)
    print(f"worst error {worst:.1f}% against the resident set, {worst_tensors:.1f}% against live tensors "
          f"(goal: within 15%); written {path}")


if __name__ == "__main__":
    main()
