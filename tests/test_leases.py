"""Leases on a shared node: the cards, cores and memory each worker holds never overlap, and a launch gets
exactly its lease (device ids, cpuset, memory); the node is given as data, no GPU is needed or pretended."""
import json
import os

import pytest

from runner.common.errors import RunnerError
from runner.deploy.launch import Launch
from runner.deploy.containers import container_config
from runner.deploy.launch import parse_cores
from runner.deploy.local import run_local
from runner.deploy.leases import CPU_QUEUE, GPU_QUEUE, Lease, cpuset_text, divide, leased

GiB = 2**30
CARDS = tuple(f"GPU-{i:08x}-0000-0000-0000-000000000000" for i in range(8))


def test_an_eight_gpu_node_is_cut_into_disjoint_leases():
    leases = divide(tuple(range(64)), CARDS, 512 * GiB, cpu_leases=2)
    gpu, cpu = [x for x in leases if x.queue == GPU_QUEUE], [x for x in leases if x.queue == CPU_QUEUE]
    assert len(gpu) == 8 and len(cpu) == 2
    assert sorted(g for x in gpu for g in x.gpus) == sorted(CARDS) and all(len(x.gpus) == 1 for x in gpu)
    cores = [c for x in leases for c in x.cpus]
    assert len(cores) == len(set(cores)) == 64  # every core in exactly one lease
    assert all(len(x.cpus) == 6 for x in gpu) and sum(len(x.cpus) for x in cpu) == 16
    assert sum(x.memory_gb for x in leases) <= 0.8 * 512 + 0.5
    assert len({x.name for x in leases}) == len(leases)


def test_cards_can_be_leased_in_pairs_and_too_few_cores_is_said():
    pairs = divide(tuple(range(16)), CARDS[:4], 64 * GiB, cpu_leases=0, gpus_per_lease=2)
    assert [x.gpus for x in pairs] == [CARDS[0:2], CARDS[2:4]] and [len(x.cpus) for x in pairs] == [8, 8]
    with pytest.raises(RunnerError, match="3 core"):
        divide((0, 1, 2), CARDS[:4], 64 * GiB, cpu_leases=1)


def test_a_lease_travels_through_a_workers_environment():
    lease = divide(tuple(range(32)), CARDS[:2], 256 * GiB, cpu_leases=1)[1]
    back = Lease.from_environment(json.loads(json.dumps(lease.environment())))
    assert (back.gpus, back.cpus, back.memory_gb, back.queue) == (lease.gpus, lease.cpus, lease.memory_gb, GPU_QUEUE)
    assert Lease.from_environment({}) is None  # a worker without a lease: a machine without GPUs
    assert cpuset_text((0, 1, 2, 3, 8, 10, 11)) == "0-3,8,10-11" and parse_cores("0-3,8,10-11") == \
        (0, 1, 2, 3, 8, 10, 11)


def test_a_leased_container_asks_docker_for_exactly_its_cards_cores_and_memory(tmp_path):
    lease = divide(tuple(range(32)), CARDS[:4], 256 * GiB, cpu_leases=1)[2]
    launch = leased(Launch("spaceship", str(tmp_path), str(tmp_path / "out"), 60), lease)
    config = container_config(launch, client=None)  # a lease's cards are asked for by id, whatever the engine
    request = config["device_requests"][0]
    assert request["DeviceIDs"] == [CARDS[2]] and request.get("Count") in (None, 0)
    assert config["cpuset_cpus"] == "12-17" and config["nano_cpus"] == 6 * 10**9  # 32 cores, 5 leases
    assert config["mem_limit"] == f"{int(lease.memory_gb * 1024)}m"
    cpu_only = leased(Launch("spaceship", str(tmp_path), str(tmp_path / "out"), 60),
                      divide(tuple(range(32)), CARDS[:4], 256 * GiB, cpu_leases=1)[-1])
    assert "device_requests" not in container_config(cpu_only, client=None)


@pytest.mark.slow
def test_a_local_run_within_its_lease_plans_for_its_cores_only(spaceship, tmp_path):
    mine = min(os.sched_getaffinity(0))  # one of this process's cores: under xdist the other worker has the rest
    lease = Lease("cpu-0", CPU_QUEUE, (), (mine,), 2.0)
    # 10 s: at 8 s on its one core, a run busy with the other worker's tests once missed its watchdog (exit 124)
    launch = leased(Launch("spaceship", str(spaceship / "prepared" / "public"), str(tmp_path / "out"), 10), lease)
    result = run_local(launch, on_line=lambda _: None)
    assert result.exit_code == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["hardware"]["cpus"] == 1 and report["hardware"]["gpus"] == []
