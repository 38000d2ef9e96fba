"""The docker backend: one container per competition on a real Docker engine, the public data read-only, no
network, a non-root user, limits on memory, CPUs, processes and shared memory, labelled so leftovers can be found
and removed."""
from __future__ import annotations

import stat
import sys
import time
from pathlib import Path
from typing import Callable

from runner import PACKAGE
from runner.common.errors import RunnerError
from runner.competition.catalog import competitions_dir
from runner.deploy.launch import Launch, LaunchResult, collect, container_user, fresh_out_dir, run_args, stream_lines

LABEL = "competition-runner"
DATA_IN_CONTAINER, OUT_IN_CONTAINER, WORK_IN_CONTAINER = "/home/data", "/home/submission", "/home/work"
WEIGHTS_IN_CONTAINER = "/opt/hf-cache"  # where the production image keeps (or a launch mounts) pretrained weights
MEMORY_SHARE = 0.8  # of this machine's memory a container may use when the launch sets no limit
PIDS_LIMIT = 4096  # processes and threads: fold processes, loader workers, BLAS threads; not a fork bomb
TMP_MB = 1024
WORK_MB_MAX = 16 * 1024  # the work area (image cache, extracted zips, fold hand-off) at most


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


def host_python_folders() -> set[Path]:
    """This machine's Python installation, virtual environment, the runner package (the whole of it: every
    subpackage) and its competition specs."""
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), PACKAGE}
    if competitions_dir().is_dir():
        paths.add(competitions_dir().resolve())
    return paths


def _host_python_mounts() -> dict:
    """The folders of `host_python_folders`, read-only, at the same paths (a virtual environment only works where
    it was made). Those folders, not the whole checkout: folders above a mount point are made by the engine and
    open to all, whatever the checkout's own mode."""
    paths = host_python_folders()
    blocked = blocked_folders(paths, *container_user())
    if blocked:
        modes = ", ".join(f"{b} (mode {stat.S_IMODE(b.stat().st_mode):o})" for b in blocked)
        raise RunnerError(f"the container's user (uid {container_user()[0]}) cannot enter {modes}, which hold "
                          "the Python the run uses; allow it (chmod o+rx) or use an image with the runner installed")
    return {str(p): {"bind": str(p), "mode": "ro"} for p in paths}


def limits(launch: Launch) -> tuple[int, float]:
    """(memory MiB, CPUs) for the container: what the launch asks, else MEMORY_SHARE of this machine's memory (the
    shared memory counts within it) and every CPU this process may use."""
    import psutil

    from runner.machine.hardware import available_cpus

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
    uid, gid = container_user()
    work_mb = min(memory_mb // 2, WORK_MB_MAX)  # in memory, so it counts against the limit (and cannot fill a disk)
    environment.update(RUNNER_WORK_DIR=WORK_IN_CONTAINER, PYTHONDONTWRITEBYTECODE="1")
    config = dict(image=launch.image, command=command, volumes=volumes, environment=environment,
                  user=f"{uid}:{gid}", labels={LABEL: "1", f"{LABEL}.competition": launch.competition},
                  network_mode=None if launch.network else "none", shm_size=f"{int(launch.shm_gb * 1024)}m",
                  nano_cpus=int(cpus * 1e9), cpuset_cpus=launch.cpuset, mem_limit=f"{memory_mb}m",
                  memswap_limit=f"{memory_mb}m",
                  pids_limit=PIDS_LIMIT, cap_drop=["ALL"], security_opt=["no-new-privileges:true"], read_only=True,
                  # `docker run --init`: pid 1 is the engine's init (docker-init, tini), which passes signals on to the
                  # runner and reaps whatever is re-parented to it (what outlives the runner, which itself adopts
                  # its units' orphans), rather than the runner as a pid 1 that waits on no stranger
                  init=True,
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
        pump = stream_lines(container.logs(stream=True, follow=True), on_line)
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
