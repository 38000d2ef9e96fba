"""The test suite's own scheduling (tests/waiting_workers.py): which worker takes which file, and which cores each is
pinned to. xdist's scheduler driven as its controller drives it, with workers that record what they are sent."""
from types import SimpleNamespace

import pytest

from waiting_workers import (QUIET_FILES, SHARED_FILES, WAITING_FILES, WaitingWorkers, cores_left, is_waiting,
                             say_ended, waiting_worker_takes, worker_cores)

WAITING = sorted(WAITING_FILES)[:2]
COMPUTING = ["test_lite.py", "test_e2e.py", "test_resume.py", "test_grade.py"]
SHARED = sorted(SHARED_FILES)[:2]
QUIET = [name for name in COMPUTING if name in QUIET_FILES]


class Worker:
    """What the scheduler sees of an xdist worker: its id, the tests it is sent, its shutdown."""

    def __init__(self, worker_id: str):
        self.gateway = SimpleNamespace(id=worker_id)
        self.sent, self.shutting_down = [], False

    def send_runtest_some(self, indices):
        self.sent.extend(indices)

    def shutdown(self):
        self.shutting_down = True

    def __repr__(self):
        return self.gateway.id


def nodeids(files, per_file=3):
    return [f"tests/{name}::test_{i}" for name in files for i in range(per_file)]


def scheduler(workers=3, waiting=1, busy=None):
    config = SimpleNamespace(getvalue=lambda name: [f"{workers}*popen"] if name == "tx" else None,
                             option=SimpleNamespace(loadscopereorder=False), hook=None)
    return WaitingWorkers(config, None, waiting, [0, 1], busy), [Worker(f"gw{i}") for i in range(workers)]


def collected(schedule, workers, everything):
    """Each worker registered and collected, the waiting one only the files it takes (registered first: it is
    quicker), then scheduled."""
    for worker in workers:
        schedule.add_node(worker)
    for worker in reversed(workers):
        waits = is_waiting(worker.gateway.id, len(workers), 1)
        schedule.add_node_collection(worker, [n for n in everything
                                              if not waits or waiting_worker_takes(n.split("/")[1].split("::")[0])])
    assert schedule.collection_is_completed
    schedule.schedule()


def files_sent(schedule, worker):
    return {schedule.registered_collections[worker][i].split("::")[0].split("/")[1] for i in worker.sent}


def finish(schedule, worker):
    """The worker runs every test it was sent."""
    for index in list(worker.sent):
        if not schedule.assigned_work.get(worker):
            break
        schedule.mark_test_complete(worker, index)


def test_the_waiting_worker_takes_only_the_waiting_files_and_the_others_none_while_another_is_left():
    schedule, workers = scheduler()
    everything = nodeids(COMPUTING[:2] + WAITING + COMPUTING[2:])
    collected(schedule, workers, everything)
    computing, waiting = workers[:2], workers[2]
    assert files_sent(schedule, waiting) <= set(WAITING) and files_sent(schedule, waiting)
    assert all(not files_sent(schedule, w) & set(WAITING) for w in computing)
    # each test is sent to one worker, as the collection of that worker numbers it
    sent = [schedule.registered_collections[w][i] for w in workers for i in w.sent]
    assert len(sent) == len(set(sent))
    for worker in computing:
        finish(schedule, worker)
    finish(schedule, waiting)
    assert waiting.shutting_down  # nothing waiting is left for it: it ends
    sent = {schedule.registered_collections[w][i] for w in workers for i in w.sent}
    assert sent == set(everything)


def test_a_computing_worker_takes_a_waiting_file_only_when_nothing_else_is_left():
    schedule, workers = scheduler()
    collected(schedule, workers, nodeids(WAITING + COMPUTING[:1], per_file=4))
    waited = files_sent(schedule, workers[2])
    assert len(waited) == 1 and waited <= set(WAITING)
    # the lone computing file went to one computing worker; the other took the waiting file left rather than idle
    assert {frozenset(files_sent(schedule, w)) for w in workers[:2]} == {frozenset({COMPUTING[0]}),
                                                                         frozenset(set(WAITING) - waited)}


