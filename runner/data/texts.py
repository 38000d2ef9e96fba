"""Text read from a table: one column, or several read together (each after its name: `anchor: ... target: ...`),
a cell holding a JSON list of strings (a conversation's turns) read as its strings; and pairs of text columns
compared as a table view, where the signal is in how two texts relate (a phrase and its match, two answers to
one prompt): their lengths, the words they share, and the cosine of their TF-IDF vectors (of character n-grams
for phrases, of words for passages)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec

PAIR_NGRAMS = (2, 4)  # character n-grams two phrases are compared by: a word's stem and its spelling variants
PAIR_FEATURES = 50_000  # the vocabulary the pair's vectors keep
# texts longer than this (the median of a pair's) are compared by their words: character n-grams read ~0.5 M
# characters a second here, words ten times as many, and lmsys' 57k conversations hold some 170 M a side
SHORT_TEXT = 200
LONG_TEXT = 5_000  # characters of a long text its word vector is made of
JSON_OPENING = "["  # a cell that may be a JSON list of strings


def cell_text(value) -> str:
    """A cell as text: a JSON list of strings becomes its strings, one a line (a null turn left out); any other
    cell its string ('' when empty)."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return ""
    text = str(value)
    if text.startswith(JSON_OPENING):
        try:
            items = json.loads(text)
        except ValueError:
            return text
        if isinstance(items, list) and all(item is None or isinstance(item, str) for item in items):
            return "\n".join(item for item in items if item is not None)
    return text


def column_texts(frame: pd.DataFrame, column: str) -> list[str]:
    return [cell_text(v) for v in frame[column].tolist()]


def joined_texts(frame: pd.DataFrame, columns: tuple[str, ...]) -> list[str]:
    """Each row's text: its one column as it is, or several each after its name, a line apiece."""
    if len(columns) == 1:
        return column_texts(frame, columns[0])
    parts = [[f"{c}: {t}" for t in column_texts(frame, c)] for c in columns]
    return ["\n".join(row) for row in zip(*parts)]


def text_view(spec: CompetitionSpec, train: pd.DataFrame, test: pd.DataFrame, train_path, test_path) -> tuple:
    """The (train, test) texts of the spec's text column(s); a missing column is named with its file."""
    if not spec.texts:
        raise InputError(f"spec {spec.id}: a text task names no text column (text_column or text_columns)")
    for frame, path in ((train, train_path), (test, test_path)):
        missing = [c for c in spec.texts if c not in frame.columns]
        if missing:
            raise InputError(f"{path}: no text column(s) {missing}")
    return joined_texts(train, spec.texts), joined_texts(test, spec.texts)


def _words(texts: list[str]) -> list[set[str]]:
    return [set(t.lower().split()) for t in texts]


def _pair_vectoriser(texts: list[str]):
    """TF-IDF fitted on every text of a pair: character n-grams for short texts (phrases), words for long ones (of
    their first LONG_TEXT characters)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    short = np.median([len(t) for t in texts]) <= SHORT_TEXT if texts else True
    kind = dict(analyzer="char_wb", ngram_range=PAIR_NGRAMS) if short else \
        dict(analyzer="word", preprocessor=lambda t: t[:LONG_TEXT].lower())
    return TfidfVectorizer(sublinear_tf=True, max_features=PAIR_FEATURES, dtype=np.float32, **kind).fit(texts)


def _cosines(left: list[str], right: list[str], vectoriser) -> np.ndarray:
    a, b = vectoriser.transform(left), vectoriser.transform(right)  # rows of unit length
    return np.asarray(a.multiply(b).sum(axis=1)).ravel()


def pair_features(spec: CompetitionSpec, train: pd.DataFrame, test: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """For each pair (a, b) of the spec's text columns, per row: both lengths in characters and words, their
    difference, the share of words they share (Jaccard), whether they are the same text, and the cosine of their
    TF-IDF vectors (fitted on every text of the pair's columns, train and test: no label seen)."""
    frames = {"train": train, "test": test}
    out = {name: {} for name in frames}
    for a, b in spec.text_pairs:
        texts = {name: (column_texts(f, a), column_texts(f, b)) for name, f in frames.items() if a in f and b in f}
        if len(texts) < len(frames):
            raise InputError(f"text pair ({a}, {b}): both columns must be in the train and the test file")
        vectoriser = _pair_vectoriser([t for left, right in texts.values() for t in (*left, *right)])
        for name, (left, right) in texts.items():
            words_left, words_right = _words(left), _words(right)
            chars_left, chars_right = np.array([len(t) for t in left]), np.array([len(t) for t in right])
            count_left, count_right = np.array([len(w) for w in words_left]), np.array([len(w) for w in words_right])
            shared = np.array([len(x & y) / max(1, len(x | y)) for x, y in zip(words_left, words_right)])
            out[name].update({
                f"{a}_chars": chars_left, f"{b}_chars": chars_right, f"{a}_words": count_left,
                f"{b}_words": count_right, f"{a}_{b}_chars_diff": chars_left - chars_right,
                f"{a}_{b}_words_diff": count_left - count_right, f"{a}_{b}_shared_words": shared,
                f"{a}_{b}_same": np.array([x == y for x, y in zip(left, right)], dtype=np.float64),
                f"{a}_{b}_cosine": _cosines(left, right, vectoriser)})
    return tuple(pd.DataFrame(out[name]).astype("float64") for name in frames)
