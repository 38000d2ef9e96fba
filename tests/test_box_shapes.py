"""Boxes learned as rows of slots: a train file's row per drawn box gathered into a row per image, rows written back
as the prediction strings the grader parses, in each image's pixels, and scored alike in cross-validation and
grading; the boxes engine learns where findings are, past the prior of typical boxes; it takes box specs alone."""
import numpy as np
import pandas as pd
import pytest

from runner.common import box_rows, metrics
from runner.competition.catalog import load_spec
from runner.competition.grade import grade
from runner.data.box_targets import box_targets
from runner.engines.base import FoldData
from runner.planning.registry import get_engine
from runner.results.submission import Predictions, build_submission, validate_submission

CLASSES = 14  # vinbigdata's findings; 14 is no finding
SPEC = load_spec("vinbigdata")


def _dicom(path, width: int, height: int, rng) -> None:
    from runner.demo._radiographs import write_dicom

    write_dicom(path, rng.uniform(0, 1, (height, width)), rng)


def test_a_row_per_drawn_box_is_gathered_into_a_row_of_slots_per_image(tmp_path):
    rng = np.random.default_rng(0)
    (tmp_path / "train").mkdir()
    for name, (w, h) in {"a": (60, 80), "b": (70, 72)}.items():
        _dicom(tmp_path / "train" / f"{name}.dicom", w, h, rng)
    train = pd.DataFrame({"image_id": ["a", "a", "a", "b", "b"], "class_id": [3, 3, 8, 14, 14],
                          "x_min": [30.0, 36.0, 6.0, np.nan, np.nan], "y_min": [40.0, 44.0, 8.0, np.nan, np.nan],
                          "x_max": [54.0, 54.0, 12.0, np.nan, np.nan], "y_max": [60.0, 64.0, 16.0, np.nan, np.nan]})
    frame, classes, y = box_targets(SPEC, train, tmp_path / "train.csv", [])
    assert classes is None and frame["image_id"].tolist() == ["a", "b"]
    assert y.shape == (2, box_rows.row_width(CLASSES))
    grid = box_rows.slots(y)
    assert grid[0, 3, 1].tolist() == pytest.approx([1.0, 33 / 60, 42 / 80, 54 / 60, 62 / 80])  # right: two readers
    assert grid[0, 8, 0].tolist() == pytest.approx([1.0, 6 / 60, 8 / 80, 12 / 60, 16 / 80])  # left
    assert grid[0, 3, 0, 0] == 0 and grid[1, :, :, 0].sum() == 0
    assert grid[1, 3, 1, 1:].tolist() == pytest.approx(grid[0, 3, 1, 1:].tolist())  # nobody drew it: typical box
    assert y[:, -1].tolist() == [0.0, 1.0]


