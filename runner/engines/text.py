"""Word and character TF-IDF into a logistic regression (classes) or ridge (values): the fast, strong first
member on text."""
from __future__ import annotations

from runner.engines.oneshot import OneShotEngine
from runner.portfolio import PlanContext, Settings

PRIOR_GAIN = 0.05  # the highest prior among text engines: it leads on text


class TfidfSettings(Settings):
    # scikit-learn's default; 4 lost to a plain word-bigram model with it on a noisy 5-class text (birds: CV 0.447
    # against 0.462 at 1): short noisy texts want the stronger penalty, and bags step C up where it pays
    C: float = 1.0
    word_ngrams: tuple[int, int] = (1, 2)
    char_ngrams: tuple[int, int] | None = (2, 5)  # None: words only
    sublinear: bool = True
    max_features: int = 200_000


def tfidf_model(classification: bool, settings: TfidfSettings):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline, make_union

    words = TfidfVectorizer(ngram_range=settings.word_ngrams, sublinear_tf=settings.sublinear, min_df=2,
                            max_features=settings.max_features)
    features = words if settings.char_ngrams is None else make_union(
        words, TfidfVectorizer(analyzer="char_wb", ngram_range=settings.char_ngrams, sublinear_tf=settings.sublinear,
                               min_df=2, max_features=settings.max_features))
    head = LogisticRegression(C=settings.C, max_iter=2000) if classification else Ridge(alpha=1.0)
    return make_pipeline(features, head)


class Tfidf(OneShotEngine):
    name = "tfidf"
    inputs = "text"
    preload = ("sklearn.feature_extraction.text", "sklearn.linear_model", "runner.engines.text")
    Settings = TfidfSettings
    search_space = dict(C=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0), word_ngrams=((1, 1), (1, 2), (1, 3)),
                        char_ngrams=(None, (2, 4), (2, 5), (1, 6)), sublinear=(True, False))
    measure_share = 0.01
    min_measure_seconds = 0.5
    prior_gain = PRIOR_GAIN

    def model(self, settings: TfidfSettings, classification: bool, rows: int):
        return tfidf_model(classification, settings)

    def describe(self, context: PlanContext) -> str:
        return "word 1-2-gram and character 2-5-gram TF-IDF into a " + \
            ("logistic regression" if context.spec.is_classification else "ridge")
