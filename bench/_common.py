"""Shared by the benchmarks: where results go and how they are written."""
from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def save(name: str, rows: list[dict], **summary) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    data = dict(benchmark=name, machine=platform.processor() or platform.machine(), torch=torch.__version__,
                threads=torch.get_num_threads(), date=time.strftime("%Y-%m-%d"), **summary, rows=rows)
    path.write_text(json.dumps(data, indent=2))
    return path


def save_goals(name: str, rows: list[dict], goal: str) -> None:
    """Save rows that each say whether they met `goal` (`goal_met`), with the count, and print the count."""
    met = sum(r["goal_met"] for r in rows)
    path = save(name, rows, goal=goal, goal_met=f"{met} of {len(rows)}")
    print(f"{met} of {len(rows)} rows meet the goal; written to {path}")
