"""Text normalisation as a learned choice among each token's candidate spoken forms (runner.data.textnorm.candidates): the classes,
the cross-fitted candidates, the features that let a model choose by context, the dataset and the submission."""
import re
import shutil
import zipfile

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold

from runner.data import reading as data_module
from runner.data.loading import load_dataset
from runner.demo import write_demo
from runner.common.errors import InputError
from runner.competition.catalog import load_spec
from runner.data.textnorm.candidates import SOURCES, TokenTable, candidates, token_table
from runner.results.submission import Predictions, build_submission

EN = "text-normalization-challenge-english-language"
RU = "text-normalization-challenge-russian-language"


@pytest.fixture(scope="module")
def english(tmp_path_factory):
    public = write_demo(EN, tmp_path_factory.mktemp("en"), seed=3) / "prepared" / "public"
    read = dict(keep_default_na=False)
    return (public, pd.read_csv(public / "en_train.csv.zip", **read),
            pd.read_csv(public / "en_test_2.csv.zip", **read))


@pytest.fixture(scope="module")
def russian(tmp_path_factory):
    public = write_demo(RU, tmp_path_factory.mktemp("ru"), seed=0) / "prepared" / "public"
    read = dict(keep_default_na=False)
    return pd.read_csv(public / "ru_train.csv.zip", **read), pd.read_csv(public / "ru_test_2.csv.zip", **read)


@pytest.fixture(scope="module")
def table(english) -> TokenTable:
    _, train, test = english
    return token_table(train, test)


def sentence(sid: int, pairs: list[tuple[str, str]]) -> pd.DataFrame:
    return pd.DataFrame({"sentence_id": sid, "token_id": range(len(pairs)), "before": [b for b, _ in pairs],
                         "after": [a for _, a in pairs]})


def test_each_token_is_labelled_by_the_first_candidate_that_says_it_right(english, table):
    _, train, test = english
    assert len(table.y) + table.unanswerable == len(train) and table.x.shape[0] == len(table.y)
    assert table.x_test.shape[0] == len(test) and table.choices.shape == (len(test), len(SOURCES))
    said = train.iloc[table.kept]["after"].astype(str).to_numpy()
    assert table.unanswerable > 0  # tokens no candidate says: left out, no choice can be right for them
    # the learned normaliser's own word is the class most tokens take: the prior is the rule-based normaliser
    assert np.bincount(table.y).argmax() == 0 and 0.85 < (table.y == 0).mean() < 1
    assert (table.y > 0).any() and set(np.unique(table.y)) <= set(range(len(SOURCES)))
    assert table.x.notna().all().all() and table.x.dtypes.eq(np.float32).all()
    assert len(said) == len(table.y) and isinstance(table, TokenTable)


def test_a_tokens_candidates_come_from_a_normaliser_that_never_saw_its_sentence():
    """A token spoken in one training sentence only: the lookup that labels it is learned without that sentence,
    so it is unknown there as it would be in test, and its class says so."""
    common = [sentence(k, [("the", "the"), ("cat", "cat"), (".", ".")]) for k in range(40)]
    rare = sentence(99, [("the", "the"), ("QZX", "queue zed ex"), (".", ".")])
    train = pd.concat([*common, rare], ignore_index=True)
    table = token_table(train, sentence(0, [("QZX", "")])[["sentence_id", "token_id", "before"]])
    qzx = int(train.index[train["before"] == "QZX"][0])
    assert table.unanswerable == 1 and qzx not in table.kept  # no candidate said it: its sentence was unseen
    assert table.choices[0, SOURCES.index("lookup")] == "queue zed ex"  # test: spoken by a normaliser of all train


def test_a_blank_candidate_never_says_the_empty_word():
    """A source with nothing new is blank; a token spoken as nothing is not thereby right for it."""
    common = [sentence(k, [("the", "the"), ("cat", "cat"), (".", ".")]) for k in range(40)]
    train = pd.concat([*common, sentence(99, [("x", ""), (".", ".")])], ignore_index=True)
    table = token_table(train, sentence(0, [("x", "")])[["sentence_id", "token_id", "before"]])
    assert table.unanswerable == 1 and int(train.index[train["before"] == "x"][0]) not in table.kept


