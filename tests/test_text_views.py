"""Text read from tables: several columns read together after their names, JSON lists of turns read as their
strings, pairs of columns compared as a table; a target the train file names otherwise; a fraction cut into the
grader's yes or no; a sample made from a test file that holds the submission's column; the medoid of strings."""
import numpy as np
import pandas as pd
import pytest

from runner.competition.catalog import load_spec
from runner.data.loading import load_dataset
from runner.data.targets import read_sample
from runner.data.texts import cell_text, joined_texts, pair_features
from runner.demo import write_demo
from runner.results.baselines import make_baseline


def test_a_json_list_of_turns_is_read_as_its_strings_and_other_cells_as_they_are():
    assert cell_text('["Hi there?", null, "And then?"]') == "Hi there?\nAnd then?"
    assert cell_text("[not json") == "[not json" and cell_text(None) == "" and cell_text(float("nan")) == ""
    assert cell_text('["a", "b"] and more') == '["a", "b"] and more'  # no list: as written
    assert cell_text(3) == "3" and cell_text(pd.NA) == ""
    assert cell_text("[1, 2]") == "[1, 2]"  # a list of numbers is no conversation: as written


def test_several_columns_are_read_together_each_after_its_name():
    frame = pd.DataFrame({"anchor": ["abatement"], "target": ["abatement of pollution"], "context": ["A47"]})
    assert joined_texts(frame, ("anchor", "target", "context")) == [
        "anchor: abatement\ntarget: abatement of pollution\ncontext: A47"]
    assert joined_texts(frame, ("target",)) == ["abatement of pollution"]  # one column: as it is


def test_a_pair_of_texts_is_compared_as_a_table():
    spec = load_spec("us-patent")
    train = pd.DataFrame({"anchor": ["hollow valve", "hollow valve", "signal"],
                          "target": ["hollow valve", "gate pump", "waveform signal detector"]})
    test = pd.DataFrame({"anchor": ["signal"], "target": ["signal"]})
    table, test_table = pair_features(spec, train, test)
    assert list(table.columns) == list(test_table.columns) and len(table) == 3 and len(test_table) == 1
    assert table["anchor_target_same"].tolist() == [1.0, 0.0, 0.0]
    assert table["anchor_target_shared_words"].tolist() == pytest.approx([1.0, 0.0, 1 / 3])
    assert table["anchor_target_cosine"].iloc[0] == pytest.approx(1.0, abs=1e-5)
    assert table["anchor_target_cosine"].iloc[0] > table["anchor_target_cosine"].iloc[2] > \
        table["anchor_target_cosine"].iloc[1]
    assert table["anchor_target_words_diff"].tolist() == [0.0, 0.0, -2.0]


def test_lmsys_reads_one_label_of_three_the_three_texts_and_how_the_responses_compare(tmp_path):
    spec = load_spec("lmsys")
    public = write_demo("lmsys", tmp_path) / "prepared" / "public"
    dataset = load_dataset(spec, public, tmp_path / "work")
    train = pd.read_csv(public / "train.csv")
    assert dataset.classes == ["winner_model_a", "winner_model_b", "winner_tie"]
    assert (dataset.y == train[list(spec.targets)].to_numpy().argmax(axis=1)).all()
    text = dataset.views["text"][0][0]
    assert text.startswith("prompt: ") and "\nresponse_a: " in text and '["' not in text
    table, test_table = dataset.views["table"]
    assert {"response_a_response_b_chars_diff", "prompt_response_a_cosine"} <= set(table.columns)
    assert len(test_table) == len(dataset.views["text"][1])


def test_a_target_named_otherwise_in_train_is_read_and_cut_where_the_grader_cuts(tmp_path):
    spec = load_spec("jigsaw-unintended")
    public = write_demo("jigsaw-unintended", tmp_path) / "prepared" / "public"
    dataset = load_dataset(spec, public, tmp_path / "work")
    share = pd.read_csv(public / "train.csv")["target"]
    assert dataset.classes == [0, 1] and (dataset.y == (share >= 0.5).astype(int)).all()
    assert set(dataset.views) == {"text"}  # only the comment is shared with the test file


