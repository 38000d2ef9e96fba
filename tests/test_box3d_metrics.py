"""3-D boxes: the IoU of boxes standing on the ground and the mAP over IoU 0.5 to 0.95 pinned to MLE-bench's 3d-object-
detection grader (the Lyft devkit) on the fixed samples built here, with its refusals (a token count that is no
multiple of nine, a size not above 0) and its allowances (an empty string, a class the truth lacks)."""
import numpy as np
import pandas as pd
import pytest

from runner.common.box3d_metrics import Box, average_precision, box3d_map, iou, overlap_area, parse_boxes
from runner.competition.catalog import load_spec
from runner.competition.grade import grade

IDS = ["a" * 64, "b" * 64, "c" * 64]


def box(conf, x, y, z, w, l, h, yaw, name) -> str:
    return " ".join(str(v) for v in (conf, x, y, z, w, l, h, yaw, name))


def lyft_answers() -> pd.DataFrame:
    first = " ".join([box(1.0, 10.0, 10.0, 0.0, 2.0, 4.0, 1.5, 0.3, "car"),
                      box(1.0, 20.0, 5.0, 0.2, 1.9, 4.6, 1.6, 1.2, "car"),
                      box(1.0, 15.0, 15.0, 0.9, 0.7, 0.8, 1.8, 0.0, "pedestrian")])
    second = box(1.0, 0.0, 0.0, 0.0, 3.0, 10.0, 3.5, -2.0, "truck")
    third = box(1.0, 100.0, 50.0, -1.0, 2.0, 4.5, 1.7, 2.5, "car")
    return pd.DataFrame({"Id": IDS, "PredictionString": [first, second, third]})


def lyft_submission() -> pd.DataFrame:
    first = " ".join([box(0.9, 10.3, 10.1, 0.0, 2.0, 4.2, 1.5, 0.35, "car"),
                      box(0.8, 10.1, 10.0, 0.1, 2.0, 4.0, 1.5, 0.3, "car"),  # a second box on the same car
                      box(0.7, 20.2, 5.1, 0.2, 1.9, 4.6, 1.6, 1.6, "car"),
                      box(0.5, 40.0, 15.0, 0.9, 0.7, 0.8, 1.8, 0.0, "pedestrian"),
                      box(0.95, 0.0, 0.0, 0.0, 3.0, 12.0, 3.5, 0.0, "bus")])  # a class the truth lacks
    second = box(0.6, 0.0, 0.0, 0.0, 3.0, 10.0, 3.5, -2.0, "truck")
    return pd.DataFrame({"Id": IDS, "PredictionString": [first, second, ""]})


def _graded(tmp_path, submission: pd.DataFrame):
    private = tmp_path / "private"
    private.mkdir(exist_ok=True)
    lyft_answers().to_csv(private / "test.csv", index=False)
    submission.to_csv(tmp_path / "submission.csv", index=False)
    return grade(tmp_path / "submission.csv", load_spec("3d-object-detection-for-autonomous-vehicles"), private)


def test_overlap_and_iou_of_boxes_on_the_ground():
    square = np.array([[1.0, -1.0], [1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0]])
    assert overlap_area(square, square + [1.0, 0.0]) == pytest.approx(2.0)
    turned = np.array([[np.sqrt(2), 0.0], [0.0, np.sqrt(2)], [-np.sqrt(2), 0.0], [0.0, -np.sqrt(2)]])
    assert overlap_area(square, turned) == pytest.approx(8 * (np.sqrt(2) - 1))  # the octagon they share
    a = Box(1.0, (0.0, 0.0, 0.0), (2.0, 4.0, 2.0), 0.0, "car")
    assert iou(a, a) == pytest.approx(1.0)
    half_up = Box(1.0, (0.0, 0.0, 1.0), (2.0, 4.0, 2.0), 0.0, "car")  # half its height shared
    assert iou(a, half_up) == pytest.approx(8 / (16 + 16 - 8))
    assert iou(a, Box(1.0, (0.0, 0.0, 0.0), (2.0, 4.0, 2.0), np.pi / 2, "car")) == pytest.approx(8 / 24)


def test_average_precision_takes_boxes_by_confidence_and_each_truth_once():
    size = (2.0, 4.0, 2.0)
    truth = [Box(1.0, (0.0, 0.0, 0.0), size, 0.0, "car"), Box(1.0, (10.0, 0.0, 0.0), size, 0.0, "car")]
    hit, miss = Box(0.9, (0.0, 0.0, 0.0), size, 0.0, "car"), Box(0.95, (50.0, 0.0, 0.0), size, 0.0, "car")
    assert average_precision(truth, [hit], 0.5) == pytest.approx(0.5)  # half the cars found, at precision 1
    assert average_precision(truth, [miss, hit], 0.5) == pytest.approx(0.25)  # the confident miss first
    assert average_precision(truth, [hit, hit], 0.5) == pytest.approx(0.5)  # the second box on a car is false


def test_boxes_are_graded_as_mle_bench(tmp_path):
    report = _graded(tmp_path, lyft_submission())
    assert report.valid_submission and report.score == pytest.approx(0.40833, abs=1e-5)  # MLE-bench: 0.40833
    shuffled = lyft_submission().iloc[[2, 0, 1]]
    assert _graded(tmp_path, shuffled).score == report.score  # rows matched by Id
    empty = lyft_submission().assign(PredictionString="")
    report = _graded(tmp_path, empty)
    assert report.valid_submission and report.score == 0.0  # MLE-bench: 0.0
    assert box3d_map(lyft_answers()["PredictionString"].to_numpy(),
                     lyft_answers()["PredictionString"].to_numpy()) == pytest.approx(1.0)


@pytest.mark.parametrize("bad", ["0.9 1 2 3 1 1 1 0", "0.9 1 2 3 1 1 0 0 car", "0.9 1 2 3 1 1 1 0 car ",
                                 "high 1 2 3 1 1 1 0 car"])
def test_an_unreadable_box_string_is_invalid(tmp_path, bad):
    submission = lyft_submission()
    submission.loc[0, "PredictionString"] = bad
    assert not _graded(tmp_path, submission).valid_submission  # MLE-bench: invalid in each case
    assert parse_boxes(np.nan) == [] and parse_boxes("   ") == []
