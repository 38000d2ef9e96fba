"""A synthetic tweet-sentiment-extraction: tweets with their sentiment and the words that carry it, as MLE-bench
lays the competition out (its 90/10 split of the real train.csv): train.csv `textID,text,selected_text,sentiment`,
test.csv without the selected text, the answers in private/test.csv (the four columns), and a sample whose every
selected text is empty.

A neutral tweet's selected text is the whole tweet, as it mostly is in the real data; a positive or negative one
holds a word of its sentiment ("love", "sucks", ...), and its selected text is that word, sometimes with its
neighbour or the "!!" after it. Some tweets start with a space, as real ones do. The whole tweet as its own span
scores a word Jaccard of about 0.5 (neutral tweets 1, the others near 0.2); a lexicon of the words inside the
training spans, per sentiment, finds the others' (about 0.9); the empty sample scores 0.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._pictures import folders, hex_ids
from runner.demo._words import pick

TRAIN_ROWS, TEST_ROWS = 900, 300
REAL_TRAIN, REAL_TEST = 24_732, 2_749  # MLE-bench's 90/10 split of the 27,481 labelled tweets
MIN_ROWS = 30
SENTIMENTS = ("neutral", "positive", "negative")
SHARES = (0.40, 0.31, 0.29)  # the real mix
WORDS = {"positive": ("love", "happy", "great", "awesome", "fun", "thanks", "good", "nice", "glad", "enjoy"),
         "negative": ("sad", "hate", "sucks", "miss", "bored", "tired", "sorry", "hurts", "awful", "worst")}
CHATTER = ("i", "im", "just", "got", "the", "my", "to", "and", "is", "it", "so", "today", "now", "going", "work",
           "home", "day", "with", "you", "at", "for", "on", "this", "that", "lol", "gonna", "back", "all", "u",
           "night", "tomorrow", "was", "be", "out", "what", "have", "new", "sleep", "school", "weekend")
LEADING_SPACE_RATE = 0.25  # tweets that begin with a space in the real file
WIDER_RATE = 0.3  # positive and negative spans that also take the next word


def _tweet(sentiment: str, rng: np.random.Generator) -> tuple[str, str]:
    """(text, selected text) of one tweet of `sentiment`."""
    words = pick(rng, CHATTER, int(rng.integers(4, 16)))
    if sentiment == "neutral":
        text = " ".join(words)
        return (" " if rng.random() < LEADING_SPACE_RATE else "") + text, text
    at = int(rng.integers(0, len(words) + 1))
    cue = WORDS[sentiment][int(rng.integers(len(WORDS[sentiment])))] + ("!!" if rng.random() < 0.2 else "")
    words.insert(at, cue)
    span = words[at:at + 2] if rng.random() < WIDER_RATE else [cue]
    return (" " if rng.random() < LEADING_SPACE_RATE else "") + " ".join(words), " ".join(span)


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    scale = parse_scale(scale)
    return scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS), scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv) and prepared/private/test.csv."""
    public, private = folders(root)
    train_rows, test_rows = counts(scale)
    n = train_rows + test_rows
    sentiments = np.asarray(SENTIMENTS)[rng.choice(len(SENTIMENTS), size=n, p=SHARES)]
    tweets = [_tweet(s, rng) for s in sentiments]
    frame = pd.DataFrame({"textID": hex_ids(rng, n, 10), "text": [t for t, _ in tweets],
                          "selected_text": [s for _, s in tweets], "sentiment": sentiments})
    train, answers = frame.iloc[:train_rows], frame.iloc[train_rows:].reset_index(drop=True)
    train.to_csv(public / "train.csv", index=False)
    answers.drop(columns="selected_text").to_csv(public / "test.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)
    answers[["textID"]].assign(selected_text="").to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Tweet Sentiment Extraction",
             "Pick out, for each tweet in test.csv, the words that support its given sentiment.",
             "Submissions are evaluated on the word-level Jaccard score, averaged over the tweets.",
             "Submit `textID,selected_text` for every test tweet.")
