"""The priors of masks and boxes on their replicas: each is what its rule says (every pixel at the item's own size,
the item's own region, a string per kind of row, each organ's blob at its depths) and scores above the
alternatives a constant could be (the sample, empty masks, whole images)."""
import dataclasses

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from runner.common import rle
from runner.common.csvfiles import find_sample, read_csv_file
from runner.competition.catalog import load_spec
from runner.competition.grade import grade
from runner.data import canvas
from runner.data.loading import load_dataset
from runner.data.targets import value_columns
from runner.demo import write_demo
from runner.results.baselines import make_baseline
from runner.results.decisions import tuned
from runner.results.submission import build_submission, prior_predictions


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    """Each replica once for the module: {competition: (public, private)}."""
    root, made = tmp_path_factory.mktemp("replicas"), {}

    def get(competition):
        if competition not in made:
            folder = write_demo(competition, root)
            made[competition] = (folder / "prepared" / "public", folder / "prepared" / "private")
        return made[competition]

    return get


def prior(competition, public, tmp_path, rule=None, **fields):
    """The spec's rule (or `rule`, with the spec `fields` it needs) on the replica: the sample with its value column
    replaced, and the rule's note."""
    spec = load_spec(competition)
    spec = dataclasses.replace(spec, baseline=rule, **fields) if rule else spec
    sample = read_csv_file(find_sample(public, spec.sample_submission), literal=True)
    columns = value_columns(spec, sample)
    made = make_baseline(spec, public, sample, columns, tmp_path)
    return sample.assign(**{columns[0]: made.values[columns[0]].to_numpy()}), made.note


def score(competition, frame, private, tmp_path, name="submission.csv"):
    frame.to_csv(tmp_path / name, index=False)
    report = grade(tmp_path / name, load_spec(competition), private)
    assert report.valid_submission, report.error
    return report.score


def learned_prior(competition, public, tmp_path):
    """A learned mask competition's prior as a run writes it: each pixel's share of the training masks at the cut
    and least size the training rows score best (runner.results.run_folder.write_prior)."""
    spec = load_spec(competition)
    dataset = load_dataset(spec, public, tmp_path / "work")
    prior = prior_predictions(dataset.y, None, dataset.n_test, metric=spec.metric)
    cuts = tuned(dataset.spec, dataset.y, np.tile(prior.values[0], (len(dataset.y), 1)), None, "training")
    sample = read_csv_file(find_sample(public, spec.sample_submission), literal=True)
    if spec.mask.own_size:  # as the run's outputs find them: each test item's own size (runner.data.canvas)
        canvas.with_item_sizes(spec, sample, canvas.test_paths(spec, sample, public))
    return build_submission(sample, spec, value_columns(spec, sample), dataclasses.replace(prior, thresholds=cuts))


def test_whole_masks_take_each_items_size_from_the_sample_or_its_image(replicas, tmp_path):
    """contrails, learned, gets whole masks as its prior (where contrails are sparse, marking every pixel is the
    global Dice's best constant); hubmap's whole-mask rule takes each slide's size from its image."""
    for competition, (height, width) in (("google-research-identify-contrails-reduce-global-warming",
                                          ("height", "width")),
                                         ("hubmap-kidney-segmentation", ("height_pixels", "width_pixels"))):
        public, private = replicas(competition)
        frame = learned_prior(competition, public, tmp_path) if competition.startswith("google") \
            else prior(competition, public, tmp_path, rule="whole_mask")[0]
        spec = load_spec(competition)
        answers = pd.read_csv(private / spec.answers_file).set_index(spec.id_column)
        column = spec.targets[0]
        for item, text in zip(frame[spec.id_column], frame[column]):
            size = answers.loc[type(answers.index[0])(item), [height, width]]
            assert text == f"1 {int(size[height]) * int(size[width])}"
        empty = frame.assign(**{column: spec.mask.empty or ""})
        assert score(competition, frame, private, tmp_path) > score(competition, empty, private, tmp_path, "e.csv")


