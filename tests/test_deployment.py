"""The whole deployment loop: a Prefect server, a process worker and every deployment from prefect.yaml, started
by flows/stack.sh as `make up` does, then `prefect deployment run 'compete/spaceship' --watch`."""
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from flows.prefect_yaml import render

pytestmark = pytest.mark.slow  # whole runs through processes, containers or Prefect: the fast subset leaves them out

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_prefect_yaml_is_generated_from_the_specs():
    assert (REPO / "prefect.yaml").read_text() == render(), "run `python -m flows.prefect_yaml`"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("stack")
    port = free_port()
    env = {**os.environ, "RUNNER_STACK_DIR": str(tmp_path / "stack"), "PREFECT_PORT": str(port),
           "RUNNER_DEMO_DATA": str(tmp_path / "demo-data"), "VENV_BIN": str(Path(os.sys.executable).parent),
           "RUNNER_OUT_ROOT": str(tmp_path_factory.getbasetemp()),
           "RUNNER_DEMO_COMPETITIONS": "spaceship",  # the only data its runs read: not all 23 (16 s on one core)
           "RUNNER_DEPLOYMENTS": "compete/spaceship sweep/demo"}  # the ones its runs use: not all 26 (7 s)
    env.pop("PREFECT_API_URL", None)
    up = subprocess.run([str(REPO / "flows" / "stack.sh"), "up"], env=env, capture_output=True, text=True,
                        timeout=300)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield env, f"http://127.0.0.1:{port}/api", tmp_path
    finally:
        subprocess.run([str(REPO / "flows" / "stack.sh"), "down"], env=env, capture_output=True, timeout=60)


def deployment_run(stack, name: str, *params: str) -> subprocess.CompletedProcess:
    env, api, root = stack
    prefect = shutil.which("prefect", path=str(Path(os.sys.executable).parent))
    command = [prefect, "deployment", "run", name, "--watch"]
    for param in params:
        command += ["--param", param]
    auth = (root / "stack" / "auth").read_text().strip()  # the local stack's API asks for it
    return subprocess.run(command, env={**env, "PREFECT_API_URL": api, "PREFECT_HOME": str(root / "stack" / "home"),
                                        "PREFECT_API_AUTH_STRING": auth},
                          capture_output=True, text=True, timeout=300)


def test_a_sweep_fans_out_through_deployments_to_a_compete_run_with_a_valid_submission(stack, tmp_path):
    """`prefect deployment run 'sweep/demo' --watch` as a user runs it: the sweep starts one run of
    `compete/spaceship` through its deployment on the stack's workers (its own flow run, as `prefect deployment
    run 'compete/spaceship'` starts one), whose submission is valid and whose run got the parameters given. The
    deployment's own run was a second whole run of the same loop (54 s of a shared core); this one carries its
    claims."""
    root = stack[2]
    data = tmp_path / "data"  # only spaceship-titanic: one compete run is started through its deployment
    shutil.copytree(root / "demo-data" / "spaceship-titanic", data / "spaceship-titanic")
    out = tmp_path / "runs"
    result = deployment_run(stack, "sweep/demo", "budget=10s", "max_members=1", "via_deployments=true",
                            f"data_root={data}", f"out_root={out}")
    assert result.returncode == 0 and "Completed" in result.stdout, result.stdout[-3000:] + result.stderr[-2000:]
    lines = (out / "sweep-demo.jsonl").read_text().splitlines()
    assert len(lines) == 1 and "spaceship-titanic" in lines[0]
    compete = (out / "spaceship-titanic" / "compete.json").read_text()
    assert '"valid_submission": true' in compete
    submission = pd.read_csv(out / "spaceship-titanic" / "submission.csv")
    sample = pd.read_csv(data / "spaceship-titanic" / "prepared" / "public" / "sample_submission.csv")
    assert submission["PassengerId"].tolist() == sample["PassengerId"].tolist()
    assert submission["Transported"].dtype == bool
    report = json.loads((out / "spaceship-titanic" / "report.json").read_text())
    assert report["plan"]["max_members"] == 1  # the sweep's parameter reached the compete run
    workers = sorted((root / "stack").glob("worker-*.pid"))  # the pool has two workers, both alive
    assert len(workers) == 2 and all(os.path.exists(f"/proc/{p.read_text().strip()}") for p in workers)


def test_the_local_stacks_api_asks_for_its_password(stack):
    import urllib.error
    import urllib.request

    env, api, root = stack
    assert oct((root / "stack" / "auth").stat().st_mode & 0o777) == oct(0o600)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{api}/deployments/filter", data=b"{}", timeout=10)
    assert refused.value.code == 401


RUNS = 3  # flow runs queued at once: two leases each serve at least one, and some lease serves two in turn
LEASE_LINES = "gpu-0 gpu RUNNER_LEASE_GPUS=GPU-aaaa RUNNER_LEASE_CPUS=0 RUNNER_LEASE_MEMORY_GB=1\n" \
              "gpu-1 gpu RUNNER_LEASE_GPUS=GPU-bbbb RUNNER_LEASE_CPUS=1 RUNNER_LEASE_MEMORY_GB=1"


