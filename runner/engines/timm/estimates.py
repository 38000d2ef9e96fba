"""The GPU candidate ladder's device-independent costs, estimated once and kept with the code.

Estimating a model's memory and FLOPs runs it forward on the CPU (`memory.estimate_memory`, `forward_flops`
here): 8 s for convnext_base at 384 px and 34 s for a large ViT at 448 px on a 2-core
machine, over two minutes for the whole ladder, which a short measuring window cannot spare. `python -m
runner.engines.timm.estimates` runs the same estimators for every ladder candidate and writes
`ladder_costs.json` beside this file; measuring reads it instead of estimating again (a rung capped to the images'
own side scales its model's nearest kept size by pixels), and so does the supervisor, without torch, when the
measuring process died. The figures depend on the model, the image size and the precision, not on the device;
the classifier head is sized for `CLASSES` outputs, a difference below 1% of the parameters of every ladder model
at any class count up to a few thousand.
"""
from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from pathlib import Path

from runner.engines.timm.costs import Candidate
from runner.engines.timm.memory import MemoryEstimate, estimate_memory

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


def _nearest(model: str, size: int, table: dict) -> int | None:
    """The size of `model`'s kept rung nearest `size` (None: the model is not on the ladder)."""
    sizes = [int(key.split("@")[1]) for key in table if key.split("@")[0] == model]
    return min(sizes, key=lambda s: abs(s - size), default=None)


def kept_memory(model: str, size: int, precision: str, table: dict) -> MemoryEstimate | None:
    """A rung's memory estimate from the kept table, read without torch; a size the table lacks (a rung capped to
    the images' own side) scales the same model's nearest kept size by its pixels, as a convolutional network's
    activations grow (its parameters do not)."""
    kept = _nearest(model, size, table)
    memory = memory_of(model, kept, precision, table) if kept else None
    if memory is None:
        return None
    return dataclasses.replace(memory, image_size=size,
                               per_sample_bytes=round(memory.per_sample_bytes * (size / kept) ** 2))


def kept_flops(model: str, size: int, table: dict) -> int | None:
    """A rung's forward FLOPs from the kept table, scaled by pixels as `kept_memory` scales activations."""
    kept = _nearest(model, size, table)
    flops = flops_of(model, kept, table) if kept else None
    return round(flops * (size / kept) ** 2) if flops else None


def ladder_estimates(candidates: list[Candidate]) -> tuple[tuple[MemoryEstimate, ...], dict]:
    """Memory estimates and FLOPs of the candidates the kept table covers (`kept_memory`, `kept_flops`): what a
    plan for a GPU stands on when measuring gave nothing."""
    table, memory, flops = known(), {}, {}
    for c in candidates:
        found, work = kept_memory(c.model, c.image_size, c.precision, table), kept_flops(c.model, c.image_size, table)
        if found and work:
            memory[(c.model, c.image_size, c.precision)], flops[f"{c.model}@{c.image_size}"] = found, work
    return tuple(memory.values()), flops


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


def estimate(candidates: list[Candidate], classes: int,
             deadline: float = math.inf) -> tuple[tuple[MemoryEstimate, ...], dict]:
    """Memory estimates and FLOPs for each distinct candidate (CPU work, no GPU needed): the ladder's kept ones
    (`ladder_costs.json`, other sizes scaled by pixels) where they exist, else counted on a forward pass, only
    until `deadline` (time.monotonic()): one takes seconds to tens of them."""
    memory, flops, table = {}, {}, known()
    for c in candidates:
        key, name = (c.model, c.image_size, c.precision), f"{c.model}@{c.image_size}"
        if key not in memory and c.channels_last and (found := kept_memory(*key, table)):
            memory[key] = found
        if name not in flops and (work := kept_flops(c.model, c.image_size, table)):
            flops[name] = work
        if time.monotonic() > deadline:
            continue
        if key not in memory:
            memory[key] = estimate_memory(*key, classes, c.channels_last)
        if name not in flops:
            flops[name] = forward_flops(c.model, c.image_size, classes)
    return tuple(memory.values()), flops


def main() -> int:
    from runner.engines.timm.ladder import GPU_CANDIDATES

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
