"""Which GPUs a run may use: lists in every form CUDA reads, resolved against a machine's cards given as data,
and every fold process handed its own card; no GPU is needed, none is pretended."""
import dataclasses
import json

import pandas as pd
import pytest

from conftest import run_cli
from runner.units import processes
from runner.machine.devices import Card, DeviceError, parse, select, visible
from runner.planning.registry import get_engine
from runner.engines.base import TARGET_MEMORY_FRACTION
from runner.machine.hardware import GiB, Gpu, Hardware, cuda_fails, spec_sheet_tflops, usable
from runner.planning.planner import make_plan
from runner.planning.portfolio import DataShape
from runner.machine.profiles import profile
from runner.units.scheduler import card
from runner.competition.catalog import load_spec
from test_planner import gpu_costs

A, B, C = "GPU-1a2b3c4d-0000-0000-0000-000000000000", "GPU-5e6f7a8b-0000-0000-0000-000000000000", \
    "GPU-5e6f9999-0000-0000-0000-000000000000"
MIG = "MIG-9c8d7e6f-0000-0000-0000-000000000000"
MACHINE = (Card(A, 0), Card(B, 1), Card(C, 2), Card(MIG))  # three cards, a MIG instance on one of them


def test_every_form_cuda_reads_is_read_and_hiding_lists_mean_no_gpu():
    assert parse("2, 5", "--gpus") == ("2", "5")
    assert parse(f"{A},{MIG}", "CUDA_VISIBLE_DEVICES") == (A, MIG)
    assert parse("MIG-GPU-1a2b3c4d/1/0", "CUDA_VISIBLE_DEVICES") == ("MIG-GPU-1a2b3c4d/1/0",)  # the R450 form
    for hidden in ("", "-1", "none", " NONE "):
        assert parse(hidden, "--gpus") == ()


@pytest.mark.parametrize("text", ["gpu2", "0,,1", "cuda:0", "2;5"])
def test_a_list_it_cannot_read_is_named_with_its_source(text):
    with pytest.raises(DeviceError, match="CUDA_VISIBLE_DEVICES=.*cannot read"):
        parse(text, "CUDA_VISIBLE_DEVICES")


def test_indices_uuids_prefixes_and_mig_instances_resolve_to_uuids_in_the_lists_order():
    assert select(("2", "0"), MACHINE, "--gpus") == (C, A)
    assert select(("GPU-1a2b", MIG.lower()), MACHINE, "--gpus") == (A, MIG)  # a unique prefix, any case


@pytest.mark.parametrize("entries,why", [(("7",), "is not a GPU of this machine"),
                                         (("GPU-5e6f",), "names more than one card"),
                                         (("0", A), "a second time")])
def test_a_card_this_machine_lacks_or_an_ambiguous_one_is_an_error(entries, why):
    with pytest.raises(DeviceError, match=why) as raised:
        select(entries, MACHINE, "--gpus")
    assert str(raised.value).startswith("--gpus")
    if "not a GPU" in why:
        assert f"0 ({A})" in str(raised.value) and MIG in str(raised.value)  # it says which cards there are


def test_without_a_driver_a_list_naming_gpus_is_an_error_and_no_list_is_the_cpu():
    with pytest.raises(DeviceError, match="--gpus='1'.*no NVIDIA driver"):
        visible("1", {}, None)
    with pytest.raises(DeviceError, match="CUDA_VISIBLE_DEVICES='0'"):
        visible(None, {"CUDA_VISIBLE_DEVICES": "0"}, None)
    assert visible(None, {}, None) == ()
    assert visible("none", {"CUDA_VISIBLE_DEVICES": "0"}, None) == ()  # --gpus wins over the inherited list
    assert visible(None, {"CUDA_VISIBLE_DEVICES": ""}, None) == ()


def test_a_fold_gets_its_slots_own_card_and_a_cpu_unit_none():
    plan = make_plan(load_spec("dog-breed"), profile("a10-24gb"), 600,
                     DataShape(2000, 200, classes=10, inputs=frozenset({"image"})))
    plan = plan.model_copy(update=dict(gpus=2, devices=(B, C)))  # a runner restricted to two cards
    assert [card(plan, g) for g in (0, 1, None)] == [B, C, None]
    env = processes.unit_environment(4, C)
    assert env["CUDA_VISIBLE_DEVICES"] == C and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert processes.unit_environment(4, None)["CUDA_VISIBLE_DEVICES"] == ""  # never the parent's list


