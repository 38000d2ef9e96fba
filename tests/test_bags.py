"""Extra members while they pay: which member is extended, how, and when a lane stops (runner.control.extra_members)."""
import pytest

from runner.control.extra_members import STALE, WIDE_EVERY, cost_ratio, extra_member, incumbent, note_record, why_stop
from runner.results.member_state import MemberState
from runner.planning.registry import get_engine
from runner.units.tasks import FoldResult
from runner.planning.portfolio import Member


def member(name, engine="lightgbm", slot="cpu", fold_seconds=2.0, max_fold=10.0, settings=None, **extra):
    settings = settings or get_engine(engine).Settings(threads=1)
    return Member(name=name, engine=engine, slot=slot, settings=settings, folds=5, fold_seconds=fold_seconds,
                  min_fold_seconds=0.5, max_fold_seconds=max_fold, expected_gain=0.05, **extra)


def done(m, cv, gain=None, record=False):
    return MemberState(m, folds_done=5, units_ended=5, cv=cv, gain=gain, record=record, status="done")


def walls(name, seconds, folds=5, least_training=None):
    """Finished folds of `seconds` each; the least training that still gives a model is the whole fit by default
    (a one-shot fit), or one epoch."""
    least = seconds - 0.1 if least_training is None else least_training
    return [FoldResult(k, "completed", name, train_seconds=seconds - 0.1, wall_seconds=seconds,
                       min_train_seconds=least) for k in range(folds)]


def test_extras_alternate_a_repeat_of_the_chosen_member_and_a_bag_next_to_its_engines_best():
    states = {"lightgbm": done(member("lightgbm"), cv=0.80), "catboost": done(member("catboost", "catboost"), 0.81)}
    weights = {"lightgbm": 0.7, "catboost": 0.3}
    repeat = extra_member("cpu", states, weights, walls("lightgbm", 2.0), split_seed=7, lower_is_better=False)
    assert repeat.repeat_of == "lightgbm" and repeat.bag_of is None and repeat.split_seed == 7
    assert repeat.settings.model_dump(exclude={"seed", "reasons"}) == \
        states["lightgbm"].member.settings.model_dump(exclude={"seed", "reasons"})
    states[repeat.name] = done(repeat, cv=0.805, gain=0.001)
    # lightgbm now has one extra: weight per extra 0.35 > catboost's 0.3, and its engine's best is the repeat's
    # base (the repeat itself is no configuration of its own)
    bag = extra_member("cpu", states, weights, walls("lightgbm", 2.0), split_seed=8, lower_is_better=False)
    assert bag.bag_of == "lightgbm" and bag.engine == "lightgbm" and bag.settings != states["lightgbm"].member.settings
    assert bag.fold_seconds == pytest.approx(2.0) and "next to lightgbm" in bag.reasons[0]


def test_every_wide_every_th_bag_of_an_engine_draws_its_configuration_afresh():
    states = {"lightgbm": done(member("lightgbm"), cv=0.80)}
    weights = {"lightgbm": 1.0}
    kinds = []
    for split in range(2 * 2 * WIDE_EVERY):  # repeats and bags alternate
        extra = extra_member("cpu", states, weights, walls("lightgbm", 2.0), split_seed=split, lower_is_better=False)
        states[extra.name] = done(extra, cv=0.79)
        if extra.bag_of:
            kinds.append("drawn afresh" in extra.reasons[0])
    assert kinds == [k % WIDE_EVERY == WIDE_EVERY - 1 for k in range(len(kinds))]
    assert sum(kinds) >= 2


def test_a_bag_starts_from_the_engines_best_member_by_own_cv():
    better = member("lightgbm-3", bag_of="lightgbm")
    states = {"lightgbm": done(member("lightgbm"), cv=0.40), "lightgbm-3": done(better, cv=0.35)}
    assert incumbent("lightgbm", states, lower_is_better=True).member.name == "lightgbm-3"
    assert incumbent("lightgbm", states, lower_is_better=False).member.name == "lightgbm"


def test_a_member_that_beats_its_engines_best_is_a_record():
    states = {"a": done(member("a"), cv=0.40), "b": done(member("b", bag_of="a"), cv=0.38)}
    note_record(states["b"], states, lower_is_better=True)
    assert states["b"].record
    note_record(states["a"], states, lower_is_better=True)
    assert not states["a"].record


def test_a_lane_stops_when_no_extra_member_improves_any_more():
    states = {"lightgbm": done(member("lightgbm"), cv=0.80)}
    for i in range(STALE):
        states[f"lightgbm-{i + 2}"] = done(member(f"lightgbm-{i + 2}", repeat_of="lightgbm"), cv=0.8, gain=0.0)
    args = ({"lightgbm": 1.0}, walls("lightgbm", 2.0), 100.0, 1.0, 2)
    assert "CV no longer improving" in why_stop("cpu", states, *args)
    states["lightgbm-2"].gain = 0.01  # one of the last five still helped
    assert why_stop("cpu", states, *args) is None
    states["lightgbm-2"].gain = 0.0
    states["lightgbm-3"].record = True  # or beat its engine's best
    assert why_stop("cpu", states, *args) is None


