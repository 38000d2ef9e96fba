"""The box detector: boxes drawn into its heatmap targets decode back to within a pixel, its plan sizes a card's
batch from the card's memory (no card needed: planning is pure) and a CPU's folds in whole waves, its cache
stretches each radiograph whole, and a short real fold finds bright findings past the prior, its rows written as
the grader parses them."""
import dataclasses

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from runner.common import box_rows, metrics
from runner.competition.catalog import load_spec
from runner.competition.grade import grade
from runner.data.dataset import Dataset
from runner.engines.centres import heatmaps
from runner.engines.centres.planning import MIN_EPOCHS, centres_member
from runner.machine.hardware import GiB
from runner.machine.profiles import profile
from runner.planning.portfolio import DataShape, Member, PlanContext
from runner.planning.registry import get_engine
from runner.results.submission import Predictions, build_submission, validate_submission
from short_fold import short_fold
from test_box_shapes import _images

SPEC = load_spec("vinbigdata")
CLASSES = 14


def _rows(boxes: dict) -> np.ndarray:
    """One row of boxes holding `{(class, side): box in shares}`."""
    row = np.zeros((1, box_rows.row_width(CLASSES)))
    grid = box_rows.slots(row).copy()
    for (c, s), box in boxes.items():
        grid[0, c, s] = (1.0, *box)
    row[:, :-1] = grid.reshape(1, -1)
    return row


def test_boxes_drawn_into_the_targets_decode_back_to_within_a_pixel():
    side, cells = 64, 16
    drawn = {(0, 1): (0.51, 0.25, 0.63, 0.36), (3, 0): (0.12, 0.58, 0.47, 0.74), (3, 1): (0.55, 0.6, 0.93, 0.71),
             (8, 0): (0.26, 0.4, 0.3, 0.44)}  # a 3 px nodule: smaller than a cell
    rows = _rows(drawn)
    heat, regression, centres = heatmaps.encode(rows, cells)
    assert heat.shape == (1, CLASSES, cells, cells) and centres.sum() == len(drawn)
    assert heat[centres].min() == 1.0 and heat[0, 5].max() == 0.0  # each centre peaks at 1; an absent class is 0
    decoded = box_rows.slots(heatmaps.decode(heat, regression, np.array([0.2])))[0]
    for (c, s), box in drawn.items():
        assert decoded[c, s, 0] == 1.0
        assert np.abs(decoded[c, s, 1:] - box).max() * side < 1.0
    assert decoded[..., 0].sum() == len(drawn)  # no other slot holds a box: class 3's two peaks are one a side
    assert heatmaps.decode(heat, regression, np.array([0.2]))[0, -1] == 0.2


def test_a_mirrored_image_moves_each_box_to_the_other_side_and_its_heads_turn_back():
    import torch

    from runner.engines.centres.network import unmirrored

    mirrored = heatmaps.mirrored
    rows = _rows({(2, 0): (0.1, 0.2, 0.3, 0.4), (5, 1): (0.62, 0.1, 0.93, 0.2)})
    once = box_rows.slots(mirrored(rows))[0]
    assert once[2, 1].tolist() == pytest.approx([1.0, 0.7, 0.2, 0.9, 0.4]) and once[2, 0, 0] == 0
    assert np.allclose(mirrored(mirrored(rows)), rows)
    # the heads of the mirror image (here its exact targets), turned back, decode to the image's own boxes
    heat, regression, _ = heatmaps.encode(mirrored(rows), 16)
    back = unmirrored((torch.from_numpy(heat), torch.from_numpy(regression), torch.zeros(1)))
    decoded = box_rows.slots(heatmaps.decode(back[0].numpy(), back[1].numpy(), np.zeros(1)))[0]
    assert np.abs(decoded[[2, 5], [0, 1]] - box_rows.slots(rows)[0, [2, 5], [0, 1]]).max() < 1e-5
    assert decoded[..., 0].sum() == 2  # and nothing else


def test_on_a_card_the_batch_fills_its_share_of_the_memory_in_bf16():
    h100 = profile("h100-80gb")  # a Hardware value with a GPU: nothing is asked of a real card
    real = DataShape(13_500, 1_500, inputs=frozenset({"image"}), image_side=2_000)
    member = centres_member(PlanContext(SPEC, h100, 7200.0, real, None, 5, h100.cpus))
    s = member.settings
    assert not member.left_out and member.slot == "gpu" and s.device == "cuda" and s.precision == "bf16"
    assert s.side == 512 and s.side % 2 ** s.levels == 0 and member.per_gpu == 4 and member.folds == 4
    assert 8 < s.batch_size < 128  # what the card holds at 512 px, not the data's or the cap's bound
    assert 0.6 * 80 * GiB < member.per_gpu * s.fold_memory_bytes <= 0.85 * 80 * GiB
    assert any(f"batch {s.batch_size}" in r and "bf16" in r for r in member.reasons)
    small = centres_member(PlanContext(SPEC, h100, 100.0, DataShape(200, 100, inputs=frozenset({"image"}),
                                                                    image_side=66), None, 5, h100.cpus))
    assert small.settings.side == 96 and any("not by the card" in r for r in small.reasons)  # 66 px, up to 32's


