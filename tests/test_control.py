"""What a run learns while it trains: the monitor's rules on recorded epoch lines and samples, and re-planning
after a first epoch or fold far from the plan (injected timings, no GPU), and folds timing their steps the way
the planner timed them."""
import json
import subprocess
import sys
import time

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator

from runner.control.rules import (
    REPROBE_SECONDS, STALL_EPOCHS, STALL_GRACE_SECONDS, TIMED_EPOCH, Change, close_enough, combine, monitor_rules,
    needs_replan, stalled)
from runner.planning.registry import get_engine
from runner.engines.base import DeadlineReached, FoldData
from runner.engines.boosting import MIN_ROUNDS, RoundCost
from runner.engines.oneshot import LATE_FIT_SECONDS, WARM_ROWS, WARM_STEPS, boosted_head, train_one_shot
from runner.units.running import GRACE_SECONDS
from runner.engines.timm.settings import ImageSettings
from runner.machine.hardware import GiB
from runner.engines.timm.costs import Candidate, ImageCosts, Throughput
from runner.planning.planner import make_plan, replan_context
from runner.planning.portfolio import DataShape, Member
from runner.machine.profiles import profile
from runner.competition.catalog import load_spec

GPU = ImageSettings(model="convnext_small", image_size=224, device="cuda", batch_size=64, num_workers=4,
                    gpu_memory_fraction=0.8, per_gpu=1)


def cnn(settings=GPU, per_gpu=1):
    return Member(name="timm", engine="timm", slot="gpu", settings=settings, folds=5, per_gpu=per_gpu, threads=5)


def epoch(memory_share, data_wait=0.02, number=1):
    """An epoch line as runner.engines.timm.training writes it."""
    return dict(epoch=number, loss=2.0, score=1.5, seconds=30.0, epoch_seconds=33.0, images_per_second=400.0,
                data_wait=data_wait, device_memory_gb=memory_share * 80, device_memory_share=memory_share)


def samples(util, used_share=0.3, n=30):
    """Monitor lines (monitor.jsonl) for one GPU of 80 GiB."""
    return [dict(t=float(t), cpu=50.0, rss=2**30, gpus=[dict(used=int(used_share * 80 * GiB), total=80 * GiB,
                                                                util=util)]) for t in range(n)]


def test_a_fold_far_under_its_planned_memory_gives_later_folds_a_larger_batch():
    [change] = monitor_rules(cnn(), epoch(0.3), samples(95), gpu=0, free_cores=0, useful_batch=512)
    assert change.member.settings.batch_size == 128  # at most twice as large in one step
    assert "30% of the GPU where the plan aimed at 80%" in change.action


def test_a_batch_the_data_cannot_grow_means_one_more_fold_on_the_gpu_instead():
    [change] = monitor_rules(cnn(), epoch(0.3), samples(95), gpu=0, free_cores=0, useful_batch=64)
    assert change.member.per_gpu == 2 and change.member.settings.batch_size == 64


def test_a_gpu_idle_with_memory_to_spare_gets_another_fold_side_by_side():
    [change] = monitor_rules(cnn(), epoch(0.7), samples(20), gpu=0, free_cores=0, useful_batch=512)
    assert change.member.per_gpu == 2 and "20% busy" in change.action
    assert monitor_rules(cnn(), epoch(0.7), samples(90), gpu=0, free_cores=0, useful_batch=512) == []


def test_a_loader_bound_epoch_gives_later_folds_more_workers_from_the_free_cores():
    [change] = monitor_rules(cnn(), epoch(0.7, data_wait=0.35), samples(90), gpu=0, free_cores=2, useful_batch=512)
    assert change.member.settings.num_workers == 6 and "waited on its loader 35%" in change.action
    assert monitor_rules(cnn(), epoch(0.7, data_wait=0.35), samples(90), gpu=0, free_cores=0, useful_batch=512) == []


def test_before_its_first_epoch_a_fold_is_judged_by_the_monitors_samples():
    [change] = monitor_rules(cnn(), None, samples(95, used_share=0.2), gpu=0, free_cores=0, useful_batch=512)
    assert change.member.settings.batch_size == 128


def test_cpu_folds_and_well_used_gpus_are_left_alone():
    cpu = cnn(GPU.model_copy(update=dict(device="cpu")))
    assert monitor_rules(cpu, epoch(0.1), samples(10), gpu=0, free_cores=4, useful_batch=512) == []
    assert monitor_rules(cnn(), epoch(0.75), samples(95), gpu=0, free_cores=4, useful_batch=512) == []


def test_changes_for_one_member_combine_into_one_version():
    member = cnn()
    batch = Change(member.model_copy(update=dict(settings=GPU.model_copy(update=dict(batch_size=128)))), "a")
    workers = Change(member.model_copy(update=dict(settings=GPU.model_copy(update=dict(num_workers=8)))), "b")
    both = combine(member, [batch, workers])
    assert (both.member.settings.batch_size, both.member.settings.num_workers) == (128, 8)
    assert both.action == "a; b" and combine(member, []) is None


