"""Training images/s: the planned configuration against the failure configuration, same machine, same run.

Failure configuration (what the notes this project grew from saw an agent choose): resnet18, batch 32, a PIL
dataset decoding each JPEG with timm's default training transform, DataLoader num_workers=0, fp32, no
channels_last. Planned configuration: the same resnet18 at the same 224 px on the same photos, with the batch,
precision, memory format and loader the planner picks from measurements on this machine, reading pixels from the
runner's decoded-image cache. A second planned row shows the image size the planner picks for a 30-minute
dog-breed budget on this machine, and a third the planned same-size configuration with torch.compile (which the
planner leaves off on CPU). Each configuration runs in a fresh process: the planned ones with the heap tunables
the runner starts its fold units with (`runner.common.heap.HEAP_TUNABLES`), the failure one with glibc's defaults, as
a plain script gets; one row each shows the other heap, so the gain of each part stands apart.

At the same model and size the only lever left on a CPU is the arithmetic itself, so the benchmark also measures
the machine's matrix-multiply peak in fp32 and bf16, and the FLOPs per second the failure configuration already
reaches (a training step is ~3x the forward FLOPs): their ratios bound what any same-size configuration can gain.

    python bench/throughput.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import timm
import torch
import torch.nn.functional as F
from PIL import Image
from timm.data import create_transform
from torch.utils.data import DataLoader, Dataset

from _common import save
from runner.demo import write_demo
from runner.engines.timm.loading import loaders
from runner.engines.timm.training import Trainer
from runner.engines.base import FoldData
from runner.engines.timm.planning import image_member
from runner.machine.hardware import probe_hardware
from runner.engines.timm.images import build_cache, cache_side
from runner.engines.timm.costs import Candidate, ImageCosts
from runner.engines.timm.estimates import forward_flops
from runner.engines.timm.measure import measure
from runner.common.heap import tunables
from runner.planning.portfolio import DataShape, PlanContext
from runner.competition.catalog import load_spec

IMAGES_PER_RUN = 384
GOAL = 3.0  # planned / failure at the same model and size
THREADS = len(os.sched_getaffinity(0))


class JpegFolder(Dataset):
    """The plain way: open, decode and transform every photo on every access."""

    def __init__(self, paths, labels, transform):
        self.paths, self.labels, self.transform = paths, labels, transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with Image.open(self.paths[i]) as image:
            return self.transform(image.convert("RGB")), int(self.labels[i])


def images_per_second(step, loader, images: int) -> float:
    """Time whole training steps (loading included) after one warm-up step."""
    batches = iter(loader)
    step(*next(batches))
    done, started = 0, time.perf_counter()
    while done < images:
        try:
            x, y = next(batches)
        except StopIteration:
            batches = iter(loader)
            x, y = next(batches)
        step(x, y)
        done += len(y)
    return done / (time.perf_counter() - started)


def failure_config(paths, labels, classes, device: str = "cpu", size: int = 224,
                   images: int = IMAGES_PER_RUN) -> float:
    """resnet18, batch 32, JPEG decode and timm's training transform per step, 0 workers, fp32, on `device`; the
    loss read every step, as a training loop logging it does."""
    model = timm.create_model("resnet18", num_classes=classes).to(device)
    optimizer = torch.optim.AdamW(model.parameters())
    transform = create_transform(size, is_training=True)
    loader = DataLoader(JpegFolder(paths, labels, transform), batch_size=32, shuffle=True, num_workers=0)

    def step(x, y):
        loss = F.cross_entropy(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss.item()

    return images_per_second(step, loader, images)


def matmul_gflops(dtype: torch.dtype, n: int = 2048) -> float:
    """The machine's peak for `dtype`: the best of three half-second runs of n x n matrix products."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    best = 0.0
    for _ in range(3):
        products, started = 0, time.perf_counter()
        while time.perf_counter() - started < 0.5:
            a @ b
            products += 1
        best = max(best, 2 * n ** 3 * products / (time.perf_counter() - started) / 1e9)
    return best


def planned_config(paths, labels, classes, model: str, size: int, work: Path,
                   compiled: bool = False) -> tuple[float, dict]:
    """The planner's choice for this model and size on this machine, run by the runner's own trainer."""
    candidates = [Candidate(model, size, p, 32) for p in ("fp32", "bf16")]
    costs = ImageCosts(throughput=tuple(measure(candidates, "cpu", classes, time.monotonic() + 120)))
    hardware = probe_hardware()
    data_shape = DataShape(len(paths), 0, classes=classes, inputs=frozenset({"image"}))
    context = PlanContext(load_spec("dog-breed"), hardware, 1800, data_shape, costs, 5, hardware.cpus)
    plan = image_member(context, ((model, size),)).settings
    cache = work / f"cache_{size}.npy"
    ok = build_cache(list(paths), cache_side(size), cache, hardware.cpus)
    rows = list(np.flatnonzero(ok))
    data = FoldData(load_spec("dog-breed"), list(range(classes)), rows, labels[ok], rows[:1], labels[:1], [],
                    str(cache))
    if compiled:
        plan = plan.model_copy(update=dict(compile=True))
    trainer = Trainer(plan, data)
    train_loader, _, _ = loaders(plan, data, str(cache))
    return images_per_second(lambda x, y: trainer.train_epoch([(x, y)], float("inf")), train_loader,
                             IMAGES_PER_RUN), dict(model=model, image_size=size, batch=plan.batch_size,
                                                   precision=plan.precision, channels_last=plan.channels_last,
                                                   num_workers=plan.num_workers, compile=plan.compile)


