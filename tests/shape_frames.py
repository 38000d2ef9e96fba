"""Fixed answers and submissions of masks, boxes and points, in each competition's own layout, whose scores
tests/test_shape_grading.py pins to what MLE-bench's graders give for them. Built from shapes drawn here (discs,
rectangles), numpy and pandas alone."""
from __future__ import annotations

import numpy as np
import pandas as pd

from runner.common import rle


def disc(height: int, width: int, cy: float, cx: float, radius: float) -> np.ndarray:
    y, x = np.ogrid[:height, :width]
    return (y - cy) ** 2 + (x - cx) ** 2 <= radius ** 2


def rect(height: int, width: int, top: int, bottom: int, left: int, right: int) -> np.ndarray:
    mask = np.zeros((height, width), bool)
    mask[top:bottom, left:right] = True
    return mask


def tgs() -> tuple[pd.DataFrame, pd.DataFrame]:
    """101 x 101 masks: both empty, a false alarm, empty predictions of 12%, 60% and 97% salt (MLE-bench scores
    these as masks of every pixel), overlaps at several IoUs, a whole-image prediction."""
    s, empty = 101, np.zeros((101, 101), bool)
    truths = [empty, empty, disc(s, s, 50, 50, 20), rect(s, s, 0, 61, 0, s), rect(s, s, 0, 98, 0, s),
              disc(s, s, 50, 50, 30), disc(s, s, 40, 60, 25), disc(s, s, 20, 20, 10)]
    guesses = [empty, disc(s, s, 10, 10, 5), empty, empty, empty, disc(s, s, 53, 50, 30), disc(s, s, 40, 60, 20),
               rect(s, s, 0, s, 0, s)]
    ids = [f"a{k}f" for k in range(len(truths))]
    answers = pd.DataFrame({"id": ids, "rle_mask": [rle.encode(m) for m in truths]})
    submission = pd.DataFrame({"id": ids[::-1], "rle_mask": [rle.encode(m) for m in guesses[::-1]]})
    return submission, answers


def hubmap() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Four slides of their own sizes: overlapping discs, a miss, an empty prediction (an empty cell). Every answer
    holds glomeruli: MLE-bench's grader fails on an empty one (it reads the answers' empty cells as no string)."""
    shapes = [(40, 30), (25, 50), (33, 33), (20, 20)]  # (height, width)
    truths = [disc(40, 30, 20, 15, 8) | disc(40, 30, 5, 5, 3), disc(25, 50, 12, 25, 6), disc(33, 33, 16, 16, 9),
              disc(20, 20, 10, 10, 3)]
    guesses = [disc(40, 30, 21, 14, 8), disc(25, 50, 12, 40, 4), disc(33, 33, 16, 16, 12), np.zeros((20, 20), bool)]
    ids = ["aaa6a05cc", "2f6ecfcdf", "b9a3865fc", "0486052bb"]
    answers = pd.DataFrame({"id": ids, "encoding": [rle.encode(m) for m in truths],
                            "width_pixels": [w for _, w in shapes], "height_pixels": [h for h, _ in shapes]})
    submission = pd.DataFrame({"id": ids, "predicted": [rle.encode(m) or np.nan for m in guesses]})
    return submission, answers


def contrails() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Four 16 x 16 records, "-" for none: one global Dice over them all."""
    truths = [rect(16, 16, 5, 6, 0, 16), np.zeros((16, 16), bool), rect(16, 16, 0, 16, 3, 5), disc(16, 16, 8, 8, 2)]
    guesses = [rect(16, 16, 5, 7, 2, 16), rect(16, 16, 9, 10, 0, 8), np.zeros((16, 16), bool), disc(16, 16, 8, 9, 2)]
    ids = [1000216489776414077, 1002653297254493116, 1007128298412315541, 100945619584718306]
    answers = pd.DataFrame({"record_id": ids, "encoded_pixels": [rle.written(m, empty="-") for m in truths],
                            "height": 16, "width": 16})
    submission = pd.DataFrame({"record_id": ids[::-1], "encoded_pixels": [rle.written(m, empty="-")
                                                                          for m in guesses[::-1]],
                               "height": 16, "width": 16})
    return submission, answers


def vesuvius() -> tuple[pd.DataFrame, pd.DataFrame]:
    """One 20 x 30 fragment, row-major: strokes against strokes shifted and a stray blob."""
    truth = rect(20, 30, 3, 5, 2, 25) | rect(20, 30, 10, 18, 6, 8)
    guess = rect(20, 30, 3, 6, 4, 28) | disc(20, 30, 15, 20, 3)
    answers = pd.DataFrame({"Id": ["a"], "Predicted": [rle.encode(truth, "row")], "width": [30], "height": [20]})
    return pd.DataFrame({"Id": ["a"], "Predicted": [rle.encode(guess, "row")]}), answers


