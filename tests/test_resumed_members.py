"""What a resumed run trains: the earlier run's unfinished members first, and no more members in all than
`--max-members` allows, the reused counted (runner.results.resume.resumed_members)."""
from runner.planning.registry import get_engine
from runner.planning.portfolio import Member
from runner.results.resume import Reused, resumed_members
from runner.units.tasks import FoldResult


def member(name, engine="lightgbm"):
    return Member(name=name, engine=engine, slot="cpu", settings=get_engine(engine).Settings(threads=1), folds=5,
                  fold_seconds=1.0, min_fold_seconds=0.5, max_fold_seconds=3.0, expected_gain=0.01)


def reused(m, folds):
    return Reused(m, tuple(FoldResult(k, "completed", m.name) for k in range(folds)))


def test_a_resumed_run_with_a_cap_trains_no_more_members_than_it_allows():
    lightgbm, linear, catboost = member("lightgbm"), member("linear", "linear"), member("catboost", "catboost")
    earlier = {"lightgbm": reused(lightgbm, 5), "linear": reused(linear, 2)}  # a run of --max-members 2, killed
    members, why = resumed_members([lightgbm, catboost, linear], earlier, most=2)
    assert [m.name for m in members] == ["linear"]  # its unfinished member; catboost would be a third
    assert "catboost" in why and "2 of them reused" in why
    # with room under the cap, the new plan's others follow the unfinished ones; nothing is said
    members, why = resumed_members([lightgbm, catboost, linear], earlier, most=3)
    assert [m.name for m in members] == ["linear", "catboost"] and why == ""
    # nothing reused: the plan as it is (it was capped when made)
    assert resumed_members([lightgbm, catboost], {}, most=2) == ([lightgbm, catboost], "")
