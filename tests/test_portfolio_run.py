"""The portfolio in slots: an engine from outside the package through the whole supervisor, GPU and CPU slots at
once, thread accounting (a run that uses its window, or says why it did not: test_e2e.py)."""
import json
import pickle

import pytest

from conftest import TOY_ENGINE, run_cli, training_share
from pace import paced
from runner.common.budget import Budget
from runner.data.loading import load_dataset
from runner.units.tasks import PREPARE, FoldTask
from runner.competition.grade import grade
from runner.planning.portfolio import Member, Plan
from runner.units.scheduler import Scheduler
from runner.competition.catalog import load_spec
from toy_engine import ToySettings


def run(competition, root, out, budget, *extra, env=None):
    result = run_cli("run", competition, "--data", str(root / "prepared" / "public"), "--budget", f"{budget}s",
                     "--out", str(out), *extra, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    graded = grade(out / "submission.csv", load_spec(competition), root / "prepared" / "private")
    return report, graded, result


@pytest.mark.slow
def test_an_engine_from_outside_the_package_runs_through_the_supervisor_and_ends_when_nothing_improves(
        spaceship, tmp_path):
    out = tmp_path / "out"
    # 40 s, stretched by the machine's pace (tests/pace.py): on a slower CPU's shared core its folds took the window
    report, graded, result = run("spaceship", spaceship, out, paced(40), "--engines", "toy", env=TOY_ENGINE)
    assert graded.valid_submission
    toy = [m for m in report["members"] if m["engine"] == "toy"]
    # every fold planned: five where the window is 30 s or more at planning, three where a shared core's start left
    # less (planned at 5.1 s, a 28.9 s window)
    folds = report["plan"]["folds"]
    assert folds in (3, 5), folds
    assert toy[0]["name"] == "toy" and toy[0]["folds_done"] == folds and toy[0]["weight"] > 0
    assert all((out / "members" / "toy" / str(k) / "toy.json").is_file() for k in range(folds))
    # its model ignores the training rows, so every extra member predicts the same: CV stops improving
    assert len(toy) >= 6 and all(m["gain"] == 0 for m in toy[1:])
    assert "CV no longer improving" in report["stop_reason"]
    assert training_share(report) < 0.8
    assert "toy" in result.stderr  # the member table


# A table run that uses its window with several engines blended (or says why it stopped): asserted on the
# end-to-end spaceship run (test_e2e.py::test_spaceship_beats_the_baseline_within_budget), the same command and
# plan at a longer budget, rather than on a second run of its own


@pytest.fixture()
def scheduled(spaceship, tmp_path, monkeypatch):
    """A scheduler over hand-made toy members on this machine's cores, the dataset handed over as a run would."""
    monkeypatch.setenv("RUNNER_ENGINES", TOY_ENGINE["RUNNER_ENGINES"])
    spec = load_spec("spaceship")
    dataset = load_dataset(spec, spaceship / "prepared" / "public", tmp_path)
    path = tmp_path / "dataset.pkl"
    path.write_bytes(pickle.dumps(dataset))

    def make(plan: Plan, seconds: float = 30) -> Scheduler:
        def task(unit, deadline, gpu, threads):
            out = tmp_path / unit.member.name / str(unit.fold)
            prepared = tmp_path / "prepared.pkl"  # what a member with a prepare step reads
            if unit.fold == PREPARE:
                return FoldTask(unit.member, PREPARE, str(path), str(out), deadline, threads, gpu,
                                prepared=str(prepared))
            data = prepared if unit.member.engine == "toyprep" else path
            return FoldTask(unit.member, unit.fold, str(data), str(out), deadline, threads, gpu)

        actions = []
        scheduler = Scheduler(plan, Budget.start(seconds, cut=0.9), task, on_result=lambda r: None,
                              on_action=actions.append)
        scheduler.actions = actions
        return scheduler

    return make


def toy(name, slot, threads=1, sleep=1.0, folds=2, per_gpu=0, data_wait=0.0):
    settings = ToySettings(sleep=sleep, threads=threads, data_wait=data_wait)
    return Member(name=name, engine="toy", slot=slot, settings=settings,
                  folds=folds, threads=threads, per_gpu=per_gpu, fold_seconds=sleep + 0.5, min_fold_seconds=0.5,
                  max_fold_seconds=sleep + 10)


def overlap(a, b) -> bool:
    return a.start < b.end and b.start < a.end


def test_a_gpu_member_and_a_cpu_member_run_side_by_side(scheduled):
    # the "GPU" member computes on the CPU here; the scheduler only sees its slot
    plan = Plan(members=(toy("cnn", "gpu", per_gpu=1, sleep=2.0), toy("trees", "cpu", sleep=1.0, folds=3)),
                folds=2, cpus=2, gpus=1)
    scheduler = scheduled(plan)
    scheduler.run()
    records = {(r.member, r.fold): r for r in scheduler.records}
    assert all(r.status == "completed" for r in records.values()), records
    assert {r.lane for r in records.values() if r.member == "cnn"} == {"gpu 0"}
    assert {r.lane for r in records.values() if r.member == "trees"} == {"cpu 0"}
    gpu_units = [r for r in records.values() if r.member == "cnn"]
    cpu_units = [r for r in records.values() if r.member == "trees"]
    assert all(any(overlap(g, c) for c in cpu_units) for g in gpu_units)  # every GPU fold had a CPU rival
    assert not overlap(*gpu_units)  # one fold per GPU: the second waited for the first


def test_units_held_never_exceed_what_the_runs_memory_holds(scheduled):
    """Four one-core folds on four cores, but memory for two: never more than two at once, and a plan whose unit
    needs more than all of it still runs its units, one at a time."""
    GiB = 2**30
    plan = Plan(members=(toy("trees", "cpu", sleep=0.6, folds=4),), folds=4, cpus=4, unit_bytes=3 * GiB,
                memory_bytes=7 * GiB)
    for memory, most in ((7 * GiB, 2), (GiB, 1)):
        scheduler = scheduled(plan.model_copy(update=dict(memory_bytes=memory)))
        scheduler.run()
        records = [r for r in scheduler.records if r.status == "completed"]
        assert len(records) == 4
        at_once = max(sum(1 for r in records if r.start <= moment < r.end)
                      for moment in (r.start + 0.01 for r in records))
        assert at_once == most, (memory, at_once)


def test_threads_held_never_exceed_the_cores(scheduled):
    plan = Plan(members=(toy("wide", "cpu", threads=2, sleep=0.6, folds=3), toy("narrow", "cpu", sleep=0.6, folds=4),
                         toy("wide2", "cpu", threads=2, sleep=0.6, folds=2)), folds=3, cpus=2)
    scheduler = scheduled(plan)
    scheduler.run()
    records = [r for r in scheduler.records if r.status == "completed"]
    assert len(records) == 9
    for moment in sorted({r.start + 0.01 for r in records}):
        held = sum(r.threads for r in records if r.start <= moment < r.end)
        assert held <= 2, (moment, held)
    narrow = [r for r in records if r.member == "narrow"]
    assert any(overlap(a, b) for a in narrow for b in narrow if a is not b)  # 1-thread folds do run two at once
    starts = [min(r.start for r in records if r.member == m) for m in ("wide", "narrow", "wide2")]
    assert starts == sorted(starts)  # CPU members start in plan order


def test_a_fold_planned_for_more_cores_than_are_left_runs_on_those_left_and_holds_nothing_back(scheduled, tmp_path):
    """Other processes took a core after the plan (the run now has 1): a member planned for 2 threads per fold
    runs on 1, rather than waiting, with the members after it, for a core that may never come back."""
    plan = Plan(members=(toy("wide", "cpu", threads=2, sleep=0.2, folds=2), toy("narrow", "cpu", sleep=0.2)),
                folds=2, cpus=1)
    scheduler = scheduled(plan)
    scheduler.run()
    assert sorted((r.member, r.status, r.threads) for r in scheduler.records) == \
        [("narrow", "completed", 1)] * 2 + [("wide", "completed", 1)] * 2
    for fold in (0, 1):  # the fold itself used the one core it was given, not the two its settings planned
        assert json.loads((tmp_path / "wide" / str(fold) / "toy.json").read_text())["threads"] == 1


def test_a_gpu_fold_waiting_on_its_loader_holds_cpu_members_back(scheduled):
    # the GPU fold reports an epoch that spent 60% of its time waiting for data: its loader needs the cores
    plan = Plan(members=(toy("cnn", "gpu", per_gpu=1, sleep=2.0, folds=2, data_wait=0.6),
                         toy("trees", "cpu", sleep=0.3, folds=2)), folds=2, cpus=2, gpus=1)
    scheduler = scheduled(plan)
    scheduler.run()
    cnn = next(r for r in scheduler.records if r.member == "cnn" and r.fold == 0)
    trees = [r for r in scheduler.records if r.member == "trees"]
    assert all(r.status == "completed" for r in scheduler.records)
    assert sum(r.start < cnn.end - 0.5 for r in trees) <= 1  # at most one started before the epoch line appeared
    assert any("waited on its loader for 60%" in a for a in scheduler.actions)


def test_a_prepare_step_that_computes_on_a_gpu_gets_one_and_its_cpu_folds_run_beside_the_gpu_folds(scheduled,
                                                                                                    tmp_path):
    """Embeddings computed once through a network want the GPU (`prepare_slot`), while the head fitted on them in
    each fold wants cores: the prepare step holds a GPU and sees it, its folds take CPU slots beside the CNN's."""
    embeddings = toy("embeddings", "cpu", sleep=0.3, folds=2).model_copy(
        update=dict(engine="toyprep", prepare_slot="gpu", prepare_seconds=0.5))
    plan = Plan(members=(embeddings, toy("cnn", "gpu", per_gpu=1, sleep=1.0)), folds=2, cpus=2, gpus=1,
                devices=("GPU-0f1e",))
    scheduler = scheduled(plan)
    scheduler.run()
    records = {(r.member, r.fold): r for r in scheduler.records}
    assert all(r.status == "completed" for r in records.values()), records
    prepare = records[("embeddings", PREPARE)]
    assert prepare.lane == "gpu 0" and {records[("embeddings", f)].lane[:3] for f in (0, 1)} == {"cpu"}
    assert json.loads((tmp_path / "prepare_devices.json").read_text()) == {"cuda": "GPU-0f1e"}
    cnn = [r for r in records.values() if r.member == "cnn"]
    assert all(c.start >= prepare.end - 1e-3 for c in cnn)  # the GPU was the prepare step's while it ran
    assert any(overlap(c, records[("embeddings", f)]) for c in cnn for f in (0, 1))


def test_a_fold_killed_by_sigkill_loses_only_itself(scheduled):
    member = toy("trees", "cpu", sleep=0.2, folds=4)
    member = member.model_copy(update=dict(settings=member.settings.model_copy(update=dict(die_in_fold=1))))
    scheduler = scheduled(Plan(members=(member,), folds=4, cpus=2))
    scheduler.run()
    by_fold = {r.fold: r for r in scheduler.results}
    assert by_fold[1].status == "failed" and "exited with code -9" in by_fold[1].message
    assert [by_fold[k].status for k in (0, 2, 3)] == ["completed"] * 3
