"""Honest submissions for what no engine trains: each is the best the data allows without a model of its kind, and
says what it is.

- `noisy_pixels` (image to image, denoising): every test pixel as it is, which beats the sample's all-white page;
- `token_lookup` (text normalisation): each token's spoken form as train teaches it (`runner.normalization`: the
  lookup, in context, and the rules for numbers, ordinals, years, money and letters learned from train), else the
  token itself;

A baseline whose rule can be checked on held-out training rows reports that score as its CV.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runner.data import gray_image, image_files, read_table
from runner.errors import InputError
from runner.normalization import Normalizer
from runner.spec import CompetitionSpec

HELD_OUT = 0.2  # share of training groups a rule is checked on
SEED = 0


@dataclass(frozen=True)
class Baseline:
    """A whole submission's value columns, in the sample's row order, and what they are."""

    values: pd.DataFrame  # the sample's value columns
    note: str
    cv: float | None = None


def make_baseline(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
                  work_dir: Path) -> Baseline:
    return RULES[spec.baseline](spec, Path(data_dir), sample, columns, work_dir)


def _by_id(sample: pd.DataFrame, spec: CompetitionSpec, values: pd.Series, fill, what: str) -> tuple[pd.Series, int]:
    """`values` (indexed by id) in the sample's row order; ids it lacks get `fill`. Also how many were lacking."""
    ids = sample[spec.id_column].astype(str)
    found = values.reindex(ids.to_numpy())
    missing = int(found.isna().sum())
    if missing == len(found):
        raise InputError(f"{what}: none of the sample submission's {len(ids)} ids was found")
    return found.fillna(fill).reset_index(drop=True), missing


# --- image to image ------------------------------------------------------------------------------------------------

def noisy_pixels(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
                 work_dir: Path) -> Baseline:
    """Pixel ids '<image stem>_<row>_<col>' (1-based) take the noisy test image's intensity in [0, 1]."""
    where = data_dir / (spec.test_image_dir or "test")
    parts = []
    for path in sorted(image_files(data_dir, spec.test_image_dir or "test", work_dir)):
        if (pixels := gray_image(path, np.float64)) is None:
            continue
        rows, cols = np.indices(pixels.shape)
        ids = path.stem + "_" + (rows.ravel() + 1).astype(str).astype(object) + "_" \
            + (cols.ravel() + 1).astype(str).astype(object)
        parts.append(pd.Series(pixels.ravel(), index=ids))
    if not parts:
        raise InputError(f"{where}: no readable test image")
    values, missing = _by_id(sample, spec, pd.concat(parts), 1.0, str(where))
    note = "the noisy test pixels themselves (no image-to-image model)" + \
        (f"; {missing} pixel(s) with no image keep the sample's white" if missing else "")
    return Baseline(pd.DataFrame({columns[0]: values}), note)


# --- text normalisation --------------------------------------------------------------------------------------------

def token_lookup(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
                 work_dir: Path) -> Baseline:
    """'<sentence_id>_<token_id>' ids take their token's spoken form from what train teaches (runner.normalization:
    the lookup, with its context where a token has several forms, and the rules for numbers, ordinals, years,
    money and letters learned from train), else the token itself; checked on held-out training sentences."""
    train = read_table(data_dir / spec.train_file, "train file", data_dir)
    test = read_table(data_dir / spec.test_file, "test file", data_dir)
    for frame, name, needed in ((train, spec.train_file, ("sentence_id", "before", "after")),
                                (test, spec.test_file, ("sentence_id", "token_id", "before"))):
        if missing := [c for c in needed if c not in frame.columns]:
            raise InputError(f"{data_dir / name}: missing column(s) {missing}")
    sentences = train["sentence_id"].unique()
    held = np.random.default_rng(SEED).random(len(sentences)) < HELD_OUT
    out = train["sentence_id"].isin(sentences[held])
    truth, checked = train.loc[out, "after"].astype(str), Normalizer(train[~out])
    cv = float((checked.speak(train[out]) == truth).mean())
    lookup_alone = float((checked.look_up(train.loc[out, "before"]) == truth).mean())
    ids = test["sentence_id"].astype(str) + "_" + test["token_id"].astype(str)
    spoken = pd.Series(Normalizer(train).speak(test).to_numpy(), index=ids.to_numpy())
    values, missing = _by_id(sample, spec, spoken, "", str(data_dir / spec.test_file))
    if missing:
        values = values.where(values != "", sample[columns[0]].astype(str))
    return Baseline(pd.DataFrame({columns[0]: values}),
                    f"the spoken forms train teaches: its lookup (in context where a token has several), rules for "
                    f"numbers, ordinals, years, money and letters learned from it, else the token itself (no "
                    f"sequence model); {cv:.4f} of the tokens of {int(held.sum())} held-out training sentences right "
                    f"(the lookup alone: {lookup_alone:.4f})", round(cv, 6))


RULES = {"noisy_pixels": noisy_pixels, "token_lookup": token_lookup}
