"""Launching `runner run` for one competition: as a local process, or in its own Docker container.

Either way the hard deadline is enforced from outside: at budget + grace the process group or the container is
killed, and the last valid submission stays. The run writes into `<out>/run/` (the only folder a container may
write, owned by its user); when it has ended, the host copies its outputs into `<out>/` without trusting them
(runner.untrusted: no links followed, regular files only, sizes capped), and everything downstream reads those
copies. The container sees the public data read-only, never the private answers; it has no network unless asked,
runs as a non-root user with no capabilities and no way to gain privileges, on a read-only root filesystem, within
memory, CPU and process limits; it is labelled, and removed whatever happens.
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
from runner.processes import child_environment
from runner.saved import Saved
from runner.spec import competitions_dir

LABEL = "competition-runner"
GRACE_SECONDS = 30.0  # past the budget before the run is killed from outside
DATA_IN_CONTAINER, OUT_IN_CONTAINER, WORK_IN_CONTAINER = "/home/data", "/home/submission", "/home/work"
WEIGHTS_IN_CONTAINER = "/opt/hf-cache"  # where the production image keeps (or a launch mounts) pretrained weights
MEMORY_SHARE = 0.8  # of this machine's memory a container may use when the launch sets no limit
PIDS_LIMIT = 4096  # processes and threads: fold processes, loader workers, BLAS threads; not a fork bomb
TMP_MB = 1024
WORK_MB_MAX = 16 * 1024  # the work area (image cache, extracted zips, fold hand-off) at most
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
        os.chown(run, *_container_user())
    return run


def collect(launch: "Launch", result: "LaunchResult") -> "LaunchResult":
    """The run's outputs, copied into out_dir without trusting them (runner.untrusted)."""
    from runner.untrusted import copy_out

    return dataclasses.replace(result, collected=copy_out(Path(launch.run_dir), Path(launch.out_dir)))


def run_args(launch: Launch, data: str, out: str) -> list[str]:
    return ["run", launch.competition, "--data", data, "--budget", f"{launch.budget_seconds:g}s", "--out", out]


def local_gpu_args(launch: Launch) -> list[str]:
    """A local run's `--gpus`: the launch's cards, or none; auto and all leave the run every card it sees."""
    if launch.devices:
        return ["--gpus", ",".join(launch.devices)]
    return ["--gpus", "none"] if launch.gpus == "none" else []


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
    fresh_out_dir(launch)
    started = time.monotonic()
    cores = parse_cores(launch.cpuset) if launch.cpuset else None
    process = subprocess.Popen([sys.executable, "-m", "runner.cli", *run_args(launch, launch.data_dir,
                                                                              launch.run_dir), *local_gpu_args(launch)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                               preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None,
                               env={**child_environment(dict(os.environ)),
                                    **({"RUNNER_HF_CACHE": launch.weights_cache} if launch.weights_cache else {})})
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
    return collect(launch, LaunchResult("local", process.returncode, killed, round(time.monotonic() - started, 2)))


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
    """Whether the engine lists an NVIDIA runtime: enough to know it can give GPUs, but not needed for it (the
    container toolkit's hook serves `--gpus` without a registered runtime)."""
    return "nvidia" in (client.info().get("Runtimes") or {})


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


def gpu_request(launch: Launch):
    """The container's GPUs as Docker's device request: the launch's cards by id, else every card; None for none."""
    import docker

    if launch.gpus == "none":
        return None
    if launch.devices:
        return docker.types.DeviceRequest(device_ids=list(launch.devices), capabilities=[["gpu"]])
    return docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])


def start_container(client, launch: Launch, on_line: Callable[[str], None]):
    """The container, started; in auto mode a request for GPUs the engine cannot serve ("could not select device
    driver") is tried once more without them, and said. Asked-for GPUs (all, or a lease's cards) are never
    dropped: that is an error naming them."""
    import docker

    config = container_config(launch, client)
    container = client.containers.create(**config)
    try:
        container.start()
        return container
    except docker.errors.APIError as exc:
        container.remove(force=True)
        if "device_requests" not in config or "device driver" not in str(exc):
            raise
        if launch.gpus != "auto":
            raise RunnerError(f"GPUs were requested (gpus={launch.gpus!r}) but this Docker engine cannot give them "
                              f"({exc.explanation or exc}): install the NVIDIA runtime (nvidia-container-toolkit), "
                              "or pass gpus='none'") from exc
        on_line(f"runner: this Docker engine cannot give GPUs ({exc.explanation or exc}); running on the CPU")
        config.pop("device_requests")
        container = client.containers.create(**config)
        try:
            container.start()
        except BaseException:
            container.remove(force=True)
            raise
        return container


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


