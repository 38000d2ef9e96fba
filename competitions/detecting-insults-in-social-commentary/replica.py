"""A synthetic detecting-insults-in-social-commentary: quoted, unicode-escaped forum comments keyed by their text.

Insults address the reader with a put-down ("you idiot", "such a loser"); other comments are neutral chatter
that sometimes calls a third party names, and a few labels are flipped. TF-IDF with logistic regression reaches
an AUC of about 0.9; the all-zero sample submission scores 0.5. There is no id: the Comment text is the key.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._words import paragraph, unique

TRAIN_ROWS, TEST_ROWS = 600, 250  # the real split is about 3:2; this keeps it small
REAL_TRAIN, REAL_TEST = 3947, 2647  # the real train.csv and the reused, labelled Kaggle test
MIN_ROWS = 50  # at the smallest factors, enough rows that both labels show up in each split
INSULT_RATE = 0.27  # as in the real training file
FLIP_RATE = 0.04  # label noise, so that a perfect score is out of reach
BLANK_DATE_RATE = 0.2  # a share of real rows carry no Date
PUTDOWNS = ("idiot", "moron", "loser", "clown", "fool", "jerk", "troll", "hypocrite", "coward", "liar")
TRAITS = ("stupid", "dumb", "pathetic", "ignorant", "worthless", "brainless", "clueless", "disgusting")
NAMING = ("you {}", "you are a {}", "such a {}", "what a {} you are", "shut up {}")
DESCRIBING = ("you are {}", "you {} people", "so {} of you", "your {} mouth")
NEUTRAL = ("agree", "disagree", "interesting", "thanks", "vote", "game", "team", "season", "price", "policy",
           "election", "market", "article", "source", "great point", "well said", "good luck", "fair enough")
ESCAPES = ("\\xa0", "\\n", "\\\\n", "\\xa0\\xa0", "\\n\\n")  # written literally, as in the real text
FIRST_DATE = datetime(2012, 3, 1)


def _insult(rng: np.random.Generator) -> list[str]:
    words, forms = (PUTDOWNS, NAMING) if rng.random() < 0.6 else (TRAITS, DESCRIBING)
    cues = [forms[int(rng.integers(len(forms)))].format(words[int(rng.integers(len(words)))])]
    if rng.random() < 0.35:
        cues.append(f"you {TRAITS[int(rng.integers(len(TRAITS)))]}")
    return cues


def _neutral(rng: np.random.Generator) -> list[str]:
    cues = [NEUTRAL[int(rng.integers(len(NEUTRAL)))] for _ in range(int(rng.integers(1, 3)))]
    if rng.random() < 0.15:
        cues.append(f"the {TRAITS[int(rng.integers(len(TRAITS)))]} referee")
    return cues


def _escape(text: str, rng: np.random.Generator) -> str:
    """Join sentences with the literal escape sequences of the real scrape and wrap the text in quotes."""
    parts = text.split(". ")
    glue = [". " if rng.random() < 0.7 else "." + ESCAPES[int(rng.integers(len(ESCAPES)))] for _ in parts[1:]]
    body = parts[0] + "".join(g + p for g, p in zip(glue, parts[1:]))
    return f'"{body}"'


def _comment(insult: bool, rng: np.random.Generator) -> str:
    cues = _insult(rng) if insult else _neutral(rng)
    end = "!" if insult and rng.random() < 0.4 else "."
    return _escape(paragraph(rng, cues, sentences=(1, 4), length=(4, 12), end=end), rng)


def _dates(count: int, rng: np.random.Generator) -> list[str | None]:
    seconds = rng.integers(0, 110 * 86400, size=count)
    stamps = [(FIRST_DATE + timedelta(seconds=int(s))).strftime("%Y%m%d%H%M%SZ") for s in seconds]
    return [None if rng.random() < BLANK_DATE_RATE else s for s in stamps]


def _table(count: int, taken: set[str], rng: np.random.Generator) -> pd.DataFrame:
    insult = rng.random(count) < INSULT_RATE
    comments = [unique(lambda: _comment(bool(flag), rng), 1, taken)[0] for flag in insult]
    label = np.where(rng.random(count) < FLIP_RATE, ~insult, insult).astype(int)
    return pd.DataFrame({"Insult": label, "Date": _dates(count, rng), "Comment": comments})


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    """Train and test comments at `scale`: a factor of the replica's own, or 'real'."""
    scale = parse_scale(scale)
    return scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS), scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission_null.csv) and prepared/private/test.csv.
    A few thousand comments at most: made one by one, which keeps each one unique cheaply."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    train_rows, test_rows = counts(scale)
    train, test = _table(train_rows, taken, rng), _table(test_rows, taken, rng)
    train.to_csv(public / "train.csv", index=False)
    test[["Date", "Comment"]].to_csv(public / "test.csv", index=False)
    test.assign(Insult=0).to_csv(public / "sample_submission_null.csv", index=False)
    usage = np.where(rng.random(len(test)) < 0.35, "PublicTest", "PrivateTest")
    test.assign(Usage=usage).to_csv(private / "test.csv", index=False)
    test.to_csv(private / "gold_submission.csv", index=False)
    describe(public, "Detecting Insults in Social Commentary",
             "Predict the probability that a comment is insulting to a participant of the conversation (Insult).",
             "Submissions are evaluated on area under the ROC curve.",
             "Submit sample_submission_null.csv's columns Insult,Date,Comment, with each test Comment copied exactly.")
