"""Honest submissions for what no engine trains: each is the best the data allows without a model of its kind, and
says what it is.

- `noisy_pixels` (image to image, denoising, where no clean pages train a model): every test pixel as it is,
  which beats the sample's all-white page.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runner.data.pages import gray_image
from runner.data.reading import image_files
from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec



@dataclass(frozen=True)
class Baseline:
    """A whole submission's value columns, in the sample's row order, and what they are."""

    values: pd.DataFrame  # the sample's value columns
    note: str


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


RULES = {"noisy_pixels": noisy_pixels}