def test_a_first_step_far_from_the_plan_asks_for_a_new_plan():
    member = cnn().model_copy(update=dict(step_seconds=10.0))
    assert not needs_replan(member, 12.0) and not needs_replan(member, 8.0)
    assert needs_replan(member, 14.0) and needs_replan(member, 0.9)
    assert needs_replan(cnn(), 3.0)  # nothing was expected: the first real step is all there is
    # within the tolerance the settings stay, but a step more than 10% off is what later folds expect
    assert close_enough(member, 10.9) and close_enough(member, 9.1)
    assert not close_enough(member, 12.0) and not close_enough(member, 8.0) and not close_enough(cnn(), 3.0)


# --- re-planning ------------------------------------------------------------------------------------------------

DOG = load_spec("dog-breed")
IMAGES = DataShape(960, 240, classes=120, inputs=frozenset({"image"}))
RATES = {("mobilenetv3_small_100", 64, "fp32"): 900, ("mobilenetv3_small_100", 96, "fp32"): 600,
         ("resnet18", 96, "bf16"): 200}
COSTS = ImageCosts(throughput=tuple(Throughput(Candidate(m, s, p, 32), "cpu", 1 / r, 1 / (3 * r))
                                   for (m, s, p), r in RATES.items()))


def image_replan(window, step_factor):
    """The CNN planned for `window`, then planned again after a first epoch `step_factor` times the plan's."""
    plan = make_plan(DOG, profile("cpu"), window, IMAGES, {"timm": COSTS})
    member = plan.member("timm")
    context = replan_context(DOG, profile("cpu"), plan, member, window * 0.9, IMAGES, COSTS)
    return member, get_engine("timm").replan(context, member, member.step_seconds * step_factor)


def test_a_first_epoch_far_slower_than_measured_plans_a_cheaper_cnn():
    member, again = image_replan(1800, step_factor=20.0)  # the case: measured far too fast
    assert (member.settings.model, member.settings.image_size) == ("resnet18", 96)
    assert (again.settings.model, again.settings.image_size) != ("resnet18", 96) or again.folds < member.folds
    assert again.step_seconds > member.step_seconds and "re-planned after a real epoch" in again.reasons[0]


def test_a_first_epoch_far_faster_than_measured_plans_more():
    member, again = image_replan(120, step_factor=0.05)  # measured 20x too slow: the plan was too timid
    assert member.folds < 5 or member.settings.model != "resnet18"
    assert again.folds > member.folds or (again.settings.model, again.settings.image_size) == ("resnet18", 96)
    assert again.settings.epochs >= member.settings.epochs


def test_a_cnn_planned_without_a_step_time_is_replanned_from_its_first_epoch():
    plan = make_plan(DOG, profile("cpu"), 600, IMAGES, {"timm": COSTS})
    member = plan.member("timm").model_copy(update=dict(step_seconds=0.0))  # nothing was expected
    context = replan_context(DOG, profile("cpu"), plan, member, 540, IMAGES, COSTS)
    again = get_engine("timm").replan(context, member, 4.0)
    assert again.reasons[0].startswith("re-planned after a real epoch of 4.0 s where 0.0 s was expected, for")


@pytest.mark.parametrize("factor, more_rounds", [(5.0, False), (0.2, True)])
def test_a_boosters_first_fold_resizes_its_rounds(factor, more_rounds):
    spaceship = load_spec("spaceship")
    table = DataShape(10_000, 1000, 14, classes=2)
    costs = tuple([RoundCost(threads=2, boosters=1, rows=8000, seconds_per_round=0.01)])
    plan = make_plan(spaceship, profile("cpu"), 60, table, {"lightgbm": costs})
    member = plan.member("lightgbm")
    context = replan_context(spaceship, profile("cpu"), plan, member, 50, table, costs)
    again = get_engine("lightgbm").replan(context, member, member.step_seconds * factor)
    assert (again.settings.max_rounds > member.settings.max_rounds) == more_rounds
    assert (again.settings.learning_rate < member.settings.learning_rate) == more_rounds
    assert again.step_seconds == pytest.approx(member.step_seconds * factor, rel=1e-3)


# --- the supervisor applying a re-plan ---------------------------------------------------------------------------

def supervisor_with_plan(dog_breed, tmp_path):
    """A supervisor on the dog-breed demo planned for the 4-CPU profile from hand-made costs, the CNN alone, its
    controller's scheduler queued but not started."""
    from runner.results.member_state import MemberState
    from runner.common.budget import Budget
    from runner.control.controller import Controller
    from runner.planning.planner import data_shape
    from runner.supervisor import Supervisor
    from runner.units.scheduler import Scheduler

    budget = Budget.start(1800)
    supervisor = Supervisor(DOG, dog_breed / "prepared" / "public", tmp_path, budget)
    supervisor.load_data()
    costs = {"timm": COSTS}
    supervisor.plan = make_plan(DOG, profile("cpu"), 1500, data_shape(supervisor.dataset), costs, engines=["timm"])
    supervisor.states.update({m.name: MemberState(m) for m in supervisor.plan.members})
    supervisor.controller = Controller(supervisor.outputs, supervisor.states, supervisor.plan, profile("cpu"), costs,
                                       supervisor.dataset, probed=False)
    supervisor.controller.scheduler = Scheduler(supervisor.plan, budget, supervisor.make_task, supervisor.on_result,
                                                on_action=supervisor.outputs.action)
    return supervisor


