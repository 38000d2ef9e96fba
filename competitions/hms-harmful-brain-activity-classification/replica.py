"""A synthetic hms-harmful-brain-activity-classification: EEG recordings (train_eegs/<eeg_id>.parquet, 19 leads and
an EKG at 200 Hz) and their spectrograms (train_spectrograms/<spectrogram_id>.parquet, four regions x 100
frequencies every 2 s), each EEG labelled in several windows by experts' votes over six patterns (train.csv: 15
columns, `seizure_vote` .. `other_vote`), as MLE-bench's split by spectrogram lays them out: test.csv lists a row
per held-out window (`spectrogram_id, eeg_id, patient_id`, an EEG's id repeated), the sample gives each 1/6; the
answers (private/test.csv, all 15 columns) beside gold_submission.csv, the votes shared out.

Each EEG shows one pattern: a seizure's fast spike-and-wave on every lead, periodic discharges on the left leads
(LPD) or on all (GPD), rhythmic slow waves on the left leads (LRDA) or on all (GRDA), or a plain background
(Other); the experts mostly agree on it, some vote for another. The leads' band powers and spikiness learn it; the
mean of the training windows' shares for every row scores a KL divergence of about 1.2, the sample's 1/6 more.

`sizes(scale)`: 4-second EEGs at a factor of the replica's own counts; at REAL the 11,138 spectrograms (17,089 EEGs,
106,800 windows) with EEGs of 50 s and spectrograms of 10 min.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import folders

LEADS = ("Fp1", "F3", "C3", "P3", "F7", "T3", "T5", "O1", "Fz", "Cz", "Pz", "Fp2", "F4", "C4", "P4", "F8", "T4",
         "T6", "O2", "EKG")
LEFT = ("Fp1", "F3", "C3", "P3", "F7", "T3", "T5", "O1")
VOTES = ("seizure_vote", "lpd_vote", "gpd_vote", "lrda_vote", "grda_vote", "other_vote")
CONSENSUS = ("Seizure", "LPD", "GPD", "LRDA", "GRDA", "Other")
REGIONS = ("LL", "RL", "LP", "RP")
FREQUENCIES = 0.5859375 + 0.1953125 * np.arange(100)  # Hz: the spectrograms' 100 columns per region, 0.59 to 19.92
RATE = 200  # Hz
SECONDS, REAL_SECONDS = 3, 50
SPECTRUM_ROWS, REAL_SPECTRUM_ROWS = 8, 300  # one every 2 s
TRAIN, TEST = 40, 20  # spectrograms, the unit of MLE-bench's split, in the replica
REAL_TRAIN, REAL_TEST = 10_024, 1_114
LEAST = 6
EEGS_PER_SPECTROGRAM = (2, 6)  # from .. below (the real data has 1.5 on average: the replica has fewer, wider)
WINDOWS = (1, 5)  # labelled windows per EEG, from .. below (6.2 on average in the real data)
AGREEMENT = (0.55, 0.95)  # the share of an EEG's experts voting for its pattern
VOTERS = (1, 16)  # experts per window, from .. below (1 to 28 in the real data)


@dataclass(frozen=True)
class Recordings:
    train: int  # spectrograms
    test: int
    seconds: int
    spectrum_rows: int


def sizes(scale: float | str = 1.0) -> Recordings:
    """How many spectrograms `scale` writes (a factor of the replica's own counts, or REAL) and how long."""
    scale = parse_scale(scale)
    real = is_real(scale)
    return Recordings(scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST),
                      REAL_SECONDS if real else SECONDS, REAL_SPECTRUM_ROWS if real else SPECTRUM_ROWS)


def eeg(pattern: int, seconds: int, rng: np.random.Generator) -> np.ndarray:
    """An EEG showing `pattern` (an index of CONSENSUS), a column per lead of LEADS: microvolts as whole numbers,
    float32 as the real ones."""
    t = np.arange(seconds * RATE) / RATE
    phase = rng.uniform(0, 2 * np.pi)
    rhythm = {0: np.sign(np.sin(2 * np.pi * 3 * t + phase)) * np.abs(np.sin(2 * np.pi * 6 * t)) ** 4 * 3,
              1: (np.mod(t * 1.0 + phase, 1.0) < 0.06) * 4.0, 2: (np.mod(t * 1.5 + phase, 1.0) < 0.06) * 4.0,
              3: np.sin(2 * np.pi * 1.5 * t + phase) * 2.0, 4: np.sin(2 * np.pi * 1.5 * t + phase) * 2.0}
    lateral = pattern in (1, 3)
    background = rng.standard_normal((len(LEADS), len(t))) + 0.6 * np.sin(2 * np.pi * rng.uniform(8, 12, (
        len(LEADS), 1)) * t)
    for k, lead in enumerate(LEADS[:-1]):
        if pattern in rhythm and (lead in LEFT or not lateral):
            background[k] += rhythm[pattern] * rng.uniform(0.7, 1.3)
    background[-1] = background[-1] * 0.3 + (np.mod(t * 1.2 + phase, 1.0) < 0.03) * 8  # the EKG: heartbeats
    return np.round(rng.uniform(15, 30) * background).astype(np.float32).T


SPECTRUM_COLUMNS = ("time", *(f"{region}_{frequency:.2f}" for region in REGIONS for frequency in FREQUENCIES))


