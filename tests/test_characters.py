"""Characters on pages (kuzushiji) learned as rows of points: the train file's groups read into rows (a bad code
named with its file and row), truth rows written and graded as the grader reads the file (1.0), folds' points of
one character fused into one, the confidence cut tuned where F1 peaks, characters drawn into one heatmap and read
back from it, the reader planned from a card's memory at its larger side, and a short real fold reading the
replica's glyphs past the prior (F1 0), its points graded as written."""
import dataclasses

import numpy as np
import pandas as pd
import pytest

from runner.common import point_rows
from runner.common.errors import InputError
from runner.competition.catalog import load_spec
from runner.competition.grade import grade
from runner.data.point_targets import point_targets
from runner.engines.centres import heatmaps
from runner.machine.hardware import GiB
from runner.machine.profiles import profile
from runner.planning.portfolio import DataShape, PlanContext
from runner.planning.registry import get_engine
from runner.results.submission import Predictions, build_submission, validate_submission
from short_fold import short_fold

SPEC = load_spec("kuzushiji")
PAGES = ["hnsd006-002", "100241706_00004_2", "umgy001-016"]
LABELS = ["U+306F 10 10 20 20 U+304C 40 10 20 22 U+306F 10 40 20 20", "", "U+2000B 0 0 30 30"]


def _written_and_graded(tmp_path, values: np.ndarray, answers: list[str], cut: float = point_rows.POINT_CUT):
    """The rows written as the submission (runner.results.submission's writer) and graded against `answers`."""
    sample = pd.DataFrame({"image_id": PAGES[:len(values)], "labels": "U+003F 1 1 U+FF2F 2 2"})
    written = build_submission(sample, SPEC, ["labels"], Predictions(values, None, "test", thresholds=(cut,)))
    validate_submission(written, sample, SPEC, ["labels"])
    pd.DataFrame({"image_id": sample["image_id"], "labels": answers}).to_csv(tmp_path / SPEC.answers_file,
                                                                              index=False)
    written.to_csv(tmp_path / "submission.csv", index=False)
    return written, grade(tmp_path / "submission.csv", SPEC, tmp_path)


def test_the_train_files_groups_are_read_into_rows_and_written_back_they_grade_one(tmp_path):
    warnings = []
    train = pd.DataFrame({"image_id": PAGES, "labels": [LABELS[0], np.nan, LABELS[2]]})
    _, classes, y = point_targets(SPEC, train, tmp_path / "train.csv", warnings)
    grid = point_rows.slots(y)
    assert classes is None and grid.shape == (3, 8, point_rows.SLOT_FIELDS)  # at least 8 slots a page
    assert grid[0, :3, 0].tolist() == [1, 1, 1] and grid[0, 1, 1:].tolist() == [0x304C, 40, 10, 20, 22]
    assert grid[1, :, 0].sum() == 0 and grid[2, 0, 1] == 0x2000B and any("1 page(s) without" in w for w in warnings)
    assert point_rows.truth_boxes(y[0])[1] == ("12364", 40, 10, 20, 22)
    written, report = _written_and_graded(tmp_path, y, [LABELS[0], "", LABELS[2]])
    assert written["labels"][0].startswith("U+306F 20 20 U+304C 50 21") and written["labels"][1] == ""
    assert report.valid_submission and report.score == 1.0
    assert point_rows.point_f1_rows(y, y) == 1.0  # the metric of rows scores them as the grader scores the file


@pytest.mark.parametrize("labels, said", [("U+306F 10 10 20", "4 tokens, not groups of 5"),
                                          ("u+306f 10 10 20 20", "'u.306f' is no character code"),
                                          ("U+306F 10 ten 20 20", "row 0: could not convert")])
def test_a_bad_group_is_named_with_its_file_and_row_and_its_page_dropped(tmp_path, labels, said):
    with pytest.raises(InputError, match=said) as caught:  # no page can be read: the error
        point_targets(SPEC, pd.DataFrame({"image_id": ["a"], "labels": [labels]}), tmp_path / "train.csv", [])
    assert "train.csv" in str(caught.value)
    warnings = []  # a page of several: dropped with a warning, the others learned
    train = pd.DataFrame({"image_id": ["a", "b", "c"], "labels": [LABELS[0], labels, LABELS[2]]})
    kept, _, y = point_targets(SPEC, train, tmp_path / "train.csv", warnings)
    assert kept["image_id"].tolist() == ["a", "c"] and len(y) == 2 and point_rows.slots(y)[1, 0, 1] == 0x2000B
    assert len(warnings) == 1 and "dropped 1 page(s)" in warnings[0] and "row 1" in warnings[0]


def _page(*points) -> np.ndarray:
    """A row of 8 slots holding `(confidence, code, x, y, w, h)` points."""
    return point_rows.as_rows([np.array(points, dtype=float).reshape(-1, point_rows.SLOT_FIELDS)],
                              point_rows.row_width(8))


