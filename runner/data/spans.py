"""A span of a text as a choice among candidate spans, learned as each candidate's score (tweet-sentiment's words
that carry the sentiment).

Each row's candidates: the whole text, and its best window of one, two and three words by a lexicon learned from
train: a word's share of its appearances that fall inside the training spans, for each value of the spec's
`span_condition` column (a tweet's sentiment). A training row's candidates come from a lexicon learned on the
other folds' rows (cross-fitted: its own span unseen), a test row's from all of train. The targets are each
candidate's word Jaccard with the training span, so a member predicts how good each candidate is, the writer
submits each row's best predicted one (`Dataset.choices`), and cross-validation scores the Jaccard of the chosen
candidates (runner.common.string_metrics): what the grader scores of the file.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from runner.common.errors import InputError
from runner.common.string_metrics import words
from runner.competition.spec import CompetitionSpec
from runner.data.dataset import Dataset
from runner.data.reading import read_table
from runner.data.targets import align_test
from runner.data.texts import joined_texts

WINDOWS = (1, 2, 3)  # the lengths in words of the windows a row's candidates hold, beside its whole text
CANDIDATES = ("whole text", *(f"best {n} word{'s' * (n > 1)}" for n in WINDOWS))
FOLDS = 5  # the cross-fitting of the training rows' lexicons
SMOOTHING = 2.0  # appearances of a word's share drawn towards its condition's overall share (rare words)


def _lexicon(texts: list[list[str]], spans: list[set[str]], conditions: np.ndarray) -> dict:
    """(condition -> word -> share of its appearances inside the spans), with the condition's overall share for
    an unseen word under the key None."""
    inside, seen = defaultdict(lambda: defaultdict(float)), defaultdict(lambda: defaultdict(float))
    for tokens, span, condition in zip(texts, spans, conditions):
        for token in tokens:
            word = token.lower()
            seen[condition][word] += 1
            inside[condition][word] += word in span
    lexicon = {}
    for condition, counts in seen.items():
        base = sum(inside[condition].values()) / max(1.0, sum(counts.values()))
        shares = {w: (inside[condition][w] + SMOOTHING * base) / (n + SMOOTHING) for w, n in counts.items()}
        lexicon[condition] = {**shares, None: base}
    return lexicon


def _best_window(tokens: list[str], scores: np.ndarray, length: int) -> tuple[str, float, float]:
    """(the window of `length` words with the highest summed score, that sum, where it starts as a share)."""
    if len(tokens) <= length:
        return " ".join(tokens), float(scores.sum()), 0.0
    sums = np.convolve(scores, np.ones(length), mode="valid")
    at = int(np.argmax(sums))
    return " ".join(tokens[at:at + length]), float(sums[at]), at / len(tokens)


def candidates(tokens: list[str], condition, lexicon: dict) -> tuple[list[str], list[float]]:
    """A row's candidate spans (CANDIDATES' order) and what tells them apart: each window's score and start."""
    shares = lexicon.get(condition, {})
    scores = np.array([shares.get(t.lower(), shares.get(None, 0.0)) for t in tokens], dtype=np.float64)
    spans, features = [" ".join(tokens)], [len(tokens), float(scores.max()) if len(tokens) else 0.0]
    for length in WINDOWS:
        text, score, start = _best_window(tokens, scores, length)
        spans.append(text)
        features += [score, start]
    return spans, features


def jaccard(a: str, b: str) -> float:
    x, y = words(a), words(b)
    return len(x & y) / len(x | y) if x | y else 0.0


def _rows(texts: list[list[str]], conditions: np.ndarray, lexicon_of) -> tuple[np.ndarray, np.ndarray]:
    """(candidate strings, their features) of rows, each row's lexicon given by `lexicon_of(row)`."""
    made = [candidates(tokens, c, lexicon_of(k)) for k, (tokens, c) in enumerate(zip(texts, conditions))]
    choices = np.empty((len(made), len(CANDIDATES)), dtype=object)
    choices[:] = [spans for spans, _ in made]
    return choices, np.array([features for _, features in made], dtype=np.float64)


def _table(features: np.ndarray, conditions: np.ndarray, kinds: list) -> pd.DataFrame:
    names = ["words", "best_share"] + [f"window{n}_{what}" for n in WINDOWS for what in ("score", "start")]
    table = pd.DataFrame(features, columns=names)
    table.insert(0, "condition", pd.Categorical(conditions, categories=kinds))
    return table


def span_dataset(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
                 budget_seconds: float | None = None, memory: int | None = None) -> Dataset:
    """The rows of a span competition: targets each candidate's Jaccard with the training span, a table of the
    condition and the candidates' scores, the text (after its condition), and the test rows' candidates."""
    warnings: list[str] = []
    train_path, test_path = data_dir / spec.train_file, data_dir / spec.test_file
    train = read_table(train_path, "train file", data_dir, warnings, budget_seconds, memory)
    test = align_test(spec, read_table(test_path, "test file", data_dir, warnings), sample, test_path)
    needed = [spec.text_column, *([spec.span_condition] if spec.span_condition else [])]
    for frame, path, more in ((train, train_path, [columns[0]]), (test, test_path, [])):
        if missing := [c for c in needed + more if c not in frame.columns]:
            raise InputError(f"{path}: missing column(s) {missing}")
    train = train[train[columns[0]].notna()].reset_index(drop=True)
    condition = spec.span_condition
    train_conditions = train[condition].astype(str).to_numpy() if condition else np.full(len(train), "")
    test_conditions = test[condition].astype(str).to_numpy() if condition else np.full(len(test), "")
    texts = [str(t).split() for t in train[spec.text_column].fillna("")]
    test_texts = [str(t).split() for t in test[spec.text_column].fillna("")]
    spans = [words(s) for s in train[columns[0]].astype(str)]
    fold = np.arange(len(train)) % FOLDS
    lexicons = [_lexicon([t for t, f in zip(texts, fold) if f != k], [s for s, f in zip(spans, fold) if f != k],
                         train_conditions[fold != k]) for k in range(FOLDS)]
    choices, features = _rows(texts, train_conditions, lambda row: lexicons[fold[row]])
    whole = _lexicon(texts, spans, train_conditions)
    test_choices, test_features = _rows(test_texts, test_conditions, lambda row: whole)
    truth = train[columns[0]].astype(str).tolist()
    gains = np.array([[jaccard(c, t) for c in row] for row, t in zip(choices, truth)])
    kinds = sorted(set(train_conditions) | set(test_conditions))
    joined = (condition, spec.text_column) if condition else (spec.text_column,)
    views = {"table": (_table(features, train_conditions, kinds), _table(test_features, test_conditions, kinds)),
             "text": (joined_texts(train, joined), joined_texts(test, joined))}
    warnings.append(f"a span chosen among {len(CANDIDATES)} candidates ({', '.join(CANDIDATES)}); the best of them "
                    f"reaches a word Jaccard of {gains.max(axis=1).mean():.3f} on the training rows")
    return Dataset(spec, columns, None, gains, views, warnings, choices=test_choices)