def uw_madison() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two scans, three organ rows a slice, written row-major: a square one of 4 slices (12 x 12) and one of 3
    slices 9 wide and 7 tall (MLE-bench decodes both column-major: on it a scramble both sides share)."""
    rows, guesses = [], []
    for case, (width, height, depth) in (("case7_day0", (12, 12, 4)), ("case19_day21", (9, 7, 3))):
        for k in range(depth):
            for c, organ in enumerate(("large_bowel", "small_bowel", "stomach")):
                truth = rect(height, width, 1 + c, 4 + c + k, 2, 6 + k) if (k + c) % 3 else np.zeros(
                    (height, width), bool)
                guess = rect(height, width, 1 + c, 5 + c, 3, 7) if (k + 2 * c) % 4 else np.zeros((height, width), bool)
                rows.append({"id": f"{case}_slice_{k + 1:04}", "class": organ, "predicted": rle.encode(truth, "row"),
                             "image_width": float(width), "image_height": float(height)})
                guesses.append(rle.encode(guess, "row"))
    answers = pd.DataFrame(rows)
    submission = answers[["id", "class"]].assign(predicted=guesses)
    return submission, answers


def vinbigdata() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Four radiographs: a normal one, findings boxed well, loosely and not at all, a class the truth lacks."""
    answers = pd.DataFrame([
        ("0a1b", 14, "No finding", "R1", 0.0, 0.0, 1.0, 1.0),
        ("1c2d", 0, "Aortic enlargement", "R2", 40.0, 20.0, 52.0, 31.0),
        ("1c2d", 3, "Cardiomegaly", "R2", 20.0, 50.0, 60.0, 64.0),
        ("2e3f", 3, "Cardiomegaly", "R3", 22.0, 48.0, 58.0, 62.0),
        ("2e3f", 10, "Pleural effusion", "R3", 5.0, 55.0, 18.0, 68.0),
        ("3a4b", 14, "No finding", "R1", 0.0, 0.0, 1.0, 1.0)],
        columns=["image_id", "class_id", "class_name", "rad_id", "x_min", "y_min", "x_max", "y_max"])
    submission = pd.DataFrame({"image_id": ["3a4b", "2e3f", "1c2d", "0a1b"], "PredictionString": [
        "14 0.9 0 0 1 1 3 0.2 20 40 50 60",
        "3 0.8 25 50 55 60 10 0.4 30 10 40 20 0 0.3 40 20 52 31",
        "0 0.7 41 21 50 30 3 0.6 21 49 61 63 14 0.1 0 0 1 1",
        "14 0.95 0 0 1 1"]})
    return submission, answers


def siim() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Three studies and four images: labels with confidences, opacities found, shifted and missed."""
    answers = pd.DataFrame({"id": ["00a1_study", "00b2_study", "00c3_study", "10a1_image", "10b2_image", "10c3_image",
                                   "10d4_image"], "PredictionString": [
        "typical 1 0 0 1 1", "negative 1 0 0 1 1", "atypical 1 0 0 1 1",
        "opacity 1 10 10 30 40 opacity 1 50 10 70 40", "none 1 0 0 1 1", "opacity 1 20 20 35 35",
        "none 1 0 0 1 1"]})
    submission = pd.DataFrame({"id": ["10d4_image", "10c3_image", "10b2_image", "10a1_image", "00c3_study",
                                      "00b2_study", "00a1_study"], "PredictionString": [
        "none 0.7 0 0 1 1 opacity 0.2 20 20 35 35",
        "opacity 0.6 22 21 36 37",
        "opacity 0.5 5 5 20 20 none 0.4 0 0 1 1",
        "opacity 0.9 11 9 31 41 opacity 0.3 60 20 80 50",
        "typical 0.6 0 0 1 1 atypical 0.3 0 0 1 1",
        "negative 0.8 0 0 1 1 typical 0.1 0 0 1 1",
        "typical 0.5 0 0 1 1 indeterminate 0.4 0 0 1 1"]})
    return submission, answers


def kuzushiji() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Three pages: points inside their boxes, on an edge (not strictly inside), of the wrong code, twice in one
    box, and a page predicted empty."""
    answers = pd.DataFrame({"image_id": ["hnsd006-002", "100241706_00004_2", "umgy001-016"], "labels": [
        "U+306F 10 10 20 20 U+304C 40 10 20 20 U+306F 10 40 20 20",
        "U+3057 5 5 10 12",
        "U+306B 0 0 30 30 U+306E 50 50 10 10"]})
    submission = pd.DataFrame({"image_id": ["umgy001-016", "hnsd006-002", "100241706_00004_2"], "labels": [
        np.nan,
        "U+306F 15 15 U+306F 16 16 U+304C 40 20 U+306F 20 50 U+3042 50 20",
        "U+3057 10 10.5"]})
    return submission, answers


FRAMES = {"tgs-salt-identification-challenge": tgs, "hubmap-kidney-segmentation": hubmap,
          "google-research-identify-contrails-reduce-global-warming": contrails,
          "vesuvius-challenge-ink-detection": vesuvius, "uw-madison-gi-tract-image-segmentation": uw_madison,
          "vinbigdata-chest-xray-abnormalities-detection": vinbigdata, "siim-covid19-detection": siim,
          "kuzushiji-recognition": kuzushiji}