def test_cross_validation_scores_the_boxes_as_the_grader_scores_the_file_written(tmp_path):
    """Rows of confidences and boxes (in shares) written in each image's pixels parse as the grader parses them,
    and grade as the out-of-fold score of the same rows."""
    rng = np.random.default_rng(1)
    n = 30
    sizes = [(float(rng.integers(60, 73)), float(rng.integers(72, 81))) for _ in range(n)]
    truth = np.zeros((n, box_rows.row_width(CLASSES)))
    t = box_rows.slots(truth).copy()
    centres = rng.uniform(0.15, 0.85, (CLASSES, 2, 2))
    for i in range(n):
        if rng.random() < 0.5:
            truth[i, -1] = 1.0
            continue
        for c in rng.choice(CLASSES, 2, replace=False):
            s = int(rng.integers(2))
            u, v = centres[c, s] + rng.normal(0, 0.03, 2)
            t[i, c, s] = (1.0, u - 0.08, v - 0.06, u + 0.08, v + 0.06)
    truth[:, :-1] = t.reshape(n, -1)
    pred = truth.copy()
    p = box_rows.slots(pred).copy()
    p[..., 0] = np.clip(p[..., 0] * 0.6 + rng.uniform(0, 0.4, p.shape[:3]), 0, 1)
    p[..., 1:] = centres[None, :, :, [0, 1, 0, 1]] + np.array([-0.08, -0.06, 0.08, 0.06])
    pred[:, :-1] = p.reshape(n, -1)
    pred[:, -1] = np.clip(truth[:, -1] * 0.5 + rng.uniform(0, 0.5, n), 0, 1)
    ids = [f"{k:032x}" for k in range(n)]
    sample = pd.DataFrame({"image_id": ids, "PredictionString": "14 1 0 0 1 1"})
    sample.attrs[box_rows.SIZES] = sizes
    written = build_submission(sample, SPEC, ["PredictionString"], Predictions(pred, None, "test"))
    validate_submission(written, sample, SPEC, ["PredictionString"])
    assert written["PredictionString"].str.contains("  ").sum() == 0
    answers = [dict(image_id=image, class_id=int(label), x_min=x0, y_min=y0, x_max=x1, y_max=y1)
               for image, row, size in zip(ids, truth, sizes)
               for label, _, x0, y0, x1, y1 in box_rows.boxes_of(row, True, size)]
    pd.DataFrame(answers).to_csv(tmp_path / SPEC.answers_file, index=False)
    written.to_csv(tmp_path / "submission.csv", index=False)
    report = grade(tmp_path / "submission.csv", SPEC, tmp_path)
    assert report.valid_submission
    cv = metrics.score(SPEC.metric, truth, pred)
    assert 0.2 < cv < 0.99
    assert report.score == pytest.approx(cv, abs=2e-3)


def _images(rng, n: int, side: int = 48):
    """Noisy gray squares, half normal; the others a bright patch of class 0 (left, high) or 1 (right, low)."""
    y = np.zeros((n, box_rows.row_width(2)))
    grid = box_rows.slots(y).copy()
    pixels = rng.normal(0.5, 0.08, (n, side, side))
    places = {0: (0, (0.2, 0.25, 0.4, 0.45)), 1: (1, (0.6, 0.55, 0.8, 0.75))}
    for i in range(n):
        if rng.random() < 0.5:
            y[i, -1] = 1.0
            continue
        for c in rng.choice(2, int(rng.integers(1, 3)), replace=False):
            s, box = places[int(c)]
            x0, y0, x1, y1 = (np.array(box) * side).astype(int)
            pixels[i, y0:y1, x0:x1] += 0.25
            grid[i, c, s] = (1.0, *box)
    y[:, :-1] = grid.reshape(n, -1)
    return np.clip(pixels, 0, 1).reshape(n, -1).astype(np.float32), y


def test_the_engine_learns_which_images_hold_findings_and_where_past_the_prior(tmp_path):
    rng = np.random.default_rng(2)
    x, y = _images(rng, 160)
    engine = get_engine("boxes")
    settings = engine.Settings()
    data = FoldData(SPEC, None, x[:100], y[:100], x[100:140], y[100:140], x[140:])
    result = engine.train_fold(settings, data, tmp_path, deadline=float("inf"))
    assert result.val_pred.shape == (40, y.shape[1]) and result.test_pred.shape == (20, y.shape[1])
    prior = np.tile(y[:100].mean(axis=0), (40, 1))
    learned = metrics.score(SPEC.metric, y[100:140], result.val_pred)
    baseline = metrics.score(SPEC.metric, y[100:140], prior)
    assert learned > baseline + 0.2, (learned, baseline)


def test_it_takes_box_competitions_only():
    engine = get_engine("boxes")
    assert SPEC.learned_as == "boxes"
    assert engine.applies(SPEC, frozenset({"image"}))
    assert not engine.applies(load_spec("tgs-salt"), frozenset({"image"}))
    assert not engine.applies(load_spec("dogs-vs-cats-redux-kernels-edition"), frozenset({"image"}))
    assert not get_engine("timm").applies(SPEC, frozenset({"image"}))
    assert not get_engine("pixels").applies(SPEC, frozenset({"image"}))
