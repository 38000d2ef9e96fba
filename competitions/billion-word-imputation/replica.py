"""A synthetic billion-word-imputation: tokenised English sentences, one of each test sentence's words removed, as
MLE-bench lays the competition out: train_v2.txt.zip holding `train_v2.txt` (a sentence a line), test_v2.txt.zip
holding `test_v2.txt` (a CSV despite its name: `"id","sentence"`, every sentence quoted, inner quotes doubled),
the full test sentences in private/test.csv, and the sample only in private (a copy of test_v2.txt: the test file
is a valid submission itself).

Sentences come from a small grammar of news sentences (punctuation as tokens, a final " ."), so a removed word is
one its neighbours predict ("the" before a noun, "of" after "percent"). About one sentence in a hundred with more
than two tokens goes to test, as prepare.py draws them, a word removed anywhere but first or last. The test
sentences as they are score the mean edit distance of a word and its space (about 5); any guess that is wrong
costs more.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._pictures import folders

TRAIN_ROWS, TEST_ROWS = 3000, 150
REAL_TRAIN, REAL_TEST = 30_000_000, 301_000  # ~1% of the 30,301,028 sentences to test
MIN_ROWS = 20
SUBJECTS = ("The company", "The minister", "Sales of drink", "The team 's coach", "A spokesman for the bank",
            "Shares in the group", "The former manager", "Police officers", "The new museum", "Most analysts")
VERBS = ("said", "rose", "fell", "announced", "expects", "reported", "denied", "confirmed", "added", "warned")
OBJECTS = ("the profits of the year", "a new plan for the city", "the rise in prices", "a loss of 3 per cent",
           "the deal with \" partners \"", "the results on Monday", "an end to the strike", "the growth of sales")
TAILS = ("", ", officials said", "in London", "after the meeting", ", according to the report", "last week")


def _sentence(rng: np.random.Generator) -> str:
    parts = [SUBJECTS[int(rng.integers(len(SUBJECTS)))], VERBS[int(rng.integers(len(VERBS)))],
             OBJECTS[int(rng.integers(len(OBJECTS)))], TAILS[int(rng.integers(len(TAILS)))], "."]
    return " ".join(p for p in parts if p)


def _removed(sentence: str, rng: np.random.Generator) -> str:
    """The sentence less one token, never the first or the last."""
    words = sentence.split()
    at = int(rng.integers(1, len(words) - 1))
    return " ".join(words[:at] + words[at + 1:])


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    scale = parse_scale(scale)
    return scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS), scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS)


def _zipped(path: Path, name: str, text: str) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, text)


def _quoted(rows: list[str]) -> str:
    """The CSV prepare.py writes by hand: a quoted header, ids bare, each sentence quoted, its quotes doubled."""
    return '"id","sentence"\n' + "".join(f'{k},"{s}"\n' for k, s in enumerate(rows))


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train_v2.txt.zip, test_v2.txt.zip) and prepared/private (test.csv,
    sample_submission.csv)."""
    public, private = folders(root)
    train_rows, test_rows = counts(scale)
    sentences = [_sentence(rng) for _ in range(train_rows + test_rows)]
    tested = np.zeros(len(sentences), dtype=bool)
    tested[rng.choice(len(sentences), size=test_rows, replace=False)] = True
    train = [s for s, t in zip(sentences, tested) if not t]
    full = [s.replace('"', '""') for s, t in zip(sentences, tested) if t]
    gapped = _quoted([_removed(s, rng) for s in full])
    _zipped(public / "train_v2.txt.zip", "train_v2.txt", "".join(s + "\n" for s in train))
    _zipped(public / "test_v2.txt.zip", "test_v2.txt", gapped)
    (private / "test.csv").write_text(_quoted(full), encoding="utf-8")
    (private / "sample_submission.csv").write_text(gapped, encoding="utf-8")
    describe(public, "Billion Word Imputation",
             "Each sentence of test_v2.txt has had one word removed (never the first or the last); submit each "
             "sentence with the missing word put back.",
             "Submissions are evaluated on the mean Levenshtein distance between the submitted and the original "
             "sentences.",
             "Submit `id,sentence` for every test sentence; test_v2.txt itself is a valid submission.")
