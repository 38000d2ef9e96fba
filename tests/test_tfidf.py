"""TF-IDF vectorises a competition's texts once, in its prepare step; its folds fit their heads on rows of that
sparse matrix and predict the test texts as a product, never reading them again."""
from __future__ import annotations

import time

import numpy as np
import pytest
from scipy import sparse

from conftest import write_spooky
from runner.data.loading import load_dataset
from runner.planning.registry import get_engine
from runner.engines.tfidf import TfidfCost, TfidfSettings
from runner.units.worker import fold_data
from runner.units.tasks import assign_folds
from runner.planning.planner import make_plan
from runner.planning.portfolio import DataShape
from runner.machine.profiles import profile
from runner.competition.catalog import load_spec


def test_tfidf_vectorises_once_and_its_folds_fit_heads_on_the_sparse_rows(tmp_path):
    spec = load_spec("spooky")
    dataset = load_dataset(spec, write_spooky(tmp_path / "spooky") / "prepared" / "public", tmp_path / "work")
    engine, settings = get_engine("tfidf"), TfidfSettings()
    cost = engine.measure(dataset, profile("cpu"), 5.0, tmp_path)
    assert isinstance(cost, TfidfCost) and cost.chars > 10_000 and cost.vectorise_seconds > 0
    prepared = engine.prepare(settings, dataset, tmp_path, 1)
    train, test = prepared.views["text"]
    assert sparse.issparse(train) and sparse.issparse(test) and train.dtype == np.float32
    assert train.shape[0] == len(dataset.y) and test.shape == (len(dataset.views["text"][1]), train.shape[1])
    folds = assign_folds(dataset.y, True, 5, 0)
    data = fold_data(prepared, engine.inputs, folds, 0)
    assert sparse.issparse(data.x_train) and data.x_train.shape[0] == (folds != 0).sum()
    result = engine.train_fold(settings, data, tmp_path / "fold", time.monotonic() + 120)
    assert result.test_pred.shape == (test.shape[0], len(dataset.classes))
    accuracy = (result.val_pred.argmax(axis=1) == data.y_val).mean()
    assert accuracy > 0.6, accuracy  # three authors: chance is a third
    # members that read the texts alike share one prepare step; other n-grams get their own
    assert engine.prepare_key(settings.model_copy(update=dict(C=4.0))) == engine.prepare_key(settings)
    assert engine.prepare_key(settings.model_copy(update=dict(char_ngrams=None))) != engine.prepare_key(settings)


def test_few_texts_are_vectorised_in_each_fold_and_many_once():
    spooky, cpu = load_spec("spooky"), profile("cpu")
    shape = lambda rows, chars: DataShape(rows, rows, classes=3, inputs=frozenset({"text"}), text_chars=chars)  # noqa
    few = make_plan(spooky, cpu, 600, shape(600, 100_000)).member("tfidf")
    many = make_plan(spooky, cpu, 600, shape(150_000, 40_000_000)).member("tfidf")
    assert not few.settings.vectorised_once and few.prepare_seconds == 0  # a unit of its own costs more
    assert get_engine("tfidf").prepare_key(few.settings) is None
    assert many.settings.vectorised_once and many.prepare_seconds > 30 and "vectorised once" in many.reasons[0]


def test_a_ridges_fold_is_planned_to_grow_faster_than_its_rows_whatever_a_small_sample_showed():
    jigsaw = load_spec("jigsaw")
    data = DataShape(160_000, 153_000, targets=6, inputs=frozenset({"text"}), text_chars=40_000_000)
    timed = TfidfCost(rows=2000, seconds=0.1, fit_seconds=0.09, chars=200_000, vectorise_seconds=0.3, power=1.1)
    tfidf = make_plan(jigsaw, profile("cpu"), 3600, data, {"tfidf": timed}).member("tfidf")
    assert tfidf.fold_seconds > 0.1 * 64 ** 1.5  # 128k rows a fold, 64x the sample: n^1.5, not the sample's n^1.1
    assert tfidf.prepare_seconds == pytest.approx(0.5 + 40_000_000 / (200_000 / 0.3), rel=0.01)  # the timed rate