def test_a_first_epoch_far_slower_replaces_the_cnns_pending_folds(dog_breed, tmp_path):
    supervisor = supervisor_with_plan(dog_breed, tmp_path)
    member = supervisor.controller.plan.member("timm")
    supervisor.controller.retime(member, member.step_seconds * 20)
    queued = {u.member.name for u in supervisor.controller.scheduler.queue if u.fold >= 0}
    assert queued == {"timm-2"} and "timm-2" in supervisor.states
    assert supervisor.states["timm-2"].member.settings.model != member.settings.model or \
        supervisor.states["timm-2"].member.folds < member.folds
    [action] = [a["action"] for a in supervisor.report.actions]
    assert "re-planned as timm-2" in action and "planned" in action
    assert all(r.status == "skipped" and "re-planned" in r.message for r in supervisor.results if r.member == "timm")
    # the new member's own first epoch far off again: its later folds expect it, but no re-plan of the re-plan
    again = supervisor.states["timm-2"].member
    supervisor.controller.retime(again, again.step_seconds * 3)
    assert len(supervisor.report.actions) == 1 and set(supervisor.states) == {"timm", "timm-2"}
    assert supervisor.states["timm-2"].member.step_seconds == pytest.approx(again.step_seconds * 3, rel=1e-3)


def test_a_cnn_fold_that_trained_nothing_by_its_deadline_skips_the_folds_behind_it(dog_breed, tmp_path):
    """On one core a CNN's folds, each given its share of a short window, can end without an epoch: the later ones
    would too, so they are skipped and the members queued behind them get the core. A fold that failed otherwise
    (a crash) skips nothing."""
    from runner.units.tasks import FoldResult

    supervisor = supervisor_with_plan(dog_breed, tmp_path)
    queued = lambda: [u.fold for u in supervisor.controller.scheduler.queue  # noqa: E731
                      if u.member.name == "timm" and u.fold >= 0]
    folds, pending = supervisor.plan.member("timm").folds, supervisor.controller.scheduler.pending
    for unit in [u for u in pending.waiting if u.member.name == "timm" and u.fold in (0, 1)]:
        pending.take(unit)  # folds 0 and 1 started
    supervisor.on_result(FoldResult(0, "failed", "timm", message="RuntimeError: a crash"))
    assert queued() == list(range(2, folds)) and not supervisor.report.actions
    supervisor.on_result(FoldResult(1, "failed", "timm", message="no epoch finished before the fold's deadline",
                                    out_of_time=True, wall_seconds=4.3))
    assert queued() == []
    skipped = [r for r in supervisor.results if r.status == "skipped"]
    assert [r.fold for r in skipped] == list(range(2, folds)) and "trained nothing in 4 s" in skipped[0].message
    [action] = [a["action"] for a in supervisor.report.actions]
    assert action.startswith("timm: its fold 1 trained nothing")


def test_the_epoch_held_against_the_plan_is_the_first_after_warm_up(dog_breed, tmp_path):
    """Epoch 1 also selects kernels and grows the allocator: far slower than planned, it changes nothing; the
    second epoch is the one timed."""
    from types import SimpleNamespace

    supervisor = supervisor_with_plan(dog_breed, tmp_path)
    member = supervisor.controller.plan.member("timm")
    unit = supervisor.controller.scheduler.queue[0]
    running = SimpleNamespace(unit=unit, task=SimpleNamespace(member=member, gpu=None), started=time.monotonic())
    slow = dict(epoch(0.0), epoch_seconds=member.step_seconds * 1.8)
    supervisor.controller.on_epoch(running, slow, [])
    assert supervisor.report.actions == () and "timm" not in supervisor.controller.timed
    supervisor.controller.on_epoch(running, {**slow, "epoch": TIMED_EPOCH}, [])
    [action] = [a["action"] for a in supervisor.report.actions]
    assert "timm" in supervisor.controller.timed
    assert action.startswith(f"timm: a real epoch took {member.step_seconds * 1.8:.3g} s")


