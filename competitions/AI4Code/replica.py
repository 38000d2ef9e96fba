"""A synthetic AI4Code: Python notebooks whose markdown cells were shuffled out of place, as MLE-bench lays the
competition out (whole ancestor groups of notebooks held out as test): train/<id>.json and test/<id>.json (each
`{"cell_type": {cell: type}, "source": {cell: text}}`, the code cells in their order, then the markdown cells
shuffled), train_orders.csv `id,cell_order` (the true order of the cell ids), train_ancestors.csv `id,ancestor_id,
parent_id` (shuffled, the test notebooks' rows left out), the answers in private/test_orders.csv, and a sample in
the given order (the cells as the JSON lists them).

A notebook walks through steps: a markdown cell announces each step ("## Step 3: load the data") before the code
cells that do it (`step3 = load_data(...)`), with an introduction first; the markdown cell shares its step's words
with the code below it. The given order keeps the code in place and puts every markdown cell last, a Kendall tau
of about 0.5 here; placing each markdown cell before the code it names would be near 1.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._pictures import folders, hex_ids

TRAIN, TEST = 120, 40
REAL_TRAIN, REAL_TEST = 119_256, 20_000  # MLE-bench holds 20,000 notebooks out, by ancestor group
LEAST = 6
ACTIONS = ("load the data", "clean the columns", "plot the distribution", "train the model", "tune the parameters",
           "evaluate the scores", "save the results", "merge the tables", "encode the labels", "split the rows")
GROUP_SIZES = (1, 1, 1, 2, 3)  # notebooks per ancestor: most alone, some forked
STEPS = (2, 7)  # a notebook's steps


def _notebook(rng: np.random.Generator) -> tuple[list[str], dict, dict]:
    """(true order of cell ids, cell types, sources): an introduction, then for each step its markdown cell (not
    always) and one to three code cells."""
    order, types, sources = [], {}, {}

    def cell(kind: str, text: str) -> None:
        cid = rng.bytes(4).hex()
        while cid in types:
            cid = rng.bytes(4).hex()
        order.append(cid)
        types[cid], sources[cid] = kind, text

    cell("markdown", "# Analysis notebook\nWe explore the data step by step.")
    cell("code", "import numpy as np\nimport pandas as pd")
    for step, k in enumerate(rng.choice(len(ACTIONS), size=int(rng.integers(*STEPS)), replace=False), start=1):
        action = ACTIONS[int(k)]
        verb = action.replace("the ", "").replace(" ", "_")
        if rng.random() < 0.8:
            cell("markdown", f"## Step {step}: {action}")
        for part in range(int(rng.integers(1, 4))):
            cell("code", f"step{step}_{part} = {verb}(df, part={part})\nprint(step{step}_{part}.shape)")
    return order, types, sources


def _given(order: list[str], types: dict, rng: np.random.Generator) -> list[str]:
    """The order the JSON lists them in: the code cells in place, then the markdown cells shuffled."""
    code = [c for c in order if types[c] == "code"]
    markdown = [c for c in order if types[c] == "markdown"]
    return code + [markdown[k] for k in rng.permutation(len(markdown))]


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    scale = parse_scale(scale)
    return scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST)


def _ancestry(count: int, rng: np.random.Generator) -> pd.DataFrame:
    """Every notebook's ancestor (8 hex) and parent (a notebook id of its group, or none)."""
    ids = hex_ids(rng, count, 14)
    rows, at = [], 0
    while at < count:
        size = min(GROUP_SIZES[int(rng.integers(len(GROUP_SIZES)))], count - at)
        ancestor = rng.bytes(4).hex()
        for k in range(size):
            rows.append((ids[at + k], ancestor, ids[at + k - 1] if k else None))
        at += size
    return pd.DataFrame(rows, columns=["id", "ancestor_id", "parent_id"])


def _held_out(ancestry: pd.DataFrame, test_count: int) -> set[str]:
    """Whole ancestor groups, in the shuffled rows' order, while they fit in `test_count` (prepare.py's way)."""
    chosen, taken = [], 0
    for _, group in ancestry.groupby("ancestor_id", sort=False):
        if taken + len(group) <= test_count:
            chosen += group["id"].tolist()
            taken += len(group)
    return set(chosen)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train/, test/, train_orders.csv, train_ancestors.csv, sample_submission.csv) and
    prepared/private/test_orders.csv."""
    train_count, test_count = counts(scale)
    public, private = folders(root, "train", "test")
    ancestry = _ancestry(train_count + test_count, rng).sample(frac=1, random_state=0).reset_index(drop=True)
    test_ids = _held_out(ancestry, test_count)
    orders, given = [], {}
    for notebook in ancestry["id"].sample(frac=1, random_state=1):  # the real train_orders.csv's own order
        order, types, sources = _notebook(rng)
        listed = _given(order, types, rng)
        given[notebook] = listed
        document = {"cell_type": {c: types[c] for c in listed}, "source": {c: sources[c] for c in listed}}
        folder = public / ("test" if notebook in test_ids else "train")
        (folder / f"{notebook}.json").write_text(json.dumps(document), encoding="utf-8")
        orders.append((notebook, " ".join(order)))
    orders = pd.DataFrame(orders, columns=["id", "cell_order"])
    held = orders["id"].isin(test_ids)
    orders[~held].to_csv(public / "train_orders.csv", index=False)
    orders[held].to_csv(private / "test_orders.csv", index=False)
    ancestry[~ancestry["id"].isin(test_ids)].to_csv(public / "train_ancestors.csv", index=False)
    sample = orders[held][["id"]].assign(cell_order=[" ".join(given[i]) for i in orders.loc[held, "id"]])
    sample.to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Google AI4Code - Understand Code in Python Notebooks",
             "Put the cells of each notebook in test/ in their order: the code cells are in order, the markdown "
             "cells shuffled after them.",
             "Submissions are evaluated on Kendall's tau between the predicted and true cell orders, pooled over "
             "the notebooks.",
             "Submit `id,cell_order` (the notebook's cell ids, space-separated, in order) for every test notebook.")
