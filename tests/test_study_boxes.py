"""siim-covid's radiographs nested by study, learned as boxes (runner.data.study_images): each image an item with its
opacities, `none` and its study's appearance as a whole-image class; written by name, a study row with its
appearances' confidences and the dummy box, an image row with its opacities in pixels and `none`, parsed and scored
as MLE-bench's grader does."""
import numpy as np
import pandas as pd
import pytest

from runner.common import box_rows, metrics
from runner.competition.catalog import load_spec
from runner.competition.grade import grade
from runner.data.loading import load_dataset
from runner.data.study_images import nested_files, parsed_boxes, row_files
from runner.demo import write_demo
from runner.results.submission import Predictions, build_submission, validate_submission

SIIM = load_spec("siim-covid19-detection")
APPEARANCES = ("negative", "typical", "indeterminate", "atypical")


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    root = write_demo(SIIM.id, tmp_path_factory.mktemp("siim")) / "prepared"
    return root / "public", root / "private"


def test_each_image_is_an_item_with_its_opacities_none_and_its_study_s_appearance(replica, tmp_path):
    public, _ = replica
    dataset = load_dataset(SIIM, public, tmp_path / "work")
    images = pd.read_csv(public / "train_image_level.csv")
    studies = pd.read_csv(public / "train_study_level.csv").set_index("id")
    assert dataset.y.shape == (len(images), box_rows.row_width(len(SIIM.boxes.labels) - 1))
    slots = box_rows.slots(dataset.y)
    ids = images["id"].tolist()  # the items in the image file's order
    by_id = images.set_index("id")
    assert len(set(dataset.groups)) == images["StudyInstanceUID"].nunique()  # a study's images share a fold
    for k, image in enumerate(ids[:40]):
        row = by_id.loc[image]
        opacities = [b for b in parsed_boxes(row["label"], "") if b[0] == "opacity"]
        assert slots[k, 0, :, 0].sum() == min(len(opacities), 2) and dataset.y[k, -1] == (not opacities)
        appearance = studies.loc[f"{row['StudyInstanceUID']}_study"].to_numpy().argmax()
        # the study's appearance, a whole-image box (its centre at the middle: the right side's slot)
        assert slots[k, 1 + appearance, 1, 0] == 1 and slots[k, 1:, :, 0].sum() == 1
        assert np.allclose(slots[k, 1 + appearance, 1, 1:], (0, 0, 1, 1))


def _truth_rows(sample: pd.DataFrame, answers: pd.DataFrame) -> np.ndarray:
    """The sample rows' answers as rows of boxes in shares of each image's size (the sizes in its attributes)."""
    truths = answers.set_index("id").loc[sample["id"], "PredictionString"].tolist()
    rows = np.zeros((len(sample), box_rows.row_width(len(SIIM.boxes.labels) - 1)))
    slots = box_rows.slots(rows).copy()
    for k, (text, (w, h)) in enumerate(zip(truths, sample.attrs[box_rows.SIZES])):
        for label, x0, y0, x1, y1 in parsed_boxes(text, ""):
            if label == "none":
                rows[k, -1] = 1.0
            elif label in APPEARANCES:
                slots[k, 1 + APPEARANCES.index(label), 1] = (1.0, 0, 0, 1, 1)
            else:
                side = int((x0 + x1) / 2 / w >= 0.5)
                slots[k, 0, side] = (1.0, x0 / w, y0 / h, x1 / w, y1 / h)
    rows[:, :-1] = slots.reshape(len(rows), -1)
    return rows


def _blurred(rows: np.ndarray, seed: int) -> np.ndarray:
    """`rows` with their confidences mixed with noise, so that ranks overlap."""
    rng = np.random.default_rng(seed)
    blurred = rows.copy()
    b = box_rows.slots(blurred).copy()
    b[..., 0] = np.clip(b[..., 0] * 0.3 + rng.uniform(0, 0.7, b.shape[:3]), 0, 1)
    blurred[:, :-1] = b.reshape(len(rows), -1)
    blurred[:, -1] = np.clip(rows[:, -1] * 0.3 + rng.uniform(0, 0.7, len(rows)), 0, 1)
    return blurred


def test_written_rows_parse_and_grade_as_the_grader_reads_them(replica, tmp_path):
    """The test rows' truths, made rows of boxes and written, score 1 under the grader; a blurred copy less."""
    public, private = replica
    sample = pd.read_csv(public / "sample_submission.csv")
    files = row_files(SIIM, public, sample)
    assert all(f is not None for f in files)
    box_rows.with_file_sizes(sample, files)
    rows = _truth_rows(sample, pd.read_csv(private / "test.csv"))
    written = build_submission(sample, SIIM, ["PredictionString"], Predictions(rows, None, "test"))
    validate_submission(written, sample, SIIM, ["PredictionString"])
    study = written["id"].str.endswith("_study")
    assert written.loc[study, "PredictionString"].str.split().str[0].isin(APPEARANCES).all()
    assert not written.loc[~study, "PredictionString"].str.contains("typical|negative").any()
    written.to_csv(tmp_path / "perfect.csv", index=False)
    assert grade(tmp_path / "perfect.csv", SIIM, private).score == pytest.approx(1.0)
    noisy = build_submission(sample, SIIM, ["PredictionString"], Predictions(_blurred(rows, 0), None, "test"))
    noisy.to_csv(tmp_path / "noisy.csv", index=False)
    assert 0.3 < grade(tmp_path / "noisy.csv", SIIM, private).score < 0.99


