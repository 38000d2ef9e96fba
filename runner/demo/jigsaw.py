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

from runner.demo._layout import describe
from runner.demo._words import paragraph, pick

LABELS = ("toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate")  # the grader's column order
TRAIN_ROWS, TEST_ROWS = 700, 300
TOXIC_RATE = 0.22  # higher than the real ~10%, so that the rare labels still have positives
GIVEN_TOXIC = {"severe_toxic": 0.18, "obscene": 0.55, "threat": 0.12, "insult": 0.5, "identity_hate": 0.15}
GIVEN_CLEAN = {"obscene": 0.01, "insult": 0.01}  # a few mild ones labelled without toxic, as in the real data
MIN_POSITIVES = 4  # per label in train and in the scored test rows, so every column AUC is defined
STRAY_RATE = 0.12  # clean comments that quote a rude word, so that no single word decides
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


def _comment(row: pd.Series, rng: np.random.Generator) -> str:
    cues = pick(rng, CUES["clean"], int(rng.integers(1, 4))) if row["toxic"] == 0 or rng.random() < 0.3 else []
    for label in LABELS:
        if row[label]:
            cues += pick(rng, CUES[label], int(rng.integers(1, 3)) + 2 * (label == "severe_toxic"))
    if row["toxic"] == 0 and rng.random() < STRAY_RATE:
        cues += pick(rng, CUES[LABELS[int(rng.integers(len(LABELS)))]], 1)
    text = paragraph(rng, cues, sentences=(1, 5), length=(4, 14))
    if row["severe_toxic"]:
        text = text.upper()
    if rng.random() < 0.3:
        text = text.replace(". ", ".\n\n" if rng.random() < 0.5 else ".\n")
    return f'"{text}"' if rng.random() < 0.05 else text


def _ids(count: int, rng: np.random.Generator) -> list[str]:
    ids: set[str] = set()
    while len(ids) < count:
        ids.add(rng.bytes(8).hex())
    return list(rng.permutation(sorted(ids)))


def generate(root: Path, rng: np.random.Generator) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv) and prepared/private/test.csv."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    labels = _labels(TRAIN_ROWS + TEST_ROWS, rng)
    scored = rng.random(TEST_ROWS) >= UNSCORED_RATE
    _ensure_positives(labels, np.arange(TRAIN_ROWS), rng)
    _ensure_positives(labels, TRAIN_ROWS + np.flatnonzero(scored), rng)
    frame = pd.DataFrame({"id": _ids(len(labels), rng),
                          "comment_text": [_comment(row, rng) for _, row in labels.iterrows()]})
    frame = pd.concat([frame, labels], axis=1)
    train, test = frame.iloc[:TRAIN_ROWS], frame.iloc[TRAIN_ROWS:].reset_index(drop=True)
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