def test_a_slow_step_samples_the_cores_again_and_what_starts_next_plans_for_those_left(dog_breed, tmp_path):
    """Another process takes a core after the run was planned: the slow epoch that shows it makes the run sample
    the cores again, and the re-planned member gets no more threads than are free."""
    import os
    import signal
    import subprocess
    import sys

    supervisor = supervisor_with_plan(dog_breed, tmp_path)
    supervisor.controller.probed = True  # as if the 4-CPU profile were this machine, probed at the start
    member = supervisor.controller.plan.member("timm")
    # another process, not a child: the shell exits and leaves it to init, outside this process tree
    rival = int(subprocess.run(["sh", "-c", f"{sys.executable} -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
                               capture_output=True, text=True, check=True).stdout)
    try:
        time.sleep(0.5)
        supervisor.controller.retime(member, member.step_seconds * 5)
    finally:
        os.kill(rival, signal.SIGKILL)
    cpus = supervisor.controller.hardware.cpus
    assert cpus < 4 and supervisor.controller.hardware.busy_cpus == 4 - cpus
    assert supervisor.controller.plan.cpus == supervisor.controller.scheduler.plan.cpus == cpus
    first, *_ = [a["action"] for a in supervisor.report.actions]
    assert f"now busy with other processes (sampled after a slow step): what starts next plans for {cpus}" in first
    queued = [u.member for u in supervisor.controller.scheduler.queue if u.member.name != "timm"]
    assert queued and all(m.threads <= cpus for m in queued)


def test_the_run_grows_back_into_cores_the_other_processes_gave_back(dog_breed, tmp_path, monkeypatch):
    """Cores taken after the plan are sampled again every REPROBE_SECONDS while they are taken: once they are free,
    what starts next plans for them again (the samples themselves are given: the rule under test is what the
    run does with them)."""
    import runner.control.controller

    samples = iter([2, 0])
    monkeypatch.setattr(runner.control.controller, "busy_elsewhere", lambda: next(samples))
    supervisor = supervisor_with_plan(dog_breed, tmp_path)
    supervisor.controller.probed = True
    planned = dict(supervisor.controller.plan.lane_cores)
    controller = supervisor.controller
    controller.retime(controller.plan.member("timm"), controller.plan.member("timm").step_seconds * 5)
    assert controller.hardware.cpus == controller.scheduler.plan.cpus == 2 and controller.hardware.busy_cpus == 2
    supervisor.controller.watch([])  # too soon after the last sample: none taken
    assert supervisor.controller.hardware.cpus == 2
    supervisor.controller.reprobed_at -= REPROBE_SECONDS
    supervisor.controller.watch([])
    assert controller.hardware.cpus == controller.scheduler.plan.cpus == 4 and controller.hardware.busy_cpus == 0
    assert supervisor.controller.plan.lane_cores == planned
    assert "sampled again while cores were taken): what starts next plans for 4" in \
        supervisor.report.actions[-1]["action"]
    supervisor.controller.reprobed_at -= REPROBE_SECONDS
    supervisor.controller.watch([])  # nothing is taken any more: no more samples (none left)


def test_a_process_trees_cpu_time_keeps_what_its_ended_children_used():
    """A fold that ends while the cores are sampled leaves the tree; its time must not look like another
    process's, or a run of short folds takes itself for a busy machine and gives up a core."""
    import subprocess
    import sys

    import psutil

    from runner.machine.hardware import _tree_cpu_seconds

    before = _tree_cpu_seconds(psutil.Process())
    subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\n"
                    "while time.process_time() - t < 0.4: pass"], check=True)
    assert _tree_cpu_seconds(psutil.Process()) - before >= 0.4


def test_a_plan_for_hardware_that_is_not_this_machine_is_not_sampled_again(dog_breed, tmp_path):
    supervisor = supervisor_with_plan(dog_breed, tmp_path)  # the 4-CPU profile, given: nothing to sample
    member = supervisor.controller.plan.member("timm")
    supervisor.controller.retime(member, member.step_seconds * 5)
    assert supervisor.controller.hardware.cpus == 4
    assert not any("now busy" in a["action"] for a in supervisor.report.actions)


