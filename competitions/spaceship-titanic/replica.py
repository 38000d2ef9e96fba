"""A synthetic spaceship-titanic with the real columns, value sets and missing values.

Transported depends on CryoSleep, spending, home planet, deck, side, age and destination through a logistic
model, so a good model reaches about 80% accuracy where the majority class gets about 50%.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import parse_scale, scaled

TRAIN_ROWS, TEST_ROWS = 3000, 800
REAL_TRAIN, REAL_TEST = 7823, 870  # MLE-bench's 90/10 split of Kaggle's 8,693 labelled passengers
MIN_ROWS = 50  # at the smallest factors, enough passengers that both outcomes show up in each split

PLANETS, DESTINATIONS = ("Earth", "Europa", "Mars"), ("TRAPPIST-1e", "55 Cancri e", "PSO J318.5-22")
DECKS, SIDES = tuple("ABCDEFGT"), ("P", "S")
SPENDING = ("RoomService", "FoodCourt", "ShoppingMall", "Spa", "VRDeck")
FIRST = ("Ada", "Bel", "Cor", "Dax", "Eli", "Fen", "Gus", "Hal", "Ivy", "Jon", "Kai", "Lia", "Mos", "Nia", "Oto")
LAST = ("Pich", "Knike", "Ofracy", "Vines", "Santy", "Hubbs", "Brity", "Coxter", "Wooder", "Flowensley")
COLUMNS = ("PassengerId", "HomePlanet", "CryoSleep", "Cabin", "Destination", "Age", "VIP", *SPENDING, "Name",
           "Transported")


def _passengers(n: int, rng: np.random.Generator) -> pd.DataFrame:
    groups = np.sort(rng.integers(1, n // 2 + 2, size=n))
    member = pd.Series(groups).groupby(groups).cumcount().to_numpy() + 1
    planet = rng.choice(PLANETS, size=n, p=[0.54, 0.25, 0.21])
    cryo = rng.random(n) < 0.35
    age = np.clip(rng.normal(29, 14, size=n), 0, 79).round()
    deck = rng.choice(DECKS, size=n, p=[0.03, 0.09, 0.09, 0.06, 0.10, 0.33, 0.299, 0.001])
    spend = {c: np.where(cryo | (age < 13), 0.0, np.round(rng.exponential(1.0, n) * (rng.random(n) < 0.4)
                                                          * rng.choice([80, 400, 1500], n))) for c in SPENDING}
    frame = pd.DataFrame({
        "PassengerId": [f"{g:04d}_{m:02d}" for g, m in zip(groups, member)],
        "HomePlanet": planet, "CryoSleep": cryo,
        "Cabin": [f"{d}/{rng.integers(0, 1900)}/{s}" for d, s in zip(deck, rng.choice(SIDES, size=n))],
        "Destination": rng.choice(DESTINATIONS, size=n, p=[0.69, 0.21, 0.10]),
        "Age": age, "VIP": rng.random(n) < 0.02, **spend,
        "Name": [f"{rng.choice(FIRST)} {rng.choice(LAST)}" for _ in range(n)],
    })
    return frame


def _transported(frame: pd.DataFrame, rng: np.random.Generator) -> np.ndarray:
    total = frame[list(SPENDING)].sum(axis=1)
    side = frame["Cabin"].str[-1]
    deck = frame["Cabin"].str[0]
    logit = (-0.2 + 2.2 * frame["CryoSleep"] - 1.4 * np.log1p(total) / 4 + 0.9 * (frame["HomePlanet"] == "Europa")
             - 0.4 * (frame["HomePlanet"] == "Earth") + 0.7 * deck.isin(["B", "C"]) + 0.45 * (side == "S")
             + 0.5 * (frame["Age"] < 18) + 0.45 * (frame["Destination"] == "55 Cancri e")
             + 0.8 * (frame["Spa"] > 0) * -1 + 0.8 * (frame["VRDeck"] > 0) * -1)
    return rng.random(len(frame)) < 1 / (1 + np.exp(-logit.to_numpy(dtype=float)))


def _blank_some(frame: pd.DataFrame, rng: np.random.Generator, rate: float = 0.02) -> pd.DataFrame:
    """About 2% missing in each feature column, as in the real data."""
    frame = frame.astype({c: object for c in ("CryoSleep", "VIP")})
    for column in COLUMNS[1:-1]:
        frame.loc[rng.random(len(frame)) < rate, column] = None
    return frame


def counts(scale: float | str = 1.0, train_rows: int | None = None, test_rows: int | None = None) -> tuple[int, int]:
    """Train and test passengers at `scale` (a factor of the replica's own, or 'real'); a count given outright is
    taken as it is, whatever the scale."""
    scale = parse_scale(scale)
    return (scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS) if train_rows is None else train_rows,
            scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS) if test_rows is None else test_rows)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0, train_rows: int | None = None,
             test_rows: int | None = None) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv) and prepared/private/test.csv.
    `train_rows` and `test_rows`, when given, override the scale's count for their split."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    train_rows, test_rows = counts(scale, train_rows, test_rows)
    frame = _passengers(train_rows + test_rows, rng)
    frame["Transported"] = _transported(frame, rng)
    frame = _blank_some(frame, rng)
    order = rng.permutation(len(frame))
    train, test = frame.iloc[order[:train_rows]], frame.iloc[order[train_rows:]]
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns="Transported").to_csv(public / "test.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    pd.DataFrame({"PassengerId": test["PassengerId"], "Transported": False}).to_csv(
        public / "sample_submission.csv", index=False)
    (public / "description.md").write_text(
        "# Spaceship Titanic (synthetic demo)\n\nPredict whether a passenger was Transported. "
        "Submissions are evaluated on classification accuracy.\n")
