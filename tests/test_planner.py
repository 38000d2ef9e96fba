"""The planner on hardware we are not on: Hardware values and hand-made costs, no GPU needed."""
import json
import time

import numpy as np
import pandas as pd
import pytest

from runner.errors import RunnerError
from runner.hardware import GiB
from runner.engines.gbm import measure_rounds
from runner.measure import Candidate, Costs, RoundCost, Throughput
from runner.memory import MemoryEstimate
from runner.planner import CPU_CANDIDATES, GPU_CANDIDATES, DataShape, Plan, image_candidates, make_plan
from runner.profiles import PROFILES, profile
from runner.spec import load_spec

DOG = load_spec("dog-breed")
DOG_DATA = DataShape(n_train=9199, n_test=1023, classes=120)
# per-sample activation bytes at 224 px in bf16, roughly what estimate_memory reports for these models
PER_SAMPLE = {"convnext_small": 190e6, "convnext_tiny": 130e6, "efficientnet_b0": 110e6, "resnet18": 30e6}
PARAMS = {"convnext_small": 50e6, "convnext_tiny": 28e6, "efficientnet_b0": 5.3e6, "resnet18": 11.7e6}
GFLOPS = {"convnext_small": 8.7e9, "convnext_tiny": 4.5e9, "efficientnet_b0": 0.4e9, "resnet18": 1.8e9}


def gpu_costs(precision="bf16"):
    memory = tuple(MemoryEstimate(m, s, precision, int(PARAMS[m]), 0, int(PER_SAMPLE[m] * (s / 224) ** 2))
                   for m, s in GPU_CANDIDATES)
    flops = {f"{m}@{s}": int(2 * GFLOPS[m] * (s / 224) ** 2) for m, s in GPU_CANDIDATES}
    return Costs(memory=memory, flops=flops)


def cpu_costs(img_per_s: dict):
    """Throughput on a CPU: {(model, size, precision): training images per second}."""
    return Costs(throughput=tuple(
        Throughput(Candidate(m, s, p, 32), "cpu", 1 / rate, 1 / (3 * rate)) for (m, s, p), rate in img_per_s.items()))


def plan_on(name, window=3600, data=DOG_DATA, costs=None, spec=DOG):
    return make_plan(spec, profile(name), window, data, costs or gpu_costs())


def test_every_profile_parses_and_unknown_ones_are_named():
    assert set(PROFILES) >= {"cpu", "a10-24gb", "l4-24gb", "a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb"}
    assert profile("A100-40GB").gpus[0].memory_bytes == 40 * GiB
    assert profile("cpu").gpus == ()
    with pytest.raises(RunnerError, match="v100"):
        profile("v100")


def test_more_gpu_memory_gives_a_larger_batch_or_more_slots():
    a10, a100, h100 = (plan_on(p) for p in ("a10-24gb", "a100-40gb", "h100-80gb"))
    for small, large in ((a10, a100), (a100, h100)):
        assert (large.batch_size, large.slots_per_gpu) > (small.batch_size, small.slots_per_gpu) or \
            large.batch_size * large.slots_per_gpu > small.batch_size * small.slots_per_gpu
    for plan in (a10, a100, h100):
        assert plan.device == "cuda" and plan.model == "convnext_small"
        assert 0.5 <= plan.gpu_memory_fraction <= 0.9, plan.gpu_memory_fraction
        assert plan.precision == "bf16" and plan.channels_last and plan.num_workers >= 1 and plan.pin_memory


def test_a_memory_bound_batch_accumulates_gradients():
    hungry = Costs(memory=tuple(MemoryEstimate(m, s, "bf16", int(PARAMS[m]), 0, int(2e9)) for m, s in GPU_CANDIDATES),
                   flops=gpu_costs().flops)
    plan = plan_on("a10-24gb", costs=hungry)
    assert plan.batch_size < 64 and plan.batch_size * plan.accumulation >= 64
    assert any("accumulation" in r for r in plan.reasons)


