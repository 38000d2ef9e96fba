"""Loaders over the decoded-image cache: a batch is one read of the memory map, cropped later on the device."""
from __future__ import annotations

import signal

import numpy as np
import torch
from torch.utils.data import DataLoader

from runner.engines.base import FoldData
from runner.engines.timm.settings import ImageSettings

# Loader workers are forked from the fold: they only read the memory map (no CUDA), and a fork costs milliseconds.
# Left to its default, a fold (itself a fork-server child) starts them through a fork server of its own, and each
# worker imports torch afresh: 7 s before the first batch on an H200 machine, 15 workers at once
WORKER_START = "fork"


def _worker_start(_worker_id: int) -> None:
    """A loader worker ignores SIGTERM: the supervisor asks a fold to stop at its next epoch with SIGTERM to the
    fold's process group, and workers ended by it left the fold failing on its next batch (its validation or test
    pass included), losing the epochs it had. Workers still end with their fold, and with SIGKILL."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


class CachedImages(torch.utils.data.Dataset):
    """Rows of the decoded-image cache with their labels, fetched a batch at a time (`__getitems__`): one read of
    the memory map per batch, its HWC rows seen as an NCHW batch in channels_last layout without another copy.
    Nothing is computed per image here; `DeviceAugment` crops, flips and normalises where the model trains."""

    def __init__(self, cache: str, rows, labels: np.ndarray | None):
        self.cache, self.rows, self.labels = cache, np.asarray(rows), labels
        self._array = None  # opened lazily so each loader worker maps the file itself

    def __len__(self) -> int:
        return len(self.rows)

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        if self._array is None:
            self._array = np.load(self.cache, mmap_mode="r")
        images = torch.from_numpy(self._array[self.rows[indices]]).permute(0, 3, 1, 2)
        if self.labels is None:
            return images, torch.full((len(indices),), -1)
        if self.labels.ndim == 2:  # multi-label: one 0/1 value per label
            return images, torch.as_tensor(self.labels[indices], dtype=torch.float32)
        return images, torch.as_tensor(self.labels[indices], dtype=torch.long)

    def __getitem__(self, i: int):
        images, labels = self.__getitems__([i])
        return images[0], labels[0]


def _as_batch(batch):
    """The loader's collate step: `CachedImages.__getitems__` already returns the batch."""
    return batch


def loaders(settings: ImageSettings, data: FoldData, cache: str):
    """Train, validation and test loaders over the decoded cache (whole squares; `DeviceAugment` crops them)."""
    common = dict(batch_size=settings.batch_size, num_workers=settings.num_workers, pin_memory=settings.pin_memory,
                  collate_fn=_as_batch, multiprocessing_context=WORKER_START if settings.num_workers else None,
                  worker_init_fn=_worker_start,
                  persistent_workers=settings.num_workers > 0, prefetch_factor=settings.prefetch_factor)
    # a ragged last batch is dropped (one of a few images skews BatchNorm), unless no full batch exists at all
    full = len(data.x_train) >= settings.batch_size
    train = DataLoader(CachedImages(cache, data.x_train, data.y_train), shuffle=True, drop_last=full, **common)
    val = DataLoader(CachedImages(cache, data.x_val, data.y_val), shuffle=False, **common)
    test = DataLoader(CachedImages(cache, data.x_test, None), shuffle=False, **common)
    return train, val, test
