"""A synthetic learning-agency-lab-automated-essay-scoring-2: student essays scored 1 to 6, as MLE-bench lays the
competition out (its 90/10 split of the real train.csv): train.csv `essay_id,full_text,score`, test.csv without
the score, the answers in private/answers.csv, and a sample of random grades (numpy's RandomState(42), as
prepare.py draws them).

A better essay is longer, and uses more of the vocabulary a rater rewards ("furthermore", "evidence", ...); a weak
one leans on filler and the words a rater marks down ("stuff", "gonna"). Paragraphs are separated by blank lines,
as in the real essays. TF-IDF with a linear model reaches a kappa of about 0.8; any constant grade scores 0.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._pictures import folders, hex_ids
from runner.demo._words import paragraphs

TRAIN_ROWS, TEST_ROWS = 540, 240
REAL_TRAIN, REAL_TEST = 15_576, 1_731  # MLE-bench's 90/10 split of the 17,307 scored essays
MIN_ROWS = 60  # at the smallest factors: every grade still drawn
GRADES = np.arange(1, 7)
SHARES = np.array([0.07, 0.27, 0.36, 0.23, 0.06, 0.01])  # the real grades' shares
GOOD = ("furthermore", "evidence", "consequently", "perspective", "significant", "demonstrates", "moreover",
        "analysis", "argument", "conclusion", "therefore", "essential", "beneficial", "approach")
WEAK = ("stuff", "gonna", "things", "like", "basically", "kinda", "really", "alot")
GOOD_RATE, WEAK_RATE = 1.6, 1.2  # good words per grade point; weak words per point below 6
PARAGRAPHS = (2, 6)  # a text's paragraphs, blank lines between


def _essay_words(grades: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each essay's cue words: good ones rising with its grade, weak ones falling with it (both drawn, so that no
    count decides alone)."""
    good = rng.poisson(GOOD_RATE * grades)
    weak = rng.poisson(WEAK_RATE * (6 - grades))
    rows = np.concatenate([np.repeat(np.arange(len(grades)), good), np.repeat(np.arange(len(grades)), weak)])
    words = np.concatenate([np.asarray(GOOD, dtype=object)[rng.integers(len(GOOD), size=good.sum())],
                            np.asarray(WEAK, dtype=object)[rng.integers(len(WEAK), size=weak.sum())]])
    return rows, words


def _essays(grades: np.ndarray, rng: np.random.Generator) -> list[str]:
    """Each essay: sentences of filler with its cue words, more sentences for a better grade, in paragraphs."""
    n = len(grades)
    texts = paragraphs(rng, n, *_essay_words(grades, rng), sentences=(4, 9), length=(8, 18))
    extra = paragraphs(rng, n, np.array([], dtype=int), np.array([], dtype=object), sentences=(1, 3),
                       length=(8, 16))
    out = []
    for k, (text, more) in enumerate(zip(texts, extra)):
        sentences = text.split(". ")
        sentences += more.split(". ") * int(grades[k] > 3)  # the better essays run on
        breaks = np.sort(rng.choice(np.arange(1, len(sentences)), size=min(len(sentences) - 1,
                                    int(rng.integers(*PARAGRAPHS)) - 1), replace=False))
        parts = np.split(np.array(sentences, dtype=object), breaks)
        out.append("\n\n".join(". ".join(p).rstrip(".") + "." for p in parts))
    return out


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    """Train and test essays at `scale`: a factor of the replica's own, or 'real'."""
    scale = parse_scale(scale)
    return scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS), scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv) and prepared/private/answers.csv."""
    public, private = folders(root)
    train_rows, test_rows = counts(scale)
    n = train_rows + test_rows
    grades = rng.choice(GRADES, size=n, p=SHARES)
    grades[:len(GRADES)] = GRADES  # every grade in train at least once
    frame = pd.DataFrame({"essay_id": hex_ids(rng, n, 7), "full_text": _essays(grades, rng), "score": grades})
    frame = frame.iloc[rng.permutation(n)].reset_index(drop=True)
    train, answers = frame.iloc[:train_rows], frame.iloc[train_rows:].reset_index(drop=True)
    train.to_csv(public / "train.csv", index=False)
    answers[["essay_id", "full_text"]].to_csv(public / "test.csv", index=False)
    answers.to_csv(private / "answers.csv", index=False)
    sample = answers[["essay_id"]].assign(score=np.random.RandomState(42).randint(1, 7, size=len(answers)))
    sample.to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Learning Agency Lab - Automated Essay Scoring 2.0",
             "Predict the holistic score (1 to 6) of each student essay in test.csv.",
             "Submissions are scored on the quadratic weighted kappa between predicted and actual scores.",
             "Submit `essay_id,score` for every test essay, the score an integer.")