def test_on_a_cpu_its_folds_fill_whole_waves_of_one_core_each():
    two = dataclasses.replace(profile("cpu"), cpus=2)
    replica = DataShape(200, 100, inputs=frozenset({"image"}), image_side=66)
    member = get_engine("centres").plan(PlanContext(SPEC, two, 100.0, replica, None, 5, 2))[0]
    s = member.settings
    assert not member.left_out and member.slot == "cpu" and member.threads == s.threads == 1
    assert member.folds == 4 and s.side == 64 and s.epochs >= MIN_EPOCHS  # 2 waves of 2, not 3 for 5
    assert 2 * member.fold_seconds <= 100.0 + 1e-6 and any("4 folds, not 5" in r for r in member.reasons)
    assert Member.model_validate_json(member.model_dump_json()) == member  # plan.json round-trips its settings
    assert centres_member(PlanContext(SPEC, two, 5.0, replica, None, 5, 2)).left_out.startswith("4 folds x")


def test_it_takes_box_competitions_only():
    engine = get_engine("centres")
    assert engine.applies(SPEC, frozenset({"image"}))
    assert not engine.applies(load_spec("tgs-salt"), frozenset({"image"}))
    assert not engine.applies(load_spec("dogs-vs-cats-redux-kernels-edition"), frozenset({"image"}))


def test_the_cache_holds_each_radiograph_whole_at_the_side(tmp_path):
    wide = np.zeros((40, 80), dtype=np.uint8)
    wide[:, 60:] = 255  # the right quarter white: kept where it is, not cropped away
    Image.fromarray(wide).save(tmp_path / "a.png")
    dataset = Dataset(SPEC, ["PredictionString"], None, np.zeros((1, box_rows.row_width(CLASSES))),
                      {"image": ([tmp_path / "a.png"], [tmp_path / "missing.png"])}, image_side=40)
    ready = get_engine("centres").prepare(get_engine("centres").Settings(side=32), dataset, tmp_path, 1)
    cache = np.load(ready.image_cache)
    assert cache.shape == (2, 32, 32, 3) and ready.views["image"] == ([0], [1])
    assert cache[0, :, 26:].min() > 200 and cache[0, :, :22].max() < 50 and (cache[0, ..., 0] == cache[0, ..., 2]).all()
    assert not ready.untrainable.any() and any("unreadable test image" in w for w in ready.warnings)


def test_a_short_fold_finds_the_findings_past_the_prior_and_its_rows_grade_as_written(tmp_path):
    side, n_train, n_val, n_test = 32, 64, 24, 8
    shades, y = _images(np.random.default_rng(3), n_train + n_val + n_test, side)  # the boxes engine's findings
    gray = (np.clip(shades, 0, 1) * 255).astype(np.uint8).reshape(-1, side, side, 1)
    np.save(tmp_path / "cache.npy", np.repeat(gray, 3, axis=-1))
    settings = get_engine("centres").Settings(side=side, epochs=8)
    result, val = short_fold(SPEC, "centres", settings, tmp_path / "cache.npy", y, (n_train, n_val, n_test),
                             tmp_path, 2.5, 3, warm="runner.engines.centres.training")
    learned = metrics.score(SPEC.metric, y[val], result.val_pred)
    prior = metrics.score(SPEC.metric, y[val], np.tile(y[:n_train].mean(axis=0), (n_val, 1)))
    print(f"{learned:.3f} against the prior's {prior:.3f}; {result.epochs} epochs, best {result.best_epoch}")
    assert learned > prior + 0.2, (learned, prior, result.epochs, result.message)
    # the validation rows written in their images' pixels parse and grade as the grader reads the file
    ids, sizes = [f"{k:032x}" for k in range(n_val)], [(60.0, 72.0)] * n_val
    sample = pd.DataFrame({"image_id": ids, "PredictionString": "14 1 0 0 1 1"})
    sample.attrs[box_rows.SIZES] = sizes
    written = build_submission(sample, SPEC, ["PredictionString"], Predictions(result.val_pred, None, "test"))
    validate_submission(written, sample, SPEC, ["PredictionString"])
    answers = [dict(image_id=image, class_id=int(label), x_min=x0, y_min=y0, x_max=x1, y_max=y1)
               for image, row, size in zip(ids, y[val], sizes) for label, _, x0, y0, x1, y1 in
               box_rows.boxes_of(row, True, size)]
    pd.DataFrame(answers).to_csv(tmp_path / SPEC.answers_file, index=False)
    written.to_csv(tmp_path / "submission.csv", index=False)
    report = grade(tmp_path / "submission.csv", SPEC, tmp_path)
    assert report.valid_submission and report.score == pytest.approx(learned, abs=5e-3)