def test_workers_holding_leases_never_run_two_flows_on_one_lease(stack, tmp_path):
    """`flows/stack.sh workers` starts one `--limit 1` worker per lease (here two leases given as
    `runner leases --shell` prints them, cards named only by id): four flow runs queued at once spread over both
    leases, and no two runs ever hold the same lease at the same time."""
    env, api, root = stack
    auth = (root / "stack" / "auth").read_text().strip()
    client_env = {**env, "PREFECT_API_URL": api, "PREFECT_HOME": str(root / "stack" / "home"),
                  "PREFECT_API_AUTH_STRING": auth}
    bin_dir = Path(os.sys.executable).parent
    subprocess.run([str(bin_dir / "prefect"), "work-pool", "create", "lease-test", "--type", "process"],
                   env=client_env, capture_output=True, timeout=60)
    deploy = ("from prefect import flow; flow.from_source(source=%r, entrypoint='lease_probe.py:hold').deploy("
              "name='hold', work_pool_name='lease-test', work_queue_name='gpu')" % str(REPO / "tests"))
    made = subprocess.run([os.sys.executable, "-c", deploy], env=client_env, capture_output=True, text=True,
                          timeout=120)
    assert made.returncode == 0, made.stderr[-2000:]
    started = subprocess.run([str(REPO / "flows" / "stack.sh"), "workers"], capture_output=True, text=True,
                             env={**env, "RUNNER_POOL": "lease-test", "RUNNER_LEASES": LEASE_LINES}, timeout=60)
    assert started.returncode == 0, started.stderr
    out = tmp_path / "held"
    out.mkdir()
    # queued at once from one process (a `prefect deployment run` each would import Prefect three times)
    queue = ("from prefect.deployments import run_deployment\n"
             f"for _ in range({RUNS}): run_deployment('hold/hold', parameters=dict(out={str(out)!r}), timeout=0)")
    queued = subprocess.run([os.sys.executable, "-c", queue], env=client_env, capture_output=True, text=True,
                            timeout=120)
    assert queued.returncode == 0, queued.stderr[-2000:]
    deadline = time.monotonic() + 240
    while len(list(out.glob("*.json"))) < RUNS and time.monotonic() < deadline:
        time.sleep(1)
    records = [json.loads(p.read_text()) for p in out.glob("*.json")]
    assert len(records) == RUNS
    assert {r["gpus"] for r in records} == {"GPU-aaaa", "GPU-bbbb"}  # both leases served, none run without one
    for lease in ("GPU-aaaa", "GPU-bbbb"):
        held = sorted((r["start"], r["end"]) for r in records if r["gpus"] == lease)
        assert all(later[0] >= earlier[1] for earlier, later in zip(held, held[1:])), held
    assert {r["cpus"] for r in records if r["gpus"] == "GPU-aaaa"} == {"0"}


IGNORES_SIGTERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); " \
                  "time.sleep(300)"


def live(pid: int) -> bool:
    """Whether the process runs: a zombie has ended, it only waits for its parent to read its status."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def processes_naming(folder: Path) -> list[str]:
    """The live processes (other than this one) whose environment names `folder`, as "pid command"."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            named = str(folder).encode() in (proc / "environ").read_bytes()
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
        except OSError:
            continue
        if named and live(int(proc.name)):
            found.append(f"{proc.name} {command}")
    return found


def test_down_ends_every_process_of_the_stack(stack):
    """Last in this file: it takes the module's stack down. `flows/stack.sh down` ends the server, every worker
    (those of the lease test too) and the processes the stack started outside their groups: here a stand-in for a
    flow run's training run (a session of its own, the worker's environment) that ignores SIGTERM, as one stuck in
    its shutdown would. The workers stop on SIGTERM (or, where Prefect's own shutdown hangs under load, are killed
    and named); the stand-in gets SIGKILL, and down says so."""
    env, api, root = stack
    state = root / "stack"
    recorded = {p.stem: int(p.read_text()) for p in state.glob("*.pid")}
    assert {"server", "worker-1", "worker-2"} <= set(recorded), recorded
    assert all(live(pid) for pid in recorded.values()), recorded
    deadline = time.monotonic() + 120  # the workers handle SIGTERM once they have started (run alone, they may not yet)
    while not all("started!" in (state / f"{name}.log").read_text() for name in recorded if name != "server"):
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.5)
    worker_env = dict(item.split("=", 1) for item in
                      Path(f"/proc/{recorded['worker-1']}/environ").read_bytes().decode().split("\0") if "=" in item)
    stuck = subprocess.Popen([os.sys.executable, "-c", IGNORES_SIGTERM], env=worker_env, start_new_session=True,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert stuck.stdout.readline() == "ready\n"  # SIGTERM is ignored from here on
        started = time.monotonic()
        down = subprocess.run([str(REPO / "flows" / "stack.sh"), "down"], env=env, capture_output=True, text=True,
                              timeout=120)
        took = time.monotonic() - started
        with contextlib.suppress(subprocess.TimeoutExpired):
            stuck.wait(timeout=5)  # reaped here once it has ended (a zombie would count as ended anyway)
        ended = stuck.returncode  # None while it runs
    finally:
        if stuck.poll() is None:
            stuck.kill()
            stuck.wait()
    said = down.stdout + down.stderr
    assert ended == -signal.SIGKILL, f"the stand-in outlived down (exit status {ended}):\n{said}"
    assert down.returncode == 0 and f"Prefect stack down (state kept in {state})" in down.stdout, said
    killed = [line for line in down.stderr.splitlines() if "SIGKILL" in line]
    assert any(f"(pid {stuck.pid})" in line for line in killed), said  # the stand-in, named
    # a worker normally ends on SIGTERM; one whose own shutdown hangs (Prefect's, under load) is killed and named too
    others = {f"{name} (pid {pid})" for name, pid in recorded.items()}
    assert all(any(name in line for name in others) for line in killed if f"(pid {stuck.pid})" not in line), said
    assert [name for name, pid in recorded.items() if live(pid)] == [], said
    assert processes_naming(state) == [], said
    assert list(state.glob("*.pid")) == [], said
    assert took < 30, f"down took {took:.0f} s"