def test_a_fold_with_no_epoch_long_after_the_plan_expected_one_is_held_against_the_plan(dog_breed, tmp_path,
                                                                                        caplog):
    """A fold that finishes no epoch after it said it was ready (its threads outnumber the cores left to it) never
    sends the epoch that would re-time it: the time it has waited since, a lower bound of an epoch, is held against
    the plan instead; and where it was stuck goes into its log and the run's (here a process standing in for the
    fold, waiting in a function of its own)."""
    from types import SimpleNamespace

    supervisor = supervisor_with_plan(dog_breed, tmp_path)
    member = supervisor.controller.plan.member("timm")
    unit = next(u for u in supervisor.controller.scheduler.queue if u.fold >= 0)  # a fold, not the image cache's unit
    task = SimpleNamespace(member=member, gpu=None, out_dir=str(tmp_path / "fold"))  # no epochs.jsonl there
    log = tmp_path / "fold.log"
    code = "from runner.common.stacks import register; import time\nregister()\ndef wait_for_epoch():\n    time.sleep(60)\n" \
           "print('ready', flush=True)\nwait_for_epoch()"
    with open(log, "a") as handle:
        fold = subprocess.Popen([sys.executable, "-c", code], stdout=handle, stderr=subprocess.STDOUT)
    try:
        while "ready" not in log.read_text():
            time.sleep(0.05)
        just_started = SimpleNamespace(unit=unit, task=task, started=time.monotonic(), process=fold, log=log)
        supervisor.controller.watch([just_started])
        assert "timm" not in supervisor.controller.timed
        waited = STALL_GRACE_SECONDS["cpu"] + (STALL_EPOCHS + 1) * member.step_seconds
        startup = member.startup_seconds  # as planned: what it waited since is all for an epoch
        long_ago = SimpleNamespace(unit=unit, task=task, started=time.monotonic() - startup - waited, process=fold,
                                   log=log)
        say_ready_at(tmp_path / "fold", long_ago.started + startup)
        with caplog.at_level("WARNING", logger="runner"):
            supervisor.controller.watch([long_ago])
        assert fold.poll() is None  # asked for its stacks, not stopped
    finally:
        fold.kill()
    [action] = [a["action"] for a in supervisor.report.actions]
    assert "timm" in supervisor.controller.timed and action.startswith(f"timm: a real epoch took {waited:.3g} s")
    assert "it was in current thread: wait_for_epoch (<string>:4)" in caplog.text
    assert "stalled: no epoch for" in log.read_text() and 'line 4 in wait_for_epoch' in log.read_text()
    assert stalled(member, waited) and not stalled(member, STALL_GRACE_SECONDS["cpu"])
    # on a GPU the start also holds the CUDA context and the batch probe (7 s of cudnn.benchmark on an H200)
    on_gpu = member.model_copy(update=dict(settings=member.settings.model_copy(update=dict(device="cuda"))))
    assert not stalled(on_gpu, waited) and stalled(on_gpu, STALL_GRACE_SECONDS["cuda"] + waited)
    assert not stalled(member.model_copy(update=dict(step_seconds=0.0)), 1e6)  # nothing planned: nothing late
    compiled = member.model_copy(update=dict(settings=member.settings.model_copy(update=dict(compile=True))))
    assert not stalled(compiled, 1e6)  # its first epoch also compiles, for a time nothing predicts


def test_a_start_up_three_times_the_stall_threshold_leaves_the_pace_and_later_folds_epochs_as_planned(
        dog_breed, tmp_path, caplog):
    """On an H200 a CNN fold's cold start (CUDA, weights, cuDNN's search in the batch probe's first backward: ~47 s)
    outlasted the stall threshold and was read as the member's epoch pace ("a real epoch took 31.7 s, 1.33 s
    planned: later folds {'epochs': 1, ...}"), and the member was marked timed. Until a fold says it is ready, its
    wait is start-up: the member's start-up estimate and its folds' least time rise, its pace and epochs stay, it is
    not timed, and its first real epochs still time it."""
    from types import SimpleNamespace

    supervisor = supervisor_with_plan(dog_breed, tmp_path)
    controller = supervisor.controller
    member = controller.plan.member("timm")
    threshold = STALL_GRACE_SECONDS["cpu"] + STALL_EPOCHS * member.step_seconds
    unit = next(u for u in controller.scheduler.queue if u.fold >= 0)
    folder = tmp_path / "fold"
    folder.mkdir()
    log = tmp_path / "fold.log"
    code = "from runner.common.stacks import register; import time\nregister()\ndef probe_batch():\n    time.sleep(60)" \
           "\nprint('started', flush=True)\nprobe_batch()"
    with open(log, "a") as handle:
        fold = subprocess.Popen([sys.executable, "-c", code], stdout=handle, stderr=subprocess.STDOUT)
    try:
        while "started" not in log.read_text():
            time.sleep(0.05)
        starting = SimpleNamespace(unit=unit, task=SimpleNamespace(member=member, gpu=None, out_dir=str(folder)),
                                   started=time.monotonic() - 3 * threshold, process=fold, log=log)
        with caplog.at_level("WARNING", logger="runner"):
            controller.watch([starting])
        assert fold.poll() is None  # asked for its stacks, not stopped
    finally:
        fold.kill()
    revised = supervisor.states["timm"].member
    assert "timm" not in controller.timed and revised.name == "timm" and set(supervisor.states) == {"timm"}
    assert revised.step_seconds == member.step_seconds and revised.settings == member.settings
    assert revised.startup_seconds >= 3 * threshold - 1
    assert revised.min_fold_seconds >= member.min_fold_seconds + revised.startup_seconds - member.startup_seconds - 0.1
    later = [u.member for u in controller.scheduler.queue if u.fold >= 0]
    assert later and all(m == revised for m in later)  # their epochs and pace as planned, their start-up as seen
    [action] = [a["action"] for a in supervisor.report.actions]
    assert action.startswith("timm fold 0: not ready after") and f"its epochs stay {member.step_seconds:.3g} s" in \
        action
    assert "it was in current thread: probe_batch (<string>:4)" in caplog.text
    # it says it is ready: what it took is what was expected by now, and nothing changes
    say_ready_at(folder, time.monotonic())
    controller.watch([starting])
    assert len(supervisor.report.actions) == 1
    # its first real epochs, at the planned pace, time it: the plan stands
    for number in (1, TIMED_EPOCH):
        with open(folder / "epochs.jsonl", "a") as handle:
            handle.write(json.dumps(dict(epoch(0.0, number=number), epoch_seconds=member.step_seconds)) + "\n")
    controller.watch([starting])
    assert "timm" in controller.timed and len(supervisor.report.actions) == 1
    assert supervisor.states["timm"].member == revised


