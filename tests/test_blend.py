"""Blend weights on hand-made out-of-fold predictions, and what one more member adds to the pool."""
import numpy as np
import pytest

from runner.common import metrics
from runner.results.blend import MemberPredictions, choose_blend, pool_gain

RNG = np.random.default_rng(0)
N = 3000
Y = RNG.integers(0, 2, N)


def member(name, logits, covered=None, test=None):
    p = 1 / (1 + np.exp(-logits))
    oof = np.column_stack([1 - p, p])
    covered = np.ones(N, bool) if covered is None else covered
    return MemberPredictions(name, np.where(covered[:, None], oof, 0.0), covered,
                             oof[:10] if test is None else test)


def signal(strength, noise=1.0):
    """Logits carrying the label with this strength plus independent noise."""
    return strength * (2 * Y - 1) + RNG.normal(0, noise, N)


def test_a_member_of_pure_noise_gets_no_weight():
    good, noise = member("good", signal(1.5)), member("noise", RNG.normal(0, 2, N))
    blend = choose_blend("log_loss", Y, [good, noise])
    assert blend.weights == {"good": 1.0}
    assert blend.cv == pytest.approx(metrics.score("log_loss", Y, good.oof))


def test_two_complementary_members_beat_each_alone():
    # each sees the label through its own independent noise: averaging them cancels part of it
    a, b = member("a", signal(1.0, 1.5)), member("b", signal(1.0, 1.5))
    for metric in ("log_loss", "roc_auc", "accuracy"):
        blend = choose_blend(metric, Y, [a, b])
        assert set(blend.weights) == {"a", "b"}, metric
        alone = [metrics.score(metric, Y, m.oof) for m in (a, b)]
        best = min(alone) if metrics.LOWER_IS_BETTER[metric] else max(alone)
        assert metrics.better(metric, blend.cv, best), (metric, blend.cv, alone)


def test_a_partial_member_is_blended_on_the_rows_it_covers():
    full = member("full", signal(0.8, 1.5))
    covered = RNG.random(N) < 0.4  # 2 of 5 folds
    partial = member("partial", signal(1.5, 1.0), covered)
    blend = choose_blend("log_loss", Y, [full, partial])
    assert blend.start == "full"  # the widest member starts, and the blend is scored on all of its rows
    assert blend.weights.get("partial", 0) > 0 and blend.rows == N and blend.covered.all()
    assert blend.cv < metrics.score("log_loss", Y, full.oof)
    # rows the partial member has no prediction for are the full member's alone
    assert np.allclose(blend.oof[~covered], full.oof[~covered])
    w = blend.weights["partial"]
    assert np.allclose(blend.oof[covered], (1 - w) * full.oof[covered] + w * partial.oof[covered], atol=1e-9)


def test_a_partial_member_that_only_shifts_its_rows_scale_gets_no_weight_under_a_rank_metric():
    """A partial member that says the same of every row it covers knows nothing there, but mixed on its rows alone
    it lifts them against the rest, which a pooled AUC reads as signal when its rows hold more positives. Judged
    on the rows every member of the trial covers (the mix every test row gets), it adds nothing."""
    rng = np.random.default_rng(3)
    full = member("full", signal(0.7))
    covered = np.where(Y == 1, rng.random(N) < 0.5, rng.random(N) < 0.1)  # a fold rich in positives, by chance
    constant = member("constant", np.full(N, 3.0), covered)
    blend = choose_blend("roc_auc", Y, [full, constant])
    assert blend.weights == {"full": 1.0}


def test_a_member_of_one_fold_never_makes_the_blend_worse_than_its_start():
    """A strong member on one fold joins the blend; the CV is still measured on, and no worse than, the start's
    rows (scoring on the rows both cover could report less than the start member alone)."""
    for seed in range(5):
        rng = np.random.default_rng(seed)
        full = member("full", signal(1.0, 1.5))
        covered = rng.random(N) < 0.2
        partial = member("partial", signal(rng.uniform(0.5, 2.0), 1.0), covered)
        for metric in ("accuracy", "roc_auc", "log_loss"):
            blend = choose_blend(metric, Y, [full, partial])
            assert blend.rows == N
            assert not metrics.better(metric, blend.member_cv["full"], blend.cv), (seed, metric)


