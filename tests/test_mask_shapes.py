"""Masks learned pixel by pixel: run-length labels read into rows of pixels, rows of probabilities written back as
the run-length strings the grader reads, scored alike in cross-validation and grading, and the pixel cut and least
mask size tuned on out-of-fold rows moving the metric the right way."""
import numpy as np
import pandas as pd
import pytest

from runner.common import metrics, rle
from runner.common.errors import InputError
from runner.common.mask_metrics import MASK_CUT, MASK_METRICS, decided, tune_mask_cut
from runner.competition.catalog import load_spec
from runner.competition.grade import grade
from runner.data.mask_targets import mask_targets
from runner.planning.registry import engine_names, get_engine
from runner.results.decisions import tuned
from runner.results.submission import Predictions, build_submission, validate_submission

SIDE = 101  # tgs-salt's slices


def blobs(rng, count: int, empty_share: float = 0.4) -> np.ndarray:
    """(count, SIDE, SIDE) boolean masks: a disc of drawn size and place, none in `empty_share` of them."""
    rows, cols = np.indices((SIDE, SIDE))
    masks = np.zeros((count, SIDE, SIDE), dtype=bool)
    for k in range(count):
        if rng.random() >= empty_share:
            r, c, radius = rng.integers(20, 80), rng.integers(20, 80), rng.integers(6, 30)
            masks[k] = (rows - r) ** 2 + (cols - c) ** 2 <= radius ** 2
    return masks


def test_run_length_labels_are_read_as_rows_of_pixels_an_empty_cell_an_empty_mask():
    spec = load_spec("tgs-salt")
    masks = blobs(np.random.default_rng(0), 12)
    texts = [rle.encode(m, "column") or np.nan for m in masks]  # pandas reads an empty cell as NaN
    y = mask_targets(spec, pd.DataFrame({"id": [f"i{k}" for k in range(12)], "rle_mask": texts}), "train.csv")
    assert y.shape == (12, SIDE * SIDE) and y.dtype == np.float32
    assert np.array_equal(y.reshape(12, SIDE, SIDE).astype(bool), masks)


def test_a_string_no_grader_decodes_is_an_error_naming_its_row_and_column():
    spec = load_spec("tgs-salt")
    train = pd.DataFrame({"id": ["a", "b"], "rle_mask": ["1 5", "9 2 3 4"]})  # starts must rise
    with pytest.raises(InputError, match=r"train.csv: row 3, column 'rle_mask'"):
        mask_targets(spec, train, "train.csv")


def test_cross_validation_scores_the_masks_as_the_grader_scores_the_file_written(tmp_path):
    """Rows of probabilities, written at a cut and a least size, grade as the out-of-fold score of the same masks;
    a mask below the least size is written empty."""
    spec = load_spec("tgs-salt")
    rng = np.random.default_rng(1)
    truth = blobs(rng, 20).reshape(20, -1)
    probabilities = np.clip(truth * 0.55 + rng.uniform(0, 0.5, truth.shape), 0, 1).astype(np.float32)
    ids = [f"s{k:02d}" for k in range(20)]
    sample = pd.DataFrame({"id": ids, "rle_mask": "1 1"})
    cut, least = 0.6, 40
    written = build_submission(sample, spec, ["rle_mask"], Predictions(probabilities, None, "test", (cut, least)))
    validate_submission(written, sample, spec, ["rle_mask"])
    answers = pd.DataFrame({"id": ids, "rle_mask": [rle.encode(m.reshape(SIDE, SIDE), "column") for m in truth]})
    answers.to_csv(tmp_path / spec.answers_file, index=False)
    written.to_csv(tmp_path / "submission.csv", index=False)
    report = grade(tmp_path / "submission.csv", spec, tmp_path)
    masks = decided(probabilities, cut, least)
    assert report.valid_submission
    assert report.score == pytest.approx(metrics.score(spec.metric, truth.astype(float), masks), abs=1e-5)
    small = probabilities.copy()
    small[0] = 0.0
    small[0, :least - 1] = 0.9  # a find smaller than the least size
    again = build_submission(sample, spec, ["rle_mask"], Predictions(small, None, "test", (cut, least)))
    assert again["rle_mask"].iloc[0] == ""


