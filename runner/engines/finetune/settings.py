"""What a fine-tuned text member trains with."""
from __future__ import annotations

from runner.engines.base import TARGET_MEMORY_FRACTION
from runner.planning.portfolio import Settings


class TextSettings(Settings):
    model: str  # the Hugging Face repository
    max_length: int = 128  # tokens a text keeps (the rest is cut)
    batch_size: int = 32
    accumulation: int = 1
    precision: str = "fp32"  # fp32 | bf16 | fp16
    lr: float = 1e-4  # the head's peak rate; layer decay lowers it block by block below
    layer_decay: float = 0.9
    warmup_share: float = 0.1  # of the planned updates
    epochs: float = 2.0  # estimated epochs per fold, the last one partial (each fold refits this to its first)
    max_epochs: float = 5.0  # a fold's ceiling (on a CPU, its share of the lane: the last pass partial)
    patience: int = 2
    per_gpu: int = 0  # folds sharing one GPU
    fold_memory_bytes: int = 0  # estimated peak of one fold on its device
    gpu_memory_fraction: float = 0.0  # planned peak of the folds sharing a GPU / its memory
    memory_target: float = TARGET_MEMORY_FRACTION
    epoch_seconds: float = 0.0  # estimated
    slowdown: float = 1.0  # real epochs against the estimate, once one was timed (re-plans carry it)
