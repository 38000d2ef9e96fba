"""Text folds: word and character TF-IDF into a logistic regression (classes) or ridge (values)."""
from __future__ import annotations

import pickle
import time
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import make_pipeline, make_union

from runner.atomic import replacing
from runner.engines import DeadlineReached, EngineResult, FoldData
from runner.planner import Plan


def _pipeline(data: FoldData):
    features = make_union(
        TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2, max_features=200_000),
        TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True, min_df=2, max_features=200_000),
    )
    model = LogisticRegression(C=4.0, max_iter=2000) if data.classes is not None else Ridge(alpha=1.0)
    return make_pipeline(features, model)


def _predict(pipeline, texts, data: FoldData) -> np.ndarray:
    if data.classes is None:
        return np.atleast_2d(pipeline.predict(texts).T).T
    proba = pipeline.predict_proba(texts)
    full = np.zeros((len(texts), len(data.classes)))
    full[:, pipeline.classes_.astype(int)] = proba  # a class absent from this fold's train rows gets 0
    return full


def train(plan: Plan, data: FoldData, out_dir: Path, deadline: float) -> EngineResult:
    started = time.monotonic()
    pipeline = _pipeline(data)
    pipeline.fit(data.x_train, data.y_train)
    train_seconds = time.monotonic() - started
    if time.monotonic() > deadline:
        raise DeadlineReached(f"fit took {train_seconds:.0f} s and ended past the fold's deadline")
    t0 = time.monotonic()
    val_pred, test_pred = _predict(pipeline, data.x_val, data), _predict(pipeline, data.x_test, data)
    predict_seconds = time.monotonic() - t0
    checkpoint = out_dir / "model.pkl"
    with replacing(checkpoint) as tmp:
        tmp.write_bytes(pickle.dumps(pipeline))
    return EngineResult(val_pred, test_pred, checkpoint, epochs=1, best_epoch=1, epoch_seconds=train_seconds,
                        min_train_seconds=train_seconds, train_seconds=train_seconds,
                        predict_seconds=predict_seconds, stopped_by_deadline=False)