def test_the_blend_is_never_worse_than_the_member_it_starts_from():
    for seed in range(5):
        rng = np.random.default_rng(seed)
        members = [member(f"m{i}", signal(rng.uniform(0.2, 1.5), rng.uniform(0.5, 2))) for i in range(4)]
        for metric in ("accuracy", "roc_auc", "log_loss"):
            blend = choose_blend(metric, Y, members)
            start = next(m for m in members if m.name == blend.start)
            assert not metrics.better(metric, round(metrics.score(metric, Y, start.oof), 6), blend.cv), (seed, metric)


def test_test_predictions_use_the_blend_weights():
    a = member("a", signal(1.0, 1.5), test=np.full((10, 2), 0.2))
    b = member("b", signal(1.0, 1.5), test=np.full((10, 2), 0.6))
    blend = choose_blend("log_loss", Y, [a, b])
    expected = blend.weights.get("a", 0) * 0.2 + blend.weights.get("b", 0) * 0.6
    assert np.allclose(blend.test, expected)


def test_regression_blends_values():
    y = RNG.normal(size=(N, 1))
    a = MemberPredictions("a", y + RNG.normal(0, 1, (N, 1)), np.ones(N, bool), np.zeros((5, 1)))
    b = MemberPredictions("b", y + RNG.normal(0, 1, (N, 1)), np.ones(N, bool), np.ones((5, 1)))
    blend = choose_blend("rmse", y, [a, b])
    assert set(blend.weights) == {"a", "b"} and blend.cv < 0.8  # each alone is about 1.0


def test_a_duplicate_adds_nothing_to_the_pool_and_a_new_view_does():
    a = member("a", signal(1.0, 1.5))
    duplicate = MemberPredictions("dup", a.oof.copy(), a.covered, a.test)
    fresh = member("fresh", signal(1.0, 1.5))
    assert pool_gain("log_loss", Y, [a, duplicate], "dup") == pytest.approx(0.0, abs=1e-9)
    assert pool_gain("log_loss", Y, [a, fresh], "fresh") > 0.01
    assert pool_gain("accuracy", Y, [a, fresh], "fresh") > 0.01  # accuracy's pool is judged in log loss
    assert pool_gain("log_loss", Y, [a], "a") == 0.0  # alone: nothing to compare with


@pytest.mark.parametrize("metric", ["log_loss", "accuracy", "roc_auc", "mean_column_roc_auc", "rmse", "mae",
                                    "rmsle"])
def test_the_fast_metrics_equal_the_graders(metric):
    rng = np.random.default_rng(1)
    if metric in ("rmse", "mae", "rmsle"):
        y, p = rng.random((400, 2)) * 10, rng.random((400, 2)) * 10
    else:
        k = 2 if metric == "roc_auc" else 4
        y, p = rng.integers(0, k, 400), rng.random((400, k))
        p /= p.sum(axis=1, keepdims=True)
        p[:20] = 1 / k  # ties
    assert metrics.fast_score(metric, y, p) == pytest.approx(metrics.score(metric, y, p), rel=1e-12)


