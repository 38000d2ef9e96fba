"""A synthetic nomad2018-predict-transparent-conductors: (Al,Ga,In)2O3 cells with two energies to predict.

The band gap falls from Al-rich to In-rich cells (with a bowing term) and the formation energy rises with the Al
and In fractions and their product; the space group shifts both and the lattice grows with In. A GBM per target
on log1p(y) gets a mean RMSLE of about 0.03, where the constant sample submission scores about 0.2. Each id also
has a geometry.xyz in ASE's extended format, consistent with its lattice and composition.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled

TRAIN_ROWS, TEST_ROWS = 320, 100
REAL_TRAIN, REAL_TEST = 2160, 240  # MLE-bench's 90/10 split of the 2,400 original train cells
MIN_ROWS = 10  # at the smallest factors, still a few cells in each split
SPACEGROUPS = {  # lattice angles (alpha, beta, gamma) and a shift of (formation, band gap) per group
    12: ((90.0, 103.7, 90.0), (0.04, -0.15)), 33: ((90.0, 90.0, 90.0), (0.02, 0.1)),
    167: ((90.0, 90.0, 120.0), (0.07, 0.2)), 194: ((90.0, 90.0, 120.0), (0.05, -0.05)),
    206: ((90.0, 90.0, 90.0), (0.0, 0.0)), 227: ((90.0, 90.0, 90.0), (0.08, -0.25)),
}
ATOMS, ATOM_WEIGHTS = (10, 20, 30, 40, 60, 80), (0.2, 0.25, 0.15, 0.2, 0.1, 0.1)  # smaller cells keep files small
SAMPLE = {"formation_energy_ev_natom": 0.1779, "bandgap_energy_ev": 1.8892}
FEATURES = ("id", "spacegroup", "number_of_total_atoms", "percent_atom_al", "percent_atom_ga", "percent_atom_in",
            "lattice_vector_1_ang", "lattice_vector_2_ang", "lattice_vector_3_ang", "lattice_angle_alpha_degree",
            "lattice_angle_beta_degree", "lattice_angle_gamma_degree")
XYZ_HEADER = "#" + "=" * 55 + "\n#Created using the Atomic Simulation Environment (ASE)\n#" + "=" * 55 + "\n"


def _composition(atoms: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Al/Ga/In shares of the 40% cation sites, in whole atoms."""
    cations = (atoms * 0.4).astype(int)
    shares = rng.dirichlet((0.6, 0.6, 0.6), size=len(atoms))
    counts = np.floor(shares * cations[:, None]).astype(int)
    counts[:, 0] += cations - counts.sum(axis=1)
    return np.round(counts / cations[:, None], 4)


def _cells(count: int, rng: np.random.Generator) -> pd.DataFrame:
    groups = rng.choice(list(SPACEGROUPS), size=count)
    atoms = rng.choice(ATOMS, size=count, p=ATOM_WEIGHTS)
    al, ga, inn = _composition(atoms, rng).T
    scale = (atoms / 10) ** (1 / 3) * (1 + 0.09 * inn - 0.06 * al)
    frame = {"spacegroup": groups, "number_of_total_atoms": atoms.astype(float),
             "percent_atom_al": al, "percent_atom_ga": ga, "percent_atom_in": inn}
    for k in range(3):
        frame[f"lattice_vector_{k + 1}_ang"] = np.round(scale * rng.uniform(4.5, 10.5, count), 4)
    for k, name in enumerate(("alpha", "beta", "gamma")):
        angle = np.array([SPACEGROUPS[g][0][k] for g in groups])
        frame[f"lattice_angle_{name}_degree"] = np.round(angle + rng.normal(0, 0.01, count), 4)
    return pd.DataFrame(frame)