def test_hubmaps_learned_prior_is_each_pixels_share_on_the_canvas_written_at_each_slides_size(replicas, tmp_path):
    """hubmap, learned on a canvas (runner.data.canvas): its prior's masks decode at each test slide's own size
    and score above empty masks."""
    competition = "hubmap-kidney-segmentation"
    public, private = replicas(competition)
    frame = learned_prior(competition, public, tmp_path)
    answers = pd.read_csv(private / "test.csv").set_index("id")
    for item, text in zip(frame["id"], frame["predicted"]):
        mask = rle.decode(text, answers.loc[item, "height_pixels"], answers.loc[item, "width_pixels"], "column")
        assert 0.02 < mask.mean() <= 1.0
    empty = frame.assign(predicted="")
    assert score(competition, frame, private, tmp_path) > score(competition, empty, private, tmp_path, "e.csv")


def test_the_region_prior_is_the_test_fragments_own_papyrus(replicas, tmp_path):
    """The rule for a fragment no model reads (vesuvius is learned; its rule stays for a spec that names it)."""
    competition = "vesuvius-challenge-ink-detection"
    public, private = replicas(competition)
    frame, note = prior(competition, public, tmp_path, rule="region_mask")
    region = np.asarray(Image.open(public / "test" / "a" / "mask.png")) > 0
    assert np.array_equal(rle.decode(frame["Predicted"].iloc[0], *region.shape, "row"), region)
    whole = frame.assign(Predicted=rle.whole(*region.shape))
    assert score(competition, frame, private, tmp_path) > score(competition, whole, private, tmp_path, "w.csv")
    assert "mask.png" in note


def test_every_study_label_on_studies_and_none_on_images_beats_the_sample(replicas, tmp_path):
    """siim-covid is learned (its prior the pruned mean row, tests/test_study_boxes.py); the constant rule it
    replaced stays for a spec that names it."""
    competition = "siim-covid19-detection"
    public, private = replicas(competition)
    appearances = " ".join(f"{label} 1 0 0 1 1" for label in ("negative", "typical", "indeterminate", "atypical"))
    frame, note = prior(competition, public, tmp_path, "constant_by_suffix",
                        baseline_values=(("_study", appearances), ("_image", "none 1 0 0 1 1")))
    studies = frame["id"].str.endswith("_study")
    assert frame.loc[studies, "PredictionString"].str.split().str[0::6].map(set).eq(
        {"negative", "typical", "indeterminate", "atypical"}).all()
    assert (frame.loc[~studies, "PredictionString"] == "none 1 0 0 1 1").all()
    sample = pd.read_csv(public / "sample_submission.csv")
    assert score(competition, frame, private, tmp_path) > score(competition, sample, private, tmp_path, "s.csv")


def test_the_salt_prior_is_the_empty_mask_and_beats_the_sample_and_whole_slices(replicas, tmp_path):
    """tgs-salt is learned; its prior is each pixel's share of the training masks at the cut and least size the
    training rows score best: on the replica the empty mask, the best constant."""
    competition = "tgs-salt-identification-challenge"
    public, private = replicas(competition)
    frame = learned_prior(competition, public, tmp_path)
    sample = read_csv_file(find_sample(public, "sample_submission.csv"), literal=True)
    assert (frame["rle_mask"] == "").all()
    empty = score(competition, frame, private, tmp_path)
    assert empty > score(competition, sample, private, tmp_path, "s.csv")
    assert empty > score(competition, frame.assign(rle_mask=rle.whole(101, 101)), private, tmp_path, "w.csv")


def test_the_organs_prior_marks_some_rows_and_beats_the_sample_and_empty_masks(replicas, tmp_path):
    competition = "uw-madison-gi-tract-image-segmentation"
    public, private = replicas(competition)
    frame, note = prior(competition, public, tmp_path)
    marked = frame["predicted"].fillna("") != ""
    assert 0.1 < marked.mean() < 0.9  # a blob at the depths an organ is at, nothing elsewhere
    assert set(frame.loc[marked, "class"]) == {"large_bowel", "small_bowel", "stomach"}
    blob = score(competition, frame, private, tmp_path)
    sample = pd.read_csv(public / "sample_submission.csv")
    assert blob > score(competition, sample, private, tmp_path, "s.csv")
    assert blob > score(competition, frame.assign(predicted=""), private, tmp_path, "e.csv") == 0.0
    assert "cut at" in note
