"""Waiting workers: pytest-xdist workers beside the computing ones that take only the files whose tests mostly wait.

A whole run takes its budget's seconds whatever CPU it gets, and a few files spend most of theirs waiting on a
clock with their core idle: a measuring window that must cover torch's import on a busy core, a toy unit's sleep, a
unit killed at its deadline. Run by a computing worker, that idle core is the suite's time; run by a waiting worker
that shares a core with a computing worker, it overlaps that worker's runs. `make test` runs `TEST_WORKERS`
computing workers, each pinned to its own cores, and `TEST_WAITING` waiting workers (the environment's
`WAITING_WORKERS`), the last workers by number, each pinned to the last core that `BUSY_CORE` (another process's,
`make test-busy`) does not name. Those files' tests hold on a core shared with another process (`make test-busy`),
as a waiting worker's is, and compute about a third of their seconds. The files whose runs want a core of their
own (QUIET_FILES) go, while a waiting worker runs, to a computing worker whose core it does not share.
"""
import os
from pathlib import Path

from xdist.scheduler import LoadFileScheduling

from runner.common.atomic import replacing

# the files whose tests wait most of their wall time (measured pinned to one core, file alone: measuring 82 s of
# wall with its core busy 27, portfolio runs 31 / 14, orphans 22 / 7.5, start-up 19 / 6.5). Not the nemesis
# runs of test_unanswering.py (40 / 24): its three runs side by side compute 20 s of their 25, and beside them a
# computing worker's 6 s and 16 s runs kept their baselines
WAITING_FILES = frozenset({"test_measuring.py", "test_portfolio_run.py", "test_orphans.py", "test_startup.py"})
# the files whose whole runs must learn or finish within small budgets and want a core of their own: while a waiting
# worker still runs, a computing worker whose core it shares takes none of them if another computing worker has a
# core to itself, and that one takes them first. On a CPU 1.7x slower than the one the budgets were set on (an
# AVX2-only EPYC), each passed alone and failed beside the waiting worker: dog-breed's CNN had 8 s to measure in,
# measured nothing and stayed at the prior; aptos' CNN predicted one class; a run whose fork server was stopped
# found it at 18 s of 30 and finished no unit after it
QUIET_FILES = frozenset({"test_e2e.py", "test_lite.py", "test_unanswering.py"})
# the files whose tests hold on a shared core (what they assert is behaviour, not how much a model learns; the
# containers' runs are on every core whatever the worker's): a waiting worker takes them once its waiting files are
# done, where it had ended and left its core idle beside the computing worker there for the last 60% of the suite;
# a computing worker takes one only when nothing else but the waiting files is left
SHARED_FILES = frozenset({"test_deployment.py", "test_docker.py", "test_gpu_check_smoke.py", "test_hardening.py"})
# Tried and not kept: the computing worker beside a waiting one at nice 3 (the waiting one's deadlines first): the
# end-to-end spaceship run there got a third of its core while measuring processes computed, and a LightGBM fold
# was cut at its deadline


# the folder (in the environment, made by the process that starts the workers) where each computing worker writes
# its cores once it has run its last test: a waiting worker takes them on for its tests from then on. The suite's
# last two minutes had been the gpu-check smoke alone on the waiting worker's core with the other core idle
ENDED_VARIABLE = "TEST_WORKERS_ENDED"


def say_ended(folder: Path, worker: str, cores: set[int]) -> None:
    """`worker` has run its last test: its `cores` are free (written whole: the waiting worker reads it any time)."""
    with replacing(folder / worker) as written:
        written.write_text(",".join(map(str, sorted(cores))))


def cores_left(folder: Path) -> set[int]:
    """The cores of the computing workers that have ended (a file being written is hidden, not yet `gw*`)."""
    return {int(core) for ended in folder.glob("gw*") for core in ended.read_text().split(",") if core}


def worker_index(worker: str) -> int:
    return int(worker.removeprefix("gw"))


def is_waiting(worker: str, workers: int, waiting: int) -> bool:
    """Whether xdist worker `gwN` of `workers` is one of the `waiting` workers (the last ones by number)."""
    return worker_index(worker) >= workers - waiting