def test_candidates_name_distinct_strings():
    train = pd.concat([sentence(k, [("12", "twelve"), ("-", "-"), ("x", "x")]) for k in range(5)] +
                      [sentence(9, [("12", "twelve"), ("-", "to"), ("15", "fifteen")])], ignore_index=True)
    from runner.data.textnorm.rules import Normalizer

    tokens = sentence(0, [("-", ""), ("13", ""), ("y", "")])
    said = candidates(Normalizer(train), tokens)
    assert tokens["before"].tolist() == ["-", "13", "y"]  # blanking repeats never writes into the caller's table
    for _, row in said.iterrows():
        named = [s for s in row if s]
        assert len(named) == len(set(named)) and row["said"], row.to_dict()
    assert said.loc[0, "second"] == "to" and said.loc[0, "said"] == "-"  # the dash's two forms, most frequent first
    assert said.loc[2, "said"] == "y" and (said.loc[2, list(SOURCES[1:])] == "").all()  # unknown word: itself


def test_its_features_let_a_model_speak_a_dash_by_its_neighbours(english, table):
    """The replica's dash is spoken "to" between two numbers and as written elsewhere: the normaliser says it one
    way for both, a plain logistic regression on the table's features tells them apart on held-out sentences."""
    _, train, _ = english
    rows = train.iloc[table.kept]
    dashes = (rows["before"] == "-").to_numpy()
    assert {"to", "-"} <= set(rows["after"].to_numpy()[dashes])
    chosen = np.zeros(len(table.y), dtype=int)
    for fit, held in GroupKFold(4).split(table.x, table.y, table.groups):
        model = LogisticRegression(max_iter=2000).fit(table.x.iloc[fit], table.y[fit])
        chosen[held] = model.classes_[model.predict_proba(table.x.iloc[held]).argmax(axis=1)]
    right = (chosen == table.y)[dashes].mean()
    by_normaliser = (table.y == 0)[dashes].mean()
    assert right > 0.9 and right > by_normaliser + 0.2, (right, by_normaliser)


def test_the_dataset_follows_the_samples_order_and_the_submission_each_rows_own_string(english, tmp_path):
    public, _, test = english
    spec = load_spec(EN)
    sample = pd.read_csv(public / spec.sample_submission, keep_default_na=False)
    reordered = tmp_path / "public"
    reordered.mkdir()
    for path in public.iterdir():
        shutil.copy(path, reordered)  # copies: links out of a competition's folder are refused
    (reordered / spec.sample_submission).unlink()
    backwards = sample.iloc[::-1].reset_index(drop=True)
    with zipfile.ZipFile(reordered / spec.sample_submission, "w") as archive:
        archive.writestr(spec.sample_submission.removesuffix(".zip"), backwards.to_csv(index=False))
    dataset = load_dataset(spec, reordered, tmp_path / "work")
    assert dataset.classes == list(SOURCES) and dataset.inputs == frozenset({"table"})
    assert dataset.choices.shape == (len(test), len(SOURCES)) and dataset.groups is not None
    assert any("no candidate says right are left out" in w for w in dataset.warnings)
    pick = np.zeros((len(test), len(SOURCES)))
    pick[:, SOURCES.index("written")] = 1.0  # every row: the token as written
    forward = load_dataset(spec, public, tmp_path / "forward")
    pd.testing.assert_frame_equal(dataset.views["table"][1].iloc[::-1].reset_index(drop=True),
                                  forward.views["table"][1])  # each token's neighbours from its sentence, not the list
    frame = build_submission(backwards, spec, ["after"], Predictions(pick, tuple(dataset.classes), "test",
                                                                     choices=dataset.choices))
    assert frame["id"].tolist() == backwards["id"].tolist()
    assert frame["after"].tolist() == test["before"].astype(str).iloc[::-1].tolist()


