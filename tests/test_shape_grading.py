"""Masks, boxes and points graded as MLE-bench grades them: fixed answers and submissions (tests/shape_frames.py),
written as files and graded by `runner grade`'s own function, give MLE-bench's scores, and what its graders reject
is invalid here too. The metrics' row-by-row totals (a bootstrap's resamples) equal their whole figures, and the
fast forms equal the libraries'."""
import numpy as np
import pandas as pd
import pytest

from runner.common import box_metrics
from runner.common.mask_metrics import MASK_METRICS
from runner.competition import grade as grading
from runner.competition import scoring
from runner.competition.catalog import load_spec
from shape_frames import FRAMES, tgs

SCORES = {  # MLE-bench's grader on each competition's frames
    "tgs-salt-identification-challenge": 0.425,  # MLE-bench: 0.425
    "hubmap-kidney-segmentation": 0.38795,  # MLE-bench: 0.38795
    "google-research-identify-contrails-reduce-global-warming": 0.4,  # MLE-bench: 0.4
    "vesuvius-challenge-ink-detection": 0.45064,  # MLE-bench: 0.45064
    "uw-madison-gi-tract-image-segmentation": 0.72122,  # MLE-bench: 0.72122
    "vinbigdata-chest-xray-abnormalities-detection": 0.56312,  # MLE-bench (numpy 1.26): 0.56312
    "siim-covid19-detection": 0.85556,  # MLE-bench: 0.85556
    "kuzushiji-recognition": 0.5,  # MLE-bench: 0.5
}


def set_cell(frame: pd.DataFrame, column: str, row: int, value) -> pd.DataFrame:
    frame = frame.copy()
    frame[column] = frame[column].astype(object)
    frame.loc[row, column] = value
    return frame


# (competition, the submission changed, MLE-bench's score: None where it calls the submission invalid)
VARIANTS = [
    ("tgs-salt-identification-challenge", lambda s: s.assign(extra=1), None),
    ("tgs-salt-identification-challenge", lambda s: set_cell(s, "rle_mask", 0, "50 2 10 3"), None),
    ("tgs-salt-identification-challenge", lambda s: set_cell(s, "rle_mask", 0, "10 5 12 3"), None),
    ("tgs-salt-identification-challenge", lambda s: set_cell(s, "rle_mask", 0, "0 5"), None),
    ("tgs-salt-identification-challenge", lambda s: set_cell(s, "rle_mask", 0, "1.5 5"), None),
    ("tgs-salt-identification-challenge", lambda s: set_cell(s, "rle_mask", 0, "10200 50"), 0.425),
    ("google-research-identify-contrails-reduce-global-warming",
     lambda s: set_cell(s, "encoded_pixels", 0, np.nan), None),  # an empty mask is "-", never an empty cell
    ("google-research-identify-contrails-reduce-global-warming", lambda s: s.drop(columns=["height", "width"]), 0.4),
    ("vesuvius-challenge-ink-detection", lambda s: set_cell(s, "Predicted", 0, np.nan), None),
    ("vesuvius-challenge-ink-detection", lambda s: s.assign(width=30), None),
    ("hubmap-kidney-segmentation", lambda s: s.drop(columns=["id"]), None),
    ("uw-madison-gi-tract-image-segmentation", lambda s: s.assign(predicted=np.nan), 0.0),
    ("vinbigdata-chest-xray-abnormalities-detection", lambda s: set_cell(s, "PredictionString", 0, np.nan), None),
    ("vinbigdata-chest-xray-abnormalities-detection",
     lambda s: set_cell(s, "PredictionString", 3, "14  0.95 0 0 1 1"), None),  # a doubled space
    ("vinbigdata-chest-xray-abnormalities-detection", lambda s: s.iloc[1:], None),
    ("vinbigdata-chest-xray-abnormalities-detection",  # an image in two rows: its boxes count together
     lambda s: pd.concat([s, s.iloc[[1]].assign(PredictionString="0 0.05 40 20 52 31")]), 0.56312),
    ("siim-covid19-detection", lambda s: set_cell(s, "PredictionString", 0, "none 0.7 0 0 1"), None),
    ("siim-covid19-detection", lambda s: set_cell(s, "PredictionString", 0, "none high 0 0 1 1"), None),
    ("siim-covid19-detection", lambda s: set_cell(s, "PredictionString", 0, np.nan), None),
    ("kuzushiji-recognition", lambda s: set_cell(s, "labels", 1, "U+306F 15"), None),
    ("kuzushiji-recognition", lambda s: set_cell(s, "labels", 1, "U+306F x 15"), None),
]


def graded(competition: str, submission: pd.DataFrame, answers: pd.DataFrame, folder):
    spec = load_spec(competition)
    private = folder / "private"
    private.mkdir(exist_ok=True)
    answers.to_csv(private / spec.answers_file, index=False)
    submission.to_csv(folder / "submission.csv", index=False)
    return grading.grade(folder / "submission.csv", spec, private)


