"""Word and character TF-IDF into a logistic regression (classes) or ridge (values): the fast, strong first
member on text.

The texts are vectorised once for all of a member's folds (`prepare`: the vocabulary and weights learned from
every training text, train and test transformed into one sparse matrix each) and a fold fits its head on its rows
of that matrix, so predicting the test texts is a sparse product. A fold that vectorised its own texts spent ~30 s
reading jigsaw's 153k test comments, and again in every fold. The vocabulary sees a fold's validation texts (never
their labels): the usual liberty of an unsupervised step fitted once.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from runner.engines.oneshot import (MEASURE_ROWS, STARTUP_SECONDS, FitCost, OneShotEngine, fit_seconds,
                                    fold_seconds, one_shot_member, take, time_fit)
from runner.planning.portfolio import Member, PlanContext, Settings

PRIOR_GAIN = 0.05  # the highest prior among text engines: it leads on text
# characters word 1-2-grams and character 2-5-grams read per second on one core here, fitting or transforming
# alike (1.1M characters of jigsaw's replica: 1.5 s each way): the guess where the budget left nothing to time
CHARS_PER_SECOND = 700_000
MAX_POWER = 2.0  # a head's time grows at most with the square of its rows (a noisy timing is not believed past it)
# a ridge's conjugate gradients need more iterations as rows add to its largest eigenvalue and alpha stays put:
# ~n^1.5 at least past the sample (jigsaw at the real size: 1.43 timed on 1,000 and 2,000 rows, ~1.7 from 2,000 to
# a fold's 128k)
RIDGE_POWER = 1.5
VECTOR_DTYPE = np.float32  # half the matrix every fold loads; the heads fit as well on it
# texts that vectorise in less than this are left to each fold: a prepare unit of its own costs about a second
# to start on a busy machine, and a 12 s budget's window has no second to spare
VECTORISE_ONCE_SECONDS = 2.0
MANY_LABELS = 8  # 0/1 labels past which the texts are vectorised by their words alone (`base_settings`)


class TfidfSettings(Settings):
    # scikit-learn's default; 4 lost to a plain word-bigram model with it on a noisy 5-class text (birds: CV 0.447
    # against 0.462 at 1): short noisy texts want the stronger penalty, and bags step C up where it pays
    C: float = 1.0
    word_ngrams: tuple[int, int] = (1, 2)
    char_ngrams: tuple[int, int] | None = (2, 5)  # None: words only
    sublinear: bool = True
    max_features: int = 200_000
    vectorised_once: bool = True  # False: each fold vectorises its own texts (few of them), no prepare step


class TfidfCost(FitCost):
    """The head's fit and prediction on a sample's vectors (FitCost), how its time grows with the rows (`power`,
    from the same timed on half of them), and vectorising that sample's `chars` characters (fitting the vocabulary
    and transforming) in `vectorise_seconds`."""

    chars: int
    vectorise_seconds: float
    power: float = 1.0

    @property
    def chars_per_second(self) -> float:
        return self.chars / max(self.vectorise_seconds, 1e-6)


def growth(half: FitCost, whole: FitCost) -> float:
    """How a head's seconds grow with its rows, from the same fit timed on half of them: linear at least (a
    faster sample is noise), at most MAX_POWER. A ridge's conjugate gradients on jigsaw's vectors take ~n^1.7."""
    if half.seconds <= 0 or whole.rows <= half.rows:
        return 1.0
    return float(np.clip(np.log(whole.seconds / half.seconds) / np.log(whole.rows / half.rows), 1.0, MAX_POWER))


def base_settings(labels: int) -> TfidfSettings:
    """The settings a member starts from: words only where many 0/1 labels are learned (a ridge solves each label
    apart, walking the matrix's nonzeros every step, and character grams hold ten times the words' nonzeros: 70
    tags of 2,160 questions fitted in 10.3 s with them, 0.7 s without, to the same F1)."""
    return TfidfSettings(char_ngrams=None) if labels > MANY_LABELS else TfidfSettings()


def vectoriser(settings: TfidfSettings):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import make_union

    words = TfidfVectorizer(ngram_range=settings.word_ngrams, sublinear_tf=settings.sublinear, min_df=2,
                            max_features=settings.max_features, dtype=VECTOR_DTYPE)
    return words if settings.char_ngrams is None else make_union(
        words, TfidfVectorizer(analyzer="char_wb", ngram_range=settings.char_ngrams, sublinear_tf=settings.sublinear,
                               min_df=2, max_features=settings.max_features, dtype=VECTOR_DTYPE))


def head(classification: bool, C: float):
    from sklearn.linear_model import LogisticRegression, Ridge

    return LogisticRegression(C=C, max_iter=2000) if classification else Ridge(alpha=1.0)


def tfidf_model(classification: bool, settings: TfidfSettings):
    """The vectoriser and its head as one model of raw texts."""
    from sklearn.pipeline import make_pipeline

    return make_pipeline(vectoriser(settings), head(classification, settings.C))


def _labels(spec, y: np.ndarray | None, targets: int = 0) -> int:
    """How many 0/1 labels a member learns (0 where it learns classes or values)."""
    if spec.learned_as != "labels":
        return 0
    return y.shape[1] if y is not None and y.ndim == 2 else targets


class Tfidf(OneShotEngine):
    name = "tfidf"
    inputs = "text"
    preload = ("sklearn.feature_extraction.text", "sklearn.linear_model", "runner.engines.tfidf")
    Settings = TfidfSettings
    search_space = dict(C=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0), word_ngrams=((1, 1), (1, 2), (1, 3)),
                        char_ngrams=(None, (2, 4), (2, 5), (1, 6)), sublinear=(True, False))
    measure_share = 0.01
    min_measure_seconds = 0.5
    prior_gain = PRIOR_GAIN

    def measure(self, dataset, hardware, seconds, work, here=True):
        """Vectorise a sample of the training texts (after an untimed warm-up on a tenth), then time the head on
        its vectors."""
        if not here or seconds < self.min_measure_seconds:
            return None
        texts, _ = dataset.views[self.inputs]
        y = dataset.y if dataset.classes is not None or dataset.y.shape[1] > 1 else dataset.y[:, 0]  # as a fold
        rows = np.sort(np.random.default_rng(0).choice(len(y), min(len(y), MEASURE_ROWS), replace=False))
        sample = take(texts, rows)
        settings = base_settings(_labels(dataset.spec, y))
        vectoriser(settings).fit_transform(sample[: max(20, len(sample) // 10)])
        started = time.perf_counter()
        vectors = vectoriser(settings).fit_transform(sample)
        vectorised = time.perf_counter() - started
        classification, targets = dataset.classes is not None, y[rows]

        def fit(at: np.ndarray):
            return head(classification, TfidfSettings().C).fit(vectors[at], targets[at])

        predict = lambda model, at: model.predict(vectors[at])  # noqa: E731
        half, cost = time_fit(fit, predict, len(rows) // 2), time_fit(fit, predict, len(rows))
        return TfidfCost(**cost.model_dump(), chars=sum(map(len, sample)), vectorise_seconds=vectorised,
                         power=growth(half, cost))

    def plan(self, context: PlanContext) -> list[Member]:
        chars = context.data.text_chars or 100 * (context.data.n_train + context.data.n_test)
        rate = context.costs.chars_per_second if isinstance(context.costs, TfidfCost) else CHARS_PER_SECOND
        vectorise = chars / rate
        power = context.costs.power if isinstance(context.costs, TfidfCost) else self.cost_power
        power = power if context.spec.is_classification else max(power, RIDGE_POWER)
        seconds, fit = fold_seconds(context.costs, context, power), fit_seconds(context.costs, context, power)
        how = "timed" if isinstance(context.costs, TfidfCost) else "a guess: not timed"
        base = base_settings(_labels(context.spec, None, context.data.targets))
        if vectorise < VECTORISE_ONCE_SECONDS:  # each fold reads its few texts itself
            why = f"{self.describe(context)}; {chars / 1e6:.1f} M characters vectorised in each fold ({how})"
            settings = base.model_copy(update=dict(vectorised_once=False))
            return [one_shot_member(context, self.name, settings, seconds + vectorise, fit + vectorise,
                                    self.prior_gain, why)]
        prepare = STARTUP_SECONDS + vectorise
        why = f"{self.describe(context)}; {chars / 1e6:.1f} M characters vectorised once, about {prepare:.0f} s ({how})"
        member = one_shot_member(context, self.name, base, seconds, fit, self.prior_gain, why)
        return [member.model_copy(update=dict(prepare_threads=1, prepare_seconds=round(prepare, 1)))]

    def prepare_key(self, settings: TfidfSettings) -> str | None:
        if not settings.vectorised_once:
            return None
        return f"tfidf-{settings.word_ngrams}-{settings.char_ngrams}-{settings.sublinear}-{settings.max_features}"

    def prepare(self, settings: TfidfSettings, dataset, work: Path, threads: int):
        train, test = dataset.views[self.inputs]
        words = vectoriser(settings)
        vectors = words.fit_transform(list(train)).tocsr(), words.transform(list(test)).tocsr()
        return dataclasses.replace(dataset, views={**dataset.views, self.inputs: vectors})

    def model(self, settings: TfidfSettings, classification: bool, rows: int):
        if not settings.vectorised_once:
            return tfidf_model(classification, settings)
        return head(classification, settings.C)

    def describe(self, context: PlanContext) -> str:
        labels = _labels(context.spec, None, context.data.targets)
        grams = "word 1-2-gram" + (" and character 2-5-gram" if base_settings(labels).char_ngrams else "")
        head = "logistic regression" if context.spec.is_classification else \
            f"ridge a label ({labels} labels: words alone)" if labels > MANY_LABELS else "ridge"
        return f"{grams} TF-IDF into a {head}"
