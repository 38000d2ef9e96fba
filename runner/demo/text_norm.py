"""The shared generator of the text-normalization replicas: sentences of classed tokens, zipped quoted CSVs.

A language supplies a PLAIN vocabulary, punctuation and one maker per semiotic class returning (before, after).
PLAIN and PUNCT tokens are copied (after == before), as in the Kaggle CSVs; the other classes have one
deterministic spoken form, so a before -> after lookup learned from train gets most test tokens right and misses
only the values (large numbers, full dates, rare acronyms) that train never showed. One kind of token is spoken by
its context, as many are in the real data: a dash between two numbers ("12 - 15") is the language's word for a
range ("to"), elsewhere a dash as written; the numbers around it seldom repeat, so no lookup, even with the exact
neighbours, gets it right, while a model that sees its neighbours' shapes can.
"""
from __future__ import annotations

import csv
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from runner.demo._layout import describe

Maker = Callable[[np.random.Generator], tuple[str, str]]

ZIP_TIME = (2017, 11, 14, 0, 0, 0)  # a fixed member time keeps the zips byte-identical for a seed
TOKENS = (5, 15)  # tokens per sentence before the closing punctuation
ENDINGS, ENDING_P = (".", "?", "!"), (0.85, 0.1, 0.05)  # how sentences close, and how often
RANGE_DASH = "-"  # also among each language's punctuation, where it is spoken as written


@dataclass(frozen=True)
class Language:
    prefix: str  # file prefix, "en" or "ru"
    title: str  # the competition's title
    words: tuple[str, ...]  # PLAIN vocabulary
    punct: tuple[str, ...]  # mid-sentence punctuation
    makers: dict[str, Maker]  # class -> (before, after) maker; PLAIN and PUNCT default to copied tokens
    mix: dict[str, float]  # class weights, PLAIN and PUNCT included; RANGE: three tokens, number dash number
    range_word: str  # how a dash between two numbers is spoken


def _token(language: Language, rng: np.random.Generator, first: bool) -> tuple[str, str, str]:
    classes = list(language.mix)
    weights = np.array([language.mix[c] for c in classes])
    kind = classes[int(rng.choice(len(classes), p=weights / weights.sum()))]
    if kind == "RANGE":  # its three tokens are made by _range
        return kind, "", ""
    if kind in language.makers:
        return (kind, *language.makers[kind](rng))
    if kind == "PLAIN":
        word = str(rng.choice(language.words))
        word = word[0].upper() + word[1:] if first else word
        return kind, word, word
    mark = str(rng.choice(language.punct))
    return kind, mark, mark


def _range(language: Language, rng: np.random.Generator) -> list[tuple[str, str, str]]:
    """Number, dash, number: the dash spoken as the language's range word."""
    number = language.makers["CARDINAL"]
    return [("CARDINAL", *number(rng)), ("VERBATIM", RANGE_DASH, language.range_word), ("CARDINAL", *number(rng))]


def _sentences(language: Language, count: int, rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for sentence in range(count):
        tokens = []
        for k in range(int(rng.integers(*TOKENS))):
            token = _token(language, rng, k == 0)
            tokens += _range(language, rng) if token[0] == "RANGE" else [token]
        end = str(rng.choice(ENDINGS, p=ENDING_P))
        tokens.append(("PUNCT", end, end))
        rows += [(sentence, k, *token) for k, token in enumerate(tokens)]
    return pd.DataFrame(rows, columns=["sentence_id", "token_id", "class", "before", "after"])


def _quoted(frame: pd.DataFrame) -> str:
    return frame.to_csv(index=False, quotechar='"', quoting=csv.QUOTE_NONNUMERIC)


def _zip_csv(path: Path, frame: pd.DataFrame) -> None:
    """A zip holding one quoted csv named like the zip without '.zip', stored at the zip root."""
    member = zipfile.ZipInfo(path.name.removesuffix(".zip"), date_time=ZIP_TIME)
    member.external_attr = 0o644 << 16
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, _quoted(frame))


def generate_replica(root: Path, rng: np.random.Generator, language: Language, train_sentences: int = 300,
                     test_sentences: int = 60) -> None:
    """Write prepared/public (three zipped CSVs, description.md) and prepared/private (answers, sample)."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    train, test = _sentences(language, train_sentences, rng), _sentences(language, test_sentences, rng)
    ids = test["sentence_id"].astype(str) + "_" + test["token_id"].astype(str)
    sample = pd.DataFrame({"id": ids, "after": test["before"]})
    answers = pd.DataFrame({"id": ids, "after": test["after"]})
    prefix = language.prefix
    _zip_csv(public / f"{prefix}_train.csv.zip", train)
    _zip_csv(public / f"{prefix}_test_2.csv.zip", test[["sentence_id", "token_id", "before"]])
    _zip_csv(public / f"{prefix}_sample_submission_2.csv.zip", sample)
    (private / "answers.csv").write_text(_quoted(answers), encoding="utf-8")
    (private / "sample_submission.csv").write_text(_quoted(sample), encoding="utf-8")
    describe(public, language.title,
             "Rewrite each written token (`before`) into its spoken form (`after`); `class` is given for train only.",
             "Submissions are evaluated on prediction accuracy (the total percent of correct tokens); the strings "
             "must match exactly.",
             'Submit `id,after` with id = "<sentence_id>_<token_id>".')