def test_folds_points_of_one_character_are_fused_into_one():
    one = _page((0.9, 5, 10, 10, 20, 20), (0.6, 7, 60, 10, 20, 20))
    two = _page((0.7, 5, 12, 11, 20, 20), (0.5, 9, 100, 100, 10, 10))
    fused = point_rows.slots(point_rows.fused([one, two]))[0]
    kept = fused[fused[:, 0] > 0]
    assert len(kept) == 3  # the first character found by both folds, and each fold's other one
    assert kept[0, 0] == pytest.approx(0.8) and kept[0, 1] == 5  # the folds' mean confidence, their code
    assert kept[0, 2] == pytest.approx((0.9 * 10 + 0.7 * 12) / 1.6)  # the confidence-weighted box
    assert sorted(kept[1:, 0].tolist()) == pytest.approx([0.25, 0.3])  # found by one fold of two: half as sure


def test_the_cut_is_tuned_where_the_f1_of_the_points_written_peaks():
    truth = np.concatenate([_page((1, 5, 0, 0, 10, 10), (1, 6, 20, 0, 10, 10)) for _ in range(20)])
    # each page's two characters found at 0.7 and 0.6, and three false alarms at 0.4, 0.2 and 0.1
    pred = np.concatenate([_page((0.7, 5, 1, 1, 8, 8), (0.6, 6, 21, 0, 9, 9), (0.4, 5, 50, 50, 5, 5),
                                 (0.2, 6, 70, 50, 5, 5), (0.1, 6, 90, 50, 5, 5)) for _ in range(20)])
    cut, tuned = point_rows.tune_cut(truth, pred)
    assert 0.4 < cut <= 0.6 and tuned == 1.0
    assert point_rows.point_f1_rows(truth, pred, 0.05) == pytest.approx(2 * 0.4 / 1.4)  # all five written


def test_characters_drawn_into_one_heatmap_are_read_back_from_it():
    import torch

    from runner.engines.centres.network import CharacterNet
    from runner.engines.centres.reading import as_point_rows, found
    from runner.engines.backbones import create_encoder

    cells, boxes = 32, np.array([[2.0, 3.0, 3.0, 3.0], [20.0, 24.0, 2.5, 3.5], [10.0, 10.0, 1.0, 1.0]])
    heat, regression, centres, where = heatmaps.encode_points([boxes], cells)
    assert centres.sum() == 3 and heat[centres].min() == 1.0 and where.tolist()[0] == [0, 4, 3]
    assert (heat[0, 0, 28:, :8] == 0).all()  # drawn within 3 sigmas only
    # two characters side by side (centres at cells 8 and 12 of row 8): a cell between them holds the higher of
    # their Gaussians, not their sum
    pair, _, _, _ = heatmaps.encode_points([np.array([[2.0, 2.0, 12.0, 12.0], [6.0, 2.0, 12.0, 12.0]])], 24)
    spread = lambda d: np.exp(-d ** 2 / (2 * (heatmaps.ALPHA * 12 / 6) ** 2))
    assert pair[0, 0, 8, 10] == pytest.approx(spread(2)) and pair[0, 0, 8, 9] == pytest.approx(spread(1))
    encoder, _ = create_encoder("resnet10t", 4)
    net = CharacterNet(encoder, 4, 16).eval()
    logit = torch.from_numpy(np.log(heat / (1 - heat + 1e-6) + 1e-9)).clamp(-30, 30)
    embedding = torch.zeros(1, 16, cells, cells)
    parts = found(net, (logit, torch.from_numpy(regression), embedding), slots=5)
    rows = as_point_rows(parts, np.array([[64.0, 128.0]]), cells, np.array([0x3042, 0x3044, 0x3046, 0x3048]),
                         point_rows.row_width(5))
    read = point_rows.slots(rows)[0]
    read = read[read[:, 0] > 0]
    assert len(read) == 3 and set(read[:, 1]) <= {0x3042, 0x3044, 0x3046, 0x3048}
    expected = boxes * np.array([2.0, 4.0, 2.0, 4.0])  # cells back to the page's 64 x 128 pixels
    got = read[np.lexsort((read[:, 3], read[:, 2]))][:, 2:]
    assert np.abs(got - expected[np.lexsort((expected[:, 1], expected[:, 0]))]).max() < 1e-3


def test_the_reader_is_planned_at_a_larger_side_and_fills_the_cards_memory():
    h100 = profile("h100-80gb")  # a Hardware value with a GPU: nothing is asked of a real card
    real = DataShape(3_492, 389, inputs=frozenset({"image"}), image_side=2_400)
    member = get_engine("characters").plan(PlanContext(SPEC, h100, 7200.0, real, None, 5, h100.cpus))[0]
    s = member.settings
    assert not member.left_out and member.slot == "gpu" and s.side == 1024 and s.precision == "bf16"
    assert not s.flips and 0.6 * 80 * GiB < member.per_gpu * s.fold_memory_bytes <= 0.85 * 80 * GiB
    assert any("reader of characters" in r for r in member.reasons)
    two = dataclasses.replace(profile("cpu"), cpus=2)
    replica = DataShape(150, 60, inputs=frozenset({"image"}), image_side=104)
    cpu = get_engine("characters").plan(PlanContext(SPEC, two, 100.0, replica, None, 5, 2))[0]
    assert not cpu.left_out and cpu.slot == "cpu" and cpu.settings.side == 112  # 104 px up to 16's


