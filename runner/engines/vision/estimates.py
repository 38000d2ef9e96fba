"""The GPU candidate ladder's device-independent costs, estimated once and kept with the code.

Estimating a model's memory and FLOPs runs it forward on the CPU (`memory.estimate_memory`, `forward_flops`
here): 8 s for convnext_base at 384 px and 34 s for a large ViT at 448 px on a 2-core
machine, over two minutes for the whole ladder, which a short measuring window cannot spare. `python -m
runner.engines.vision.estimates` runs the same estimators for every ladder candidate and writes
`ladder_costs.json` beside this file; measuring reads it instead of estimating again. The figures depend on the
model, the image size and the precision, not on the device; the classifier head is sized for `CLASSES` outputs,
a difference below 1% of the parameters of every ladder model at any class count up to a few thousand.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from runner.engines.vision.costs import Candidate
from runner.engines.vision.memory import MemoryEstimate, estimate_memory

COSTS = Path(__file__).with_name("ladder_costs.json")
CLASSES = 100
PRECISIONS = ("bf16", "fp16")


def _key(model: str, size: int, precision: str) -> str:
    return f"{model}@{size}@{'bf16' if precision in PRECISIONS else precision}"  # fp16 saves what bf16 saves


def known() -> dict:
    try:
        return json.loads(COSTS.read_text())
    except (OSError, ValueError):
        return {}


def memory_of(model: str, size: int, precision: str, table: dict | None = None) -> MemoryEstimate | None:
    entry = (known() if table is None else table).get(_key(model, size, precision))
    return MemoryEstimate(model, size, precision, **entry["memory"]) if entry else None


def flops_of(model: str, size: int, table: dict | None = None) -> int | None:
    entry = (known() if table is None else table).get(_key(model, size, "bf16"))
    return entry["flops"] if entry else None


def forward_flops(model_name: str, image_size: int, classes: int) -> int:
    """FLOPs of one sample's forward pass, counted by torch's FlopCounterMode on CPU."""
    import timm
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    model = timm.create_model(model_name, num_classes=classes).eval()
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(torch.randn(1, 3, image_size, image_size))
    return int(counter.get_total_flops())


def estimate(candidates: list[Candidate], classes: int) -> tuple[tuple[MemoryEstimate, ...], dict]:
    """Memory estimates and FLOPs for each distinct candidate (CPU work, no GPU needed); the ladder's own come
    from the estimates kept with the code (`ladder_costs.json`)."""
    memory, flops, kept = {}, {}, known()
    for c in candidates:
        key = (c.model, c.image_size, c.precision)
        if key not in memory:
            memory[key] = memory_of(c.model, c.image_size, c.precision, kept) if c.channels_last else None
            memory[key] = memory[key] or estimate_memory(c.model, c.image_size, c.precision, classes,
                                                         c.channels_last)
        if f"{c.model}@{c.image_size}" not in flops:
            flops[f"{c.model}@{c.image_size}"] = flops_of(c.model, c.image_size, kept) or \
                forward_flops(c.model, c.image_size, classes)
    return tuple(memory.values()), flops


def main() -> int:
    from runner.engines.vision.ladder import GPU_CANDIDATES

    table = known()
    for model, size in GPU_CANDIDATES:
        if _key(model, size, "bf16") in table:
            continue
        estimate = estimate_memory(model, size, "bf16", CLASSES, True)
        table[_key(model, size, "bf16")] = dict(
            memory=dict(parameters=estimate.parameters, fixed_bytes=estimate.fixed_bytes,
                        per_sample_bytes=estimate.per_sample_bytes),
            flops=forward_flops(model, size, CLASSES))
        print(f"{model} at {size} px: {estimate.parameters / 1e6:.1f} M parameters, "
              f"{estimate.per_sample_bytes / 2**20:.0f} MiB a sample", flush=True)
        COSTS.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