def _targets(cells: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    al, ga, inn = (cells[f"percent_atom_{e}"].to_numpy() for e in ("al", "ga", "in"))
    shift = np.array([SPACEGROUPS[g][1] for g in cells["spacegroup"]])
    formation = 0.02 + 0.2 * al + 0.08 * inn + 0.4 * al * inn + shift[:, 0] + rng.normal(0, 0.015, len(al))
    gap = 4.3 * al + 2.7 * ga + 0.8 * inn - 1.2 * al * inn + shift[:, 1] + rng.normal(0, 0.1, len(al))
    return cells.assign(formation_energy_ev_natom=np.round(np.clip(formation, 0.002, None), 4),
                        bandgap_energy_ev=np.round(np.clip(gap, 0.05, None), 4))


def _lattice(row: pd.Series) -> np.ndarray:
    a, b, c = (row[f"lattice_vector_{k}_ang"] for k in (1, 2, 3))
    alpha, beta, gamma = np.radians([row[f"lattice_angle_{n}_degree"] for n in ("alpha", "beta", "gamma")])
    cx, cy = c * np.cos(beta), c * (np.cos(alpha) - np.cos(beta) * np.cos(gamma)) / np.sin(gamma)
    third = [cx, cy, np.sqrt(c * c - cx * cx - cy * cy)]
    return np.array([[a, 0, 0], [b * np.cos(gamma), b * np.sin(gamma), 0], third])


def _xyz(row: pd.Series, rng: np.random.Generator) -> str:
    """The cell as ASE writes it: three lattice_vector lines, then one atom line per atom (cations, then O)."""
    lattice, atoms = _lattice(row), int(row["number_of_total_atoms"])
    cations = round(atoms * 0.4)
    counts = np.round(np.array([row["percent_atom_al"], row["percent_atom_ga"], row["percent_atom_in"]]) * cations)
    elements = [e for e, n in zip(("Al", "Ga", "In"), counts.astype(int)) for _ in range(n)]
    elements += ["O"] * (atoms - len(elements))
    positions = rng.random((atoms, 3)) @ lattice
    lines = [f"lattice_vector {v[0]:.10f} {v[1]:.10f} {v[2]:.10f} " for v in lattice]
    lines += [f"atom {p[0]:.10f} {p[1]:.10f} {p[2]:.10f} {e}" for p, e in zip(positions, elements)]
    return XYZ_HEADER + "\n".join(lines) + "\n"


def _write_split(frame: pd.DataFrame, folder: Path, rng: np.random.Generator) -> None:
    for _, row in frame.iterrows():
        (folder / str(int(row["id"]))).mkdir(parents=True, exist_ok=True)
        (folder / str(int(row["id"])) / "geometry.xyz").write_text(_xyz(row, rng))


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    """Train and test cells at `scale`: a factor of the replica's own, or 'real'."""
    scale = parse_scale(scale)
    return scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS), scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv, {train,test}/{id}/geometry.xyz) and
    prepared/private/test.csv. The table is built by columns; the 2,400 geometry files of the real size are
    written one by one, in under a second."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    train_rows, test_rows = counts(scale)
    frame = _targets(_cells(train_rows + test_rows, rng), rng)
    train, test = frame.iloc[:train_rows].copy(), frame.iloc[train_rows:].copy()
    train.insert(0, "id", np.arange(1, len(train) + 1)), test.insert(0, "id", np.arange(1, len(test) + 1))
    train.to_csv(public / "train.csv", index=False)
    test[list(FEATURES)].to_csv(public / "test.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    test[["id"]].assign(**SAMPLE).to_csv(public / "sample_submission.csv", index=False)
    _write_split(train, public / "train", rng)
    _write_split(test, public / "test", rng)
    describe(public, "Nomad2018 Predicting Transparent Conductors",
             "Predict formation_energy_ev_natom and bandgap_energy_ev for each material.",
             "Submissions are evaluated on the column-wise root mean squared logarithmic error (RMSLE), "
             "averaged over the two targets.",
             "Submit id,formation_energy_ev_natom,bandgap_energy_ev in test.csv's row order.")