def test_a_first_epoch_a_little_off_keeps_the_plan_and_a_faster_one_revises_the_epochs(dog_breed, tmp_path):
    supervisor = supervisor_with_plan(dog_breed, tmp_path)
    member = supervisor.controller.plan.member("timm")
    supervisor.controller.retime(member, member.step_seconds * 1.05)
    assert supervisor.report.actions == () and supervisor.controller.scheduler.queue[-1].member == member
    supervisor.controller.timed.clear()
    supervisor.controller.retime(member, member.step_seconds * 1.2)  # no new plan; later folds expect what was timed
    expecting = supervisor.controller.scheduler.queue[-1].member
    assert supervisor.report.actions == () and expecting.settings == member.settings
    assert expecting.step_seconds == pytest.approx(member.step_seconds * 1.2, rel=1e-3)
    supervisor.controller.timed.clear()
    supervisor.controller.retime(member, member.step_seconds * 0.5)
    [action] = [a["action"] for a in supervisor.report.actions]
    revised = supervisor.controller.scheduler.queue[-1].member
    assert revised.name == "timm" and revised.settings.epochs > member.settings.epochs
    assert "later folds" in action and "epochs" in action


def say_ready_at(folder, at: float) -> None:
    """A fold's ready file, as `runner.engines.base.say_ready` writes it, said at `at` (monotonic)."""
    from runner.common.atomic import write_json
    from runner.engines.base import READY_FILE

    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / READY_FILE, dict(at=at, probe_seconds=0.0))


class Recording(BaseEstimator):
    """A classifier that records the rows and classes of each fit (its clones share the record)."""

    fits: list = []

    def fit(self, x, y):
        Recording.fits.append((len(x), sorted(set(y))))
        self.classes_ = np.unique(y)
        return self

    def predict_proba(self, x):
        return np.full((len(x), len(self.classes_)), 1 / len(self.classes_))


def test_a_fold_fit_is_timed_after_an_untimed_warm_up(tmp_path):
    """The planner times a fit after a warm-up; the fold's step is timed the same way, so a cold first fit's
    imports and set-up do not count as fitting."""
    Recording.fits.clear()
    x = pd.DataFrame({"a": np.arange(1000.0)})
    y = np.r_[np.zeros(990, int), np.ones(5, int), np.full(5, 2)]  # classes 1 and 2 only past row 990
    data = FoldData(x_train=x, y_train=y, x_val=x[:10], y_val=y[:10], x_test=x[:10], classes=[0, 1, 2],
                    spec=load_spec("spaceship"))
    result = train_one_shot(Recording(), data, tmp_path, time.monotonic() + 60)
    assert Recording.fits == [(WARM_ROWS + 2, [0, 1, 2]), (1000, [0, 1, 2])]  # every class in the warm-up fit
    assert result.epoch_seconds == result.train_seconds and (tmp_path / "model.pkl").exists()


class Rounds(BaseEstimator):
    """A classifier that records how many rounds each fit was asked for (its clones share the record)."""

    fits: list = []

    def __init__(self, n_estimators: int = 100):
        self.n_estimators = n_estimators

    def fit(self, x, y):
        Rounds.fits.append(self.n_estimators)
        self.classes_ = np.unique(y)
        return self

    def predict_proba(self, x):
        return np.full((len(x), len(self.classes_)), 1 / len(self.classes_))


def test_the_warm_up_fit_takes_a_few_rounds_and_the_folds_fit_all_of_its_own(tmp_path):
    """A warm-up is for imports and set-up: at a boosted head's own 100 rounds, 120 classes' warm-up on 200 rows
    took 2.1 s of a fold whose whole fit took about 3. It fits WARM_STEPS rounds (inside a pipeline too); the
    fold's model keeps its own."""
    from sklearn.pipeline import make_pipeline

    Rounds.fits.clear()
    x = pd.DataFrame({"a": np.arange(300.0)})
    y = np.arange(300) % 3
    data = FoldData(x_train=x, y_train=y, x_val=x[:10], y_val=y[:10], x_test=x[:10], classes=[0, 1, 2],
                    spec=load_spec("spaceship"))
    model = make_pipeline(Rounds(n_estimators=100))
    train_one_shot(model, data, tmp_path, time.monotonic() + 60)
    assert Rounds.fits == [WARM_STEPS, 100]
    assert model.get_params()["rounds__n_estimators"] == 100


class Slow(Rounds):
    """A classifier whose fit (not its warm-up's two rounds) takes `seconds`."""

    def __init__(self, seconds: float = 0.0, n_estimators: int = 100):
        super().__init__(n_estimators)
        self.seconds = seconds

    def fit(self, x, y):
        time.sleep(self.seconds if self.n_estimators > WARM_STEPS else 0.0)
        return super().fit(x, y)


