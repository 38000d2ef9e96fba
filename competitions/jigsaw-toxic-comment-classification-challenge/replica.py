"""A synthetic jigsaw-toxic-comment-classification-challenge: talk-page comments with six correlated labels.

A comment is toxic first; obscene, insult, severe_toxic, threat and identity_hate mostly occur within toxic
ones, each carrying its own cue words (severe ones also shout). Clean comments talk about edits and sources.
TF-IDF with one logistic regression per label reaches a mean column-wise AUC of about 0.98; the 0.5 sample
scores 0.5. As in the real test_labels.csv, some test rows are all -1 and are not scored.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._words import paragraphs

LABELS = ("toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate")  # the grader's column order
TRAIN_ROWS, TEST_ROWS = 700, 300
REAL_TRAIN, REAL_TEST = 159_571, 153_164  # the real train.csv and the original Kaggle test, reused unsplit
MIN_ROWS = 100  # at the smallest factors, enough toxic rows to give every label MIN_POSITIVES
TOXIC_RATE = 0.22  # higher than the real ~10%, so that the rare labels still have positives
GIVEN_TOXIC = {"severe_toxic": 0.18, "obscene": 0.55, "threat": 0.12, "insult": 0.5, "identity_hate": 0.15}
GIVEN_CLEAN = {"obscene": 0.01, "insult": 0.01}  # a few mild ones labelled without toxic, as in the real data
MIN_POSITIVES = 4  # per label in train and in the scored test rows, so every column AUC is defined
STRAY_RATE = 0.12  # clean comments that quote a rude word, so that no single word decides
TOXIC_WITH_CLEAN_RATE = 0.3  # toxic comments that still talk about edits and sources
NEWLINE_RATE, QUOTED_RATE = 0.3, 0.05  # comments whose sentences break lines, and comments wrapped in quotes
UNSCORED_RATE = 0.4  # the real test_labels.csv marks most rows -1; fewer here to keep enough scored rows
CUES = {
    "clean": ("article", "edit", "source", "citation", "talk page", "revert", "please", "thanks", "section",
              "reference", "consensus", "wikipedia", "policy", "notability", "image", "discussion"),
    "toxic": ("shut up", "pathetic", "garbage", "stupid", "get lost", "nonsense", "hate", "useless"),
    "severe_toxic": ("filthy scum", "rot", "worst scum"),
    "obscene": ("crap", "damn", "bloody hell", "freaking", "screw this", "sucks"),
    "threat": ("kill you", "hurt you", "find you", "watch your back", "destroy you", "come for you"),
    "insult": ("idiot", "moron", "loser", "clown", "fool", "jerk"),
    "identity_hate": ("your kind", "those people", "your tribe", "inferior lot", "go back home"),
}


def _labels(count: int, rng: np.random.Generator) -> pd.DataFrame:
    toxic = rng.random(count) < TOXIC_RATE
    frame = {"toxic": toxic}
    for label in LABELS[1:]:
        frame[label] = np.where(toxic, rng.random(count) < GIVEN_TOXIC[label],
                                rng.random(count) < GIVEN_CLEAN.get(label, 0.0))
    return pd.DataFrame(frame).astype(int)


def _ensure_positives(labels: pd.DataFrame, rows: np.ndarray, rng: np.random.Generator) -> None:
    """Turn toxic rows among `rows` positive for any label that has fewer than MIN_POSITIVES there."""
    toxic_rows = rows[labels.loc[rows, "toxic"].to_numpy() == 1]
    for label in LABELS[1:]:
        missing = MIN_POSITIVES - int(labels.loc[rows, label].sum())
        if missing > 0:
            labels.loc[rng.choice(toxic_rows, size=missing, replace=False), label] = 1


def _draw(rows: np.ndarray, counts: np.ndarray, pool: tuple[str, ...], rng: np.random.Generator):
    """counts[i] words of `pool` for each of `rows`: (the row of each word, the words)."""
    owners = np.repeat(rows, counts)
    return owners, np.asarray(pool, dtype=object)[rng.integers(len(pool), size=len(owners))]


def _cues(labels: pd.DataFrame, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Every comment's cue words at once: clean talk, one to two words per label it carries (severe ones
    shout more), and the stray rude word of some clean comments."""
    n, toxic = len(labels), labels["toxic"].to_numpy() == 1
    clean = np.flatnonzero(~toxic | (rng.random(n) < TOXIC_WITH_CLEAN_RATE))
    drawn = [_draw(clean, rng.integers(1, 4, len(clean)), CUES["clean"], rng)]
    for label in LABELS:
        rows = np.flatnonzero(labels[label].to_numpy() == 1)
        drawn.append(_draw(rows, rng.integers(1, 3, len(rows)) + 2 * (label == "severe_toxic"), CUES[label], rng))
    stray = np.flatnonzero(~toxic & (rng.random(n) < STRAY_RATE))
    quoted = rng.integers(len(LABELS), size=len(stray))
    for k, label in enumerate(LABELS):
        drawn.append(_draw(stray[quoted == k], 1, CUES[label], rng))
    return np.concatenate([rows for rows, _ in drawn]), np.concatenate([words for _, words in drawn])


