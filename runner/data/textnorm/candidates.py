"""Text normalisation as a choice the table engines learn. Each token has a few candidate spoken forms, each from
what train teaches (runner.data.textnorm.rules): what the learned normaliser says (its lookup in context, else its
rules, else the token), the token as written, the lookup's first and second forms, and the rules' form. The class
of a training token is the first candidate that says it right; a row of features tells the candidates apart: the
token's shape, how often and how many ways train spoke it, its neighbours' shapes and whether train speaks them
as written. The class prior, the first candidate for every token, is the learned normaliser itself: whatever the
engines learn must beat it to be submitted.

A training token's candidates come from a normaliser that never saw its sentence (train split CROSS_PARTS ways,
each part spoken by a normaliser of the others), so they are wrong as often as a test token's are; test tokens
are spoken by a normaliser of the whole train. Tokens no candidate says right are left out of the table: no choice
can be right for them, and as a class of their own (validated, never trained on) they were a loss no round could
lower, whose float noise kept LightGBM's early stopping from ever firing. The CV is so the accuracy on the tokens
some candidate says right; the share left out is said with it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from runner.data.textnorm.rules import Normalizer

SOURCES = ("said", "written", "lookup", "second", "rule")  # candidates; a tie goes to the first
CROSS_PARTS = 4  # each training token spoken by a normaliser of the other three quarters of the sentences
SEED = 0
EDGE = "\n"  # the neighbour of a sentence's first or last token: nothing


@dataclass(frozen=True)
class TokenTable:
    """The training tokens as rows the table engines learn, the test tokens' rows, and each test token's
    candidates (the strings the classes stand for)."""

    x: pd.DataFrame
    y: np.ndarray  # class indices into SOURCES
    groups: np.ndarray  # sentence of each training row: a sentence's tokens share a fold
    x_test: pd.DataFrame
    choices: np.ndarray  # (test tokens, SOURCES) strings; a source with nothing new repeats the first
    kept: np.ndarray  # each row's place among the training tokens it was drawn from
    unanswerable: int  # training tokens left out: no candidate says them right


def candidates(normalizer: Normalizer, tokens: pd.DataFrame) -> pd.DataFrame:
    """Each token's candidate spoken forms, a column per source; '' where a source says nothing new (no form, or
    the same as an earlier source), so each class names a distinct string."""
    written = tokens["before"].astype(str)
    forms = normalizer.forms.reindex(written.to_numpy())
    unique = written.unique()
    rules = dict(zip(unique, (normalizer.rule(t) for t in unique)))
    # fresh object arrays: a string column's to_numpy() can be the caller's own memory, which the blanking below
    # would write into
    said = pd.DataFrame({source: np.array(values, dtype=object) for source, values in (
        ("said", normalizer.speak(tokens)), ("written", written), ("lookup", forms["first"]),
        ("second", forms["second"]), ("rule", written.map(rules)))}).fillna("")
    for k, source in enumerate(SOURCES[1:], start=1):
        repeated = np.column_stack([said[source] == said[earlier] for earlier in SOURCES[:k]]).any(axis=1)
        said.loc[repeated, source] = ""
    return said


def _shape(written: pd.Series, prefix: str) -> dict[str, np.ndarray]:
    # each distinct token measured once (a token recurs tens of times in millions), then spread to its rows
    codes, unique = pd.factorize(written.astype(str).to_numpy(dtype=object))
    text = pd.Series(unique, dtype=object)
    length = text.str.len().to_numpy()
    digits = text.str.count(r"\d").to_numpy()
    letters = text.str.count(r"[^\W\d_]").to_numpy()
    spaces = text.str.count(" ").to_numpy()
    shape = {"length": length, "digits": digits, "letters": letters,
             "upper": np.where(text.str.isupper().to_numpy(dtype=bool), letters, 0),
             "other": length - digits - letters - spaces, "spaces": spaces,
             "title": text.str.istitle().to_numpy(dtype=bool), "edge": (text == EDGE).to_numpy()}
    return {prefix + name: values[codes] for name, values in shape.items()}


def features(normalizer: Normalizer, tokens: pd.DataFrame, said: pd.DataFrame) -> pd.DataFrame:
    """What tells the candidates apart, one row per token (float32)."""
    written = tokens["before"].astype(str)
    by_sentence = tokens.assign(before=written).groupby("sentence_id", sort=False)["before"]
    neighbours = {"prev_": by_sentence.shift(1).fillna(EDGE), "next_": by_sentence.shift(-1).fillna(EDGE)}
    forms = normalizer.forms.reindex(written.to_numpy())
    columns = {**_shape(written, ""), "seen": np.log1p(forms["seen"].fillna(0).to_numpy()),
               "share": forms["share"].fillna(0).to_numpy(), "position": by_sentence.cumcount().to_numpy(),
               "from_end": by_sentence.cumcount(ascending=False).to_numpy()}
    for source in SOURCES[1:]:
        columns[f"has_{source}"] = (said[source] != "").to_numpy()
    columns["said_as_written"] = (said["said"] == written.to_numpy()).to_numpy()
    for prefix, words in neighbours.items():
        columns.update(_shape(words, prefix))
        spoken = normalizer.forms["first"].reindex(words.to_numpy()).to_numpy()
        columns[f"{prefix}spoken_otherwise"] = pd.notna(spoken) & (spoken != words.to_numpy())
    return pd.DataFrame(columns).astype(np.float32)


def _parts(sentences: pd.Series) -> pd.Series:
    """Each sentence's part (of CROSS_PARTS), by sentence id."""
    unique = sentences.unique()
    return pd.Series(np.random.default_rng(SEED).permutation(len(unique)) % CROSS_PARTS, index=unique)


def token_table(train: pd.DataFrame, test: pd.DataFrame, learned_from: pd.DataFrame | None = None) -> TokenTable:
    """`train` (sentence_id, before, after) and `test` (sentence_id, before) in the sample's order, as rows. The
    table's training rows are `learned_from` (whole sentences of train; all of it by default); every training
    sentence teaches the normalisers that speak them."""
    rows = (train if learned_from is None else learned_from).reset_index(drop=True)
    parts = _parts(train["sentence_id"])
    part_of_train, part_of_row = (parts.reindex(f["sentence_id"].to_numpy()).to_numpy() for f in (train, rows))
    x, y = [], np.full(len(rows), -1)
    for k in range(CROSS_PARTS):
        at = np.flatnonzero(part_of_row == k)
        if not len(at):
            continue
        normalizer = Normalizer(train[part_of_train != k])
        tokens = rows.iloc[at]
        said = candidates(normalizer, tokens)
        spoken = said.to_numpy()
        right = spoken == tokens["after"].astype(str).to_numpy()[:, None]
        right[:, 1:] &= spoken[:, 1:] != ""  # a blank says nothing, not the empty word
        y[at] = np.where(right.any(axis=1), right.argmax(axis=1), -1)
        x.append(features(normalizer, tokens, said).set_index(at))
    normalizer = Normalizer(train)
    said = candidates(normalizer, test)
    choices = np.column_stack([said[s].where(said[s] != "", said["said"]) for s in SOURCES])
    answered = y >= 0
    return TokenTable(pd.concat(x).sort_index()[answered].reset_index(drop=True), y[answered],
                      rows["sentence_id"].to_numpy()[answered], features(normalizer, test, said),
                      choices.astype(object), np.flatnonzero(answered), int((~answered).sum()))
