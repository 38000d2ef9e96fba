"""Plan: which engine, model, batch, folds and slots a run uses, each with a reason a reader can follow.

`make_plan` is a pure function of the spec, the hardware, the budget and the data size, so tests can plan for an
A100 on a laptop.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from runner.hardware import GiB, Hardware
from runner.spec import CompetitionSpec

ENGINES = {"tabular": "lightgbm", "image": "timm", "text": "tfidf_linear", "unsupported": "none"}


@dataclass(frozen=True)
class Plan:
    engine: str
    folds: int
    slots: int  # fold processes running at once
    threads: int  # CPU threads per fold process
    device: str  # "cpu" or "cuda"
    model: str | None = None
    image_size: int | None = None
    batch_size: int | None = None
    max_epochs: int = 0
    precision: str = "fp32"  # fp32 | bf16 | fp16
    channels_last: bool = False
    num_workers: int = 0
    max_rounds: int = 0  # boosting rounds (LightGBM)
    patience: int = 0  # epochs or rounds without improvement before a fold stops
    seed: int = 0
    reasons: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "Plan":
        return cls(**{**data, "reasons": tuple(data.get("reasons", ()))})

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2))


def _folds(spec: CompetitionSpec, budget_seconds: float, gpu: bool, reasons: list[str]) -> int:
    """Fewer folds when the budget is short: each fold pays a fixed start-up (process, imports, data) cost."""
    folds = spec.folds
    if spec.task == "image" and not gpu:
        folds = min(folds, 2 if budget_seconds < 150 else 3 if budget_seconds < 1800 else folds)
    elif budget_seconds < 60:
        folds = min(folds, 3)
    if folds != spec.folds:
        reasons.append(f"folds {folds} (not {spec.folds}): a {budget_seconds:.0f} s budget leaves too little "
                       "time per fold for more")
    else:
        reasons.append(f"folds {folds}: the spec's default fits the budget")
    return folds


def _image_plan(hardware: Hardware, reasons: list[str]) -> dict:
    if hardware.gpus:
        gpu = hardware.gpus[0]
        precision = "bf16" if gpu.bf16 else "fp16"
        batch = 64 if gpu.memory_bytes < 20 * GiB else 128 if gpu.memory_bytes < 60 * GiB else 256
        workers = max(1, min(8, hardware.cpus // max(1, len(hardware.gpus)) - 1))
        reasons += [f"model convnext_tiny at 224 px: {gpu.name} has {gpu.memory_bytes / GiB:.0f} GiB",
                    f"batch {batch} for {gpu.memory_bytes / GiB:.0f} GiB of GPU memory",
                    f"precision {precision}: compute capability {gpu.compute_capability}",
                    f"{workers} loader workers from {hardware.cpus} CPUs"]
        return dict(model="convnext_tiny", image_size=224, batch_size=batch, max_epochs=30, precision=precision,
                    channels_last=True, num_workers=workers, patience=5)
    reasons += ["model mobilenetv3_small_100 at 64 px: no GPU, so the fastest small CNN measured on CPU",
                "precision fp32 with channels_last: bf16 autocast was slower for this model on CPU",
                "0 loader workers: on few cores, workers take CPU from the compute threads"]
    return dict(model="mobilenetv3_small_100", image_size=64, batch_size=64, max_epochs=100, precision="fp32",
                channels_last=True, num_workers=0, patience=10)


def make_plan(spec: CompetitionSpec, hardware: Hardware, budget_seconds: float, seed: int = 0) -> Plan:
    """The plan for one run. Folds run one at a time on CPU (two LightGBM folds with half the threads each were
    ~15% slower than one with all of them) and one per GPU otherwise."""
    reasons: list[str] = []
    engine = ENGINES[spec.task]
    gpu = bool(hardware.gpus) and spec.task == "image"
    if engine == "none":
        return Plan(engine="none", folds=0, slots=0, threads=hardware.cpus, device="cpu", seed=seed,
                    reasons=(f"task {spec.task}: {spec.note or 'nothing to train'}; the sample submission is used",))
    folds = _folds(spec, budget_seconds, gpu, reasons)
    slots = len(hardware.gpus) if gpu else 1
    threads = max(1, hardware.cpus // slots)
    reasons.append(f"{slots} slot(s) with {threads} CPU thread(s) each")
    extra: dict = {}
    if engine == "timm":
        extra = _image_plan(hardware, reasons)
    elif engine == "lightgbm":
        extra = dict(max_rounds=5000, patience=100)
        reasons.append("LightGBM up to 5000 rounds, stopping after 100 without improvement or at the deadline")
    return Plan(engine=engine, folds=folds, slots=slots, threads=threads, device="cuda" if gpu else "cpu",
                seed=seed, reasons=tuple(reasons), **extra)