def limits(launch: Launch) -> tuple[int, float]:
    """(memory MiB, CPUs) for the container: what the launch asks, else MEMORY_SHARE of this machine's memory (the
    shared memory counts within it) and every CPU this process may use."""
    import psutil

    from runner.hardware import available_cpus

    memory = launch.memory_gb * 1024 if launch.memory_gb else MEMORY_SHARE * psutil.virtual_memory().total / 2**20
    return int(memory), float(launch.cpus or available_cpus())


def container_config(launch: Launch, client) -> dict:
    """Keyword arguments for `containers.create`: mounts, limits, user, labels, network and GPUs."""
    volumes = {str(Path(launch.data_dir).resolve()): {"bind": DATA_IN_CONTAINER, "mode": "ro"},
               str(Path(launch.run_dir).resolve()): {"bind": OUT_IN_CONTAINER, "mode": "rw"}}
    command = ["runner", *run_args(launch, DATA_IN_CONTAINER, OUT_IN_CONTAINER)]
    environment = {"HOME": "/tmp", "MPLCONFIGDIR": "/tmp"}
    if launch.weights_cache:  # read-only and offline: a run never downloads, and never changes the host's cache
        volumes[str(Path(launch.weights_cache).resolve())] = {"bind": WEIGHTS_IN_CONTAINER, "mode": "ro"}
        environment.update(RUNNER_HF_CACHE=WEIGHTS_IN_CONTAINER, HF_HUB_OFFLINE="1")
    if launch.host_python:
        volumes.update(_host_python_mounts())
        environment["RUNNER_COMPETITIONS"] = str(competitions_dir().resolve())
        command = [sys.executable, "-m", "runner.cli", *command[1:]]
    memory_mb, cpus = limits(launch)
    uid, gid = _container_user()
    work_mb = min(memory_mb // 2, WORK_MB_MAX)  # in memory, so it counts against the limit (and cannot fill a disk)
    environment.update(RUNNER_WORK_DIR=WORK_IN_CONTAINER, PYTHONDONTWRITEBYTECODE="1")
    config = dict(image=launch.image, command=command, volumes=volumes, environment=environment,
                  user=f"{uid}:{gid}", labels={LABEL: "1", f"{LABEL}.competition": launch.competition},
                  network_mode=None if launch.network else "none", shm_size=f"{int(launch.shm_gb * 1024)}m",
                  nano_cpus=int(cpus * 1e9), cpuset_cpus=launch.cpuset, mem_limit=f"{memory_mb}m",
                  memswap_limit=f"{memory_mb}m",
                  pids_limit=PIDS_LIMIT, cap_drop=["ALL"], security_opt=["no-new-privileges:true"], read_only=True,
                  tmpfs={"/tmp": f"size={TMP_MB}m,mode=1777",
                         WORK_IN_CONTAINER: f"size={work_mb}m,uid={uid},gid={gid},mode=0700"},
                  detach=True)
    request = gpu_request(launch)
    if request is not None and (launch.gpus != "auto" or has_gpu_runtime(client) or _gpu_devices_present()):
        config["device_requests"] = [request]  # what the engine cannot serve fails at start, and is said
    return config


def _gpu_devices_present() -> bool:
    """An NVIDIA driver on this host (its device files), whether or not the engine lists a runtime for it."""
    return Path("/dev/nvidiactl").exists()


def run_docker(launch: Launch, on_line: Callable[[str], None] = print) -> LaunchResult:
    """One container for the competition; removed in `finally`, killed at the hard deadline."""
    client = docker_client()
    fresh_out_dir(launch, container=True)
    started = time.monotonic()
    container = start_container(client, launch, on_line)
    killed = False
    try:
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
        return collect(launch, LaunchResult("docker", code, killed, round(time.monotonic() - started, 2),
                                            container.short_id))
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