def test_a_fit_that_ends_just_past_its_deadline_is_kept_and_one_well_past_it_is_not(tmp_path):
    """A fit cannot stop halfway; one that ended a moment past its fold's deadline is predicted within the unit's
    grace and kept, saying so, instead of throwing the whole fit away; one that ended LATE_FIT_SECONDS or more past
    it is discarded as before."""
    x = pd.DataFrame({"a": np.arange(300.0)})
    y = np.arange(300) % 3
    data = FoldData(x_train=x, y_train=y, x_val=x[:10], y_val=y[:10], x_test=x[:10], classes=[0, 1, 2],
                    spec=load_spec("spaceship"))
    for folder in ("late", "on-time", "later"):
        (tmp_path / folder).mkdir()
    result = train_one_shot(Slow(0.5), data, tmp_path / "late", time.monotonic() + 0.2)
    assert result.train_seconds >= 0.5 and result.val_pred.shape == (10, 3)
    assert "past the fold's deadline: predicted in the unit's grace" in result.message
    assert not train_one_shot(Slow(0.0), data, tmp_path / "on-time", time.monotonic() + 60).message
    with pytest.raises(DeadlineReached, match="past the fold's deadline"):
        train_one_shot(Slow(LATE_FIT_SECONDS + 0.5), data, tmp_path / "later", time.monotonic())


SLOW_ROUND_SECONDS = 0.05


def _slow_round(env) -> None:
    time.sleep(SLOW_ROUND_SECONDS)


_slow_round.order = 10  # before the deadline's callback: the round's time includes it


class SlowRounds(lgb.LGBMClassifier):
    """LightGBM's classifier whose every round takes SLOW_ROUND_SECONDS longer, as on a core another process keeps
    busy."""

    def fit(self, x, y, callbacks=None, **kw):
        return super().fit(x, y, callbacks=[_slow_round, *(callbacks or [])], **kw)


def test_a_boosted_head_stops_before_its_deadline_and_keeps_the_rounds_it_boosted(tmp_path):
    """A boosted head can stop halfway: on a busy core a pixel table's 100 rounds took over four times their
    estimate and each fold was killed mid-round at its deadline's grace with nothing kept. With rounds slowed it
    stops before its deadline, keeps the rounds it boosted (fewer than its 100, at least a booster's MIN_ROUNDS)
    and says so, and times its step as the whole fit at that pace and its least as MIN_ROUNDS of them; with a
    deadline too close for MIN_ROUNDS it fails at once for its deadline; with time to spare it boosts every
    round."""
    import pickle

    rng = np.random.default_rng(0)
    x = pd.DataFrame(rng.normal(size=(400, 5)), columns=list("abcde"))
    y = (x["a"] > 0).astype(int).to_numpy() + (x["b"] > 0).astype(int).to_numpy()
    data = FoldData(x_train=x, y_train=y, x_val=x[:50], y_val=y[:50], x_test=x[:20], classes=[0, 1, 2],
                    spec=load_spec("spaceship"))
    for folder in ("stopped", "too-close", "whole"):
        (tmp_path / folder).mkdir()
    deadline = time.monotonic() + 3.0  # 0.05 s a round: about 55 of the 100 rounds fit
    result = train_one_shot(SlowRounds(n_estimators=100, n_jobs=1, verbose=-1), data, tmp_path / "stopped", deadline)
    assert time.monotonic() < deadline + GRACE_SECONDS  # predicted and saved before the unit would be killed
    model = pickle.loads(result.checkpoint.read_bytes())
    rounds = model.booster_.current_iteration()
    assert result.stopped_by_deadline and MIN_ROUNDS <= rounds < 100, rounds
    assert f"boosted {rounds} of 100 rounds: stopped before the fold's deadline" == result.message
    assert result.epoch_seconds == pytest.approx(result.train_seconds * 100 / rounds)
    assert result.min_train_seconds == pytest.approx(result.train_seconds * MIN_ROUNDS / rounds)
    assert result.val_pred.shape == (50, 3) and np.allclose(result.val_pred.sum(axis=1), 1.0)
    assert result.test_pred.shape == (20, 3)
    close = time.monotonic() + 0.5
    with pytest.raises(DeadlineReached, match=f"fewer than {MIN_ROUNDS} is no model to blend"):
        train_one_shot(SlowRounds(n_estimators=100, n_jobs=1, verbose=-1), data, tmp_path / "too-close", close)
    assert time.monotonic() < close + GRACE_SECONDS
    whole = train_one_shot(boosted_head(True, 0), data, tmp_path / "whole", time.monotonic() + 60)
    assert not whole.stopped_by_deadline and not whole.message
    assert pickle.loads(whole.checkpoint.read_bytes()).booster_.current_iteration() == 100
    # a later fold given less than the whole fit stops with a model: the least it needs is MIN_ROUNDS rounds
    assert whole.min_train_seconds == pytest.approx(whole.train_seconds * MIN_ROUNDS / 100)


