"""Feeding the model: what one CPU core delivers from JPEGs and from the decoded cache, what the loader costs a
training step, and what the cache costs to build. All on the dog-breed demo's photos (180-520 px JPEGs, like the
competition's), in one run on one machine.

- **Images/s per core at 224 px.** The plain way: PIL opens and decodes each JPEG, then RandomResizedCrop, a flip,
  a float tensor and the normalisation (torchvision; the least a training transform does). The runner's way: rows
  of the decoded cache (256 px squares) read from its memory map a batch at a time; the crop, flip and
  normalisation run where the model trains (`runner.engines.timm.augment.DeviceAugment`): batched on the GPU on
  a GPU box, or crop by crop in uint8 on a CPU.
  Shown twice: the loader's own work (what a loader worker's core does on a GPU box), and with the CPU crop too
  (what a CPU-only box spends per image). Timed after one pass over the cache: a fold maps the file's pages in its
  first epoch, once.
  Goal: the cache ≥ 10x the plain way.
- **Step efficiency**: the runner's training images/s (loader, device crop, step, as a CPU fold runs them) divided by
  the same model, batch and trainer stepping on batches already in memory at the crop size. On CPU at a small model
  and resolution, where loading weighs most. Goal ≥ 0.95.
- **Cache build**: seconds and images/s to decode every demo photo into the cache, on every core.

    python bench/loader.py
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from PIL import Image
from torch.utils.data import DataLoader
from torchvision.transforms import v2

from _common import save
from runner.engines.timm.augment import DeviceAugment
from runner.engines.timm.loading import CachedImages, _as_batch, loaders
from runner.engines.timm.training import Trainer
from runner.demo import write_demo
from runner.engines.base import FoldData
from runner.engines.timm.settings import ImageSettings
from runner.engines.timm.images import build_cache, cache_side
from runner.competition.catalog import load_spec

SIZE = 224  # the resolution the per-core figures are quoted at
PER_CORE_IMAGES = 2048  # images timed per way (the plain way runs ~1,100 img/s per core here)
BATCH = 64
STEP_MODEL = ("mobilenetv3_small_100", 96)  # the CPU ladder's smallest rung: loading weighs most there
STEP_IMAGES = 1024  # images per timed pass of the step comparison
STEP_REPEATS = 3  # alternating passes; the median counts (another process taking a core hits one pass, not all)
THREADS = len(os.sched_getaffinity(0))
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # ImageNet's: both ways end in a normalised float tensor


def demo_photos(root: Path) -> tuple[list[Path], np.ndarray]:
    frame = pd.read_csv(root / "prepared/public/labels.csv")
    breeds = {b: k for k, b in enumerate(sorted(frame["breed"].unique()))}
    return [root / "prepared/public/train" / f"{i}.jpg" for i in frame["id"]], frame["breed"].map(breeds).to_numpy()


def per_core_jpeg(paths: list[Path]) -> float:
    transform = v2.Compose([v2.RandomResizedCrop(SIZE, antialias=True), v2.RandomHorizontalFlip(), v2.PILToTensor(),
                            v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)])
    started = time.perf_counter()
    for i in range(PER_CORE_IMAGES):
        with Image.open(paths[i % len(paths)]) as image:
            transform(image.convert("RGB"))
    return PER_CORE_IMAGES / (time.perf_counter() - started)


def per_core_cache(cache: Path, labels: np.ndarray, crop: bool) -> float:
    """The runner's loader on one core (0 workers: this process is the worker); `crop` adds the batched device
    crop and normalisation, run here on the CPU."""
    loader = DataLoader(CachedImages(str(cache), np.arange(len(labels)), labels), batch_size=BATCH, shuffle=True,
                        collate_fn=_as_batch)
    augment = DeviceAugment(SIZE, MEAN, STD, "bicubic", torch.device("cpu"), torch.channels_last)
    for _ in loader:  # a first pass maps the file's pages into this process, as a fold's first epoch does once
        pass
    done, started = 0, time.perf_counter()
    while done < PER_CORE_IMAGES:
        for images, _ in loader:
            if crop:
                augment.train(images)
            done += len(images)
            if done >= PER_CORE_IMAGES:
                break
    return done / (time.perf_counter() - started)


def timed_epoch(trainer: Trainer, batches) -> float:
    stats = trainer.train_epoch(batches, stop_at=float("inf"))
    return stats.samples / stats.seconds


def step_efficiency(cache: Path, labels: np.ndarray, classes: int) -> dict:
    """The runner's loop against the same trainer fed batches already in memory, alternated STEP_REPEATS times."""
    model, size = STEP_MODEL
    settings = ImageSettings(model=model, image_size=size, batch_size=BATCH, precision="bf16", threads=THREADS,
                             max_epochs=1, num_workers=0)
    rows = list(range(min(STEP_IMAGES, len(labels))))
    data = FoldData(load_spec("dog-breed"), list(range(classes)), rows, labels[rows], rows[:1], labels[:1], [],
                    str(cache))
    trainer = Trainer(settings, data)
    train_loader, _, _ = loaders(settings, data, str(cache))
    augment = trainer.augment
    memory = [(augment.train(x), y) for x, y in train_loader]  # already cropped and normalised, in memory
    passthrough = type("InMemory", (), dict(train=staticmethod(lambda x: x)))()
    timed_epoch(trainer, train_loader)  # warm-up: oneDNN kernel choice, the memory map's pages
    runner_rates, memory_rates = [], []
    for _ in range(STEP_REPEATS):
        trainer.augment = augment
        runner_rates.append(timed_epoch(trainer, train_loader))
        trainer.augment = passthrough
        memory_rates.append(timed_epoch(trainer, memory))
    runner, in_memory = statistics.median(runner_rates), statistics.median(memory_rates)
    return dict(model=model, image_size=size, batch=BATCH, precision="bf16", threads=THREADS,
                runner_images_per_second=round(runner, 1), in_memory_images_per_second=round(in_memory, 1),
                step_efficiency=round(runner / in_memory, 3))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = write_demo("dog-breed", Path(tmp))
        paths, labels = demo_photos(root)
        classes = int(labels.max()) + 1
        started = time.perf_counter()
        cache = Path(tmp) / "cache.npy"
        build_cache(list(paths), cache_side(SIZE), cache, THREADS)
        build = time.perf_counter() - started
        print(f"cache build: {len(paths)} photos -> {cache_side(SIZE)} px squares in {build:.1f} s on {THREADS} "
              f"cores ({len(paths) / build:.0f} img/s)", flush=True)
        torch.set_num_threads(1)  # per-core figures
        jpeg = per_core_jpeg(paths)
        loader_only = per_core_cache(cache, labels, crop=False)
        with_crop = per_core_cache(cache, labels, crop=True)
        ways = (("PIL decode + RandomResizedCrop + flip + normalise", jpeg),
                ("cache: loader's work (crop on the device)", loader_only),
                ("cache + crop, flip, normalise on this CPU core", with_crop))
        rows = [dict(way=way, images_per_second_per_core=round(rate, 1), ratio=round(rate / jpeg, 1))
                for way, rate in ways]
        for row in rows:
            print(f"{row['way']}: {row['images_per_second_per_core']} img/s per core ({row['ratio']}x)", flush=True)
        cache_small = Path(tmp) / "cache_small.npy"
        build_cache(list(paths), cache_side(STEP_MODEL[1]), cache_small, THREADS)
        torch.set_num_threads(THREADS)
        step = step_efficiency(cache_small, labels, classes)
        print(f"step efficiency: {step}", flush=True)
    path = save("loader", rows, image_size=SIZE, photos=len(paths), cache_build_seconds=round(build, 2),
                cache_build_images_per_second=round(len(paths) / build), cache_goal=10.0, step=step,
                step_goal=0.95)
    print(f"written {path}")


if __name__ == "__main__":
    main()