def test_a_blend_whose_cv_is_no_better_than_the_prior_is_not_submitted(spaceship, tmp_path):
    """Models that learned nothing (their out-of-fold log loss above the class prior's, or equal to it) leave the
    prior as the submission, and the report says why; a blend that beats the prior replaces it."""
    import pandas as pd

    from runner.common.budget import Budget
    from runner.supervisor import Supervisor
    from runner.competition.catalog import load_spec

    spec = load_spec("spaceship").__class__.from_json({**load_spec("spaceship").to_json(), "metric": "log_loss"})
    supervisor = Supervisor(spec, spaceship / "prepared" / "public", tmp_path, Budget.start(60))
    supervisor.load_data()
    y, n_test = supervisor.dataset.y, supervisor.dataset.n_test
    prior = pd.read_csv(tmp_path / "submission.csv")
    wrong = np.column_stack([0.9 * y + 0.05, 0.95 - 0.9 * y])  # confidently the other class
    supervisor.ensemble.predictions = {"wrong": MemberPredictions("wrong", wrong, np.ones(len(y), bool),
                                                         np.full((n_test, 2), [0.05, 0.95]))}
    changes = supervisor.ensemble.publish()
    assert "no better than the prior" in changes["submission_source"]
    assert pd.read_csv(tmp_path / "submission.csv").equals(prior)
    # one that ties the prior learned nothing either: the prior itself, out of fold and on test, stays out too
    prior_row = supervisor.ensemble.prior.values[0]
    supervisor.ensemble.predictions = {"prior": MemberPredictions("prior", np.tile(prior_row, (len(y), 1)),
                                                                  np.ones(len(y), bool), np.tile(prior_row, (n_test, 1)))}
    assert "no better than the prior" in supervisor.ensemble.publish()["submission_source"]
    assert pd.read_csv(tmp_path / "submission.csv").equals(prior)
    right = np.column_stack([0.8 - 0.6 * y, 0.2 + 0.6 * y])
    mixed = np.tile([[0.3, 0.7], [0.7, 0.3]], (n_test // 2 + 1, 1))[:n_test]
    supervisor.ensemble.predictions = {"right": MemberPredictions("right", right, np.ones(len(y), bool), mixed)}
    assert supervisor.ensemble.publish()["submission_source"].startswith("blend")
    assert pd.read_csv(tmp_path / "submission.csv")["Transported"].nunique() == 2  # the prior has one label


# --- kappa: grades 0..4 -------------------------------------------------------------------------------------------

K = 5
GRADES = RNG.integers(0, K, N)


def graded(name, signal, sharpness, covered=None):
    """Grade probabilities peaked around a mix of the true grade (weight `signal`) and the middle grade, with noise;
    `sharpness`: how confident (a logistic head on few rows is far too sure)."""
    centre = signal * GRADES + (1 - signal) * (K - 1) / 2 + RNG.normal(0, 1.0, N)
    logits = -sharpness * (np.arange(K)[None, :] - centre[:, None]) ** 2
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    covered = np.ones(N, bool) if covered is None else covered
    return MemberPredictions(name, np.where(covered[:, None], p, 0.0), covered, p[:10])


def test_a_member_that_ties_the_prior_is_no_start_however_many_rows_it_covers():
    """A CNN cut in its first epochs predicts one grade for every photo (kappa 0, the prior's) on all rows; a member
    of 3 folds that learned is where the blend starts, and its CV is measured on its rows."""
    prior = np.bincount(GRADES, minlength=K) / N
    nothing = MemberPredictions("nothing", np.tile(prior, (N, 1)), np.ones(N, bool), np.tile(prior, (10, 1)))
    covered = RNG.random(N) < 0.6
    learned = graded("learned", 0.7, 1.0, covered)
    blend = choose_blend("qwk", GRADES, [nothing, learned], prior)
    assert blend.start == "learned" and blend.rows == covered.sum()
    assert blend.cv > 0.3 and blend.cv >= blend.member_cv["learned"]
    # where no member beats the prior, any may start: the widest
    assert choose_blend("qwk", GRADES, [nothing], prior).start == "nothing"


def test_under_kappa_an_overconfident_member_that_orders_the_grades_well_is_weighted_by_the_grades():
    """Steps are judged in the squared error of the expected grade (kappa's quadratic weights, row by row): the
    log loss of a member far too sure of itself would keep most of the weight on the weaker one."""
    weak = graded("weak", 0.3, 0.3)
    sure = graded("sure", 0.7, 10.0, RNG.random(N) < 0.6)
    blend = choose_blend("qwk", GRADES, [weak, sure])
    assert blend.weights["sure"] > 0.5, blend.weights
    assert blend.cv > blend.member_cv["weak"] + 0.15, blend