def spectrogram(pattern: int, rows: int, rng: np.random.Generator) -> np.ndarray:
    """A spectrogram in SPECTRUM_COLUMNS: the time every 2 s and the power of each region at each frequency,
    higher where the pattern's rhythm is."""
    peak = {0: 3.0, 1: 1.0, 2: 1.5, 3: 1.5, 4: 1.5}.get(pattern)
    lateral = pattern in (1, 3)
    parts = [np.arange(1, 2 * rows, 2)[:, None].astype(np.float64)]
    for region in REGIONS:
        power = 10.0 / FREQUENCIES * rng.uniform(0.7, 1.3, (rows, 1)) * rng.lognormal(0, 0.3, (rows, len(FREQUENCIES)))
        if peak is not None and (region.startswith("L") or not lateral):
            power += 20.0 * np.exp(-0.5 * ((FREQUENCIES - peak) / 0.4) ** 2)
        parts.append(np.round(power, 2))
    return np.concatenate(parts, axis=1).astype(np.float32)


def votes(pattern: int, rng: np.random.Generator) -> np.ndarray:
    """One window's votes: most of its experts for the EEG's pattern, the rest spread over the others."""
    voters = int(rng.integers(*VOTERS))
    shares = rng.dirichlet(np.ones(len(VOTES)) * 0.5) * (1 - rng.uniform(*AGREEMENT))
    shares[pattern] += 1 - shares.sum()
    return rng.multinomial(voters, shares)


def _split(spectrograms: int, size: Recordings, public: Path, split: str, rng: np.random.Generator,
           taken: set) -> pd.DataFrame:
    """Write one split's EEGs and spectrograms; return its windows, a row each, in train.csv's columns."""
    rows = []
    for _ in range(spectrograms):
        spectrogram_id, patient = _fresh(rng, taken, 10**9), int(rng.integers(10_000, 66_000))
        patterns = []
        for sub in range(int(rng.integers(*EEGS_PER_SPECTROGRAM))):
            eeg_id, pattern = _fresh(rng, taken, 4 * 10**9), int(rng.integers(len(CONSENSUS)))
            patterns.append(pattern)
            _parquet(LEADS, eeg(pattern, size.seconds, rng), public / f"{split}_eegs" / f"{eeg_id}.parquet")
            for window in range(int(rng.integers(*WINDOWS))):
                counts = votes(pattern, rng)
                rows.append([eeg_id, window, float(window), spectrogram_id, len(rows), float(2 * window + 60 * sub),
                             _fresh(rng, taken, 4 * 10**9), patient, CONSENSUS[int(counts.argmax())], *counts])
        _parquet(SPECTRUM_COLUMNS, spectrogram(patterns[0], size.spectrum_rows, rng),
                 public / f"{split}_spectrograms" / f"{spectrogram_id}.parquet")
    return pd.DataFrame(rows, columns=["eeg_id", "eeg_sub_id", "eeg_label_offset_seconds", "spectrogram_id",
                                       "spectrogram_sub_id", "spectrogram_label_offset_seconds", "label_id",
                                       "patient_id", "expert_consensus", *VOTES])


def _parquet(names: tuple[str, ...], values: np.ndarray, path: Path) -> None:
    """A table of float32 columns as parquet, written straight by pyarrow: a spectrogram's 401 columns cost
    pandas' schema and statistics more than their numbers."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_arrays([pa.array(column) for column in values.T], names=list(names))
    pq.write_table(table, path, write_statistics=False, use_dictionary=False, compression="zstd")


def _fresh(rng: np.random.Generator, taken: set, high: int) -> int:
    """An id below `high` not taken yet."""
    while (value := int(rng.integers(1, high))) in taken:
        pass
    taken.add(value)
    return value


def _figures(folder: Path) -> None:
    """Two small PDF pages standing for the overview's example figures (Sample01.pdf, ...)."""
    for k in (1, 2):
        (folder / f"Sample{k:02d}.pdf").write_bytes(
            b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj"
            b"\n3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 72 72]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv, train_eegs/, test_eegs/,
    train_spectrograms/, test_spectrograms/, example_figures/) and prepared/private (test.csv,
    gold_submission.csv), as many spectrograms as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root, "train_eegs", "test_eegs", "train_spectrograms", "test_spectrograms",
                              "example_figures")
    taken: set = set()
    train = _split(size.train, size, public, "train", rng, taken)
    test = _split(size.test, size, public, "test", rng, taken)
    train.to_csv(public / "train.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    test[["spectrogram_id", "eeg_id", "patient_id"]].to_csv(public / "test.csv", index=False)
    gold = test[["eeg_id", *VOTES]].astype({v: float for v in VOTES})
    gold[list(VOTES)] = gold[list(VOTES)].div(gold[list(VOTES)].sum(axis=1), axis=0)
    gold.to_csv(private / "gold_submission.csv", index=False)
    gold.assign(**{v: 1 / len(VOTES) for v in VOTES}).to_csv(public / "sample_submission.csv", index=False)
    _figures(public / "example_figures")
    describe(public, "HMS - Harmful Brain Activity Classification",
             "Predict, for each row of test.csv, the share of experts' votes for each of six patterns (seizure, "
             "LPD, GPD, LRDA, GRDA, other) in its EEG (test_eegs/<eeg_id>.parquet); train.csv gives the votes of "
             "the training windows.",
             "Submissions are evaluated on the Kullback-Leibler divergence between the predicted and the voted "
             "distributions, averaged over rows.",
             "Submit `eeg_id` and the six `*_vote` columns, each row summing to one.")
