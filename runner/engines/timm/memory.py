"""Training memory of a timm model: estimated without a GPU, then confirmed on one by probing.

Estimate (bytes) for batch B:
    parameters x (4 weights + 4 gradients + 8 AdamW moments)
  + the activation peak of backward, fixed part + B x per-sample part
  + runtime (a CUDA context and library workspaces, which a caching allocator never sees)
The activation peak comes from autograd's saved-tensor hooks on a CPU forward pass: backward visits the saved
tensors in reverse order and frees each once the earliest operation that saved it is done, so while it runs the
operation saved k-th, the tensors first saved at or before k are alive, plus the gradient buffers of that
operation (one for its output, one for its input, each about the size of what it saved). The peak over k is
counted at batch 2 and 4, so the per-sample slope and the fixed part come out of two measurements, for any
model, without a GPU.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from runner.common.saved import Saved

BYTES_PER_PARAMETER = 16  # fp32 weight, fp32 gradient, two fp32 AdamW moments


@dataclass(frozen=True)
class MemoryEstimate(Saved):
    model: str
    image_size: int
    precision: str
    parameters: int
    fixed_bytes: int
    per_sample_bytes: int
    runtime_bytes: int = 0

    def total(self, batch: int) -> int:
        return (self.parameters * BYTES_PER_PARAMETER + self.fixed_bytes + batch * self.per_sample_bytes
                + self.runtime_bytes)

    def largest_batch(self, budget_bytes: float) -> int:
        """Largest batch whose estimate fits `budget_bytes` (0 when not even the model fits)."""
        free = budget_bytes - self.total(0)
        return max(0, int(free // max(1, self.per_sample_bytes)))

    def on_device(self, runtime_bytes: int) -> "MemoryEstimate":
        return dataclasses.replace(self, runtime_bytes=runtime_bytes)


def backward_peak_bytes(saved: list[tuple[int, int]]) -> int:
    """Peak bytes of activations and gradient buffers while backward runs, from the (storage, bytes) pairs the
    forward pass saved, in the order it saved them."""
    alive, first_seen, peak = 0, set(), 0
    for storage, nbytes in saved:
        if storage not in first_seen:
            first_seen.add(storage)
            alive += nbytes
        peak = max(peak, alive + 2 * nbytes)
    return peak


def saved_tensors(model, batch: int, image_size: int, precision: str, channels_last: bool) -> list[tuple[int, int]]:
    """(storage, bytes) of each tensor autograd saves for backward in one forward pass on CPU, in the order they
    are saved; parameters are left out (they are counted once, not per sample)."""
    import torch

    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: list[tuple[int, int]] = []

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params and tensor.device.type != "meta":
            saved.append((storage.data_ptr(), storage.nbytes()))
        return tensor

    x = torch.randn(batch, 3, image_size, image_size)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.bfloat16}.get(precision)  # fp16 and bf16 save the same bytes
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
            torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        model(x)
    return saved


def estimate_memory(model_name: str, image_size: int, precision: str, classes: int, channels_last: bool = True,
                    runtime_bytes: int = 0) -> MemoryEstimate:
    """The estimate for a timm model, measured on CPU (no GPU and no weights needed)."""
    import timm
    import torch

    model = timm.create_model(model_name, num_classes=classes)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    small, large = (backward_peak_bytes(saved_tensors(model, batch, image_size, precision, channels_last))
                    for batch in (2, 4))
    per_sample = (large - small) // 2
    parameters = sum(p.numel() for p in model.parameters())
    return MemoryEstimate(model_name, image_size, precision, parameters, fixed_bytes=max(0, small - 2 * per_sample),
                          per_sample_bytes=per_sample, runtime_bytes=runtime_bytes)