def worker_cores(worker: str, workers: int, waiting: int, cores: list[int], busy: int | None = None) -> set[int]:
    """The cores a worker is pinned to: a computing worker an equal share of `cores`, at least one; a waiting
    worker the last core that no other process keeps busy (`busy`), shared with the computing worker there."""
    if is_waiting(worker, workers, waiting):
        quiet = [core for core in cores if core != busy] or cores
        return {quiet[-1]}
    share = max(1, len(cores) // max(1, workers - waiting))
    start = worker_index(worker) * share % len(cores)
    return set(cores[start:start + share])


def file_name(nodeid: str) -> str:
    return Path(nodeid.split("::")[0]).name


def is_waiting_file(nodeid: str) -> bool:
    return file_name(nodeid) in WAITING_FILES


def is_shared_file(nodeid: str) -> bool:
    return file_name(nodeid) in SHARED_FILES


def waiting_worker_takes(name: str) -> bool:
    """Whether a waiting worker collects (and may be handed) the test file `name`."""
    return name in WAITING_FILES or name in SHARED_FILES


class WaitingWorkers(LoadFileScheduling):
    """`--dist loadfile` (whole files, in the collection's order) with the waiting files kept for the waiting
    workers: one takes those, then the files that hold on a shared core (SHARED_FILES), and ends when none is left; a
    computing worker takes a shared file only when nothing else but waiting files is left, and a waiting file only
    when nothing else is left. A waiting worker collects only the files it takes (tests/conftest.py): collecting every
    file imports torch, timm, Prefect and scikit-learn, 15 s of a core, and the suite starts when the last worker
    has collected, so on its shared core a full collection had doubled the suite's start (29 s against 14)."""

    def __init__(self, config, log=None, waiting: int = 1, cores: list[int] | None = None, busy: int | None = None):
        super().__init__(config, log)
        # the cores the workers share out as tests/conftest.py pins them, and the one another process keeps busy
        self.waiting, self.cores, self.busy = waiting, cores or sorted(os.sched_getaffinity(0)), busy

    def _waits(self, node) -> bool:
        return is_waiting(node.gateway.id, self.numnodes, self.waiting)  # numnodes: every worker, ended ones too

    def _cores(self, node) -> set[int]:
        return worker_cores(node.gateway.id, self.numnodes, self.waiting, self.cores, self.busy)

    def _has_its_core(self, node) -> bool:
        """Whether no running waiting worker, nor the busy core's process, shares this computing worker's cores."""
        shared = {self.busy} if self.busy is not None else set()
        for other in self.assigned_work:
            if self._waits(other) and not other.shutting_down:
                shared |= self._cores(other)
        return not self._cores(node) & shared

    def _computing_choices(self, node, others: list[str]) -> list[str]:
        """QUIET_FILES first for a worker with its core to itself; none for one sharing it while another has its
        own."""
        if self._has_its_core(node):
            return sorted(others, key=lambda scope: file_name(scope) not in QUIET_FILES)
        if any(self._has_its_core(n) for n in self.assigned_work if not self._waits(n) and n is not node):
            return [scope for scope in others if file_name(scope) not in QUIET_FILES] or others
        return others

    def add_node_collection(self, node, collection) -> None:
        super().add_node_collection(node, collection)
        # xdist schedules from the first collection registered: a computing worker's, the whole one, comes first
        self.registered_collections = dict(sorted(self.registered_collections.items(),
                                                  key=lambda item: self._waits(item[0])))

    def _check_nodes_have_same_collection(self) -> bool:
        """The computing workers collected the same tests, and each waiting worker the waiting files among them."""
        collections = self.registered_collections
        whole = next(iter(collections.values()))
        self.registered_collections = {node: items for node, items in collections.items() if not self._waits(node)}
        try:
            same = super()._check_nodes_have_same_collection()
        finally:
            self.registered_collections = collections
        waiting = [nodeid for nodeid in whole if waiting_worker_takes(file_name(nodeid))]
        for node, items in collections.items():
            if self._waits(node) and items != waiting:
                self.log(f"{node.gateway.id} collected {len(items)} waiting tests, not the {len(waiting)} expected")
                same = False
        return same

    def _assign_work_unit(self, node) -> None:
        waiting = [scope for scope in self.workqueue if is_waiting_file(scope)]
        shared = [scope for scope in self.workqueue if is_shared_file(scope)]
        others = [scope for scope in self.workqueue if not waiting_worker_takes(file_name(scope))]
        if self._waits(node):
            choices = waiting or shared
        else:
            choices = self._computing_choices(node, others) or shared or waiting
        if not choices:  # a waiting worker with nothing left that it takes
            if not node.shutting_down:
                node.shutdown()
            return
        self.workqueue.move_to_end(choices[0], last=False)  # the parent hands out the queue's first file
        super()._assign_work_unit(node)
