"""The docker backend against a real Docker engine that this setup starts (skipped, with the reason, only where
no engine can be started or no image built)."""
import json
from pathlib import Path

import pandas as pd
import pytest

from conftest import IMAGE
from pace import paced
from runner.common.errors import RunnerError
from runner.deploy.containers import LABEL, container_config, leftover_containers, run_docker
from runner.deploy.launch import Launch, parse_cores
from runner.deploy.leases import CPU_QUEUE, Lease, leased

pytestmark = pytest.mark.slow  # whole runs through processes, containers or Prefect: the fast subset leaves them out

def left_over(engine, out: Path) -> list:
    """This test's containers still there: those with `out` mounted (another worker's runs may hold others)."""
    return [c for c in leftover_containers(engine)
            if any(str(m.get("Source", "")).startswith(str(out.resolve())) for m in c.attrs.get("Mounts", []))]


def launch(data: Path, out: Path, **changes) -> Launch:
    # 12 s, stretched by the machine's pace (tests/pace.py): on a slower CPU the container's run trained nothing in
    # 12 s
    settings = dict(competition="spaceship", data_dir=str(data), out_dir=str(out), budget_seconds=paced(12),
                    image=IMAGE, host_python=True, cpus=2, memory_gb=6, gpus="auto")
    return Launch(**{**settings, **changes})


def test_the_engine_serves_every_core_though_a_pinned_worker_started_it(engine):
    # Test workers pin themselves to one core (conftest); an engine they start must not inherit that, or Docker
    # refuses any container asking for more CPUs than the worker had.
    online = parse_cores(Path("/sys/devices/system/cpu/online").read_text().strip())
    assert engine.info()["NCPU"] == len(online)


def test_a_competition_runs_in_its_own_container(engine, spaceship, tmp_path):
    lines = []
    # one member (the run ends once it is trained): what is asserted is the container's run, not what it trains
    result = run_docker(launch(spaceship / "prepared" / "public", tmp_path / "out", max_members=1),
                        on_line=lines.append)
    assert result.backend == "docker" and result.exit_code == 0 and not result.killed_at_deadline
    submission = pd.read_csv(tmp_path / "out" / "submission.csv")
    sample = pd.read_csv(spaceship / "prepared" / "public" / "sample_submission.csv")
    assert submission["PassengerId"].tolist() == sample["PassengerId"].tolist()
    assert json.loads((tmp_path / "out" / "report.json").read_text())["status"] == "trained"
    assert any("fold" in line for line in lines)  # the container's log was streamed
    assert not [c for c in leftover_containers(engine) if c.short_id == result.container]


PROBE = r"""
import json, os, socket
def reach(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return True
    except OSError:
        return False
print(json.dumps(dict(uid=os.getuid(), data=sorted(os.listdir("/home/data")),
                      answers_visible=os.path.exists(ANSWERS), network=reach("1.1.1.1", 53) or reach("8.8.8.8", 53),
                      writable_data=os.access("/home/data", os.W_OK))))
"""


def test_the_container_cannot_read_answers_or_reach_the_network(engine, spaceship, tmp_path):
    answers = spaceship / "prepared" / "private" / "test.csv"
    (tmp_path / "run").mkdir()
    config = container_config(launch(spaceship / "prepared" / "public", tmp_path), engine)
    assert config["labels"][LABEL] == "1" and config["network_mode"] == "none"
    config["command"] = [config["command"][0], "-c", PROBE.replace("ANSWERS", repr(str(answers)))]
    container = engine.containers.create(**config)
    try:
        container.start()
        container.wait(timeout=60)
        seen = json.loads(container.logs().decode().strip().splitlines()[-1])
    finally:
        container.remove(force=True)
    assert seen["uid"] != 0 and not seen["writable_data"]
    assert "train.csv" in seen["data"] and "test.csv" in seen["data"]
    assert not seen["answers_visible"] and not seen["network"]


def test_the_hard_deadline_kills_the_container_and_keeps_the_last_submission(engine, dog_breed, tmp_path):
    settings = launch(dog_breed / "prepared" / "public", tmp_path / "out", competition="dog-breed",
                      budget_seconds=120, kill_after_seconds=15)
    result = run_docker(settings, on_line=lambda _: None)
    assert result.killed_at_deadline and result.wall_seconds < 25
    submission = pd.read_csv(tmp_path / "out" / "submission.csv")
    assert len(submission) == len(pd.read_csv(dog_breed / "prepared" / "public" / "sample_submission.csv"))
    assert not left_over(engine, tmp_path)


def test_asking_for_gpus_without_an_nvidia_runtime_is_a_clear_error(engine, spaceship, tmp_path):
    if "nvidia" in (engine.info().get("Runtimes") or {}):
        pytest.skip("this engine has an NVIDIA runtime")
    with pytest.raises(RunnerError, match="NVIDIA runtime"):
        run_docker(launch(spaceship / "prepared" / "public", tmp_path, gpus="all"))
    assert not left_over(engine, tmp_path)


