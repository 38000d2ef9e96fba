"""The backends by name: `launch_competition(launch, "local" | "docker")`."""
from __future__ import annotations

from typing import Callable

from runner.common.errors import RunnerError
from runner.deploy.containers import run_docker
from runner.deploy.launch import Launch, LaunchResult
from runner.deploy.local import run_local

BACKENDS = {"local": run_local, "docker": run_docker}


def launch_competition(launch: Launch, backend: str, on_line: Callable[[str], None] = print) -> LaunchResult:
    if backend not in BACKENDS:
        raise RunnerError(f"backend {backend!r}: use one of {', '.join(BACKENDS)}")
    return BACKENDS[backend](launch, on_line)
