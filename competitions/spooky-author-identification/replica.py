"""A synthetic spooky-author-identification: one gothic sentence per row, written by EAP, HPL or MWS.

Each author has a favourite vocabulary that shows up one to three times per sentence, over a shared old-fashioned
filler; a fifth of the sentences borrow a word from another author. TF-IDF with logistic regression reaches a
log loss of about 0.2; the prior-like sample submission scores about 1.09.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._words import pick, sentence

AUTHORS = ("EAP", "HPL", "MWS")
PRIOR = (0.403493538995863, 0.287808366106543, 0.308698094897594)  # the real sample submission's constants
TRAIN_ROWS, TEST_ROWS = 700, 200
REAL_TRAIN, REAL_TEST = 17621, 1958  # MLE-bench's 90/10 split of the 19,579 labelled sentences
MIN_ROWS = 30  # at the smallest factors, enough sentences that every author shows up in each split
ID_POOL = 28000  # ids id00000..id27999 are drawn without replacement, as sparse as the real ones
BORROW_RATE = 0.2  # sentences with one word of another author's vocabulary
FILLER = tuple("""
the a of and to in that it was which i my me he his her she upon with as at by from not but had have been were
all this so yet there when no one more some into now then before after through while long whose such our
night day house door room light dark shadow wind sea hill town street stone wall window eyes hand face voice
heart mind soul thought words silence hour moment time life death world earth sky moon sun cold grey old great
little strange far deep last first still never ever even again once seemed became could would might must should
saw heard felt knew found came went left fell spoke looked turned lay stood upon within beyond beneath toward
""".split())
STYLE = {
    "EAP": ("singular", "portion", "analysis", "character", "thus", "however", "mere", "whole", "ratiocination",
            "intellect", "vault", "premises", "indeed", "farther", "apparatus", "balloon", "chamber", "pendulum"),
    "HPL": ("eldritch", "ancient", "nameless", "hideous", "cyclopean", "blasphemous", "whispered", "gibbering",
            "abyss", "cosmic", "daemon", "loathsome", "antediluvian", "Arkham", "folk", "charnel", "geometry"),
    "MWS": ("love", "misery", "beloved", "tears", "despair", "Raymond", "Perdita", "affection", "happiness",
            "companion", "sorrow", "Adrian", "tranquil", "wretched", "father", "sympathy", "grief", "hope"),
}
ENDINGS = (".", ".", ".", ";", "?", "!")


def _sentence(author: str, rng: np.random.Generator) -> str:
    cues = pick(rng, STYLE[author], int(rng.integers(1, 4)))
    if rng.random() < BORROW_RATE:
        other = [a for a in AUTHORS if a != author][int(rng.integers(2))]
        cues += pick(rng, STYLE[other], 1)
    text = sentence(rng, cues, length=(8, 26), filler=FILLER, end=ENDINGS[int(rng.integers(len(ENDINGS)))])
    if rng.random() < 0.4:
        words = text.split(" ")
        cut = int(rng.integers(2, len(words)))
        text = " ".join(words[:cut]) + ", " + " ".join(words[cut:])
    return text.replace(" i ", " I ")


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    """Train and test sentences at `scale`: a factor of the replica's own, or 'real'."""
    scale = parse_scale(scale)
    return scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS), scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv) and prepared/private/test.csv.
    Twenty thousand sentences at the real size: made one by one, in about a second."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    train_rows, test_rows = counts(scale)
    count = train_rows + test_rows
    authors = rng.choice(AUTHORS, size=count, p=PRIOR)
    ids = [f"id{n:05d}" for n in rng.choice(max(ID_POOL, 2 * count), size=count, replace=False)]
    frame = pd.DataFrame({"id": ids, "text": [_sentence(a, rng) for a in authors], "author": authors})
    train, test = frame.iloc[:train_rows], frame.iloc[train_rows:]
    train.to_csv(public / "train.csv", index=False)
    test[["id", "text"]].to_csv(public / "test.csv", index=False)
    test[["id"]].assign(**dict(zip(AUTHORS, PRIOR))).to_csv(public / "sample_submission.csv", index=False)
    onehot = {a: (test["author"] == a).astype(int) for a in AUTHORS}
    test[["id"]].assign(**onehot).to_csv(private / "test.csv", index=False)
    describe(public, "Spooky Author Identification",
             "Predict which author (EAP, HPL or MWS) wrote each sentence, as a probability per author.",
             "Submissions are evaluated using multi-class logarithmic loss.",
             "Submit id,EAP,HPL,MWS with id first and each row summing to 1.")
