"""A synthetic stanford-covid-vaccine: RNA sequences of 107 bases with their dot-bracket structure and loop types,
as JSON Lines (train.json with five measurements at the first 68 bases, their errors and the signal-to-noise;
test.json without), split as MLE-bench splits the real 2,400: a tenth of them, drawn among those that pass the
signal-to-noise filter, are the test; the sample and the answers have a row per base, `<id>_<position>`, the
answers' `keep` true for the 68 scored positions.

A base's reactivity and degradation follow what it is and where: unpaired bases (A and G most) react far more
than paired ones, hairpin loops most, and a base beside an unpaired one a little more; every measurement fades a
little along the sequence. Each measurement weighs these its own way, with noise that grows as the record's
signal-to-noise falls (the filter's failures are noisy). Each base alone says much (its letter, bracket and loop);
its neighbours along the sequence say the rest: a GBM on a row per base beats the columns' means by a wide margin.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._pictures import hex_ids

SEQUENCES = 200  # the replica's own count, of which a tenth is the test
REAL_SEQUENCES = 2_400  # the real train.json
LEAST = 20
LENGTH, SCORED = 107, 68
TARGETS = ("reactivity", "deg_Mg_pH10", "deg_pH10", "deg_Mg_50C", "deg_50C")
BASES = np.array(list("ACGU"))
UNPAIRED_BASE = {"A": 1.0, "G": 0.8, "C": 0.45, "U": 0.55}  # how much an unpaired base reacts
LOOP = {"H": 1.3, "E": 0.9, "M": 0.8, "I": 0.9, "B": 1.0, "X": 0.7, "S": 0.12}  # by loop type (S: paired)
TARGET_WEIGHTS = (1.0, 1.1, 0.9, 1.2, 1.0)  # each measurement's scale
PASSING = 0.66  # of the sequences pass the signal-to-noise filter, as the real ones


def sizes(scale: float | str = 1.0) -> tuple[int, int]:
    """Train and test sequences at `scale` (a factor of the replica's own count, or 'real', 'real/N')."""
    total = scaled(SEQUENCES, REAL_SEQUENCES, parse_scale(scale), LEAST)
    test = int(total * 0.1)
    return total - test, test


def _structure(rng: np.random.Generator) -> str:
    """A dot-bracket structure: stems side by side, some broken by an interior loop or a bulge, each closing a
    hairpin loop of at least 4 bases."""
    out = "." * int(rng.integers(2, 10))
    while True:
        outer, inner = int(rng.integers(3, 8)), int(rng.integers(0, 5))
        left, right = (int(rng.integers(0, 3)), int(rng.integers(1, 3))) if inner else (0, 0)
        stem = ("(" * outer + "." * left + "(" * inner + "." * int(rng.integers(4, 9)) + ")" * inner + "." * right
                + ")" * outer)
        if len(out) + len(stem) > LENGTH - 2:
            return (out + "." * LENGTH)[:LENGTH]  # only unpaired bases are cut
        out += stem + "." * int(rng.integers(1, 12))


def _loops(structure: str) -> str:
    """Loop types: S paired, E outside every pair, H closed by one pair, M between two stems inside a pair, I in a
    stem's interior loop, B in its bulge (the other side unbroken)."""
    out = []
    for k, c in enumerate(structure):
        if c != ".":
            out.append("S")
            continue
        before, after = structure[:k].rstrip("."), structure[k + 1:].lstrip(".")
        depth = before.count("(") - before.count(")")
        left, right = before[-1:] or " ", after[:1] or " "
        if depth == 0:
            out.append("E")
        elif left == "(" and right == ")":
            out.append("H")
        elif left == ")" and right == "(":
            out.append("M")
        else:  # a stem broken on one side or both
            out.append("I" if _broken_opposite(structure, k) else "B")
    return "".join(out)


def _broken_opposite(structure: str, k: int) -> bool:
    """Whether the stem that an unpaired base at `k` breaks is broken on the other side too (an interior loop)."""
    pairs, stack = {}, []
    for i, c in enumerate(structure):
        if c == "(":
            stack.append(i)
        elif c == ")":
            j = stack.pop()
            pairs[i], pairs[j] = j, i
    left = k
    while structure[left] == ".":
        left -= 1
    right = k
    while structure[right] == ".":
        right += 1
    return abs(pairs[left] - pairs[right]) > 1


def _record(rng: np.random.Generator) -> dict:
    sequence = "".join(rng.choice(BASES, LENGTH))
    structure = _structure(rng)
    loops = _loops(structure)
    noise = float(rng.gamma(2.0, 3.0)) if rng.random() < PASSING else float(rng.uniform(0.05, 1.0))
    base = np.array([UNPAIRED_BASE[b] if s == "." else 1.0 for b, s in zip(sequence, structure)])
    loop = np.array([LOOP[c] for c in loops])
    unpaired = np.array([s == "." for s in structure], dtype=float)
    beside = np.convolve(unpaired, [0.5, 0, 0.5], mode="same")
    fade = 1 - 0.3 * np.arange(LENGTH) / LENGTH
    record = {"id": "", "sequence": sequence, "structure": structure, "predicted_loop_type": loops,
              "signal_to_noise": round(noise, 3), "SN_filter": int(noise > 1.0 and rng.random() < 0.95),
              "seq_length": LENGTH, "seq_scored": SCORED}
    measured = {}
    for k, (name, weight) in enumerate(zip(TARGETS, TARGET_WEIGHTS)):
        clean = weight * (0.7 * base * loop * (0.3 + 0.7 * unpaired) + 0.15 * beside) * fade
        error = np.abs(rng.normal(0.1, 0.05, SCORED)) / max(noise, 0.2) + 0.02
        measured[name] = np.round(clean[:SCORED] + rng.normal(0, 1, SCORED) * error, 4).tolist()
        record[f"deg_error_{name[4:]}" if k else "reactivity_error"] = np.round(error, 4).tolist()
    return {**record, **measured}


def _answers(test: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for record in test.to_dict("records"):
        for j in range(record["seq_length"]):
            scored = j < record["seq_scored"]
            rows.append({"id_seqpos": f"{record['id']}_{j}",
                         **{t: record[t][j] if scored else 0.0 for t in TARGETS}, "keep": scored})
    return pd.DataFrame(rows)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.json, test.json, sample_submission.csv, description.md) and
    prepared/private/test.csv, as many sequences as `sizes(scale)` says."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    train_count, test_count = sizes(scale)
    records = [_record(rng) for _ in range(train_count + test_count)]
    for record, name in zip(records, hex_ids(rng, len(records), 9)):
        record["id"] = f"id_{name}"
    order = ["index", "id", "sequence", "structure", "predicted_loop_type", "signal_to_noise", "SN_filter",
             "seq_length", "seq_scored", "reactivity_error", "deg_error_Mg_pH10", "deg_error_pH10",
             "deg_error_Mg_50C", "deg_error_50C", *TARGETS]
    frame = pd.DataFrame(records).assign(index=np.arange(len(records)))[order]
    passing = np.flatnonzero(frame["SN_filter"].to_numpy() > 0)
    chosen = np.zeros(len(frame), dtype=bool)
    chosen[rng.choice(passing, min(test_count, len(passing)), replace=False)] = True
    train, test = frame[~chosen].copy(), frame[chosen].copy()
    train["index"] = np.arange(len(train))
    train.to_json(public / "train.json", orient="records", lines=True)
    public_test = test[["index", "id", "sequence", "structure", "predicted_loop_type", "seq_length", "seq_scored"]]
    public_test.assign(index=np.arange(len(test))).to_json(public / "test.json", orient="records", lines=True)
    answers = _answers(test)
    answers.to_csv(private / "test.csv", index=False, float_format="%.10f")
    answers[["id_seqpos", *TARGETS]].assign(**{t: 0.0 for t in TARGETS}).to_csv(
        public / "sample_submission.csv", index=False, float_format="%.10f")
    describe(public, "OpenVaccine: COVID-19 mRNA Vaccine Degradation Prediction",
             "Predict, for each base of each test RNA sequence, its reactivity and its degradation under four "
             "conditions (deg_Mg_pH10, deg_pH10, deg_Mg_50C, deg_50C), a row per base named <id>_<position>.",
             "Submissions are scored on MCRMSE: the mean over reactivity, deg_Mg_pH10 and deg_Mg_50C of each "
             "column's RMSE, over the first 68 bases of each sequence.",
             "Submit `id_seqpos` and all five columns for every row of the sample submission, in its order.")