def test_memory_others_hold_lowers_the_target_for_the_card_and_the_plan_says_so():
    card = profile("a10-24gb").gpus[0]
    busy = Gpu(card.name, 24 * GiB, 18 * GiB, card.compute_capability, card.bf16_tflops, device=B)
    idle = Gpu(card.name, 24 * GiB, 24 * GiB - GiB // 2, card.compute_capability, card.bf16_tflops, device=A)
    assert idle.others_bytes == 0  # a driver's own half GiB is nobody's
    assert busy.memory_target(TARGET_MEMORY_FRACTION) == pytest.approx(0.8 - 6 / 24)
    hardware = Hardware((idle, busy), 30, 200 * GiB, 8 * GiB, 500 * GiB)
    assert hardware.tightest_gpu is busy
    plan = make_plan(load_spec("dog-breed"), hardware, 3600,
                     DataShape(9199, 1023, classes=120, inputs=frozenset({"image"})), {"timm": gpu_costs()})
    assert plan.devices == (A, B)
    assert any("GPU 1" in r and "6.0 GiB of 24 GiB in use by other processes" in r and "55%" in r
               for r in plan.reasons), plan.reasons
    settings = plan.member("timm").settings
    assert settings.memory_target == pytest.approx(0.55)
    assert settings.gpu_memory_fraction <= 0.55 + 0.1  # planned on the busy card's room, not the idle one's


def test_a_probed_card_gets_its_spec_sheet_throughput_by_name():
    assert spec_sheet_tflops("NVIDIA H100 80GB HBM3") == 989.0
    assert spec_sheet_tflops("NVIDIA H100 PCIe") == 756.0
    assert spec_sheet_tflops("NVIDIA A10G") == 70.0 and spec_sheet_tflops("NVIDIA A10") == 125.0
    assert spec_sheet_tflops("Some Future Card") == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("args,env,named", [(["--gpus", "GPU-00000000-dead"], {}, "--gpus"),
                                            ([], {"CUDA_VISIBLE_DEVICES": "cuda:1"}, "CUDA_VISIBLE_DEVICES")])
def test_a_gpu_list_that_cannot_be_used_is_said_and_the_baseline_kept(spaceship, tmp_path, args, env, named):
    """Never a silent run on the CPU: the command says what is wrong with which list, and exits 2 with the
    sample's submission in place."""
    public, out = spaceship / "prepared" / "public", tmp_path / "out"
    # the run ends at its error, seconds in: the budget only has to outlast its start and the sample's baseline on a
    # busy core (at 8 s the watchdog once fired while a slow start was still writing it: exit 124, not 2)
    result = run_cli("run", "spaceship", "--data", str(public), "--budget", "60s", "--out", str(out), *args, env=env)
    assert result.returncode == 2, result.stderr
    assert json.loads((out / "report.json").read_text())["wall_seconds"] < 30  # it ended at the error
    assert f"runner: error: {named}" in result.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "error" and report["error"].startswith(named)
    sample = pd.read_csv(public / "sample_submission.csv")
    assert pd.read_csv(out / "submission.csv")["PassengerId"].tolist() == sample["PassengerId"].tolist()


def test_a_gpu_plan_with_nothing_measured_still_trains_on_the_gpu_with_loaders():
    """A probed card whose measuring failed: the smallest model, but on the card in its precision, not a CPU-class
    plan with one thread feeding an H100."""
    plan = make_plan(load_spec("dog-breed"), profile("h100-80gb"), 600,
                     DataShape(9199, 1023, classes=120, inputs=frozenset({"image"})))
    member = plan.member("timm")
    s = member.settings
    assert member.slot == "gpu" and s.device == "cuda" and s.precision == "bf16"
    assert s.num_workers >= 1 and s.pin_memory and member.per_gpu == 1
    assert member.threads == 1 + s.num_workers <= plan.cpus


def test_a_card_torch_cannot_start_is_dropped_with_the_reason_in_the_plan():
    """NVML seeing a card does not mean this torch can use it (a driver older than its CUDA): a child process is
    asked to start CUDA, and when it cannot the plan is for the CPU and says why. On this machine the child
    really fails: no driver."""
    why = cuda_fails("0")
    assert why and "Traceback" not in why
    card = profile("h100-80gb").gpus[0]
    gpus, notes = usable((card,), why)
    assert gpus == () and "cannot start CUDA" in notes[0] and why in notes[0]
    assert usable((card,), None) == ((card,), ())
    hardware = Hardware(gpus, 8, 32 * GiB, 4 * GiB, 100 * GiB, notes=notes)
    plan = make_plan(load_spec("dog-breed"), hardware, 600, DataShape(2000, 200, classes=10,
                                                                       inputs=frozenset({"image"})))
    assert notes[0] in plan.reasons and plan.member("timm").settings.device == "cpu"


def test_without_a_compiler_long_gpu_folds_are_not_compiled_and_the_plan_says_why():
    data = DataShape(50_000, 5_000, classes=120, inputs=frozenset({"image"}))  # folds of over 20 minutes
    with_cc = make_plan(load_spec("dog-breed"), profile("a10-24gb"), 36_000, data, {"timm": gpu_costs()})
    without = make_plan(load_spec("dog-breed"), dataclasses.replace(profile("a10-24gb"), compiler=False), 36_000,
                        data, {"timm": gpu_costs()})
    assert with_cc.member("timm").settings.compile  # long folds: compiling pays
    assert not without.member("timm").settings.compile
    assert any("no C compiler or Python.h" in r for r in without.member("timm").reasons)


def test_measuring_on_a_gpu_gets_a_floor_the_budget_can_spare():
    """On a GPU the measuring process pays its start, imports and CUDA context before timing anything: 5% of a
    3-minute budget (9 s) timed nothing, so a GPU we are on gets 20 s where the budget spares them."""
    timm = get_engine("timm")
    gpu, cpu = profile("h100-80gb"), profile("cpu")
    assert timm.measure_seconds(180, cpu, here=True) == pytest.approx(9.0)
    assert timm.measure_seconds(180, gpu, here=True) == pytest.approx(20.0)
    assert timm.measure_seconds(60, gpu, here=True) == pytest.approx(7.2)  # at most 12% of a short budget
    assert timm.measure_seconds(180, gpu, here=False) == pytest.approx(9.0)  # planning for a card elsewhere
    assert get_engine("lightgbm").measure_seconds(3600, gpu, here=True) == get_engine("lightgbm").measure_seconds(
        3600, cpu, here=True)


def test_a_plan_whose_pinned_batches_would_fill_the_ram_says_so():
    data = DataShape(50_000, 5_000, classes=120, inputs=frozenset({"image"}))
    roomy = make_plan(load_spec("dog-breed"), profile("h100-80gb"), 7200, data, {"timm": gpu_costs()})
    small = dataclasses.replace(profile("h100-80gb"), ram_bytes=4 * GiB)
    tight = make_plan(load_spec("dog-breed"), small, 7200, data, {"timm": gpu_costs()})
    assert not any("pinned batches" in r for r in roomy.member("timm").reasons)
    assert any("pinned batches may hold" in r for r in tight.member("timm").reasons)


def test_on_a_gpu_candidates_are_timed_near_the_batch_they_will_train_at():
    """Batch 32 on an H100 times kernel launches more than the model: each candidate is timed at the largest batch
    (up to 256) whose memory estimate fits half the card, never below its own."""
    from runner.engines.timm.costs import Candidate
    from runner.engines.timm.measure import TIMING_BATCH_MAX, timing_batches

    memory = gpu_costs().memory
    small = [Candidate("resnet18", 224, "bf16", 32)]
    large = [Candidate(m.model, m.image_size, "bf16", 32) for m in memory]
    assert [c.batch for c in timing_batches(small, memory, 80 * GiB)] == [TIMING_BATCH_MAX]
    on_a10 = timing_batches(large, memory, 24 * GiB)
    for candidate, estimate in zip(on_a10, memory):
        assert 32 <= candidate.batch <= TIMING_BATCH_MAX and candidate.batch % 8 == 0
        if candidate.batch > 32:
            assert estimate.total(candidate.batch) <= 0.5 * 24 * GiB
    assert min(c.batch for c in on_a10) < TIMING_BATCH_MAX  # the heaviest rungs are held back by the estimate
    assert timing_batches(small, (), 80 * GiB) == small  # nothing estimated: its own batch