def test_a_lane_stops_at_the_most_members_a_run_trains():
    """`runner run --max-members N`: the planned members count, and the lane takes none past N, whatever CV does."""
    states = {"lightgbm": done(member("lightgbm"), cv=0.80), "lightgbm-2": done(member("lightgbm-2"), 0.8, 0.05)}
    args = ({"lightgbm": 1.0}, walls("lightgbm", 2.0), 100.0, 1.0, 2)
    assert why_stop("cpu", states, *args) is None  # the default: far more than two
    assert why_stop("cpu", states, *args, most=3) is None
    assert why_stop("cpu", states, *args, most=2) == "2 members is the most this run trains (--max-members)"
    del states["lightgbm-2"]
    assert why_stop("cpu", states, *args, most=1) == "1 member is the most this run trains (--max-members)"


def test_a_lane_stops_when_no_fold_fits_or_nothing_finished():
    states = {"lightgbm": MemberState(member("lightgbm"))}
    assert "finished a fold" in why_stop("cpu", states, {}, [], 100.0, 1.0, 2)
    states = {"lightgbm": done(member("lightgbm"), cv=0.8)}
    assert "needs about" in why_stop("cpu", states, {"lightgbm": 1.0}, walls("lightgbm", 5.0), 3.0, 1.0, 2)


def test_a_cnn_is_extended_while_one_more_fold_can_finish_at_its_measured_pace():
    """Its folds stretch to the time they get: the lane stays open while another fold can start up (beside the
    folds starting on its card at once), train an epoch and predict at the pace its folds showed, however much
    shorter than theirs (a card idled for the last fifth of its window where half of 60 s per wave was asked)."""
    image = get_engine("timm").Settings(model="resnet18", image_size=96, device="cuda")
    cnn = member("timm", "timm", slot="gpu", fold_seconds=60.0, max_fold=0.0, settings=image, startup_seconds=10.0,
                 per_gpu=2)  # folds stretch to their time, two to a card
    states = {"timm": done(cnn, cv=1.8)}
    results = [FoldResult(k, "completed", "timm", startup_seconds=10.0, train_seconds=48.0, wall_seconds=60.0,
                          min_train_seconds=2.0) for k in range(5)]
    # 2 s of predictions and the like, an epoch of 2 s, and 10 s of start-up for each of 2 folds starting at once
    assert "needs about 24 s" in why_stop("gpu", states, {"timm": 1.0}, results, 23.0, 1.0, 2)
    assert why_stop("gpu", states, {"timm": 1.0}, results, 25.0, 1.0, 2) is None


def timed(name, step, rows=8000, folds=5):
    return [FoldResult(k, "completed", name, n_train=rows, epoch_seconds=step, train_seconds=1.0, wall_seconds=1.1,
                       min_train_seconds=0.2) for k in range(folds)]


@pytest.mark.parametrize("engine, setting, deeper, shallower", [
    ("catboost", "depth", 8, 4), ("lightgbm", "num_leaves", 127, 7), ("xgboost", "max_depth", 10, 3)])
def test_a_bag_with_larger_trees_expects_longer_rounds(engine, setting, deeper, shallower):
    """A bag carries its base's measured round to its own configuration: its first folds start before any of
    its own rounds are timed."""
    base = member(engine, engine)
    deep = base.settings.model_copy(update={setting: deeper})
    shallow = base.settings.model_copy(update={setting: shallower})
    results = timed(engine, 0.001)
    assert cost_ratio(base, deep, results) > 1.5 and cost_ratio(base, shallow, results) < 0.7
    assert cost_ratio(base, base.settings.model_copy(update=dict(learning_rate=0.2)), results) == 1.0
    states = {engine: done(base, cv=0.5)}
    for n in range(2, 12):  # bags alternate with repeats; their steps follow their own trees
        extra = extra_member("cpu", states, {engine: 1.0}, results, split_seed=n, lower_is_better=True)
        expected = 0.001 * cost_ratio(base, extra.settings, results)
        assert extra.step_seconds == pytest.approx(expected, rel=1e-3)
        states[extra.name] = done(extra, cv=0.6)


def test_larger_trees_cost_no_more_than_the_rows_allow():
    """On a tiny table LightGBM's leaves are bounded by its rows (min rows per leaf), so more leaves cost nothing."""
    lgbm = get_engine("lightgbm")
    few = lgbm.Settings(num_leaves=31)
    assert lgbm.step_cost(few.model_copy(update=dict(num_leaves=127)), 40) == lgbm.step_cost(few, 40)
    assert lgbm.step_cost(few.model_copy(update=dict(num_leaves=127)), 100_000) > 3 * lgbm.step_cost(few, 100_000)
