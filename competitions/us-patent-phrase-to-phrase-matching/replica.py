"""A synthetic us-patent-phrase-to-phrase-matching: pairs of patent phrases (an anchor and a target) rated for how
alike they are in a patent class (the CPC context), as MLE-bench lays the competition out (its 90/10 split of the
real train.csv, by row): train.csv `id,anchor,target,context,score`, test.csv without the score, the answers in
private/test.csv, and a sample of zeros (whose Pearson correlation is undefined: NaN).

Each anchor is two or three words of one technical field; its targets keep some of its words, swap others for a
synonym, or bring words of their own. The score (0, 0.25, 0.5, 0.75 or 1, in the real shares) rises with the
words the pair shares and with each synonym, and a little when the context is the anchor's own field. As in the
real split, test anchors also appear in train. The signal is in the pair: how many words the two share, how alike
their letters are, and the anchor's usual score; a table of those features reaches a Pearson of about 0.8.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._pictures import folders, hex_ids

TRAIN_ROWS, TEST_ROWS = 900, 300
REAL_TRAIN, REAL_TEST = 32_825, 3_648  # MLE-bench's 90/10 split of the 36,473 rated pairs
MIN_ROWS = 60
ANCHORS_PER_ROW = 1 / 45  # the real data: 733 anchors for 36k pairs
SCORES = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
# words of each CPC section's field, in synonym pairs (a word and its partner say the same)
FIELDS = {
    "A": [("garment", "clothing"), ("seat", "chair"), ("food", "nutrient"), ("drug", "medicament"),
          ("brush", "bristle"), ("toy", "plaything"), ("shoe", "footwear"), ("tablet", "pill")],
    "B": [("cutting", "severing"), ("press", "stamping"), ("vehicle", "carriage"), ("conveyor", "belt"),
          ("mould", "cast"), ("grinding", "abrasion"), ("printing", "imprint"), ("package", "container")],
    "C": [("polymer", "resin"), ("catalyst", "promoter"), ("solvent", "diluent"), ("alloy", "metal"),
          ("acid", "acidic"), ("coating", "film"), ("fermentation", "brewing"), ("crystal", "lattice")],
    "F": [("engine", "motor"), ("valve", "gate"), ("pump", "compressor"), ("bearing", "bushing"),
          ("turbine", "rotor"), ("boiler", "heater"), ("pipe", "conduit"), ("spring", "coil")],
    "G": [("sensor", "detector"), ("lens", "optic"), ("signal", "waveform"), ("memory", "storage"),
          ("display", "screen"), ("clock", "timer"), ("measurement", "gauge"), ("processor", "controller")],
    "H": [("battery", "cell"), ("antenna", "aerial"), ("transistor", "switch"), ("cable", "wire"),
          ("circuit", "network"), ("magnet", "inductor"), ("transmitter", "emitter"), ("voltage", "potential")],
}
MODIFIERS = ("adjustable", "automatic", "flexible", "portable", "rotary", "hollow", "layered", "thermal",
             "electric", "linear", "modular", "sealed")
SHARED, SYNONYM, OWN_FIELD = 0.55, 0.3, 0.15  # a score's rise per shared word share, per synonym, in its field
NOISE = 0.12
SHARES = (0.20, 0.32, 0.34, 0.11, 0.03)  # the real scores' shares, which the raw scores are cut into


def _anchor(field: str, rng: np.random.Generator) -> list[str]:
    pairs = FIELDS[field]
    words = [pairs[k][int(rng.integers(2))] for k in rng.choice(len(pairs), size=int(rng.integers(1, 3)),
                                                                 replace=False)]
    return ([MODIFIERS[int(rng.integers(len(MODIFIERS)))]] if rng.random() < 0.5 else []) + words


def _partner(word: str) -> str | None:
    for pairs in FIELDS.values():
        for a, b in pairs:
            if word in (a, b):
                return b if word == a else a
    return None


def _target(anchor: list[str], field: str, rng: np.random.Generator) -> tuple[str, float]:
    """A target phrase for `anchor` and its raw score before the context's lean and the noise: each anchor word
    kept, swapped for its synonym, or left out; and words of its own (another field's, often)."""
    words, shared, synonyms = [], 0, 0
    for word in anchor:
        draw = rng.random()
        if draw < 0.4:
            words.append(word)
            shared += 1
        elif draw < 0.6 and (partner := _partner(word)):
            words.append(partner)
            synonyms += 1
    other = field if rng.random() < 0.4 else rng.choice(list(FIELDS))
    own = [FIELDS[other][k][int(rng.integers(2))] for k in rng.choice(len(FIELDS[other]),
                                                                       size=int(rng.integers(0, 3)), replace=False)]
    words += [w for w in own if w not in words] or [MODIFIERS[int(rng.integers(len(MODIFIERS)))]]
    rng.shuffle(words)
    return " ".join(words), SHARED * shared / len(anchor) + SYNONYM * synonyms / len(anchor)


def _pairs(n: int, rng: np.random.Generator) -> pd.DataFrame:
    fields = list(FIELDS)
    anchors = []
    for _ in range(max(8, int(n * ANCHORS_PER_ROW))):
        field = fields[int(rng.integers(len(fields)))]
        anchors.append((" ".join(_anchor(field, rng)), field))
    rows = []
    for k in rng.integers(len(anchors), size=n):
        anchor, field = anchors[k]
        target, raw = _target(anchor.split(), field, rng)
        section = field if rng.random() < 0.6 else fields[int(rng.integers(len(fields)))]
        raw += OWN_FIELD * (section == field) + rng.normal(0, NOISE)
        rows.append((anchor, target, f"{section}{int(rng.integers(1, 100)):02d}", raw))
    frame = pd.DataFrame(rows, columns=["anchor", "target", "context", "raw"])
    cuts = np.quantile(frame["raw"], np.cumsum(SHARES)[:-1])
    frame["score"] = SCORES[np.searchsorted(cuts, frame["raw"], side="right")]
    return frame.drop(columns="raw")


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    scale = parse_scale(scale)
    return scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS), scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv) and prepared/private/test.csv."""
    public, private = folders(root)
    train_rows, test_rows = counts(scale)
    frame = _pairs(train_rows + test_rows, rng)
    frame.insert(0, "id", hex_ids(rng, len(frame), 16))
    train, answers = frame.iloc[:train_rows], frame.iloc[train_rows:].reset_index(drop=True)
    train.to_csv(public / "train.csv", index=False)
    answers.drop(columns="score").to_csv(public / "test.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)
    answers[["id"]].assign(score=0).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "U.S. Patent Phrase to Phrase Matching",
             "Predict, for each pair of phrases in test.csv (an anchor and a target, in a CPC context), how alike "
             "their meanings are, from 0 (unrelated) to 1 (the same).",
             "Submissions are evaluated on the Pearson correlation coefficient between the predicted and actual "
             "similarity scores.",
             "Submit `id,score` for every test pair.")
