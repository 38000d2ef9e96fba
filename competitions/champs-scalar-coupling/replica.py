"""A synthetic champs-scalar-coupling: small molecules (`dsgdb9nsd_000001` ...) whose hydrogen-atom pairs have a
scalar coupling constant of one of eight types (1JHC ... 3JHN), laid out as MLE-bench splits the real molecules
90/10: train.csv and test.csv (rows of whole molecules, in the split's shuffled order, `id` the raw file's row
number), the sample all 0, the answers in private/answers.csv; the structures (structures.csv and one .xyz file
per molecule) and the other per-molecule tables (dipole moments, magnetic shielding tensors, Mulliken charges,
potential energies, the coupling's four contributions) for the TRAIN molecules only, as MLE-bench's prepare.py
keeps them.

Each molecule is a chain of heavy atoms (C, N, O, F) with hydrogens after them in the atom order, each bonded to a
heavy atom and listed in their heavy atoms' order (as QM9 lists them); its atoms lie along a random walk, so that
atoms far apart in the list tend to be far apart in space.
A pair's constant is its type's mean plus, in the type's own spread, a term falling with the pair's distance, one
that swings with the gap between the pair's atom indices and one growing with the molecule's size, plus noise.
The test molecules have no geometry, but the index gap is in test.csv and the molecule's size in its largest
index: a GBM on test.csv's own columns and each molecule's counts beats the per-type median by a wide margin.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled

MOLECULES = 400  # the replica's own count, split 90/10
REAL_MOLECULES = 85_003  # the real train.csv's molecules (QM9), 4,658,147 pairs
LEAST = 20  # molecules at the smallest factors
TEST_SHARE = 0.1
# type: (mean, spread) of the real constants, and its share of the real pairs
TYPES = {"1JHC": (94.98, 18.3, 0.152), "1JHN": (47.5, 10.9, 0.009), "2JHC": (-0.27, 4.5, 0.245),
         "2JHH": (-10.3, 4.0, 0.082), "2JHN": (3.12, 3.7, 0.026), "3JHC": (3.69, 3.1, 0.323),
         "3JHH": (4.77, 3.7, 0.127), "3JHN": (0.99, 1.3, 0.036)}
HEAVY = ("C", "C", "C", "C", "N", "O", "F")  # drawn uniformly: carbon-rich, as QM9
BOND = 1.45  # Angstrom between chained heavy atoms
HYDROGEN_BOND = 1.09
NOISE = 0.35  # of a type's spread: what neither the distance nor the size says
PAIR_SHARE = 0.6  # of a molecule's possible (hydrogen, partner) pairs listed, at most 40


def sizes(scale: float | str = 1.0) -> tuple[int, int]:
    """Train and test molecules at `scale` (a factor of the replica's own count, or 'real', 'real/N')."""
    total = scaled(MOLECULES, REAL_MOLECULES, parse_scale(scale), LEAST)
    test = int(np.ceil(total * TEST_SHARE))
    return total - test, test


def _molecule(rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
    """A molecule's atoms (heavy atoms first, then hydrogens) and their positions."""
    heavy = int(rng.integers(2, 10))
    hydrogens = int(rng.integers(2, 2 * heavy + 3))
    steps = rng.normal(0, 1, (heavy, 3))
    chain = np.cumsum(BOND * steps / np.linalg.norm(steps, axis=1, keepdims=True), axis=0)
    anchors = np.sort(rng.integers(0, heavy, hydrogens))  # hydrogens listed in their heavy atoms' order, as QM9
    offsets = rng.normal(0, 1, (hydrogens, 3))
    hydro = chain[anchors] + HYDROGEN_BOND * offsets / np.linalg.norm(offsets, axis=1, keepdims=True)
    atoms = ["C"] + [str(a) for a in rng.choice(HEAVY, heavy - 1)] + ["H"] * hydrogens
    return atoms, np.vstack([chain, hydro])


def _couplings(name: str, atoms: list[str], xyz: np.ndarray, rng: np.random.Generator) -> list[tuple]:
    """Some of the molecule's (hydrogen, partner) pairs, each typed by its partner's element and how many bonds
    apart their distance says they are (1 under 1.3 A, 2 under 2.4, 3 under 3.6; two hydrogens are never 1 bond
    apart), at most 40."""
    elements = np.array(atoms)
    first, second = np.nonzero((elements == "H")[:, None] & np.isin(elements, ("C", "N", "H"))[None, :])
    keep = (first != second) & ~((elements[second] == "H") & (second < first))
    first, second = first[keep], second[keep]
    distance = np.linalg.norm(xyz[first] - xyz[second], axis=1)
    bonds = np.select([distance < 1.3, distance < 2.4, distance < 3.6], [1, 2, 3], 0)
    keep = (bonds > 0) & ~((elements[second] == "H") & (bonds == 1)) & (rng.random(len(bonds)) < PAIR_SHARE)
    return [(name, int(i), int(j), f"{b}JH{elements[j]}", float(d))
            for i, j, b, d in zip(first[keep], second[keep], bonds[keep], distance[keep])][:40]


def _constants(pairs: pd.DataFrame, rng: np.random.Generator) -> np.ndarray:
    mean = pairs["type"].map({k: v[0] for k, v in TYPES.items()}).to_numpy()
    spread = pairs["type"].map({k: v[1] for k, v in TYPES.items()}).to_numpy()
    size = pairs.groupby("molecule_name")["atom_index_0"].transform("max").to_numpy()
    gap = (pairs["atom_index_0"] - pairs["atom_index_1"]).to_numpy()
    signal = np.exp(-pairs["distance"].to_numpy() / 1.5) + 0.8 * np.cos(0.9 * gap) + 0.06 * (size - 12)
    return np.round(mean + spread * (signal - 0.5 + NOISE * rng.normal(0, 1, len(pairs))), 4)


def _tables(names: list[str], atoms: dict, xyz: dict, pairs: pd.DataFrame, rng: np.random.Generator) -> dict:
    """The per-molecule tables MLE-bench keeps for the train molecules."""
    structures = pd.DataFrame([(n, k, a, *np.round(xyz[n][k], 6)) for n in names for k, a in enumerate(atoms[n])],
                              columns=["molecule_name", "atom_index", "atom", "x", "y", "z"])
    count = len(structures)
    shielding = pd.DataFrame(np.round(rng.normal(0, 30, (count, 9)) + 100, 4),
                             columns=["XX", "YX", "ZX", "XY", "YY", "ZY", "XZ", "YZ", "ZZ"])
    parts = rng.dirichlet((8, 1, 1, 1), len(pairs)) * pairs["scalar_coupling_constant"].to_numpy()[:, None]
    return {
        "structures": structures,
        "dipole_moments": pd.DataFrame({"molecule_name": names, **{a: np.round(rng.normal(0, 1.5, len(names)), 4)
                                                                    for a in "XYZ"}}),
        "magnetic_shielding_tensors": pd.concat([structures[["molecule_name", "atom_index"]], shielding], axis=1),
        "mulliken_charges": structures[["molecule_name", "atom_index"]].assign(
            mulliken_charge=np.round(rng.normal(0, 0.2, count), 6)),
        "potential_energy": pd.DataFrame({"molecule_name": names,
                                          "potential_energy": np.round(-rng.uniform(200, 700, len(names)), 5)}),
        "scalar_coupling_contributions": pairs[["molecule_name", "atom_index_0", "atom_index_1", "type"]].assign(
            fc=np.round(parts[:, 0], 5), sd=np.round(parts[:, 1], 5), pso=np.round(parts[:, 2], 5),
            dso=np.round(parts[:, 3], 5)),
    }


def _xyz(path: Path, atoms: list[str], xyz: np.ndarray) -> None:
    lines = [str(len(atoms)), ""] + [f"{a} {x:.6f} {y:.6f} {z:.6f}" for a, (x, y, z) in zip(atoms, xyz)]
    path.write_text("\n".join(lines) + "\n")


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv, structures.csv, structures/, the other
    per-molecule tables, description.md) and prepared/private/answers.csv, as many molecules as `sizes(scale)`
    says."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    (public / "structures").mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    train_count, test_count = sizes(scale)
    names = [f"dsgdb9nsd_{k:06d}" for k in np.sort(rng.choice(np.arange(1, 133_886), train_count + test_count,
                                                                 replace=False))]
    atoms, xyz, rows = {}, {}, []
    for name in names:
        atoms[name], xyz[name] = _molecule(rng)
        rows += _couplings(name, atoms[name], xyz[name], rng)
    pairs = pd.DataFrame(rows, columns=["molecule_name", "atom_index_0", "atom_index_1", "type", "distance"])
    pairs.insert(0, "id", np.arange(len(pairs)))  # the raw file's row numbers, molecule by molecule
    pairs["scalar_coupling_constant"] = _constants(pairs, rng)
    pairs = pairs.drop(columns="distance")
    order = rng.permutation(pairs["molecule_name"].unique())  # the split shuffles the molecules
    test_names, train_names = set(order[:test_count]), list(order[test_count:])
    by_name = {n: g for n, g in pairs.groupby("molecule_name", sort=False)}
    train = pd.concat([by_name[n] for n in order if n not in test_names])
    answers = pd.concat([by_name[n] for n in order if n in test_names])
    train.to_csv(public / "train.csv", index=False)
    answers.drop(columns="scalar_coupling_constant").to_csv(public / "test.csv", index=False)
    answers[["id"]].assign(scalar_coupling_constant=0).to_csv(public / "sample_submission.csv", index=False)
    answers.to_csv(private / "answers.csv", index=False)
    kept = [n for n in names if n in set(train_names)]
    for table, frame in _tables(kept, atoms, xyz, train, rng).items():
        frame.to_csv(public / f"{table}.csv", index=False)
    for name in kept:
        _xyz(public / "structures" / f"{name}.xyz", atoms[name], xyz[name])
    describe(public, "Predicting Molecular Properties",
             "Predict the scalar coupling constant of each atom pair of test.csv (its type, e.g. 1JHC, and its two "
             "atoms' indices in the molecule). Structures and the other per-molecule tables cover the training "
             "molecules only.",
             "Submissions are scored on the log of the mean absolute error of each coupling type, averaged over "
             "the types.",
             "Submit `id,scalar_coupling_constant` for every row of test.csv.")
