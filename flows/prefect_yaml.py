"""Writes prefect.yaml from the competition specs: `python -m flows.prefect_yaml [PATH]`."""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

from runner.deploy.leases import CPU_QUEUE, GPU_QUEUE
from runner.competition.catalog import known_specs

SWEEP_QUEUE = "sweep"  # flows that only wait on others: served by a worker holding no lease
# MLE-bench's splits (competitions/splits/<name>.txt) -> what they hold and when they sweep (inactive until resumed)
SPLITS = {
    "mle-bench-lite": ("every MLE-bench Lite competition", "0 1 * * *"),
    "low": ("MLE-bench's low-complexity split (Lite)", "0 2 * * 6"),
    "medium": ("MLE-bench's 38 medium-complexity competitions", "0 2 * * 0"),
    "high": ("MLE-bench's 15 high-complexity competitions", "0 14 * * 6"),
    "split75": ("all 75 MLE-bench competitions", "0 2 1 * *"),
    "dev": ("MLE-bench's dev split", "0 14 * * 0"),
}
# tasks whose runs want a GPU (a CNN, a sentence encoder, a spectrogram CNN): the gpu queue
ON_A_CARD = {"image", "text", "audio"}

HEADER = """\
# Deployments: `compete/<alias>` per competition spec, a sweep per MLE-bench split (`sweep/mle-bench-lite`, its low
# split, nightly; `sweep/low`, `sweep/medium`, `sweep/high`, `sweep/split75` and `sweep/dev` weekly: every schedule
# is created inactive: resume it in the UI or with `prefect deployment schedule resume`), and `sweep/demo`.
# `make up` deploys them all to a local server; workers run flows from $RUNNER_REPO (set by `make up`).
# Queues: gpu (image, text and audio competitions), cpu (tables, image to image, text normalization, rule
# baselines), sweep (flows that wait on others).
# Generated from competitions/*.yaml by `python -m flows.prefect_yaml`: edit that, not this.
"""


def deployments() -> list[dict]:
    found = []
    for spec in known_specs().values():
        found.append({"name": spec.aliases[0] if spec.aliases else spec.id,
                      "entrypoint": "flows/compete.py:compete",
                      "description": f"{spec.id}: {spec.task}, {spec.metric}",
                      "parameters": {"competition": spec.id, "budget": "10m"},
                      "work_pool": {"name": "runner-process", "work_queue_name": queue(spec.task)}})
    found.append({"name": "dog-breed-gpu", "entrypoint": "flows/compete.py:compete",
                  "description": "dog-breed trained in its own GPU container (the docker backend); the flow, with "
                                 "the worker's credentials and network, stays outside it",
                  "parameters": {"competition": "dog-breed-identification", "budget": "2h", "backend": "docker",
                                 "image": "competition-runner:latest", "gpus": "all"},
                  "work_pool": {"name": "runner-process", "work_queue_name": GPU_QUEUE}})
    found.extend(split_sweep(name, what, cron) for name, (what, cron) in SPLITS.items())
    found.append({"name": "demo", "entrypoint": "flows/sweep.py:sweep",
                  "description": "the demo competitions, one after another in this flow run",
                  "parameters": {"split": "demo", "budget": "2m"},
                  "work_pool": {"name": "runner-process", "work_queue_name": SWEEP_QUEUE}})
    return found


def split_sweep(split: str, what: str, cron: str) -> dict:
    """The sweep of one MLE-bench split: a compete run per competition with prepared data, through deployments."""
    return {"name": split, "entrypoint": "flows/sweep.py:sweep",
            "description": f"{what} with prepared data, one compete run each",
            "parameters": {"split": split, "budget": "2h", "data_root": "~/.cache/mle-bench/data",
                           "via_deployments": True, "slot": "runner-slot"},
            "work_pool": {"name": "runner-process", "work_queue_name": SWEEP_QUEUE},
            "schedules": [{"cron": cron, "timezone": "UTC", "active": False}]}


def queue(task: str) -> str:
    """The work queue a competition's runs go to: on a GPU node, the workers holding a card serve the gpu queue
    and those holding only cores the cpu queue; elsewhere every worker serves every queue."""
    return GPU_QUEUE if task in ON_A_CARD else CPU_QUEUE


def render() -> str:
    doc = {"name": "competition-runner", "prefect-version": "3.8.8",
           "pull": [{"prefect.deployments.steps.set_working_directory": {"directory": "{{ $RUNNER_REPO }}"}}],
           "deployments": deployments()}
    return HEADER + yaml.safe_dump(doc, sort_keys=False, width=110)


if __name__ == "__main__":
    Path(sys.argv[1] if len(sys.argv) > 1 else "prefect.yaml").write_text(render())
