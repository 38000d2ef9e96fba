"""Masks of series of slices written a row per slice and class (uw-madison's organs), learned: the rows gathered into
a slice with a mask per class at the learned size, written back at each slice's own size in the sample's order,
the cut tuned on series' volumes, and the rule's prior kept wherever a blend does not beat it as written."""
import dataclasses

import numpy as np
import pandas as pd
import pytest

from runner.common import rle
from runner.common.budget import Budget
from runner.common.csvfiles import read_csv_file
from runner.common.mask_metrics import MASK_CUT, MASK_METRICS
from runner.common.mask_volumes import decided_classes, depth_prior, series_rows, tune_volume_cut, volume_score
from runner.competition.catalog import load_spec
from runner.competition.grade import grade
from runner.data.loading import load_dataset
from runner.data.canvas import CARD_MEMORY_SHARE, card_side, resized
from runner.data.mask_targets import held_bytes
from runner.demo import write_demo
from runner.results.blend import MemberPredictions
from runner.results.ensemble import Ensemble
from runner.results.run_folder import RunOutputs
from runner.results.submission import Predictions, build_submission

COMPETITION = "uw-madison-gi-tract-image-segmentation"
CLASSES = ("large_bowel", "small_bowel", "stomach")


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    """(public, private, the dataset the run reads) of the replica, once for the module."""
    root = tmp_path_factory.mktemp("uw")
    folder = write_demo(COMPETITION, root)
    public, private = folder / "prepared" / "public", folder / "prepared" / "private"
    return public, private, load_dataset(load_spec(COMPETITION), public, root / "work")


def truth_rows(spec, frame: pd.DataFrame, column: str, sizes) -> dict:
    """{slice id: its classes' masks at the learned size, flattened side by side} of a frame a row per class."""
    side = spec.mask.shape
    rows = {}
    for slice_id, organ, text, size in zip(frame["id"], frame["class"], frame[column].fillna(""), sizes):
        row = rows.setdefault(slice_id, np.zeros((len(CLASSES), *side), np.float32))
        if text:
            row[CLASSES.index(organ)] = resized(rle.decode(text, *size, "row"), *side) >= 0.5
    return {k: v.ravel() for k, v in rows.items()}


def test_a_slice_s_three_rows_are_one_item_with_a_mask_per_class_at_the_learned_size(replica):
    public, _, dataset = replica
    spec = dataset.spec
    train = pd.read_csv(public / "train.csv")
    side = spec.mask.shape
    assert dataset.y.shape == (train["id"].nunique(), len(CLASSES) * side[0] * side[1])
    # every slice's masks, read at its own size (its file name's), are the dataset's row at the learned size
    ids = sorted(train["id"].unique())
    own = {}
    for path in (public / "train").rglob("*.png"):
        parts = path.stem.split("_")
        own[f"{path.parent.parent.name}_slice_{parts[1]}"] = (int(parts[3]), int(parts[2]))
    expected = truth_rows(spec, train, "segmentation", [own[i] for i in train["id"]])
    assert np.array_equal(dataset.y, np.stack([expected[i] for i in ids]))
    assert dataset.y.sum() > 0 and dataset.n_test == pd.read_csv(public / "test.csv")["id"].nunique()
    series = dataset.score_groups
    assert len(series_rows(series)) == len({i.split("_slice_")[0] for i in ids})
    assert set(dataset.groups) == set(series)  # a series' slices share a fold


def test_on_a_card_slices_are_learned_at_their_own_side_as_far_as_memory_holds_their_pixels(replica, tmp_path):
    public, _, cpu = replica
    spec = dataclasses.replace(load_spec(COMPETITION), mask=dataclasses.replace(load_spec(COMPETITION).mask,
                                                                                shape=(16, 16), card_side=256))
    # the replica's slices are 39-60 px: a card learns them at their median shorter side, in whole strides of 32
    card = load_dataset(spec, public, tmp_path / "card", memory=2**40, accelerated=True)
    assert card.spec.mask.shape == (32, 32) and card.y.shape == (len(cpu.y), len(CLASSES) * 32 * 32)
    # without a card, or with too little memory for the larger pixels, the spec's side stays
    assert load_dataset(spec, public, tmp_path / "cpu", memory=2**40).spec.mask.shape == (16, 16)
    tight = int(1.5 * held_bytes(32 * 32 * len(CLASSES), len(cpu.y), 0))  # half of it holds no 32 px pixels
    assert load_dataset(spec, public, tmp_path / "tight", memory=tight, accelerated=True).spec.mask.shape == (16, 16)
    # the real slices (266 px, 31,696 and 6,800 of them) on a 200 GiB machine: the largest side whose pixels fit half
    real = load_spec(COMPETITION)
    side = card_side(real, 266, 31_696, 6_800, 200 * 2**30)
    assert side % 32 == 0 and 48 < side < 256
    assert held_bytes(side * side * 3, 31_696, 6_800) <= CARD_MEMORY_SHARE * 200 * 2**30 \
        < held_bytes((side + 32) ** 2 * 3, 31_696, 6_800)


