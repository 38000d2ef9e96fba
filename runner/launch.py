"""Launching `runner run` for one competition: as a local process, or in its own Docker container.

Either way the hard deadline is enforced from outside: at budget + grace the process group or the container is
killed, and the last valid submission in the output folder stays. The container sees the public data read-only,
never the private answers; it has no network unless asked, runs as a non-root user, is labelled, and is removed
whatever happens.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from runner.errors import RunnerError
from runner.spec import competitions_dir

LABEL = "competition-runner"
GRACE_SECONDS = 30.0  # past the budget before the run is killed from outside
DATA_IN_CONTAINER, OUT_IN_CONTAINER = "/home/data", "/home/submission"


@dataclass(frozen=True)
class Launch:
    competition: str
    data_dir: str  # the competition's prepared/public folder on the host
    out_dir: str  # where submission.csv and report.json land on the host
    budget_seconds: float
    image: str = "competition-runner"
    cpus: float | None = None
    memory_gb: float | None = None
    shm_gb: float = 4.0
    gpus: str = "auto"  # auto (when the engine has an NVIDIA runtime) | all | none
    network: bool = False
    host_python: bool = False  # mount this machine's Python, venv and source read-only (images without Python)
    kill_after_seconds: float | None = None  # hard deadline from the start; default: budget + GRACE_SECONDS
    resume: bool = False  # keep what an earlier launch left in out_dir: the run reuses its finished folds

    @property
    def hard_deadline_seconds(self) -> float:
        return self.kill_after_seconds if self.kill_after_seconds is not None else \
            self.budget_seconds + GRACE_SECONDS

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class LaunchResult:
    backend: str
    exit_code: int | None
    killed_at_deadline: bool
    wall_seconds: float
    container: str | None = None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def fresh_out_dir(path: str, shared: bool = False, keep: bool = False) -> Path:
    """An empty output folder: a previous run's report must never pass for this one's (unless `keep`: a retry
    resumes from what it finished). `shared`: writable by the container's non-root user."""
    out = Path(path)
    if out.exists() and not keep:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    if shared:
        out.chmod(0o777)
    return out


def run_args(launch: Launch, data: str, out: str) -> list[str]:
    return ["run", launch.competition, "--data", data, "--budget", f"{launch.budget_seconds:g}s", "--out", out]


# --- local ---------------------------------------------------------------------------------------------------

def _stream(lines, on_line: Callable[[str], None]) -> threading.Thread:
    def pump():
        for line in lines:
            on_line(line.decode(errors="replace").rstrip() if isinstance(line, bytes) else line.rstrip())

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def run_local(launch: Launch, on_line: Callable[[str], None] = print) -> LaunchResult:
    """`runner run` as a child process in its own session, killed as a group at the hard deadline."""
    fresh_out_dir(launch.out_dir, keep=launch.resume)
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "runner.cli", *run_args(launch, launch.data_dir,
                                                                              launch.out_dir)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    pump = _stream(process.stdout, on_line)
    killed = False
    try:
        process.wait(timeout=launch.hard_deadline_seconds)
    except subprocess.TimeoutExpired:
        killed = True
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        pump.join(timeout=5)
    return LaunchResult("local", process.returncode, killed, round(time.monotonic() - started, 2))


# --- docker --------------------------------------------------------------------------------------------------

def docker_client():
    try:
        import docker
        client = docker.from_env()
        client.ping()
        return client
    except Exception as exc:
        raise RunnerError(f"no Docker engine answers ({exc}); start one (docker/start-engine.sh) or use "
                          "--backend local") from exc


def has_gpu_runtime(client) -> bool:
    return "nvidia" in (client.info().get("Runtimes") or {})


def blocked_folders(mounts: set[Path], uid: int, gid: int) -> list[Path]:
    """Folders inside bind mounts that `uid:gid` cannot pass through: a mount keeps the host's modes, so a
    0700 checkout (as `mktemp -d` makes) stops a non-root container user at its door."""
    blocked = set()
    for mount in mounts:
        for folder in (mount, *mount.parents):
            if not any(folder == m or m in folder.parents for m in mounts):
                continue  # the engine creates folders above a mount point itself, passable by all
            info = folder.stat()
            bit = stat.S_IXUSR if info.st_uid == uid else stat.S_IXGRP if info.st_gid == gid else stat.S_IXOTH
            if not info.st_mode & bit:
                blocked.add(folder)
    return sorted(blocked)


