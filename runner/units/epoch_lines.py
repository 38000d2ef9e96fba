"""Reading running folds' epoch lines as they are written, each once, with the GPU's utilisation over that epoch
from the monitor's samples; and when each fold said its start-up was over (its ready file)."""
from __future__ import annotations

import json
from pathlib import Path

from runner.engines.base import EPOCH_LOG, READY_FILE

SPEED_UNITS = {"images": "img", "rows": "rows"}  # what an epoch line's speed may count, and its short name


class EpochReader:
    """New complete lines of each unit's epoch log since the last read."""

    def __init__(self):
        self.offsets: dict[str, int] = {}

    def new_lines(self, folder: Path) -> list[dict]:
        path = Path(folder) / EPOCH_LOG
        if not path.is_file():
            return []
        with open(path, "rb") as handle:
            handle.seek(self.offsets.get(str(folder), 0))
            data = handle.read()
        complete = data[: data.rfind(b"\n") + 1]  # a line being written waits for the next read
        self.offsets[str(folder)] = self.offsets.get(str(folder), 0) + len(complete)
        return [json.loads(line) for line in complete.splitlines() if line.strip()]


def read_ready(folder: Path) -> dict | None:
    """What a fold said when its start-up was over (`at` and its process's start, `started`, monotonic;
    `probe_seconds`), None before it did."""
    path = Path(folder) / READY_FILE
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):  # not yet (it is written by a rename: never half)
        return None


def ready_at(item) -> float | None:
    """When a running unit said it was ready (monotonic), read from its folder until it has, then kept on it with
    the start-up it said (`startup`: from its process's start)."""
    if getattr(item, "ready_at", None) is None:
        said = read_ready(Path(item.task.out_dir))
        item.ready_at = said["at"] if said else None
        item.startup = said["at"] - said.get("started", item.started) if said else None
    return item.ready_at


def utilisation(samples: list[dict], gpu: int | None, since: float, until: float) -> float | None:
    """Mean % busy of one GPU over the monitor's samples between two times (seconds from the run's start)."""
    if gpu is None:
        return None
    busy = [s["gpus"][gpu]["util"] for s in samples
            if since <= s["t"] <= until and len(s["gpus"]) > gpu and s["gpus"][gpu].get("util") is not None]
    return round(sum(busy) / len(busy), 1) if busy else None


def _speed(line: dict) -> str:
    """An epoch's speed in what its engine counts: images, or rows of text."""
    unit = next((u for u in SPEED_UNITS if f"{u}_per_second" in line), "images")
    return f"{line.get(f'{unit}_per_second', 0.0):.0f} {SPEED_UNITS[unit]}/s"


def describe(member: str, fold: int, line: dict, metric: str) -> str:
    """One log line per epoch."""
    score_name = line.get("score_name") or metric  # a validation loss is named as such, not as the metric
    text = (f"{member} fold {fold} epoch {line['epoch']}: loss {line['loss']:.4f}, {score_name} {line['score']:.5f}, "
            f"{_speed(line)}, data-wait {line['data_wait']:.0%}")
    if line.get("device_memory_gb"):
        text += f", GPU {line['device_memory_gb']:.1f} GiB ({line['device_memory_share']:.0%})"
    if line.get("gpu_util") is not None:
        text += f", kernels running {line['gpu_util']:.0f}% of the time"  # NVML's utilisation: not SMs busy
    return text