def test_a_booster_stops_once_its_loss_falls_only_by_float_dust():
    """On data a booster separates perfectly the validation log loss fell by ever smaller amounts for thousands of
    rounds, so patience never ran out; a loss that does not fall more than MIN_IMPROVEMENT below its best within
    the patience has stopped improving."""
    import time

    from runner.engines.boosting import MIN_IMPROVEMENT, PATIENCE, RoundClock

    def rounds_until_stop(fall: float) -> int:
        clock, loss = RoundClock(time.monotonic() + 60, PATIENCE), 0.01
        for iteration in range(5000):
            loss -= fall
            if clock.tick(iteration, loss, higher_better=False):
                return iteration + 1
        return 5000

    assert rounds_until_stop(MIN_IMPROVEMENT / (2 * PATIENCE)) == PATIENCE + 1
    assert rounds_until_stop(MIN_IMPROVEMENT / 10) == 5000  # past MIN_IMPROVEMENT every 11 rounds: boosting goes on


def test_a_booster_keeps_time_to_predict_every_row_as_its_model_grows():
    """Predicting grows with the rounds: with a probe that takes longer the more rounds there are, the clock stops
    while what is left of the deadline still holds predicting every validation and test row; with no rows to
    predict it boosts to the deadline's two-round margin."""
    import time

    from runner.engines.boosting import PROBE_ROWS, RoundClock

    def run(predict_rows: int) -> tuple[int, float, RoundClock]:
        clock = RoundClock(time.monotonic() + 1.5, patience=10_000, predict_rows=predict_rows)
        for iteration in range(100_000):
            time.sleep(0.005)  # a round
            # a probe: PROBE_ROWS rows through every round's trees at 2 us a row and round
            if clock.tick(iteration, -iteration, False, probe=lambda: time.sleep(2e-6 * PROBE_ROWS * clock.rounds)):
                return iteration + 1, time.monotonic(), clock
        raise AssertionError("never stopped")

    rounds, stopped, clock = run(predict_rows=20_000)  # predicting: 0.04 s a round
    assert stopped + 2e-6 * 20_000 * rounds <= clock.deadline + 0.05  # its prediction ends on time
    assert clock.row_round_seconds == pytest.approx(2e-6, rel=0.5)
    free, _, _ = run(predict_rows=0)
    assert rounds < free / 3, (rounds, free)


def test_a_probe_slowed_once_by_another_process_does_not_cut_the_boosting_short():
    """A probe takes milliseconds, so one time slice lost to another process on a shared core makes it many times
    longer: here every probe's first timing is 15x what predicting takes. The reserve comes from the shortest
    timing of each probe, so the rounds' estimate is the true one and boosting runs to the deadline's margin."""
    import time

    from runner.engines.boosting import PROBE_ROWS, RoundClock

    clock, calls = RoundClock(time.monotonic() + 1.0, patience=10_000, predict_rows=20_000), []
    slowed = 15 * 2e-6  # seconds a row and round, as the first timing of each probe takes it

    def probe():  # 2 us a row and round, 15x that on the first call of each probe (a lost time slice)
        calls.append(clock.rounds)
        time.sleep(2e-6 * PROBE_ROWS * clock.rounds * (15 if calls.count(clock.rounds) == 1 else 1))

    iteration = 0
    while not clock.tick(iteration, -iteration, False, probe=probe):
        time.sleep(0.005)
        iteration += 1
    # the probe sleeps 2 ms a round, and a sleep on a busy core overshoots by a time slice (3.7e-6 twice in whole
    # suites): the estimate is held below a third of the slowed timing's, not to the sleep's precision
    assert 1e-6 < clock.row_round_seconds < slowed / 3
    assert clock.rounds > 2  # the slowed timing's reserve (1.8 s at round 1) would have stopped it at the first
    # not stopped seconds early: it ended where the reserve at its estimate meets the deadline
    assert clock.deadline - time.monotonic() < 2 * clock.predict_reserve() + 0.1


def test_a_lightgbm_fold_whose_prediction_is_heavy_still_ends_by_its_deadline(tmp_path):
    """Seven classes, 40k rows to predict: the fold stops boosting early enough to predict them all before the
    unit would be killed (5 s past its deadline; 12 s in all without the reserve on a quiet core). Within 3 s of it:
    on a core another test's run takes half of, prediction slows after its cost was measured (7.3 s once)."""
    import time

    from runner.planning.registry import get_engine
    from runner.engines.base import FoldData

    rng = np.random.default_rng(0)
    x = pd.DataFrame(rng.normal(size=(60_000, 20)), columns=[f"f{i}" for i in range(20)])
    y = (x["f0"] * 3 + x["f1"] + rng.normal(size=len(x))).pipe(lambda v: pd.cut(v, 7, labels=False)).to_numpy()
    data = FoldData(load_spec("tabular-playground-series-dec-2021"), list(range(1, 8)), x[:20_000], y[:20_000],
                    x[20_000:40_000], y[20_000:40_000], x[40_000:])
    engine = get_engine("lightgbm")
    settings = engine.Settings(threads=1, learning_rate=0.02, patience=10_000, max_rounds=100_000)
    started = time.monotonic()
    result = engine.train_fold(settings, data, tmp_path, deadline=started + 6)
    assert time.monotonic() - started < 9 and result.test_pred.shape == (20_000, 7)
    assert result.predict_seconds > 0.05 and result.epochs >= 20
