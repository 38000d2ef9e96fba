"""A synthetic jigsaw-unintended-bias-in-toxicity-classification: news-site comments with the share of raters who
found each toxic, and the identities each mentions, as MLE-bench lays the competition out: train.csv with the 45
columns of the real one (`target` the toxic share, then the toxicity subtypes, the 24 identity shares, empty
where a comment was not labelled for identity, and the comment's metadata), test.csv `id,comment_text`, the
answers in private/test.csv (the real test_private_expanded.csv's 45 columns, `toxicity` the share), and a
sample of zeros.

A toxic comment insults (its words: "idiot", "disgusting", ...); identities are mentioned by toxic and civil
comments alike, a little more often by toxic ones, as in the real data. The grader cuts predictions and shares at
0.5 and weighs the AUC within each of nine identities' mentions: every one of them has toxic and civil comments
among the test rows. TF-IDF and a logistic regression, cut where out-of-fold balanced accuracy peaks, reach about
0.85; the sample scores 0.5.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._pictures import folders
from runner.demo._words import paragraphs

TRAIN_ROWS, TEST_ROWS = 1500, 600
REAL_TRAIN, REAL_TEST = 1_804_874, 97_320  # the real train.csv, and Kaggle's private test set
MIN_ROWS = 120  # at the smallest factors: every scored identity keeps toxic and civil mentions in the test rows
TOXIC_RATE = 0.2  # higher than the real 8%, so that a small test set holds toxic mentions of each identity
IDENTITIES = ("asian", "atheist", "bisexual", "black", "buddhist", "christian", "female", "heterosexual", "hindu",
              "homosexual_gay_or_lesbian", "intellectual_or_learning_disability", "jewish", "latino", "male",
              "muslim", "other_disability", "other_gender", "other_race_or_ethnicity", "other_religion",
              "other_sexual_orientation", "physical_disability", "psychiatric_or_mental_illness", "transgender",
              "white")
SCORED = ("male", "female", "homosexual_gay_or_lesbian", "christian", "jewish", "muslim", "black", "white",
          "psychiatric_or_mental_illness")  # the identities the grader weighs
MENTIONS = {"male": "men", "female": "women", "homosexual_gay_or_lesbian": "gay", "christian": "christians",
            "jewish": "jews", "muslim": "muslims", "black": "black people", "white": "white people",
            "psychiatric_or_mental_illness": "mentally ill", "asian": "asians", "atheist": "atheists",
            "transgender": "trans people", "latino": "latinos", "hindu": "hindus"}
MENTION_RATE, TOXIC_MENTION_RATE = 0.08, 0.12  # of civil and of toxic comments, per mentioned identity
INSULTS = ("idiot", "stupid", "disgusting", "pathetic", "moron", "liar", "scum", "ignorant", "shut up", "clown")
CIVIL = ("article", "policy", "council", "budget", "election", "agree", "thanks", "vote", "economy", "reporting")
STRAY_RATE = 0.1  # civil comments with one rude word: no single word decides
SUBTYPES = ("severe_toxicity", "obscene", "identity_attack", "insult", "threat")
IDENTITY_LABELLED = 0.25  # of train comments labelled for identity (the others' shares are empty)
LEAST = 3  # toxic and civil test comments per scored identity, at least


def _mentions(toxic: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(comments x identities) 0/1: which identities each comment mentions."""
    named = [IDENTITIES.index(k) for k in MENTIONS]
    rate = np.where(toxic, TOXIC_MENTION_RATE, MENTION_RATE)[:, None]
    mentioned = np.zeros((len(toxic), len(IDENTITIES)), dtype=bool)
    mentioned[:, named] = rng.random((len(toxic), len(named))) < rate
    return mentioned


def _ensure_mentions(toxic: np.ndarray, mentioned: np.ndarray, rows: np.ndarray, rng: np.random.Generator) -> None:
    """Among `rows`, at least LEAST toxic and LEAST civil comments mention each scored identity."""
    for identity in SCORED:
        j = IDENTITIES.index(identity)
        for kind in (True, False):
            pool = rows[toxic[rows] == kind]
            missing = LEAST - int(mentioned[pool, j].sum())
            if missing > 0:
                mentioned[rng.choice(pool[~mentioned[pool, j]], size=missing, replace=False), j] = True


def _comments(toxic: np.ndarray, mentioned: np.ndarray, rng: np.random.Generator) -> list[str]:
    rows, words = [], []
    for j, identity in enumerate(IDENTITIES):
        hit = np.flatnonzero(mentioned[:, j])
        rows.append(hit), words.append(np.full(len(hit), MENTIONS.get(identity, ""), dtype=object))
    insulting = np.flatnonzero(toxic)
    count = rng.integers(1, 4, size=len(insulting))
    rows.append(np.repeat(insulting, count)), words.append(np.asarray(INSULTS, dtype=object)[
        rng.integers(len(INSULTS), size=count.sum())])
    stray = np.flatnonzero(~toxic & (rng.random(len(toxic)) < STRAY_RATE))
    rows.append(stray), words.append(np.asarray(INSULTS, dtype=object)[rng.integers(len(INSULTS), size=len(stray))])
    civil = rng.integers(0, 3, size=len(toxic))
    rows.append(np.repeat(np.arange(len(toxic)), civil)), words.append(np.asarray(CIVIL, dtype=object)[
        rng.integers(len(CIVIL), size=civil.sum())])
    return paragraphs(rng, len(toxic), np.concatenate(rows), np.concatenate(words), sentences=(1, 4), length=(5, 14))


def _shares(flag: np.ndarray, raters: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The share of `raters` who said yes: most of them where `flag`, few otherwise."""
    p = np.where(flag, rng.uniform(0.5, 1.0, flag.shape), rng.beta(0.4, 4.0, flag.shape))
    return np.round(rng.binomial(raters, np.clip(p, 0, 1)) / raters, 6)


def _table(n: int, test_rows: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
    toxic = rng.random(n) < TOXIC_RATE
    mentioned = _mentions(toxic, rng)
    _ensure_mentions(toxic, mentioned, test_rows, rng)
    raters = rng.integers(4, 60, size=n)
    share = _shares(toxic, raters, rng)
    toxic_now = share >= 0.5
    fix = toxic != toxic_now  # a drawn share on the wrong side of the cut: moved to the right side
    share[fix] = np.where(toxic[fix], 0.5, 0.4)
    identity_raters = rng.integers(4, 10, size=n)
    frame = {"comment_text": _comments(toxic, mentioned, rng), "toxicity": share}
    for name in SUBTYPES:
        frame[name] = np.round(share * rng.uniform(0, 0.6, n), 6)
    for j, identity in enumerate(IDENTITIES):
        frame[identity] = _shares(mentioned[:, j], identity_raters, rng)
    days = rng.integers(0, 700, size=n)
    frame.update({
        "created_date": [str(pd.Timestamp("2015-09-29") + pd.Timedelta(days=int(d), seconds=int(s))) + ".0+00"
                         for d, s in zip(days, rng.integers(0, 86_400, size=n))],
        "publication_id": rng.choice([2, 6, 13, 21, 54, 102], size=n),
        "parent_id": np.where(rng.random(n) < 0.4, rng.integers(100_000, 7_000_000, size=n).astype(float), np.nan),
        "article_id": rng.integers(2_000, 400_000, size=n), "rating": np.where(toxic & (rng.random(n) < 0.3),
                                                                                "rejected", "approved"),
        "funny": rng.poisson(0.3, n), "wow": rng.poisson(0.05, n), "sad": rng.poisson(0.1, n),
        "likes": rng.poisson(2.0, n), "disagree": rng.poisson(0.5 + toxic, n),
        "sexual_explicit": np.round(share * rng.uniform(0, 0.2, n), 6), "identity_annotator_count": identity_raters,
        "toxicity_annotator_count": raters})
    return pd.DataFrame(frame)


PRIVATE_ORDER = ("id", "comment_text", "created_date", "publication_id", "parent_id", "article_id", "rating",
                 "funny", "wow", "sad", "likes", "disagree", "toxicity", "severe_toxicity", "obscene",
                 "sexual_explicit", "identity_attack", "insult", "threat", "identity_annotator_count",
                 "toxicity_annotator_count", *IDENTITIES)
TRAIN_ORDER = ("id", "target", "comment_text", "severe_toxicity", "obscene", "identity_attack", "insult", "threat",
               *IDENTITIES, "created_date", "publication_id", "parent_id", "article_id", "rating", "funny", "wow",
               "sad", "likes", "disagree", "sexual_explicit", "identity_annotator_count", "toxicity_annotator_count")


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    scale = parse_scale(scale)
    return scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS), scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv) and prepared/private/test.csv."""
    public, private = folders(root)
    train_rows, test_rows = counts(scale)
    frame = _table(train_rows + test_rows, np.arange(train_rows, train_rows + test_rows), rng)
    frame.insert(0, "id", np.concatenate([np.sort(rng.choice(np.arange(59_848, 59_848 + 200 * train_rows),
                                                             size=train_rows, replace=False)),
                                          np.sort(rng.choice(np.arange(7_000_000, 7_000_000 + 20 * test_rows),
                                                             size=test_rows, replace=False))]))
    train, answers = frame.iloc[:train_rows].copy(), frame.iloc[train_rows:].reset_index(drop=True)
    unlabelled = rng.random(train_rows) >= IDENTITY_LABELLED
    train.loc[unlabelled, list(IDENTITIES)] = np.nan
    train.rename(columns={"toxicity": "target"})[list(TRAIN_ORDER)].to_csv(public / "train.csv", index=False)
    answers[["id", "comment_text"]].to_csv(public / "test.csv", index=False)
    answers[list(PRIVATE_ORDER)].to_csv(private / "test.csv", index=False)
    answers[["id"]].assign(prediction=0.0).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Jigsaw Unintended Bias in Toxicity Classification",
             "Predict, for each comment in test.csv, whether it is toxic (a value from 0 to 1; from 0.5 on it "
             "counts as toxic).",
             "Submissions are evaluated on a bias-weighted ROC AUC: the overall AUC and the generalized mean of "
             "the subgroup, BPSN and BNSP AUCs over nine identities.",
             "Submit `id,prediction` for every test comment.")