def test_a_training_table_without_its_columns_is_named(english, tmp_path):
    public, train, _ = english
    spec = load_spec(EN)
    broken = tmp_path / "public"
    broken.mkdir()
    for path in public.iterdir():
        shutil.copy(path, broken)
    (broken / spec.train_file).unlink()
    with zipfile.ZipFile(broken / spec.train_file, "w") as archive:
        archive.writestr("en_train.csv", train.drop(columns="before").to_csv(index=False))
    with pytest.raises(InputError, match=r"en_train\.csv\.zip: missing column\(s\) \['before'\]"):
        load_dataset(spec, broken, tmp_path / "work")


def test_a_short_budget_teaches_the_candidates_from_whole_sentences_it_affords(english, tmp_path):
    """Five normalisers learn from train: a budget too short for all of it draws whole sentences, says so, and the
    test rows are still every token of the sample."""
    public, train, test = english
    dataset = load_dataset(load_spec(EN), public, tmp_path / "work", budget_seconds=0.15)  # 1,500 tokens
    assert 1000 < len(dataset.y) < 1500 < len(train) and dataset.n_test == len(test)
    assert len(np.unique(dataset.groups)) < train["sentence_id"].nunique()
    kept = train[train["sentence_id"].isin(np.unique(dataset.groups))]
    learned = [int(m.group(1)) for w in dataset.warnings if (m := re.search(r"of those (\d+) training", w))]
    assert learned and len(kept) <= learned[0] <= 1500  # each drawn sentence whole (less the tokens left out)
    taught, learns = dataset.sampled  # both cuts said, each as a share of every training token
    assert taught.kept <= 1500 < taught.of == learns.of == len(train) and taught.how == "whole sentences at random"
    assert learns.kept == learned[0] and "normalisers learn from" in taught.what and taught.say() in dataset.warnings


def test_a_zipped_training_file_larger_than_the_runs_memory_parses_is_read_as_far_as_it_does(english, tmp_path):
    """The competition ships its tokens zipped: what parsing needs is the CSV inside (several times the archive),
    so a run told it has N bytes reads the share of the tokens they parse, said as the file's first rows of all."""
    public, train, _ = english
    content = zipfile.ZipFile(public / "en_train.csv.zip").infolist()[0].file_size
    assert content > 2 * (public / "en_train.csv.zip").stat().st_size  # the archive alone would look small
    memory = int(content * data_module.MEMORY_PER_FILE_BYTE / data_module.MEMORY_SHARE / 2)  # half the CSV fits
    dataset = load_dataset(load_spec(EN), public, tmp_path / "work", memory=memory)
    cut = dataset.sampled[0]
    assert cut.how == "the file's first rows" and "of the run's memory" in cut.why and cut.say() in dataset.warnings
    assert 0.8 * len(train) < cut.of < 1.2 * len(train) and 0.4 < cut.kept / len(train) < 0.6
    assert len(dataset.y) <= cut.kept and dataset.n_test == len(english[2])
    last = train["sentence_id"].iloc[cut.kept - 1]  # the file's last sentence read, perhaps without its end
    assert last not in set(dataset.groups) and set(dataset.groups) <= set(train["sentence_id"].iloc[:cut.kept])


