"""The local backend: `runner run` as a process of this machine, its output streamed line by line, killed as a
group at the launch's hard deadline."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Callable


from runner.deploy.launch import Launch, LaunchResult, collect, fresh_out_dir, parse_cores, run_args, stream_lines
from runner.units.processes import child_environment


def local_gpu_args(launch: Launch) -> list[str]:
    """A local run's `--gpus`: the launch's cards, or none; auto and all leave the run every card it sees."""
    if launch.devices:
        return ["--gpus", ",".join(launch.devices)]
    return ["--gpus", "none"] if launch.gpus == "none" else []


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
    pump = stream_lines(process.stdout, on_line)
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