def test_each_row_is_written_at_its_slice_s_own_size_in_the_sample_s_order(replica, tmp_path):
    """The answers' masks at the learned size, written back: every row in the sample's order at its own size,
    grading close to the answers themselves and far above the prior."""
    public, private, dataset = replica
    spec = dataset.spec
    out = RunOutputs(load_spec(COMPETITION), public, tmp_path / "run", Budget.start(60))
    answers = pd.read_csv(private / "test.csv")
    truths = truth_rows(spec, answers, "predicted", zip(answers["image_height"].astype(int), answers["image_width"].astype(int)))
    items = pd.unique(out.sample["id"])
    values = np.stack([truths[i] for i in items])
    frame = build_submission(out.sample, spec, out.columns, Predictions(values, None, "answers", (MASK_CUT, 0)))
    assert frame["id"].tolist() == out.sample["id"].tolist() and frame["class"].tolist() == out.sample["class"].tolist()
    for text, h, w in zip(frame["predicted"], answers["image_height"], answers["image_width"]):
        if text:
            rle.decode(text, int(h), int(w), "row")  # fits its own slice
    frame.to_csv(tmp_path / "submission.csv", index=False)
    written = grade(tmp_path / "submission.csv", spec, private)
    assert written.valid_submission, written.error
    assert written.score > 0.9
    out.write_prior(dataset)  # the rule's file
    baseline = grade(out.out / "baseline.csv", spec, private)
    assert written.score > baseline.score + 0.1


def test_the_cut_tuned_on_volumes_moves_the_metric_the_right_way():
    """True organs sit just under the default cut and faint speckles far from them under a lower one: the cut
    tuned on the series' volumes takes the organs and leaves the speckles, and scores above the default."""
    rng = np.random.default_rng(0)
    side, classes, depth = 16, 3, 6
    truth = np.zeros((2 * depth, classes, side, side), np.float32)
    truth[:, 0, 4:10, 4:10] = 1
    truth[2:5, 2, 8:12, 2:6] = 1
    pred = truth * 0.45 + (rng.random(truth.shape) < 0.01) * 0.3
    y, p = truth.reshape(2 * depth, -1), pred.reshape(2 * depth, -1)
    series = np.array(["a"] * depth + ["b"] * depth, dtype=object)
    metric = MASK_METRICS["dice_hausdorff"]
    cut, least, best = tune_volume_cut(metric, y, p, series, classes)
    default = volume_score(metric, y >= 0.5, decided_classes(p, classes), series_rows(series), classes)
    assert cut == 0.4 and best > default + 0.5
    assert best == pytest.approx(volume_score(metric, y >= 0.5, decided_classes(p, classes, cut, least),
                                              series_rows(series), classes))


def test_the_rule_s_prior_stays_unless_a_blend_beats_it_as_written(replica, tmp_path):
    """Empty masks everywhere are a worse blend: the rule's file stays the submission; the truth itself beats it
    and is published."""
    public, private, dataset = replica
    spec = load_spec(COMPETITION)
    out = RunOutputs(spec, public, tmp_path / "run", Budget.start(60))
    prior = out.write_prior(dataset)
    rule = read_csv_file(out.out / "baseline.csv", literal=True)
    assert read_csv_file(out.submission, literal=True).equals(rule)
    ensemble = Ensemble(out, dataset, prior)
    n, covered = len(dataset.y), np.ones(len(dataset.y), bool)
    test = np.zeros((dataset.n_test, dataset.y.shape[1]), np.float32)
    ensemble.predictions["empty"] = MemberPredictions("empty", np.zeros_like(dataset.y), covered, test)
    changes = ensemble.publish()
    assert changes["cv_score"] < changes["baseline_cv_score"]
    assert read_csv_file(out.submission, literal=True).equals(rule)
    ensemble.predictions["empty"] = MemberPredictions("empty", dataset.y.copy(), covered, test + 0.9)
    changes = ensemble.publish()
    assert changes["cv_score"] > changes["baseline_cv_score"]
    assert not read_csv_file(out.submission, literal=True).equals(rule)
    # the depth prior it was held against is the rule's kind: each class's share by depth, above empty masks
    shares = depth_prior(dataset.y, dataset.score_groups)
    assert shares.shape == dataset.y.shape and n == len(shares)


def test_a_slice_s_picture_holds_the_slices_before_and_after_it(tmp_path):
    """`slice_stack`: the slice in the middle channel, its neighbours in the outer ones (the first slice its own
    neighbour before), the three scaled together from 16 bits."""
    from PIL import Image

    from runner.data.decoders import slice_picture

    scans = tmp_path / "case1" / "case1_day1" / "scans"
    scans.mkdir(parents=True)
    for k, level in enumerate((1000, 2000, 3000), start=1):
        Image.fromarray(np.full((6, 8), level, np.uint16)).save(scans / f"slice_{k:04d}_8_6_1.50_1.50.png")
    first = np.asarray(slice_picture(scans / "slice_0001_8_6_1.50_1.50.png"))
    middle = np.asarray(slice_picture(scans / "slice_0002_8_6_1.50_1.50.png"))
    assert first.shape == (6, 8, 3) and first[0, 0, 0] == first[0, 0, 1] < first[0, 0, 2]
    assert middle[0, 0, 0] < middle[0, 0, 1] < middle[0, 0, 2]


def test_a_16_bit_picture_is_cached_scaled_not_washed_out(tmp_path):
    """The mask engine's cache reads a 16-bit picture between its own percentiles: converted as it is, every value
    past 255 would be white."""
    from PIL import Image

    from runner.engines.masks.images import decode_at

    values = np.tile(np.linspace(500, 3000, 8), (6, 1)).astype(np.uint16)
    Image.fromarray(values).save(tmp_path / "slice.png")
    cached = decode_at(tmp_path / "slice.png", 6, 8)
    assert cached.shape == (6, 8, 3) and cached[0, 0, 0] < 50 and cached[0, -1, 0] > 200
