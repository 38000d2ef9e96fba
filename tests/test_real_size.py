"""The plan at a competition's real size, from its replica's shape (runner.planning.real_size): counts and bytes
grow to the spec's real size, a run there samples by the data layer's own rules and says so, and the fit to the
machine's memory, disk and window is checked."""
import dataclasses

import pytest

from runner.common.budget import Budget
from runner.common.errors import RunnerError
from runner.competition.spec import CompetitionSpec, RealSize
from runner.data.reading import ROWS_PER_BUDGET_SECOND
from runner.machine.profiles import profile
from runner.planning.portfolio import DataShape
from runner.planning.real_size import grown, plan_at_real_size, read_at_size

TABLE = CompetitionSpec(id="t", task="tabular", metric="rmse", submission="regression", id_column="id",
                        targets=("y",), real=RealSize(train=50_000_000, test=10_000, gigabytes=5.0))
IMAGES = CompetitionSpec(id="i", task="image", metric="accuracy", submission="label", id_column="id",
                         targets=("label",), image_dir="train",
                         real=RealSize(train=800_000, test=200_000, gigabytes=120.0, side=1000))


def test_a_replicas_shape_grows_to_the_real_counts_and_images_to_their_real_side():
    replica = DataShape(n_train=200, n_test=50, n_features=8, inputs=frozenset({"table"}), data_bytes=250_000)
    real = grown(replica, TABLE)
    assert (real.n_train, real.n_test) == (50_000_000, 10_000)
    assert real.data_bytes == pytest.approx(250_000 * 50_010_000 / 250, rel=1e-6)
    pictures = DataShape(n_train=100, n_test=25, inputs=frozenset({"image"}), image_side=50, decode_seconds=0.001)
    bigger = grown(pictures, IMAGES)
    assert bigger.image_side == 1000 and bigger.decode_seconds == pytest.approx(0.001 * (1000 / 50) ** 2 / 64)
    with pytest.raises(RunnerError, match="no real size"):
        grown(replica, dataclasses.replace(TABLE, real=None))


def test_a_run_at_the_real_size_samples_as_the_data_layer_would_and_says_so():
    hardware = profile("h100-80gb")
    table = grown(DataShape(n_train=200, n_test=50, n_features=8, data_bytes=250_000), TABLE)
    read, cut = read_at_size(table, 7200, hardware, "t")
    assert read.n_train == 7200 * ROWS_PER_BUDGET_SECOND and cut[0].of == 50_000_000
    assert "training rows" in cut[0].say()
    images = grown(DataShape(n_train=100, n_test=25, inputs=frozenset({"image"}), image_side=50,
                             decode_seconds=0.02), IMAGES)  # 0.125 s each at 1000 px: 224k in 15% of 2 h
    read, cut = read_at_size(images, 7200, hardware, "i")
    assert 0 < read.n_train < 800_000 and cut[0].what == "training images" and "decoding" in cut[0].why
    small = dataclasses.replace(images, n_train=1000, n_test=100)
    assert read_at_size(small, 7200, hardware, "i") == (small, ())


def test_the_plan_at_the_real_size_fits_a_large_machine_and_not_a_small_one():
    replica = DataShape(n_train=200, n_test=50, n_features=8, data_bytes=250_000)
    plan, fit = plan_at_real_size(TABLE, replica, profile("h100-80gb"), Budget.start(7200))
    assert plan.members and fit.memory_fits and fit.disk_fits and fit.window_filled
    assert plan.reasons[0].startswith("training rows") or "sampled" in plan.reasons[0] or plan.sampled
    huge = dataclasses.replace(TABLE, real=RealSize(train=50_000_000, test=10_000, gigabytes=900.0))
    assert not plan_at_real_size(huge, replica, profile("h100-80gb"), Budget.start(7200))[1].disk_fits


def test_masks_learned_pixel_by_pixel_count_their_targets_and_predictions_in_memory():
    """A mask competition's supervisor holds every row's pixels (targets, members' and the blend's predictions):
    contrails' 20k records of 256 x 256 need tens of GiB, more than the 2-core machine's 24, said as a misfit."""
    from runner.competition.catalog import load_spec
    from runner.planning.real_size import pixel_bytes

    contrails, tgs = load_spec("contrails"), load_spec("tgs-salt")
    shape = DataShape(n_train=18_673, n_test=1_856, inputs=frozenset({"image"}), image_side=256)
    assert pixel_bytes(contrails, shape) > 24 * 2**30
    assert pixel_bytes(tgs, dataclasses.replace(shape, n_train=3_000, n_test=1_000)) == \
        101 * 101 * (3_000 * 4 + 4_000 * 24)
    assert pixel_bytes(TABLE, shape) == 0


def test_a_card_plans_uw_madison_s_real_slices_larger_than_a_cpu_within_the_memory_for_their_pixels():
    from runner.competition.catalog import load_spec
    from runner.planning.real_size import on_real_side, pixel_bytes

    uw = load_spec("uw-madison")
    real = DataShape(n_train=31_696, n_test=6_800, inputs=frozenset({"image"}), image_side=266)
    card = on_real_side(uw, real, profile("h100-80gb"))
    side = card.mask.shape[0]
    assert card.mask.shape == (side, side) and 48 < side <= 256 and side % 32 == 0
    assert pixel_bytes(card, real) <= 0.5 * profile("h100-80gb").ram_bytes
    assert on_real_side(uw, real, profile("cpu")).mask.shape == (48, 48)  # no card: the spec's side
    tgs = load_spec("tgs-salt")
    assert on_real_side(tgs, real, profile("h100-80gb")) == tgs  # learned at its own size everywhere