def test_gpu_without_bf16_plans_fp16():
    plan = make_plan(DOG, profile("a10-24gb").__class__(
        (profile("a10-24gb").gpus[0].__class__("Tesla T4", 16 * GiB, 16 * GiB, (7, 5), 65.0),), 8, 32 * GiB,
        8 * GiB, 100 * GiB), 3600, DOG_DATA, gpu_costs("fp16"))
    assert plan.precision == "fp16"


def test_cpu_only_plans_a_small_model_in_cpu_slots():
    rates = {("mobilenetv3_small_100", 64, "fp32"): 900, ("mobilenetv3_small_100", 64, "bf16"): 450,
             ("mobilenetv3_small_100", 96, "fp32"): 600, ("resnet18", 96, "bf16"): 200, ("resnet18", 96, "fp32"): 90}
    plan = make_plan(DOG, profile("cpu"), 1800, DataShape(960, 240, classes=120), cpu_costs(rates))
    assert plan.device == "cpu" and (plan.model, plan.image_size) in CPU_CANDIDATES
    assert plan.slots_per_gpu == 0 and plan.slots * plan.threads <= profile("cpu").cpus
    assert plan.num_workers == 0 and plan.gpu_memory_fraction == 0
    assert plan.precision == "bf16" if plan.model == "resnet18" else "fp32"  # the faster measured one


def test_a_tiny_budget_plans_fewer_folds_and_a_cheaper_model():
    rates = {("mobilenetv3_small_100", 64, "fp32"): 900, ("mobilenetv3_small_100", 96, "fp32"): 600,
             ("resnet18", 96, "bf16"): 200}
    data = DataShape(960, 240, classes=120)
    roomy = make_plan(DOG, profile("cpu"), 1800, data, cpu_costs(rates))
    tight = make_plan(DOG, profile("cpu"), 60, data, cpu_costs(rates))
    assert roomy.folds == DOG.folds and roomy.model == "resnet18"
    assert tight.folds < roomy.folds and tight.epochs < roomy.epochs
    assert (tight.model, tight.image_size) == ("mobilenetv3_small_100", 64)
    assert tight.training_seconds <= 60 * 1.1 or any("no candidate fits" in r for r in tight.reasons)


def test_gpu_folds_fit_the_window():
    plan = plan_on("a10-24gb", window=600)
    assert plan.training_seconds <= 600
    assert all(isinstance(r, str) and r for r in plan.reasons)


def test_nothing_measured_falls_back_to_the_smallest_model_with_a_reason():
    plan = make_plan(DOG, profile("cpu"), 600, DataShape(960, 240, classes=120), Costs())
    assert (plan.model, plan.image_size) == CPU_CANDIDATES[-1]
    assert any("nothing was measured" in r for r in plan.reasons)


def test_unmeasured_small_tables_run_folds_side_by_side_and_large_ones_take_every_core():
    spaceship = load_spec("spaceship")
    small = make_plan(spaceship, profile("cpu"), 600, DataShape(8000, 900, 14))
    large = make_plan(spaceship, profile("cpu"), 600, DataShape(800_000, 100_000, 31))
    assert (small.slots, small.threads) == (4, 1)
    assert (large.slots, large.threads) == (1, 4)


def rounds(*measured):
    """Costs of boosting rounds: (threads, boosters at once, seconds per round) on 8000 rows."""
    return Costs(rounds=tuple(RoundCost(t, b, 8000, s) for t, b, s in measured))


TABLE = DataShape(10_000, 1000, 14, classes=2)  # folds train on 8000 rows: no scaling of the timed rows


def test_measured_rounds_choose_how_to_split_the_cores():
    spaceship = load_spec("spaceship")
    # 4 one-thread boosters at once barely slow each other: 5 folds in 2 waves beat 5 waves of 4-thread folds
    parallel = make_plan(spaceship, profile("cpu"), 600, TABLE, rounds((4, 1, 0.004), (2, 2, 0.005), (1, 4, 0.006)))
    # threads scale well and folds at once contend for memory: one fold at a time with every core
    serial = make_plan(spaceship, profile("cpu"), 600, TABLE, rounds((4, 1, 0.001), (2, 2, 0.005), (1, 4, 0.02)))
    assert (parallel.slots, parallel.threads) == (4, 1)
    assert (serial.slots, serial.threads) == (1, 4)
    assert any("measured on 8000 rows" in r for r in serial.reasons)