def _comments(labels: pd.DataFrame, rng: np.random.Generator) -> pd.Series:
    """The comment of each row of `labels`: its cue words among talk-page filler, severe ones in capitals, some
    with line breaks between sentences, a few in quotes."""
    n = len(labels)
    text = pd.Series(paragraphs(rng, n, *_cues(labels, rng), sentences=(1, 5), length=(4, 14)), dtype=object)
    severe = labels["severe_toxic"].to_numpy() == 1
    text[severe] = text[severe].str.upper()
    broken, double = rng.random(n) < NEWLINE_RATE, rng.random(n) < 0.5
    for rows, newline in ((broken & double, ".\n\n"), (broken & ~double, ".\n")):
        text[rows] = text[rows].str.replace(". ", newline, regex=False)
    quoted = rng.random(n) < QUOTED_RATE
    text[quoted] = '"' + text[quoted] + '"'
    return text


def _ids(count: int, rng: np.random.Generator) -> list[str]:
    """Distinct 16-hex ids in random order (64 random bits: a repeat is all but impossible, and redrawn)."""
    values = np.unique(np.frombuffer(rng.bytes(8 * count), dtype=">u8"))
    while len(values) < count:
        more = np.frombuffer(rng.bytes(8 * (count - len(values))), dtype=">u8")
        values = np.unique(np.concatenate([values, more]))
    return [f"{v:016x}" for v in rng.permutation(values).tolist()]


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    """Train and test comments at `scale`: a factor of the replica's own, or 'real'."""
    scale = parse_scale(scale)
    return scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS), scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv) and prepared/private/test.csv.
    Labels and comments are made for all rows at once (`paragraphs`): seconds at the real size."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    train_rows, test_rows = counts(scale)
    labels = _labels(train_rows + test_rows, rng)
    scored = rng.random(test_rows) >= UNSCORED_RATE
    _ensure_positives(labels, np.arange(train_rows), rng)
    _ensure_positives(labels, train_rows + np.flatnonzero(scored), rng)
    frame = pd.DataFrame({"id": _ids(len(labels), rng), "comment_text": _comments(labels, rng)})
    frame = pd.concat([frame, labels], axis=1)
    train, test = frame.iloc[:train_rows], frame.iloc[train_rows:].reset_index(drop=True)
    train.to_csv(public / "train.csv", index=False)
    test[["id", "comment_text"]].to_csv(public / "test.csv", index=False)
    test[["id"]].assign(**{label: 0.5 for label in LABELS}).to_csv(public / "sample_submission.csv", index=False)
    answers = test[["id", *LABELS]].copy()
    answers.loc[~scored, list(LABELS)] = -1
    answers.to_csv(private / "test.csv", index=False)
    describe(public, "Toxic Comment Classification Challenge",
             "Predict a probability for each of six toxicity types (toxic, severe_toxic, obscene, threat, "
             "insult, identity_hate) of each comment.",
             "Submissions are evaluated on the mean column-wise ROC AUC.",
             "Submit id followed by the six probability columns in that order.")