def test_a_leased_container_runs_on_its_own_cores_within_its_memory(engine, spaceship, tmp_path):
    (tmp_path / "run").mkdir()
    settings = leased(launch(spaceship / "prepared" / "public", tmp_path), Lease("cpu-0", CPU_QUEUE, (), (0,), 2.0))
    config = container_config(settings, engine)
    config["command"] = [config["command"][0], "-c", "import os; print(sorted(os.sched_getaffinity(0)))"]
    container = engine.containers.create(**config)
    try:
        container.start()
        container.wait(timeout=60)
        seen = container.logs().decode().strip().splitlines()[-1]
        limits = container.attrs["HostConfig"]
    finally:
        container.remove(force=True)
    assert seen == "[0]" and limits["CpusetCpus"] == "0" and limits["Memory"] == 2 * 2**30


ALLOCATE = "x = bytearray(1024 ** 3); print('allocated', len(x))"
ESCALATE = r"""
import json, os, subprocess

def writes(path):
    try:
        open(path, "w").close()
        return True
    except OSError:
        return False
caps = [l for l in open("/proc/self/status") if l.startswith(("CapEff", "NoNewPrivs"))]
print(json.dumps(dict(root_fs_writable=writes("/etc/x"), tmp_writable=writes("/tmp/x"),
                      work_writable=writes("/home/work/x"), status=caps)))
"""


def run_container(engine, config) -> tuple[dict, str]:
    container = engine.containers.create(**config)
    try:
        container.start()
        container.wait(timeout=120)
        container.reload()
        return container.attrs["State"], container.logs().decode()
    finally:
        container.remove(force=True)


def test_a_flow_launched_container_cannot_exceed_its_memory_limit(engine, spaceship, tmp_path):
    (tmp_path / "run").mkdir()
    config = container_config(launch(spaceship / "prepared" / "public", tmp_path, memory_gb=0.25), engine)
    config["command"] = [config["command"][0], "-c", ALLOCATE]
    state, logs = run_container(engine, config)
    assert state["OOMKilled"] and state["ExitCode"] == 137 and "allocated" not in logs


def test_the_container_has_no_capabilities_and_a_read_only_root(engine, spaceship, tmp_path):
    (tmp_path / "run").mkdir()
    config = container_config(launch(spaceship / "prepared" / "public", tmp_path), engine)
    config["command"] = [config["command"][0], "-c", ESCALATE]
    state, logs = run_container(engine, config)
    seen = json.loads(logs.strip().splitlines()[-1])
    assert not seen["root_fs_writable"] and seen["tmp_writable"] and seen["work_writable"]
    status = dict(line.split(":\t") for line in seen["status"])
    assert int(status["CapEff"], 16) == 0 and status["NoNewPrivs"].strip() == "1"


def test_a_weights_cache_is_mounted_read_only_and_read_offline(engine, spaceship, tmp_path):
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    (tmp_path / "run").mkdir()
    with_cache = launch(spaceship / "prepared" / "public", tmp_path, weights_cache=str(cache))
    config = container_config(with_cache, engine)
    assert config["volumes"][str(cache.resolve())] == {"bind": "/opt/hf-cache", "mode": "ro"}
    assert config["environment"]["RUNNER_HF_CACHE"] == "/opt/hf-cache"
    assert config["environment"]["HF_HUB_OFFLINE"] == "1"
    assert str(cache.resolve()) not in container_config(launch(spaceship / "prepared" / "public", tmp_path),
                                                        engine)["volumes"]


INIT = r"""
import json, os, subprocess, time
subprocess.run(["sh", "-c", "sleep 0.2 &"])  # sh ends at once: its sleep, orphaned, goes to pid 1 and ends
time.sleep(1.5)
def state(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0]
    except OSError:
        return "gone"
zombies = [p for p in os.listdir("/proc") if p.isdigit() and state(p) == "Z"]
print(json.dumps(dict(me=os.getpid(), init=open("/proc/1/cmdline").read().split("\0")[0], zombies=zombies)))
"""


def test_the_container_runs_under_an_init_that_reaps_zombies(spaceship, tmp_path):
    """`docker run --init`: whatever outlives the runner in its container is reaped, not left a zombie of a pid 1
    that waits on nothing it did not start (the config alone: no engine needed)."""
    (tmp_path / "run").mkdir()
    config = container_config(launch(spaceship / "prepared" / "public", tmp_path, gpus="none", host_python=False),
                              None)
    assert config["init"] is True


def test_the_engines_init_is_pid_1_and_reaps_an_orphan_the_runner_does_not_wait_on(engine, spaceship, tmp_path):
    (tmp_path / "run").mkdir()
    config = container_config(launch(spaceship / "prepared" / "public", tmp_path), engine)
    config["command"] = [config["command"][0], "-c", INIT]
    state, logs = run_container(engine, config)
    seen = json.loads(logs.strip().splitlines()[-1])
    assert state["ExitCode"] == 0 and seen["me"] != 1 and seen["init"].endswith("docker-init"), seen
    assert seen["zombies"] == []  # without --init the command is pid 1, and the ended orphan stays its zombie