@pytest.mark.parametrize("engine", ["lightgbm", "catboost", "xgboost", "linear", "knn"])
def test_every_table_engine_answers_every_class_where_training_rows_lack_one(russian, engine, tmp_path):
    """A rare candidate (the token as written, where the normaliser says otherwise) may be right for no training
    token of a fold yet for some it validates: each table engine still gives a probability for every class, and
    stops on time (CatBoost refused such a fold until it was told the classes)."""
    import time

    from runner.planning.registry import get_engine
    from runner.engines.base import FoldData

    train, test = russian
    table = token_table(train, test)
    rare = SOURCES.index("written")  # a Latin word the normaliser transliterates, written as it is in train
    val = np.asarray(table.groups) % 4 == 0
    fit = ~val & (table.y != rare)
    assert (table.y[val] == rare).any() and len(np.unique(table.y[fit])) >= 2
    data = FoldData(load_spec(RU), list(SOURCES), table.x[fit], table.y[fit], table.x[val], table.y[val],
                    table.x_test)
    chosen = get_engine(engine)
    started = time.monotonic()
    result = chosen.train_fold(chosen.Settings(), data, tmp_path, deadline=started + 60)
    assert result.val_pred.shape == (val.sum(), len(SOURCES)) and result.test_pred.shape == (len(test), len(SOURCES))
    assert (result.val_pred.argmax(axis=1) == table.y[val]).mean() > (table.y[val] == 0).mean() - 0.02
    assert time.monotonic() - started < 30  # early stopping fires: no validation loss left flat for thousands of rounds


def test_a_sample_id_the_test_table_lacks_or_gives_twice_still_gets_one_token(english, tmp_path):
    public, _, test = english
    spec = load_spec(EN)
    short = tmp_path / "public"
    shutil.copytree(public, short)
    (short / spec.test_file).unlink()
    odd = pd.concat([test.iloc[1:], test.iloc[[5]].assign(before="again")])  # no first token; the sixth twice
    with zipfile.ZipFile(short / spec.test_file, "w") as archive:
        archive.writestr("en_test_2.csv", odd.to_csv(index=False))
    dataset = load_dataset(spec, short, tmp_path / "work")
    assert dataset.n_test == len(test) and any("no token for 1 of the sample's ids" in w for w in dataset.warnings)
    assert dataset.choices[0, SOURCES.index("written")] == str(test.iloc[0]["before"])  # the sample copies before
    assert any("1 token id(s) given twice" in w for w in dataset.warnings)
    assert dataset.choices[5, SOURCES.index("written")] == str(test.iloc[5]["before"])  # the first of the two


def test_tokens_pandas_would_read_as_missing_stay_words_from_train_to_the_submission(english, tmp_path):
    """"None", "NA", "null" are words of the real data. pandas' defaults read them as gaps: the runner spoke them
    "nan", and its own check of the file it wrote then found "empty values" and refused every submission."""
    from runner.results.submission import publish

    public, train, test = english
    spec = load_spec(EN)
    words = tmp_path / "public"
    shutil.copytree(public, words)
    odd = ("None", "NA", "null")
    taught = pd.concat([train] + [pd.DataFrame({"sentence_id": 10_000 + k, "token_id": [0, 1], "class": "PLAIN",
                                                "before": [w, "."], "after": [w, "."]}) for k, w in enumerate(odd)]
                       + [pd.DataFrame({"sentence_id": [20_000], "token_id": [0], "class": ["PLAIN"],
                                        "before": ["x"], "after": [""]})])  # an empty field, a gap
    asked = test.copy()
    asked.loc[asked.index[:3], "before"] = odd
    sample = pd.read_csv(public / spec.sample_submission, keep_default_na=False)
    sample.loc[sample.index[:3], "after"] = odd
    for name, frame in ((spec.train_file, taught), (spec.test_file, asked), (spec.sample_submission, sample)):
        (words / name).unlink()
        with zipfile.ZipFile(words / name, "w") as archive:
            archive.writestr(name.removesuffix(".zip"), frame.to_csv(index=False))
    dataset = load_dataset(spec, words, tmp_path / "work")
    assert dataset.choices[:3, 0].tolist() == list(odd)  # spoken as train speaks them: themselves
    from runner.data.targets import read_sample

    given = read_sample(spec, words)
    frame = build_submission(given, spec, ["after"], Predictions(np.eye(len(SOURCES))[np.zeros(len(test), int)],
                                                                 tuple(SOURCES), "test", choices=dataset.choices))
    publish(frame, given, spec, ["after"], tmp_path / "submission.csv")  # refused before
    assert (tmp_path / "submission.csv").read_text().splitlines()[1:4] == [f"0_{k},{w}" for k, w in enumerate(odd)]