def _container_user() -> tuple[int, int]:
    """This user, or 1000:1000 in place of root: the run never needs root inside."""
    return (os.getuid(), os.getgid()) if os.getuid() else (1000, 1000)


def _host_python_mounts() -> dict:
    """This machine's Python installation, virtual environment, the runner package and its competition specs,
    read-only, at the same paths (a virtual environment only works where it was made). Those folders, not the
    whole checkout: folders above a mount point are made by the engine and open to all, whatever the checkout's
    own mode."""
    package = Path(__file__).resolve().parent
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), package}
    if competitions_dir().is_dir():
        paths.add(competitions_dir().resolve())
    blocked = blocked_folders(paths, *_container_user())
    if blocked:
        modes = ", ".join(f"{b} (mode {stat.S_IMODE(b.stat().st_mode):o})" for b in blocked)
        raise RunnerError(f"the container's user (uid {_container_user()[0]}) cannot enter {modes}, which hold "
                          "the Python the run uses; allow it (chmod o+rx) or use an image with the runner installed")
    return {str(p): {"bind": str(p), "mode": "ro"} for p in paths}


def container_config(launch: Launch, client) -> dict:
    """Keyword arguments for `containers.create`: mounts, limits, user, labels, network and GPUs."""
    import docker

    gpus = launch.gpus == "all" or (launch.gpus == "auto" and has_gpu_runtime(client))
    if launch.gpus == "all" and not has_gpu_runtime(client):
        raise RunnerError("GPUs were requested but this Docker engine has no NVIDIA runtime "
                          "(install nvidia-container-toolkit, or pass gpus='none')")
    volumes = {str(Path(launch.data_dir).resolve()): {"bind": DATA_IN_CONTAINER, "mode": "ro"},
               str(Path(launch.out_dir).resolve()): {"bind": OUT_IN_CONTAINER, "mode": "rw"}}
    command = ["runner", *run_args(launch, DATA_IN_CONTAINER, OUT_IN_CONTAINER)]
    environment = {"HOME": "/tmp", "MPLCONFIGDIR": "/tmp"}
    if launch.host_python:
        volumes.update(_host_python_mounts())
        environment["RUNNER_COMPETITIONS"] = str(competitions_dir().resolve())
        command = [sys.executable, "-m", "runner.cli", *command[1:]]
    config = dict(image=launch.image, command=command, volumes=volumes, environment=environment,
                  user="{}:{}".format(*_container_user()),
                  labels={LABEL: "1", f"{LABEL}.competition": launch.competition},
                  network_mode=None if launch.network else "none", shm_size=f"{int(launch.shm_gb * 1024)}m",
                  detach=True)
    if launch.cpus:
        config["nano_cpus"] = int(launch.cpus * 1e9)
    if launch.memory_gb:
        config["mem_limit"] = f"{int(launch.memory_gb * 1024)}m"
    if gpus:
        config["device_requests"] = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return config


def run_docker(launch: Launch, on_line: Callable[[str], None] = print) -> LaunchResult:
    """One container for the competition; removed in `finally`, killed at the hard deadline."""
    client = docker_client()
    fresh_out_dir(launch.out_dir, shared=True, keep=launch.resume)
    started = time.monotonic()
    container = client.containers.create(**container_config(launch, client))
    killed = False
    try:
        container.start()
        pump = _stream(container.logs(stream=True, follow=True), on_line)
        deadline = started + launch.hard_deadline_seconds
        while True:
            container.reload()
            if container.status not in ("created", "running"):
                break
            if time.monotonic() > deadline:
                container.kill()
                killed = True
                break
            time.sleep(0.5)
        code = container.wait(timeout=30)["StatusCode"]
        pump.join(timeout=5)
        return LaunchResult("docker", code, killed, round(time.monotonic() - started, 2), container.short_id)
    finally:
        container.remove(force=True)


def leftover_containers(client) -> list:
    """Containers this runner started that still exist (after a crash of the launcher itself)."""
    return client.containers.list(all=True, filters={"label": LABEL})


BACKENDS = {"local": run_local, "docker": run_docker}


def launch_competition(launch: Launch, backend: str, on_line: Callable[[str], None] = print) -> LaunchResult:
    if backend not in BACKENDS:
        raise RunnerError(f"backend {backend!r}: use one of {', '.join(BACKENDS)}")
    return BACKENDS[backend](launch, on_line)