@pytest.mark.parametrize("competition", sorted(SCORES))
def test_each_competition_scores_its_frames_as_mle_bench(competition, tmp_path):
    report = graded(competition, *FRAMES[competition](), tmp_path)
    assert report.valid_submission, report.error
    assert report.score == pytest.approx(SCORES[competition], abs=1e-5)


@pytest.mark.parametrize("competition, change, expected", VARIANTS)
def test_what_mle_bench_rejects_is_invalid_and_what_it_takes_scores_alike(competition, change, expected, tmp_path):
    submission, answers = FRAMES[competition]()
    report = graded(competition, change(submission), answers, tmp_path)
    if expected is None:
        assert not report.valid_submission and report.error
    else:
        assert report.score == pytest.approx(expected, abs=1e-5), report.error


@pytest.mark.parametrize("competition", sorted(SCORES))
def test_every_row_once_totals_the_whole_figure_and_the_edge_over_itself_is_nil(competition):
    submission, answers = FRAMES[competition]()
    spec = load_spec(competition)
    scored = scoring.scored(spec, submission, answers)
    rows = np.arange(len(scored.truth))
    assert scored.score(rows) == pytest.approx(scored.score(), abs=1e-9)
    edge = grading.edge(spec, submission, submission, answers, rounds=50)
    assert edge.value == edge.low == edge.high == 0


def test_the_mask_metrics_take_masks_as_an_engine_gives_them():
    submission, answers = tgs()
    from runner.common import rle

    truths = [rle.decode(t, 101, 101) for t in answers.sort_values("id")["rle_mask"]]
    guesses = [rle.decode(p, 101, 101) for p in submission.sort_values("id")["rle_mask"]]
    assert MASK_METRICS["mask_iou_sweep"](truths, guesses) == pytest.approx(0.425)
    empty, full = np.zeros((4, 4), bool), np.ones((4, 4), bool)
    assert MASK_METRICS["mean_dice"]([empty, full], [empty, full]) == 1.0  # both empty: 1, as hubmap's grader says
    assert np.isnan(MASK_METRICS["global_dice"]([empty], [empty]))
    assert MASK_METRICS["pixel_f05"]([full], [empty]) == 0.0


def test_cocos_accumulation_is_what_pycocotools_gives_for_many_boxes():
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    rng = np.random.default_rng(5)
    truths, guesses = [], []
    for _ in range(30):
        boxes = [(str(int(rng.integers(0, 4))), 1.0, *_box(rng)) for _ in range(int(rng.integers(1, 4)))]
        truths.append(boxes)
        guesses.append([(label, float(rng.random()), *np.add(box, rng.normal(0, 4, 4))) for label, _, *box in boxes]
                       + [(str(int(rng.integers(0, 5))), float(rng.random()), *_box(rng))])
    classes = sorted({int(b[0]) for t in truths for b in t})
    truth, found = COCO(), COCO()
    truth.dataset = box_metrics._coco_dataset(truths, classes, False)
    found.dataset = box_metrics._coco_dataset(guesses, classes, True)
    truth.createIndex()
    found.createIndex()
    evaluation = COCOeval(truth, found, "bbox")
    evaluation.params.imgIds, evaluation.params.iouThrs = list(range(30)), np.array([0.4])
    evaluation.evaluate()
    evaluation.accumulate()
    precision = evaluation.eval["precision"][:, :, :, 0, -1]
    assert box_metrics.coco_map_iou40(truths, guesses) == pytest.approx(float(np.mean(precision[precision > -1])))


def _box(rng) -> tuple[float, float, float, float]:
    x, y = rng.uniform(0, 80, 2)
    return float(x), float(y), float(x + rng.uniform(5, 30)), float(y + rng.uniform(5, 30))


def test_weighted_average_precision_is_scikit_learns():
    from sklearn.metrics import average_precision_score

    rng = np.random.default_rng(2)
    found = (rng.random(200) < 0.3).astype(float)
    confidence = np.round(rng.random(200), 1)  # ties, as constant confidences make
    weights = rng.integers(0, 3, 200).astype(float)
    assert box_metrics.average_precision(found, confidence, weights) == pytest.approx(
        average_precision_score(found, confidence, sample_weight=weights))
    assert box_metrics.average_precision(found, confidence) == pytest.approx(
        average_precision_score(found, confidence))


def test_a_shape_spec_names_what_its_rule_and_grader_need():
    from runner.common.errors import SpecError
    from runner.competition.spec import CompetitionSpec

    base = dict(id="x", task="unsupported", metric="global_dice", id_column="id", targets=("m",))
    with pytest.raises(SpecError, match="mask"):
        CompetitionSpec(submission="mask", baseline="whole_mask", **base)
    with pytest.raises(SpecError, match="baseline_values"):
        CompetitionSpec(submission="boxes", baseline="constant_by_suffix", **base)