def test_the_waiting_worker_takes_the_shared_files_once_its_waiting_files_are_done():
    schedule, workers = scheduler()
    collected(schedule, workers, nodeids(SHARED + COMPUTING + WAITING, per_file=2))
    computing, waiting = workers[:2], workers[2]
    # the shared files queue first, yet the computing workers take the others and the waiting worker a waiting file
    assert not any(files_sent(schedule, w) & set(SHARED) for w in computing)
    assert files_sent(schedule, waiting) <= set(WAITING)
    while not waiting.shutting_down:
        finish(schedule, waiting)
    # done with the waiting files it took the shared ones, all of them while the computing workers were busy
    assert files_sent(schedule, waiting) == set(WAITING) | set(SHARED)
    assert not any(files_sent(schedule, w) & set(SHARED) for w in computing)


def test_a_computing_worker_takes_a_shared_file_before_a_waiting_one_when_nothing_else_is_left():
    schedule, workers = scheduler()
    collected(schedule, workers, nodeids(WAITING + SHARED[:1] + COMPUTING[:1], per_file=4))
    assert files_sent(schedule, workers[2]) <= set(WAITING)
    assert {frozenset(files_sent(schedule, w)) for w in workers[:2]} == {frozenset({COMPUTING[0]}),
                                                                         frozenset({SHARED[0]})}


def test_a_waiting_worker_whose_collection_differs_is_refused():
    schedule, workers = scheduler()
    for worker in workers:
        schedule.add_node(worker)
    everything = nodeids(COMPUTING[:1] + WAITING)
    schedule.add_node_collection(workers[0], everything)
    schedule.add_node_collection(workers[1], everything)
    schedule.add_node_collection(workers[2], everything)  # every file: it should have collected the waiting ones
    schedule.log = lambda *args: None
    assert not schedule._check_nodes_have_same_collection()


@pytest.mark.parametrize("busy, waiting_core", [(None, {1}), (1, {0})])
def test_workers_are_pinned_a_core_each_and_the_waiting_one_beside_the_core_another_process_keeps(busy, waiting_core):
    assert [worker_cores(f"gw{i}", 3, 1, [0, 1], busy) for i in range(2)] == [{0}, {1}]
    assert worker_cores("gw2", 3, 1, [0, 1], busy) == waiting_core
    # without waiting workers, each takes an equal share
    assert [worker_cores(f"gw{i}", 2, 0, [0, 1, 2, 3]) for i in range(2)] == [{0, 1}, {2, 3}]


def test_the_runs_that_want_a_core_of_their_own_go_to_the_worker_that_has_one_while_a_waiting_worker_runs():
    schedule, workers = scheduler()
    # the quiet files queued behind the others: the worker with its own core (gw0) still takes them first
    collected(schedule, workers, nodeids(["test_resume.py", "test_grade.py", *WAITING, *QUIET], per_file=1))
    own, shared, waiting = workers
    assert len(QUIET) == 2 and files_sent(schedule, own) <= set(QUIET) and files_sent(schedule, own)
    assert not files_sent(schedule, shared) & set(QUIET)
    finish(schedule, waiting)  # the waiting files done: the waiting worker ends, and its core is gw1's alone
    assert waiting.shutting_down
    schedule.remove_node(waiting)
    finish(schedule, shared)
    finish(schedule, own)
    sent = {name for worker in (own, shared) for name in files_sent(schedule, worker)}
    assert sent >= set(QUIET) | {"test_resume.py", "test_grade.py"}


def test_with_every_computing_core_shared_the_quiet_runs_go_in_the_queues_order():
    # core 1 kept busy by another process (make test-busy): the waiting worker beside gw0 on core 0, gw1 beside
    # the busy process: no worker has a core of its own, so none is kept from the quiet files
    schedule, workers = scheduler(busy=1)
    collected(schedule, workers, nodeids([*QUIET, *WAITING, "test_resume.py", "test_grade.py"], per_file=1))
    assert {name for worker in workers[:2] for name in files_sent(schedule, worker)} >= set(QUIET)


def test_a_waiting_worker_takes_on_the_cores_of_the_computing_workers_that_have_ended(tmp_path):
    assert cores_left(tmp_path) == set()
    say_ended(tmp_path, "gw0", {0})
    (tmp_path / ".gw1.x7f.tmp").write_text("1")  # gw1 still writing (runner.common.atomic's name): not ended yet
    assert cores_left(tmp_path) == {0}
    say_ended(tmp_path, "gw1", {1, 2})
    assert cores_left(tmp_path) == {0, 1, 2}
