"""What a fold that trains a network from scratch in epochs holds beside its network (the U-Nets of restored pages
and of masks): AdamW, autocast at the planned precision (a gradient scaler for fp16), and a cosine schedule over
the updates the fold fitted to its window, warmed up from a small share of the rate. Imported by fold processes
only: it imports torch."""
from __future__ import annotations

import contextlib
import gc
from typing import Callable, TypeVar

import torch
from timm.scheduler import CosineLRScheduler

from runner.engines.networks import smaller_batch

T = TypeVar("T")

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
MIN_LR_SHARE = 0.01  # where the cosine ends, and where its warm-up starts, as a share of the peak rate
WEIGHT_DECAY = 1e-4  # AdamW's: light, the nets are small and their epochs few


class Optimised:
    """A network on its device with its optimiser, precision and schedule; `settings` gives device, lr, precision."""

    def __init__(self, model: torch.nn.Module, settings):
        self.settings, self.device = settings, torch.device(settings.device)
        self.model = model.to(self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=settings.lr, weight_decay=WEIGHT_DECAY)
        dtype = DTYPES.get(settings.precision)
        self.autocast = torch.autocast(self.device.type, dtype=dtype) if dtype else contextlib.nullcontext()
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=settings.precision == "fp16")
        self.scheduler, self.updates = None, 0

    def schedule(self, steps: int, warmup: int = 0) -> None:
        """Cosine decay over `steps` updates from now, after `warmup` rising from MIN_LR_SHARE of the rate."""
        low = self.settings.lr * MIN_LR_SHARE
        self.scheduler = CosineLRScheduler(self.optimizer, t_initial=max(1, steps), t_in_epochs=False, lr_min=low,
                                           warmup_t=warmup, warmup_lr_init=low, warmup_prefix=True)
        self.updates = 0

    def update(self, loss: torch.Tensor) -> float:
        """One optimiser step on `loss` (scaled under fp16), the schedule advanced; the loss as a number."""
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.scheduler is not None:
            self.updates += 1
            self.scheduler.step_update(self.updates)
        return float(loss.detach())


def from_start_on_oom(settings, attempt: Callable[[object], T]) -> tuple[T, object, list[str]]:
    """`attempt(settings)` (a fold's whole training), started again from the start at a smaller batch each time it
    runs out of memory (runner.engines.networks.smaller_batch re-raises anything else): its result, the settings
    it finished with, and what was said. For small nets whose epochs are cheap to redo: the planned batch is an
    estimate, not probed."""
    notes = []
    while True:
        try:
            return attempt(settings), settings, notes
        except Exception as exc:
            batch = smaller_batch(exc, settings.batch_size)
            notes.append(f"out of memory at batch {settings.batch_size}: started again at batch {batch}")
            settings = settings.model_copy(update=dict(batch_size=batch))
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
