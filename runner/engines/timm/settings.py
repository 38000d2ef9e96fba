"""What an image member trains with, and the memory and batch rules that planning and training share."""
from __future__ import annotations

from typing import Literal

from runner.engines.base import TARGET_MEMORY_FRACTION
from runner.planning.portfolio import Settings

__all__ = ["TARGET_MEMORY_FRACTION", "MEMORY_TOLERANCE", "MAX_EPOCHS", "ImageSettings", "useful_batch"]
MEMORY_TOLERANCE = 0.1  # the planned peak aims at 0.8 +- 0.1 of device memory
MAX_EPOCHS = {"scratch": 100, "pretrained": 20}  # a fold's default ceiling; a window with room for more raises it


class ImageSettings(Settings):
    model: str
    image_size: int
    source_side: int = 0  # the training images' median shorter side (0: unknown): the cache keeps no more
    init: str = "scratch"  # scratch | pretrained (local weights found)
    augment: Literal["photo", "spectrogram"] = "photo"  # see augment.DeviceAugment
    batch_size: int = 32
    accumulation: int = 1
    precision: str = "fp32"  # fp32 | bf16 | fp16
    channels_last: bool = True
    compile: bool = False
    num_workers: int = 0
    prefetch_factor: int | None = None
    pin_memory: bool = False
    epochs: int = 1  # estimated epochs per fold (each fold refits this to its first timed epoch)
    max_epochs: int = MAX_EPOCHS["scratch"]
    patience: int = 10  # epochs without improvement before a fold stops
    per_gpu: int = 0  # folds sharing one GPU (each caps itself at its share of the memory)
    fold_memory_bytes: int = 0  # estimated peak of one fold on its device
    gpu_memory_fraction: float = 0.0  # planned peak of the folds sharing a GPU / its memory
    memory_target: float = TARGET_MEMORY_FRACTION  # of the card this run's folds aim at: less what others held
    epoch_seconds: float = 0.0  # estimated


def useful_batch(rows: int) -> int:
    """The largest batch the data makes useful: an epoch of `rows` keeps at least 20 steps."""
    return max(16, min(512, (rows // 20) // 8 * 8))