def test_a_sample_made_from_the_test_file_takes_the_submissions_column_it_holds(tmp_path):
    spec = load_spec("billion-word")
    public = write_demo("billion-word", tmp_path) / "prepared" / "public"
    warnings = []
    sample = read_sample(spec, public, warnings)
    given = pd.read_csv(tmp_path / "billion-word-imputation" / "prepared" / "private" / "sample_submission.csv")
    assert warnings and sample["sentence"].tolist() == given["sentence"].tolist()
    assert sample["id"].tolist() == given["id"].tolist()


def test_the_medoid_is_the_training_answer_nearest_the_others(tmp_path):
    spec = load_spec("bms")
    # edits between the first three: 1 (C2H6, C2H7), 2 (C2H6, C3H7), 1 (C2H7, C3H7); to the last one, many more
    (tmp_path / "train_labels.csv").write_text(
        "image_id,InChI\na,InChI=1S/C2H6\nb,InChI=1S/C2H7\nc,InChI=1S/C3H7\nd,InChI=1S/C20H40O2/c1-2-3-4-5-6\n")
    sample = pd.DataFrame({"image_id": ["x", "y"], "InChI": "InChI=1S/H2O/h1H2"})
    made = make_baseline(spec, tmp_path, sample, ["InChI"], tmp_path)
    assert made.values["InChI"].tolist() == ["InChI=1S/C2H7"] * 2
    assert "nearest" in made.note


def test_a_span_is_chosen_among_candidates_by_a_lexicon_learned_from_train():
    from runner.data.spans import CANDIDATES, _lexicon, candidates

    texts = [t.split() for t in ("i love it so", "so sad today", "love this day", "going home now")]
    spans = [{"love"}, {"sad"}, {"love"}, {"going", "home", "now"}]
    lexicon = _lexicon(texts, spans, np.array(["positive", "negative", "positive", "neutral"]))
    spans_of, features = candidates("what a day i love".split(), "positive", lexicon)
    assert len(spans_of) == len(CANDIDATES) and spans_of[0] == "what a day i love" and spans_of[1] == "love"
    assert spans_of[2] == "i love" and features[0] == 5  # the words, then what tells the windows apart
    assert candidates([], "positive", lexicon)[0] == ["", "", "", ""]  # an empty text: empty candidates


def test_cross_validation_scores_the_chosen_candidates_as_the_grader_scores_the_file(tmp_path):
    """Each candidate's Jaccard as targets: the CV of predicted scores is the grader's word Jaccard of the spans
    the writer picks with them."""
    from runner.common import metrics
    from runner.common.string_metrics import word_jaccard
    from runner.data.spans import jaccard
    from runner.results.submission import Predictions, build_submission

    spec = load_spec("tweet-sentiment")
    choices = np.array([["I love it", "love", "love it", "I love it"], ["so sad", "sad", "so sad", "so sad"],
                        ["at home now", "home", "at home", "at home now"]], dtype=object)
    truth = ["love it", "sad", "at home now"]
    gains = np.array([[jaccard(c, t) for c in row] for row, t in zip(choices, truth)])
    scores = np.array([[0.1, 0.5, 0.9, 0.2], [0.3, 0.8, 0.1, 0.0], [0.2, 0.9, 0.1, 0.0]])
    sample = pd.DataFrame({"textID": ["a", "b", "c"], "selected_text": ""})
    written = build_submission(sample, spec, ["selected_text"], Predictions(scores, None, "blend", choices=choices))
    assert written["selected_text"].tolist() == ["love it", "sad", "home"]
    assert metrics.score("word_jaccard", gains, scores) == pytest.approx(word_jaccard(truth, written["selected_text"]))