def test_each_engine_takes_its_own_shape():
    characters, centres = get_engine("characters"), get_engine("centres")
    assert characters.applies(SPEC, frozenset({"image"})) and not centres.applies(SPEC, frozenset({"image"}))
    assert not characters.applies(load_spec("vinbigdata"), frozenset({"image"}))
    assert not get_engine("timm").applies(SPEC, frozenset({"image"}))


def _replica_pages(n: int, side: int):
    """`n` of the replica's pages (its glyphs, columns and codes) cached at `side`, their sizes and rows."""
    from PIL import Image

    from runner.demo import replica as generator

    replica = generator("kuzushiji-recognition")
    rng, shapes = np.random.default_rng(11), replica.glyphs()
    pictures, labels = zip(*(replica.page(rng, 100, 136, shapes) for _ in range(n)))
    cache = np.stack([np.asarray(p.resize((side, side), Image.BILINEAR)) for p in pictures])
    _, _, y = point_targets(SPEC, pd.DataFrame({"image_id": range(n), "labels": labels}), "train.csv", [])
    return cache, np.tile([100.0, 136.0], (n, 1)), y, list(labels)


def test_a_short_fold_reads_the_glyphs_past_the_prior_and_its_points_grade_as_written(tmp_path):
    side, n_train, n_val, n_test = 96, 48, 12, 3
    cache, sizes, y, labels = _replica_pages(n_train + n_val + n_test, side)
    np.save(tmp_path / "pages_96.npy", cache)
    np.save(tmp_path / "pages_96_sizes.npy", sizes)
    settings = get_engine("characters").Settings(side=side, epochs=10)
    result, val = short_fold(SPEC, "characters", settings, tmp_path / "pages_96.npy", y, (n_train, n_val, n_test),
                             tmp_path, 8.0, 4, warm="runner.engines.centres.reading")
    cut, learned = point_rows.tune_cut(y[val], result.val_pred)
    print(f"F1 {learned:.3f} from {cut:.2f} on; {result.epochs} epochs, best {result.best_epoch}; {result.message}")
    assert learned > 0.15, (learned, result.epochs, result.message)  # the prior writes no point: F1 0
    _, report = _written_and_graded(tmp_path, result.val_pred[:3], labels[n_train:n_train + 3], cut)
    assert report.valid_submission
    assert report.score == pytest.approx(point_rows.point_f1_rows(y[val][:3], result.val_pred[:3], cut), abs=1e-5)


def test_members_rows_of_points_are_fused_where_that_scores_better_never_averaged():
    from runner.results.blend import MemberPredictions, choose_blend, pool_gain

    truth = np.concatenate([_page((1, 5, 0, 0, 10, 10), (1, 6, 20, 0, 10, 10)) for _ in range(24)])
    left = np.concatenate([_page((0.9, 5, 1, 1, 8, 8)) for _ in range(24)])  # finds one of two: F1 2/3
    right = np.concatenate([_page((0.8, 6, 21, 1, 8, 8)) for _ in range(24)])  # the other one
    whole = np.concatenate([_page((0.9, 5, 1, 1, 8, 8), (0.8, 6, 21, 1, 8, 8)) for _ in range(24)])  # F1 1
    covered = np.ones(24, bool)
    members = {name: MemberPredictions(name, oof, covered, oof[:2]) for name, oof in
               (("baseline", np.zeros_like(truth)), ("left", left), ("right", right), ("whole", whole))}
    pool = [members["baseline"], members["left"]]
    assert pool_gain(SPEC.metric, truth, pool, "left") == pytest.approx(2 / 3)  # 1 - F1: from 1 to 1/3
    assert pool_gain(SPEC.metric, truth, pool + [members["right"]], "right") == pytest.approx(1.0)  # fused: F1 1
    assert pool_gain(SPEC.metric, truth, [members["whole"], members["left"]], "left") == 0.0
    blend = choose_blend(SPEC.metric, truth, [members["left"], members["right"]])
    assert blend.weights == {"left": 0.5, "right": 0.5} and blend.cv == 1.0  # each page's two points, not a mean
    assert blend.oof.shape == truth.shape and (point_rows.slots(blend.oof)[:, :2, 0] > 0).all()
    assert point_rows.slots(blend.test)[:, :2, 0].tolist() == [[0.45, 0.4]] * 2  # the test pages fused alike
    assert choose_blend(SPEC.metric, truth, [members["whole"], members["left"]]).weights == {"whole": 1.0}
    partial = MemberPredictions("right", right, np.arange(24) < 12, right[:2])  # cut before its last folds
    assert choose_blend(SPEC.metric, truth, [members["left"], partial]).weights == {"left": 1.0}
