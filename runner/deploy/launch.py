"""Launching `runner run` for one competition: what a launch asks (`Launch`), what it gives back
(`LaunchResult`), the run's own folder and arguments. The backends: runner.deploy.local (a process here) and
runner.deploy.containers (one Docker container per competition); runner.deploy.backends picks one by name."""
from __future__ import annotations

import dataclasses
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from runner.common.errors import RunnerError
from runner.common.saved import Saved

GRACE_SECONDS = 30.0  # past the budget before the run is killed from outside
GPU_MODES = ("auto", "all", "none")  # Launch.gpus other than a list of cards


@dataclass(frozen=True)
class Launch(Saved):
    competition: str
    data_dir: str  # the competition's prepared/public folder on the host
    out_dir: str  # where submission.csv and report.json land on the host
    budget_seconds: float
    image: str = "competition-runner"
    cpus: float | None = None
    memory_gb: float | None = None
    shm_gb: float = 4.0
    gpus: str = "auto"  # auto (GPUs when the engine can give them) | all | none | the cards to hold: "GPU-…,GPU-…"
    cpuset: str | None = None  # the cores to hold ("0-7"): a lease's; None: any, within `cpus`
    network: bool = False
    host_python: bool = False  # mount this machine's Python, venv and source read-only (images without Python)
    kill_after_seconds: float | None = None  # hard deadline from the start; default: budget + GRACE_SECONDS
    resume: bool = False  # keep what an earlier launch left in out_dir: the run reuses its finished folds
    weights_cache: str | None = None  # a host Hugging Face cache of pretrained weights, mounted read-only
    max_members: int | None = None  # `runner run --max-members`: the most members the run trains (None: its default)

    @property
    def devices(self) -> tuple[str, ...]:
        """The cards a launch names (a lease's), or () for auto, all and none."""
        return () if self.gpus in GPU_MODES else tuple(g.strip() for g in self.gpus.split(","))

    @property
    def run_dir(self) -> str:
        """Where the run writes (the container's only writable mount); the host copies from it into out_dir."""
        return str(Path(self.out_dir) / "run")

    @property
    def hard_deadline_seconds(self) -> float:
        return self.kill_after_seconds if self.kill_after_seconds is not None else \
            self.budget_seconds + GRACE_SECONDS


@dataclass(frozen=True)
class LaunchResult(Saved):
    backend: str
    exit_code: int | None
    killed_at_deadline: bool
    wall_seconds: float
    container: str | None = None
    collected: dict = dataclasses.field(default_factory=dict)  # output -> "copied", or why the host refused it


def fresh_out_dir(launch: "Launch", container: bool = False) -> Path:
    """An empty output folder and its run folder: a previous run's report must never pass for this one's (unless
    `launch.resume`: a retry resumes from what it finished). A container's run folder belongs to its user (0700),
    and is the only one it can write."""
    out, run = Path(launch.out_dir), Path(launch.run_dir)
    if out.exists() and not launch.resume:
        shutil.rmtree(out)
    run.mkdir(parents=True, exist_ok=True)
    run.chmod(0o700)
    if container and os.getuid() == 0:
        os.chown(run, *container_user())
    return run


def collect(launch: "Launch", result: "LaunchResult") -> "LaunchResult":
    """The run's outputs, copied into out_dir without trusting them (runner.common.untrusted)."""
    from runner.common.untrusted import copy_out

    return dataclasses.replace(result, collected=copy_out(Path(launch.run_dir), Path(launch.out_dir)))


def run_args(launch: Launch, data: str, out: str) -> list[str]:
    members = ["--max-members", str(launch.max_members)] if launch.max_members else []
    return ["run", launch.competition, "--data", data, "--budget", f"{launch.budget_seconds:g}s", "--out", out,
            *members]


def container_user() -> tuple[int, int]:
    """This user, or 1000:1000 in place of root: the run never needs root inside."""
    return (os.getuid(), os.getgid()) if os.getuid() else (1000, 1000)


def parse_cores(text: str) -> tuple[int, ...]:
    """"0-3,8" as core numbers."""
    cores: list[int] = []
    try:
        for part in text.split(","):
            first, _, last = part.strip().partition("-")
            cores.extend(range(int(first), int(last or first) + 1))
    except ValueError:
        raise RunnerError(f"cpuset {text!r}: not a list of cores such as 0-3,8") from None
    return tuple(sorted(set(cores)))


def stream_lines(lines, on_line: Callable[[str], None]) -> threading.Thread:
    def pump():
        for line in lines:
            on_line(line.decode(errors="replace").rstrip() if isinstance(line, bytes) else line.rstrip())

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread
