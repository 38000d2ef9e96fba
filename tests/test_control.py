"""What a run learns while it trains: the monitor's rules on recorded epoch lines and samples, and re-planning
after a first epoch or fold far from the plan (injected timings, no GPU)."""
import pytest

from runner.control import Change, combine, monitor_rules, needs_replan
from runner.engines import get_engine
from runner.engines.boosting import RoundCost
from runner.engines.vision import ImageSettings
from runner.hardware import GiB
from runner.measure import Candidate, ImageCosts, Throughput
from runner.planner import make_plan, replan_context
from runner.portfolio import DataShape, Member
from runner.profiles import profile
from runner.spec import load_spec

GPU = ImageSettings(model="convnext_small", image_size=224, device="cuda", batch_size=64, num_workers=4,
                    gpu_memory_fraction=0.8, per_gpu=1)


def cnn(settings=GPU, per_gpu=1):
    return Member(name="timm", engine="timm", slot="gpu", settings=settings, folds=5, per_gpu=per_gpu, threads=5)


def epoch(memory_share, data_wait=0.02, number=1):
    """An epoch line as runner.cnn writes it."""
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
    """A supervisor on the dog-breed demo planned for the 4-CPU profile from hand-made costs, its scheduler
    queued but not started."""
    from runner.bags import MemberState
    from runner.budget import Budget
    from runner.planner import data_shape
    from runner.run import Supervisor
    from runner.slots import Scheduler

    budget = Budget.start(1800)
    supervisor = Supervisor(DOG, dog_breed / "prepared" / "public", tmp_path, budget)
    supervisor.load_data()
    supervisor.hardware, supervisor.costs = profile("cpu"), {"timm": COSTS}
    supervisor.plan = make_plan(DOG, profile("cpu"), 1500, data_shape(supervisor.dataset), supervisor.costs)
    supervisor.states = {m.name: MemberState(m) for m in supervisor.plan.members}
    supervisor.scheduler = Scheduler(supervisor.plan, budget, supervisor.make_task, supervisor.on_result,
                                     on_action=supervisor.on_action)
    return supervisor


def test_a_first_epoch_far_slower_replaces_the_cnns_pending_folds(dog_breed, tmp_path):
    supervisor = supervisor_with_plan(dog_breed, tmp_path)
    member = supervisor.plan.member("timm")
    supervisor._retime(member, member.step_seconds * 20)
    queued = {u.member.name for u in supervisor.scheduler.queue if u.fold >= 0}
    assert queued == {"timm-2"} and "timm-2" in supervisor.states
    assert supervisor.states["timm-2"].member.settings.model != member.settings.model or \
        supervisor.states["timm-2"].member.folds < member.folds
    [action] = [a["action"] for a in supervisor.report.actions]
    assert "re-planned as timm-2" in action and "planned" in action
    assert all(r.status == "skipped" and "re-planned" in r.message for r in supervisor.results if r.member == "timm")


def test_a_first_epoch_a_little_off_changes_nothing_and_a_faster_one_revises_the_epochs(dog_breed, tmp_path):
    supervisor = supervisor_with_plan(dog_breed, tmp_path)
    member = supervisor.plan.member("timm")
    supervisor._retime(member, member.step_seconds * 1.2)
    assert supervisor.report.actions == () and supervisor.scheduler.queue[-1].member == member
    supervisor.timed.clear()
    supervisor._retime(member, member.step_seconds * 0.5)
    [action] = [a["action"] for a in supervisor.report.actions]
    revised = supervisor.scheduler.queue[-1].member
    assert revised.name == "timm" and revised.settings.epochs > member.settings.epochs
    assert "later folds" in action and "epochs" in action