def test_rounds_and_learning_rate_follow_the_window():
    spaceship = load_spec("spaceship")
    costs = rounds((2, 1, 0.01), (1, 2, 0.03))
    long = make_plan(spaceship, profile("cpu"), 3600, TABLE, costs)
    short = make_plan(spaceship, profile("cpu"), 40, TABLE, costs)
    assert (long.max_rounds, long.learning_rate) == (5000, 0.05)
    assert short.max_rounds < 1000 and short.learning_rate > 0.05
    # what the plan promises fits its window: 5 folds one at a time, each within its share
    assert short.training_seconds <= 40 and short.max_rounds * short.epoch_seconds <= 40 / 5
    big = make_plan(spaceship, profile("cpu"), 600, DataShape(100_000, 1000, 14, classes=2), costs)
    assert big.epoch_seconds == pytest.approx(0.01 * 80_000 / 8000)  # scaled from the timed rows


def test_boosting_rounds_are_timed_for_each_split_of_the_cores():
    rng = np.random.default_rng(0)
    x = pd.DataFrame(rng.normal(size=(3000, 8)), columns=[f"f{i}" for i in range(8)])
    y = (x["f0"] + rng.normal(size=3000) > 0).astype(int).to_numpy()
    measured = measure_rounds(x, y, 2, 4, time.monotonic() + 30)
    assert [(c.threads, c.boosters) for c in measured] == [(4, 1), (2, 2), (1, 4)]
    assert all(c.rows == 3000 and 0 < c.seconds_per_round < 1 for c in measured)
    assert len(measure_rounds(x, y, 2, 4, time.monotonic())) == 1  # past the deadline: only the first split
    regression = measure_rounds(x, rng.normal(size=(3000, 2)), 0, 1, time.monotonic() + 30)
    assert [(c.threads, c.boosters) for c in regression] == [(1, 1)]
    with pytest.raises(ValueError):  # a booster failing in its thread fails the measurement, not silently
        measure_rounds(x.assign(f0=x["f0"].astype(str)), y, 2, 2, time.monotonic() + 30)


def test_costs_round_trip_through_json():
    costs = Costs(throughput=cpu_costs({("resnet18", 96, "bf16"): 200.0}).throughput,
                  rounds=rounds((2, 1, 0.01)).rounds, flops={"resnet18@96": 3})
    assert Costs.from_json(json.loads(json.dumps(costs.to_json()))) == costs


def test_plans_round_trip_through_json():
    plan = plan_on("h100-80gb")
    assert Plan.from_json(json.loads(json.dumps(plan.to_json()))) == plan


def test_candidates_to_measure_follow_the_hardware():
    assert {c.precision for c in image_candidates(profile("a100-40gb"))} == {"bf16"}
    assert {c.precision for c in image_candidates(profile("cpu"))} == {"fp32", "bf16"}


@pytest.mark.parametrize("hardware, device", [("a100-40gb", "cuda"), ("cpu", "cpu")])
def test_runner_plan_prints_and_writes_a_plan_for_a_profile(dog_breed, tmp_path, hardware, device):
    from conftest import run_cli

    result = run_cli("plan", "dog-breed", "--data", str(dog_breed / "prepared" / "public"), "--budget", "30m",
                     "--hardware", hardware, "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    plan = Plan.from_json(json.loads((tmp_path / "plan.json").read_text()))
    assert plan.device == device and plan.engine == "timm" and plan.reasons
    assert any(plan.model in r for r in plan.reasons)
    assert "why" in result.stderr  # the table a reader sees
    if device == "cuda":
        assert plan.batch_size >= 8 and plan.gpu_memory_fraction > 0 and plan.fold_memory_bytes > 0