def test_the_cut_and_least_size_tuned_on_out_of_fold_rows_beat_the_default():
    """Empty slices carry small confident false finds and true bodies sit just under the default cut: the tuned
    cut comes down and the least size rises, and the IoU sweep of the masks written that way is higher."""
    rng = np.random.default_rng(2)
    truth = blobs(rng, 80).reshape(80, -1)
    pred = np.where(truth, 0.45, 0.1).astype(np.float32)
    for row in np.flatnonzero(~truth.any(axis=1)):  # a speck of 30 pixels in every empty slice
        pred[row, :30] = 0.9
    metric = MASK_METRICS["mask_iou_sweep"]
    default = metric(truth, decided(pred))
    cut, least, value = tune_mask_cut(metric, truth.astype(np.float32), pred)
    assert cut < MASK_CUT and least > 30 and value > default + 0.3
    assert value == pytest.approx(metric(truth, decided(pred, cut, least)))
    spec = load_spec("tgs-salt")
    assert tuned(spec, truth.astype(np.float32), pred) == (cut, float(least))  # what the blend and prior write


def test_only_an_engine_that_learns_pixels_takes_a_mask_competition():
    mask_spec, image_spec = load_spec("tgs-salt"), load_spec("aerial-cactus")
    for name in engine_names():
        engine = get_engine(name)
        if engine.learns == "pixels":
            assert not engine.applies(image_spec, frozenset({"image"}))
        else:
            assert not engine.applies(mask_spec, frozenset({"image", "table"})), name


def test_band_records_are_read_with_their_masks_and_drawn_in_the_spec_s_channels(tmp_path):
    """Folders of band arrays (contrails' layout): labelled folders of train/ and validation/ read with each mask
    as the run-length string the competition writes, test folders in the sample's order; the picture's first
    channel is band 15 less band 14 at the labelled frame."""
    from runner.data.band_records import band_records
    from runner.data.decoders import band_picture

    spec = load_spec("contrails")
    rng = np.random.default_rng(4)
    masks = {}
    for folder, name, labelled in (("train", "11", True), ("validation", "12", True), ("test", "13", False)):
        where = tmp_path / folder / name
        where.mkdir(parents=True)
        for band in range(8, 17):
            values = rng.normal(280, 1, (6, 6, 8)).astype(np.float32)
            if band == 15:
                values[2, :, spec.bands.frame] -= 20  # a cold line in band 15 alone, at the labelled frame
            np.save(where / f"band_{band:02}.npy", values)
        if labelled:
            masks[name] = rng.random((6, 6)) < 0.3
            np.save(where / "human_pixel_masks.npy", masks[name][..., None].astype(np.int32))
    sample = pd.DataFrame({"record_id": ["13", "99"], "encoded_pixels": "-", "height": 6, "width": 6})
    train, folders, tests, _ = band_records(spec, tmp_path, tmp_path / "work", sample)
    assert train["record_id"].tolist() == ["11", "12"]
    assert train["encoded_pixels"].tolist() == [rle.written(masks[k], "column", "-") for k in ("11", "12")]
    assert tests == [tmp_path / "test" / "13", None]
    picture = np.asarray(band_picture(spec.bands)(folders[0]))
    assert picture.shape == (6, 6, 3) and picture[2, :, 0].max() < picture[[0, 1, 3, 4, 5], :, 0].min()


def test_a_mask_size_comes_from_the_sample_where_the_spec_gives_none():
    from runner.data.mask_targets import mask_pixels

    spec = load_spec("contrails")
    assert mask_pixels(spec, pd.DataFrame({"height": [6, 6], "width": [9, 9]})) == (6, 9)
    with pytest.raises(InputError, match="2 sizes"):
        mask_pixels(spec, pd.DataFrame({"height": [6, 7], "width": [9, 9]}))


def test_tuning_a_cut_stops_at_its_time_however_slow_the_metric():
    """The supervisor tunes after every fold inside the budget: a metric slow enough (Hausdorff distances of whole
    scans) is asked for a few pairs, the default first, never the whole grid."""
    import time

    from runner.common.mask_metrics import CUTS, LEAST_SHARES

    calls = []

    def slow(truth, masks):
        calls.append(1)
        time.sleep(0.1)
        return float(masks.sum())

    y = np.zeros((4, 16), dtype=np.float32)
    cut, least, _ = tune_mask_cut(slow, y, np.full((4, 16), 0.45, dtype=np.float32), seconds=0.25)
    assert len(calls) <= 5 < len(CUTS) * len(LEAST_SHARES)
    assert (cut, least) != (MASK_CUT, 0)  # the next likeliest pair (0.4) marks every pixel: more, so better here