def test_out_of_fold_images_score_as_the_file_written_from_them_grades(replica, tmp_path):
    """Cross-validation sees images only, each with its study's appearance: made into the grader's rows (a study
    row pooling its images' appearances as the writer does, and an image row each), they score what the grader
    gives the file written from the same images; scoring the images' rows themselves does not."""
    from runner.data.study_images import study_rows

    public, private = replica
    sample = pd.read_csv(public / "sample_submission.csv")
    files = row_files(SIIM, public, sample)
    box_rows.with_file_sizes(sample, files)
    sample.attrs[box_rows.ROW_GROUPS] = study_rows(SIIM, sample, files)
    truth = _truth_rows(sample, pd.read_csv(private / "test.csv"))
    ids = sample["id"].tolist()
    images = [k for k, i in enumerate(ids) if i.endswith("_image")]
    studies = np.array([files[k].parents[1].name for k in images], dtype=object)
    assert len(set(studies)) < len(images)  # some study holds several radiographs
    of_study = [ids.index(f"{study}_study") for study in studies]
    image_truth = truth[images].copy()  # an image's truth holds its study's appearance, as a training row does
    whole = box_rows.slots(image_truth).copy()
    whole[:, 1:] = box_rows.slots(truth[of_study])[:, 1:]
    image_truth[:, :-1] = whole.reshape(len(images), -1)
    for seed in (1, 2):
        blurred = _blurred(truth, seed)
        written = build_submission(sample, SIIM, ["PredictionString"], Predictions(blurred, None, "test"))
        written.to_csv(tmp_path / "noisy.csv", index=False)
        graded = grade(tmp_path / "noisy.csv", SIIM, private).score
        as_graded = metrics.score(SIIM.metric, box_rows.as_graded(image_truth, studies, SIIM.boxes, True),
                                  box_rows.as_graded(blurred[images], studies, SIIM.boxes, False))
        assert as_graded == pytest.approx(graded, abs=2e-4), (seed, as_graded, graded)
        rows_themselves = metrics.score(SIIM.metric, image_truth, blurred[images])
        assert abs(rows_themselves - graded) > 1e-3, (seed, rows_themselves, graded)


def test_a_study_row_reads_its_study_s_first_image_and_an_image_row_its_own(replica):
    public, _ = replica
    sample = pd.read_csv(public / "sample_submission.csv")
    found = nested_files(public / "test", ".dcm")
    files = row_files(SIIM, public, sample)
    for row_id, file in zip(sample["id"], files):
        name = row_id.rsplit("_", 1)[0]
        if row_id.endswith("_image"):
            assert file == found[name][1]
        else:
            assert file.parts[-3] == name and file == min(p for s, p in found.values() if s == name)


def test_the_prior_leaves_out_typical_boxes_that_cost_more_than_they_find(replica, tmp_path):
    """siim's opacities rarely sit where their mean box does: the prior written keeps each appearance at its share
    and `none` at its own, with no opacity box, and scores above the plain mean row on the training rows and the
    test rows alike."""
    from runner.common.budget import Budget
    from runner.results.run_folder import RunOutputs
    from runner.results.submission import prior_predictions

    public, private = replica
    out = RunOutputs(SIIM, public, tmp_path / "run", Budget.start(60))
    dataset = load_dataset(SIIM, public, tmp_path / "work")
    prior = out.write_prior(dataset)
    assert "no typical box of opacity" in prior.source
    assert (box_rows.slots(prior.values)[:, 0, :, 0] == 0).all() and (prior.values[:, -1] > 0).all()
    mean = prior_predictions(dataset.y, None, len(prior.values), None, None, SIIM.metric)
    train = [metrics.score(SIIM.metric, dataset.y, np.tile(p.values[0], (len(dataset.y), 1))) for p in (prior, mean)]
    assert train[0] > train[1]
    build_submission(out.sample, SIIM, out.columns, mean).to_csv(tmp_path / "mean.csv", index=False)
    test = [grade(path, SIIM, private).score for path in (tmp_path / "run" / "baseline.csv", tmp_path / "mean.csv")]
    assert test[0] > test[1], test


def test_a_study_of_several_radiographs_is_written_with_the_mean_of_its_images_appearances(replica):
    from runner.data.study_images import study_rows

    public, _ = replica
    sample = pd.read_csv(public / "sample_submission.csv")
    files = row_files(SIIM, public, sample)
    box_rows.with_file_sizes(sample, files)
    groups = study_rows(SIIM, sample, files)
    sample.attrs[box_rows.ROW_GROUPS] = groups
    several = [k for k, g in enumerate(groups) if len(g) > 1]
    assert several, "the replica holds no study of several radiographs"
    assert all(sample["id"][k].endswith("_study") and all(sample["id"][i].endswith("_image") for i in groups[k])
               for k in several)
    rows = np.random.default_rng(2).uniform(0, 1, (len(sample), box_rows.row_width(len(SIIM.boxes.labels) - 1)))
    written = build_submission(sample, SIIM, ["PredictionString"], Predictions(rows, None, "test"))
    typical = SIIM.boxes.labels.index("typical")
    for k in several:
        groups_written = written["PredictionString"][k].split()
        said = float(groups_written[groups_written.index("typical") + 1])
        mean = box_rows.slots(rows)[groups[k], typical, :, 0].max(axis=1).mean()
        assert said == pytest.approx(mean, abs=1e-5)
    single = next(k for k, g in enumerate(groups) if sample["id"][k].endswith("_study") and len(g) == 1)
    text = written["PredictionString"][single].split()  # a study of one radiograph: its image row's
    image = groups[single][0]
    assert float(text[text.index("typical") + 1]) == pytest.approx(box_rows.slots(rows)[image, typical, :, 0].max(),
                                                                   abs=1e-5)