def demo_labels(root: Path) -> tuple[list[Path], np.ndarray, int]:
    labels_frame = pd.read_csv(root / "prepared/public/labels.csv")
    breeds = sorted(labels_frame["breed"].unique())
    paths = [root / "prepared/public/train" / f"{i}.jpg" for i in labels_frame["id"]]
    return paths, labels_frame["breed"].map({b: k for k, b in enumerate(breeds)}).to_numpy(), len(breeds)


def unit(argv: list[str]) -> None:
    """One configuration in this process (started as `throughput.py --unit ROOT WHAT [MODEL SIZE COMPILE]`);
    its figures as one JSON line."""
    torch.set_num_threads(THREADS)
    root, what = Path(argv[0]), argv[1]
    paths, labels, classes = demo_labels(root)
    if what == "failure":
        print(json.dumps(dict(images_per_second=failure_config(paths, labels, classes))))
        return
    model, size, compiled = argv[2], int(argv[3]), argv[4] == "1"
    rate, settings = planned_config(paths, labels, classes, model, size, root, compiled)
    print(json.dumps(dict(images_per_second=rate, settings=settings)))


def in_process(root: Path, *args: str, runner_heap: bool) -> dict:
    """A configuration in a fresh process: with the heap tunables the runner starts its fold units with, or with
    glibc's defaults (what a plain training script gets)."""
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    if runner_heap:
        env["GLIBC_TUNABLES"] = tunables(os.environ)
    done = subprocess.run([sys.executable, __file__, "--unit", str(root), *args], capture_output=True, text=True,
                          env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = write_demo("dog-breed", Path(tmp))
        classes = demo_labels(root)[2]
        failure = in_process(root, "failure", runner_heap=False)["images_per_second"]
        print(f"failure configuration: {failure:.1f} img/s (resnet18, 224 px, batch 32, fp32, JPEG per step, "
              "0 workers)", flush=True)
        base = dict(model="resnet18", image_size=224, batch=32, precision="fp32", channels_last=False, num_workers=0,
                    compile=False)
        rows.append(dict(config="failure", **base, heap="glibc defaults", images_per_second=round(failure, 1),
                         speedup=1.0))
        for model, size, label, compiled, heap in (
                ("resnet18", 224, "planned, same model and size", False, True),
                ("resnet18", 224, "planned, same model and size, glibc's default heap", False, False),
                ("resnet18", 96, "planned, the size chosen for a 30m CPU budget", False, True),
                ("resnet18", 224, "planned, same model and size, with torch.compile", True, True)):
            found = in_process(root, "planned", model, str(size), str(int(compiled)), runner_heap=heap)
            rate = found["images_per_second"]
            rows.append(dict(config=label, **found["settings"], heap="runner" if heap else "glibc defaults",
                             images_per_second=round(rate, 1), speedup=round(rate / failure, 2)))
            print(f"{label}: {rate:.1f} img/s = {rate / failure:.2f}x ({found['settings']})", flush=True)
        heaped = in_process(root, "failure", runner_heap=True)["images_per_second"]
        rows.append(dict(config="failure, with the runner's heap tunables", **base, heap="runner",
                         images_per_second=round(heaped, 1), speedup=round(heaped / failure, 2)))
        print(f"failure configuration with the runner's heap: {heaped:.1f} img/s", flush=True)
    torch.set_num_threads(THREADS)
    same = rows[1]["speedup"]
    fp32, bf16 = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)
    reached = 3 * forward_flops("resnet18", 224, classes) * failure / 1e9
    print(f"matmul peak: fp32 {fp32:.0f} GFLOPS, bf16 {bf16:.0f} GFLOPS ({bf16 / fp32:.1f}x); the failure "
          f"configuration reaches {reached:.0f} GFLOPS ({reached / fp32:.0%} of the fp32 peak), so a same-size "
          f"configuration at the bf16 peak would be {bf16 / reached:.1f}x")
    path = save("throughput", rows, speedup_same_size=same, goal=GOAL, matmul_gflops_fp32=round(fp32),
                matmul_gflops_bf16=round(bf16), failure_gflops=round(reached),
                same_size_at_bf16_peak=round(bf16 / reached, 2))
    print(f"planned / failure at the same model and size: {same:.2f}x (goal >= {GOAL}x); written {path}")


if __name__ == "__main__":
    unit(sys.argv[2:]) if sys.argv[1:2] == ["--unit"] else main()
