import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pace
from waiting_workers import (ENDED_VARIABLE, WaitingWorkers, cores_left, is_waiting, say_ended, waiting_worker_takes,
                             worker_cores)
from runner.demo import write_demo


@pytest.fixture(scope="session")
def demo_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("demo")


@pytest.fixture(scope="session")
def spaceship(demo_root) -> Path:
    """The spaceship-titanic demo competition folder (prepared/public, prepared/private)."""
    return write_demo("spaceship", demo_root, seed=1)


@pytest.fixture(scope="session")
def dog_breed(tmp_path_factory) -> Path:
    """The dog-breed demo competition folder, written once for the whole session (its photos took 20 s of CPU,
    spawned drawing processes included, and each worker that asked wrote its own): the first worker to ask writes
    it, under a lock, into the folder every worker's own lies in; the others wait for it and read it. Tests copy
    it before changing anything in it."""
    import fcntl

    root = tmp_path_factory.getbasetemp()
    shared = (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "shared-demo"
    shared.mkdir(exist_ok=True)
    with open(shared / "dog-breed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        written = shared / "dog-breed.written"
        if not written.exists():
            written.write_text(str(write_demo("dog-breed", shared, seed=2)))
        return Path(written.read_text())


# A run's own clock (its report's wall_seconds, from its process's start) ends by its budget; seen from the test its
# exit comes later by the interpreter's exit after the report's last write and the test noticing it: 0.1 s on a
# quiet core, 1.3 s on one shared by three runs and another process
EXIT_SLACK = 2.0


def training_share(report) -> float:
    """How much of the training window (planning done to the cut) the run trained for."""
    planned, ended = report["timings"]["planned"], report["timings"]["training_done"]
    return (ended - planned) / (0.85 * report["budget_seconds"] - planned)


def run_cli(*args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """`runner ...` as a user runs it: a separate process, output captured (`env` added to this environment)."""
    return subprocess.run([sys.executable, "-m", "runner.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def children(pid: int, recursive: bool = False) -> list:
    """`pid`'s child processes (psutil.Process), from the kernel's list of each of its threads' children: psutil's
    own `children()` reads every process's stat on the machine, about 10 ms with a busy suite's few hundred, and
    the tests that poll a run's tree every 20-50 ms spent a core's tenth on it. psutil's way where the kernel keeps
    no such list."""
    import glob

    import psutil

    tasks = glob.glob(f"/proc/{pid}/task/*/children")
    if not tasks:
        try:
            return psutil.Process(pid).children(recursive=recursive)
        except psutil.Error:
            return []
    found = []
    for task in tasks:
        try:
            found += [int(child) for child in Path(task).read_text().split()]
        except (OSError, ValueError):
            continue
    processes = []
    for child in dict.fromkeys(found):
        try:
            processes.append(psutil.Process(child))
        except psutil.Error:
            continue
        if recursive:
            processes += children(child, recursive=True)
    return processes


def alive(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie has)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def measuring_pid(timeout: float = 30.0) -> int:
    """The pid of the measuring process this test process started, once it runs the measuring module."""
    import psutil

    end = time.monotonic() + pace.paced(timeout)
    while time.monotonic() < end:
        for child in children(os.getpid(), recursive=True):
            try:
                if "runner.engines.timm.measure" in " ".join(child.cmdline()):
                    return child.pid
            except psutil.Error:
                continue
        time.sleep(0.01)
    raise AssertionError("no measuring process started")


TESTS = Path(__file__).resolve().parent
# engines from outside the package (the second plans nothing: scheduling tests hand it members)
TOY_ENGINE = {"RUNNER_ENGINES": "toy=toy_engine:Toy,toyprep=toy_engine:ToyPrepared", "PYTHONPATH": str(TESTS)}


def write_spooky(root: Path, rows: int = 600, seed: int = 0) -> Path:
    """A small spooky-author-identification in the MLE-bench layout: each author favours their own words."""
    rng = np.random.default_rng(seed)
    authors = ["EAP", "HPL", "MWS"]
    words = {a: [f"{a.lower()}word{i}" for i in range(12)] for a in authors}
    common = [f"common{i}" for i in range(40)]

    def sentence(author):
        mine = rng.choice(words[author], size=rng.integers(2, 5))
        return " ".join(rng.permutation(list(mine) + list(rng.choice(common, size=8))))

    labels = rng.choice(authors, size=rows)
    frame = pd.DataFrame({"id": [f"id{i:05d}" for i in range(rows)], "text": [sentence(a) for a in labels],
                          "author": labels})
    train, test = frame.iloc[: rows * 3 // 4], frame.iloc[rows * 3 // 4:]
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True), private.mkdir(parents=True)
    train.to_csv(public / "train.csv", index=False)
    test[["id", "text"]].to_csv(public / "test.csv", index=False)
    pd.DataFrame({"id": test["id"], "EAP": 0.4, "HPL": 0.3, "MWS": 0.3}).to_csv(public / "sample_submission.csv",
                                                                               index=False)
    onehot = pd.DataFrame({"id": test["id"], **{a: (test["author"] == a).astype(int) for a in authors}})
    onehot.to_csv(private / "test.csv", index=False)
    return root


def write_nomad(root: Path, rows: int = 800, seed: int = 0) -> Path:
    """A small nomad2018 (two non-negative regression targets, graded by RMSLE in row order)."""
    rng = np.random.default_rng(seed)
    al, ga = rng.random(rows), rng.random(rows)
    frac = np.column_stack([al, ga, rng.random(rows)])
    frac /= frac.sum(axis=1, keepdims=True)
    frame = pd.DataFrame({
        "id": np.arange(1, rows + 1), "spacegroup": rng.choice([12, 33, 167, 194, 206, 227], rows),
        "number_of_total_atoms": rng.choice([10, 20, 30, 40, 60, 80], rows),
        "percent_atom_al": frac[:, 0], "percent_atom_ga": frac[:, 1], "percent_atom_in": frac[:, 2],
        "lattice_vector_1_ang": rng.uniform(3, 25, rows),
    })
    frame["formation_energy_ev_natom"] = np.clip(0.05 + 0.3 * frac[:, 0] * frac[:, 2] + 0.02 * rng.normal(size=rows)
                                                 + 0.05 * (frame["spacegroup"] == 206), 0, None)
    frame["bandgap_energy_ev"] = np.clip(1.0 + 3.5 * frac[:, 0] + 1.5 * frac[:, 1] + 0.1 * rng.normal(size=rows),
                                         0, None)
    train, test = frame.iloc[: rows * 3 // 4], frame.iloc[rows * 3 // 4:].copy()
    test["id"] = np.arange(1, len(test) + 1)
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True), private.mkdir(parents=True)
    targets = ["formation_energy_ev_natom", "bandgap_energy_ev"]
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns=targets).to_csv(public / "test.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    pd.DataFrame({"id": test["id"], targets[0]: 0.1779, targets[1]: 1.8892}).to_csv(
        public / "sample_submission.csv", index=False)
    return root


# Prefect: no telemetry, and time for the temporary server to start on a busy 2-core machine.
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")


# `-n auto` (`make test TEST_WORKERS=auto`): a worker for each core other processes leave free, pinned to it, plus
# EXTRA_WORKERS, plus the waiting workers (tests/waiting_workers.py). One computing worker more than the cores
# (three on this machine's two) ended the suite in 9 min 46 s and 9 min 55 s against 12 min 4 s with two, since most
# of it is whole runs that take their budget's seconds whatever CPU they get; but each run on a shared core then
# gets half of it or less, and 1 and 3 of 685 failed (spooky's TF-IDF, whose window closed before its fork server
# and imports were done; aptos' CNN predicting one class; dog-breed's CNN no better than the prior; a 6 s run past
# its watchdog importing scikit-learn), so none is added: a waiting worker takes only files that mostly wait
EXTRA_WORKERS = 0
WAITING = int(os.environ.get("WAITING_WORKERS", "0"))  # the last WAITING workers wait (Makefile: TEST_WAITING)
# the core another process keeps busy (`make test-busy`): a waiting worker shares another
BUSY_CORE = int(os.environ["BUSY_CORE"]) if os.environ.get("BUSY_CORE") else None
WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # gwN under xdist, else None
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
WAITS = bool(WORKER) and is_waiting(WORKER, WORKERS, WAITING)  # this process is a waiting worker


def pytest_configure(config):
    """The machine's pace (tests/pace.py), measured once by the process that starts the workers, before it starts
    them; and with waiting workers the folder where computing workers say they have ended (ENDED_VARIABLE)."""
    if not WORKER:
        pace.settle()
        if WAITING and not os.environ.get(ENDED_VARIABLE):
            os.environ[ENDED_VARIABLE] = tempfile.mkdtemp(prefix="pytest-workers-ended-")


def pytest_runtest_setup(item):
    """A waiting worker takes on the cores of the computing workers that have ended (its runs from then on plan for
    them too): with the others done, its last files had one core of two."""
    if WAITS and os.environ.get(ENDED_VARIABLE):
        cores = os.sched_getaffinity(0) | cores_left(Path(os.environ[ENDED_VARIABLE]))
        if cores != os.sched_getaffinity(0):
            os.sched_setaffinity(0, cores)


def pytest_unconfigure(config):
    """The files the session made for its workers go with it."""
    if not WORKER:
        if os.environ.get(ENDED_VARIABLE, "").startswith(tempfile.gettempdir()):
            shutil.rmtree(os.environ[ENDED_VARIABLE], ignore_errors=True)


def pytest_sessionfinish(session):
    """A computing worker's last test has run: its cores are free for a waiting worker (pytest_runtest_setup)."""
    if WORKER and not WAITS and os.environ.get(ENDED_VARIABLE):
        say_ended(Path(os.environ[ENDED_VARIABLE]), WORKER, os.sched_getaffinity(0))


def pace_line() -> str:
    return f"pace {pace.pace()}: time-bound tests' budgets stretched by it (tests/pace.py; {pace.VARIABLE}=1: as set)"


def pytest_report_header(config):
    return pace_line()


def pytest_terminal_summary(terminalreporter):
    """The pace again at the end, where `-q` (make test) shows it beside the failures it may explain."""
    if not WORKER:
        terminalreporter.write_line(pace_line())


def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto`: a worker a core plus EXTRA_WORKERS, less one for each core other processes keep busy (sampled
    for half a second, as the runner samples them), at least one; then the waiting workers."""
    from runner.machine.hardware import busy_elsewhere

    return max(1, len(os.sched_getaffinity(0)) - busy_elsewhere() + EXTRA_WORKERS) + WAITING


def pytest_ignore_collect(collection_path, config):
    """A waiting worker collects only the files it takes (tests/waiting_workers.py)."""
    if WAITS and collection_path.name.startswith("test_") and collection_path.suffix == ".py":
        return not waiting_worker_takes(collection_path.name) or None
    return None


def pytest_xdist_make_scheduler(config, log):
    """With waiting workers, files go to workers as `--dist loadfile` hands them out, the waiting files to them."""
    if WAITING and config.getoption("dist") == "loadfile":
        return WaitingWorkers(config, log, WAITING, sorted(os.sched_getaffinity(0)), BUSY_CORE)
    return None  # xdist's own


if WORKER:
    # Each worker (and every run it starts: children inherit the mask, and the runner plans for the cores in it)
    # keeps its own cores, so a run sees the same machine whatever the other worker does instead of a share of
    # both cores that changes with it. Set at import, before torch or OpenMP start a thread.
    os.sched_setaffinity(0, worker_cores(WORKER, WORKERS, WAITING, sorted(os.sched_getaffinity(0)), BUSY_CORE))
    # an OpenMP thread waiting at a barrier sleeps instead of spinning on a core another process needs
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

CORES = len(os.sched_getaffinity(0))  # this process's cores (a worker's share under xdist): what tests give threads


# the files that take longest on a worker's one core, longest first (measured with two workers; about 60 s or more)
LONGEST_FILES = ("test_lite.py", "test_e2e.py", "test_deployment.py", "test_bad_input.py", "test_resume.py",
                 "test_gpu_check_smoke.py", "test_weights.py", "test_measuring.py", "test_portfolio_run.py",
                 "test_docker.py")


def pytest_collection_modifyitems(items):
    """The longest files first, then those with the most whole runs, each file's tests together and in order: with
    several workers (`make test`: each takes whole files, in this order) the long files are handed out first and
    the short ones even out the workers' ends, where a long file handed out last would keep one worker busy alone."""
    runs = Counter(item.path for item in items if item.get_closest_marker("slow"))
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: (rank.get(item.path.name, len(rank)), -runs[item.path]))


@pytest.fixture(scope="session", autouse=True)
def torch_threads_on_this_workers_cores():
    """Under xdist (`make test`) a worker's own training uses the cores it kept (torch would count the machine's:
    threads beyond the cores spin at barriers for a preempted peer, tens of times slower)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(CORES)


@pytest.fixture(scope="session", autouse=True)
def out_root_under_the_test_folder(tmp_path_factory):
    """The flows empty only folders under $RUNNER_OUT_ROOT: the tests' own temporary folders."""
    os.environ["RUNNER_OUT_ROOT"] = str(tmp_path_factory.getbasetemp())


IMAGE = "competition-runner-local"  # the container tests' image (docker/build-test-image.sh)


@pytest.fixture(scope="session")
def engine():
    """A Docker engine with the container tests' image built (docker/start-engine.sh, docker/build-test-image.sh:
    they take turns with the background start `make test` began); skipped, with the reason, where either fails."""
    from runner.deploy.containers import docker_client

    for script in ("start-engine.sh", "build-test-image.sh"):
        result = subprocess.run([str(Path(__file__).resolve().parent.parent / "docker" / script)],
                                capture_output=True, text=True, env={**os.environ, "IMAGE": IMAGE})
        if result.returncode != 0:
            reason = f"{script} failed: {result.stderr.strip()[-500:]}"
            print(reason)
            pytest.skip(reason)
    return docker_client()


@pytest.fixture(scope="session")
def prefect_server():
    """One Prefect test server for the whole session: about 26 s of CPU to start on an AVX2-only EPYC (its import
    in both processes and the database's migrations), so every test that needs one is in test_flows.py, the flows
    in a container too: a worker that took another file asking for it started a second."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield
