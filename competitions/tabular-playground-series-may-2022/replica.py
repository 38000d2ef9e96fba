"""A synthetic tabular-playground-series-may-2022: machine states from 30 numeric features and one string.

The target's logit mixes a few numeric columns (f_21, f_22, f_28, f_30 and an f_00 x f_01 interaction) with
letter counts of f_27, a 10-letter uppercase code: more distinct letters raise it, more B's lower it. A GBM on the
numeric columns alone gets an AUC of about 0.75; per-letter counts of f_27 lift it to about 0.87. The 0.5
sample submission scores 0.5.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled

TRAIN_ROWS, TEST_ROWS = 1200, 300
REAL_TRAIN, REAL_TEST = 800_000, 100_000  # MLE-bench's split of the 900,000 Kaggle train rows
MIN_ROWS = 50  # at the smallest factors, enough rows that both targets show up in each split
CODE_LENGTH = 10  # f_27's letters
LETTERS = np.array(list("ABCDEFGHIJKLMNOPQRST"))
LETTER_ODDS = 0.6 ** np.arange(len(LETTERS))  # early letters are far more common, as in the real codes
TWO_LETTER_SLOTS = (0, 2, 5)  # positions that only ever hold A or B
SAMPLE_TARGET = 0.5


def _codes(count: int, rng: np.random.Generator) -> np.ndarray:
    letters = rng.choice(LETTERS, size=(count, CODE_LENGTH), p=LETTER_ODDS / LETTER_ODDS.sum())
    letters[:, TWO_LETTER_SLOTS] = rng.choice(["A", "B"], size=(count, len(TWO_LETTER_SLOTS)))
    return letters.view(f"<U{CODE_LENGTH}").ravel()  # each row's letters read as one string, no copy


def _letters(codes: np.ndarray) -> np.ndarray:
    """The codes back as a (rows, 10) array of single letters."""
    return codes.astype(f"<U{CODE_LENGTH}").view("<U1").reshape(len(codes), CODE_LENGTH)


def _features(count: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    columns = {f"f_{k:02d}": np.round(rng.normal(0, 1, count), 6) for k in range(7)}
    columns.update({f"f_{k:02d}": rng.poisson(rng.uniform(1, 6), count) for k in range(7, 19)})
    columns.update({f"f_{k:02d}": np.round(rng.normal(0, rng.uniform(1.5, 3), count), 6) for k in range(19, 27)})
    columns["f_27"] = _codes(count, rng)
    columns["f_28"] = np.round(rng.normal(0, 240, count), 6)
    columns["f_29"] = (rng.random(count) < 0.35).astype(int)
    columns["f_30"] = rng.choice(3, size=count)
    return columns


def _target(columns: dict[str, np.ndarray], rng: np.random.Generator) -> np.ndarray:
    letters = np.sort(_letters(columns["f_27"]), axis=1)
    distinct = 1 + (letters[:, 1:] != letters[:, :-1]).sum(axis=1)
    b_count = (letters == "B").sum(axis=1)
    logit = (1.2 * (distinct - distinct.mean()) - 1.0 * (b_count - b_count.mean()) + 0.6 * columns["f_21"]
             - 0.5 * columns["f_22"] + columns["f_28"] / 150 + 1.2 * (columns["f_30"] == 2)
             + 1.5 * columns["f_00"] * columns["f_01"] - 0.4)
    return (rng.random(len(logit)) < 1 / (1 + np.exp(-logit))).astype(int)


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    """Train and test rows at `scale`: a factor of the replica's own, or 'real'."""
    scale = parse_scale(scale)
    return scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS), scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv) and prepared/private/test.csv.
    Every column is drawn whole: the real 900,000 rows fit in memory at once (0.7 GB at the peak)."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    train_rows, test_rows = counts(scale)
    columns = _features(train_rows + test_rows, rng)
    frame = pd.DataFrame({"id": np.arange(train_rows + test_rows), **columns, "target": _target(columns, rng)})
    train, test = frame.iloc[:train_rows], frame.iloc[train_rows:]
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns="target").to_csv(public / "test.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    test[["id", "target"]].to_csv(private / "gold_submission.csv", index=False)
    test[["id"]].assign(target=SAMPLE_TARGET).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Tabular Playground Series - May 2022",
             "Predict the probability that the machine is in state 1 (target) for each row.",
             "Submissions are evaluated on area under the ROC curve between the predicted probability and the "
             "observed target.",
             "Submit id,target for each id in test.csv.")
