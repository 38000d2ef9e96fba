"""Image to image (denoising-dirty-documents) as a table of pixels: each pixel's neighbourhood and the paper's
tone around it, a random share of the training pixels, and every test pixel in the sample's order."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from runner.common.errors import InputError
from runner.common.sampling import SAMPLING_SEED, Sampled
from runner.common.untrusted import inside
from runner.competition.spec import CompetitionSpec
from runner.data.dataset import MAX_PIXELS, SIDE_SAMPLE, Dataset
from runner.data.reading import image_files, sampled_rows

log = logging.getLogger(__name__)


WINDOW = 5  # a pixel's neighbourhood: its 5 x 5 window of noisy intensities
BACKGROUND = 7  # the paper's own tone near a pixel: the lightest and the median of its 7 x 7 window
MAX_PIXEL_ROWS = 2_000_000  # training pixels kept at most (a random share of them): ~250 MB of features


def pixel_features(image: np.ndarray) -> np.ndarray:
    """(pixels x columns) float32 of a gray image in [0, 1], row by row: the WINDOW x WINDOW neighbourhood, the
    window's lightest and median value and the page's median (the paper's tone, under stains), and the position."""
    from scipy.ndimage import maximum_filter, median_filter

    padded = np.pad(image, WINDOW // 2, mode="edge")
    window = np.lib.stride_tricks.sliding_window_view(padded, (WINDOW, WINDOW)).reshape(image.size, -1)
    rows, cols = np.indices(image.shape)
    extra = [maximum_filter(image, BACKGROUND, mode="nearest"), median_filter(image, BACKGROUND, mode="nearest"),
             np.full(image.shape, np.median(image)), rows / max(1, image.shape[0] - 1),
             cols / max(1, image.shape[1] - 1)]
    return np.concatenate([window, np.stack([e.ravel() for e in extra], axis=1)], axis=1).astype(np.float32)


def gray_image(path: Path, dtype=np.float32) -> np.ndarray | None:
    """An image's gray intensities in [0, 1], or None when it cannot be read or is larger than MAX_PIXELS."""
    try:
        with Image.open(path) as image:
            if image.width * image.height > MAX_PIXELS:
                return None
            return np.asarray(image.convert("L"), dtype=dtype) / 255.0
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        return None


def _area(path: Path) -> int:
    try:
        with Image.open(path) as image:
            return image.width * image.height
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        return 0


def _pixel_columns() -> list[str]:
    return [f"w{r}{c}" for r in range(WINDOW) for c in range(WINDOW)] + ["lightest", "median", "page", "row", "col"]


def pixel_dataset(spec: CompetitionSpec, data_dir: Path, work_dir: Path, sample: pd.DataFrame, columns: list[str],
                   budget_seconds: float | None) -> Dataset:
    """Image to image as a table: a row per training pixel (its noisy neighbourhood; the clean intensity as the
    target; the pixels of one page one group) and a row per sample row (`<image>_<row>_<col>`, 1-based, of the
    test images), so the table engines learn the map pixel by pixel."""
    warnings: list[str] = []
    paths = sorted(image_files(data_dir, spec.image_dir, work_dir))
    pixels = np.mean([_area(p) for p in paths[:SIDE_SAMPLE]] or [0]) * len(paths)  # from headers: no decoding
    most = min(MAX_PIXEL_ROWS, sampled_rows(budget_seconds, None)) if budget_seconds else MAX_PIXEL_ROWS
    share = min(1.0, most / max(1.0, pixels))  # each page keeps this share of its pixels, before any is stacked
    rng = np.random.default_rng(SAMPLING_SEED)
    features, targets, groups, located, pages, sides, areas = [], [], [], [], [], [], []
    for path in paths:
        clean_path = data_dir / spec.target_image_dir / path.name
        noisy, clean = gray_image(path), gray_image(inside(data_dir, clean_path)) if clean_path.is_file() else None
        if noisy is None or clean is None or noisy.shape != clean.shape:
            warnings.append(f"{path}: no readable clean image of its size in {spec.target_image_dir}/, skipped")
            continue
        keep = np.flatnonzero(rng.random(noisy.size) < share) if share < 1 else np.arange(noisy.size)
        features.append(pixel_features(noisy)[keep])
        targets.append(clean.ravel()[keep])
        groups.append(np.full(len(targets[-1]), len(groups)))
        located.append(np.divmod(keep, noisy.shape[1]))  # each kept pixel's row and column
        pages.append((str(path), str(clean_path)))
        sides.append(min(noisy.shape))
        areas.append(noisy.size)
    if not features:
        raise InputError(f"{data_dir / spec.image_dir}: no training image with a clean one in {spec.target_image_dir}/")
    x, y, group = np.concatenate(features), np.concatenate(targets), np.concatenate(groups)
    sampled = () if share >= 1 else (Sampled(
        what="training pixels", kept=len(y), of=int(sum(areas)), how="the same random share of each page's",
        why=f"what the budget trains, at most {MAX_PIXEL_ROWS:,}", source=str(data_dir / spec.image_dir)),)
    warnings.extend(s.say() for s in sampled)
    ids = sample[spec.id_column].astype(str)
    parts = ids.str.extract(r"^(.+)_(\d+)_(\d+)$")
    if parts.isna().any().any():
        raise InputError(f"{spec.sample_submission}: ids must be <image>_<row>_<col>, e.g. "
                         f"{ids[parts.isna().any(axis=1)].iloc[0]!r}")
    test = np.full((len(ids), x.shape[1]), np.nan, dtype=np.float32)
    found = {p.stem: p for p in image_files(data_dir, spec.test_image_dir or "test", work_dir)}
    test_codes, test_pages = np.full(len(ids), -1), []  # each row's test page, as the page view names it
    for stem, rows in parts.groupby(0).groups.items():
        image = gray_image(found[stem]) if stem in found else None
        if image is None:
            warnings.append(f"{data_dir / (spec.test_image_dir or 'test')}: no readable image {stem}: its "
                            f"{len(rows)} pixel(s) get the mean")
            continue
        test_codes[np.asarray(rows)] = len(test_pages)
        test_pages.append(str(found[stem]))
        r, c = parts.loc[rows, 1].astype(int) - 1, parts.loc[rows, 2].astype(int) - 1
        inside_image = ((r >= 0) & (r < image.shape[0]) & (c >= 0) & (c < image.shape[1])).to_numpy()
        flat = (r * image.shape[1] + c).to_numpy()
        test[np.asarray(rows)[inside_image]] = pixel_features(image)[flat[inside_image]]
    names = _pixel_columns()
    at_row, at_col = (parts[k].astype(np.int32).to_numpy() - 1 for k in (1, 2))  # 0-based; int32: millions of rows
    test_rows = pd.DataFrame({"noisy": pd.Categorical.from_codes(test_codes, categories=test_pages), "row": at_row,
                              "col": at_col})
    views = {"table": (pd.DataFrame(x, columns=names), pd.DataFrame(test, columns=names)),
             "page": (_page_rows(pages, group, located), test_rows)}
    return Dataset(spec, columns, None, y[:, None].astype(np.float64), views, warnings, groups=group,
                   image_side=int(np.median(sides)), source_pixels=int(sum(areas)), sampled=sampled)


def _page_rows(pages: list[tuple[str, str]], group: np.ndarray, located: list[tuple]) -> pd.DataFrame:
    """The training pixels as the page view's rows: the noisy page's path, the clean one's, row and column."""
    rows, cols = (np.concatenate([part[k] for part in located]) for k in (0, 1))
    return pd.DataFrame({"noisy": pd.Categorical.from_codes(group, categories=[n for n, _ in pages]),
                         "clean": pd.Categorical.from_codes(group, categories=[c for _, c in pages]),
                         "row": rows.astype(np.int32), "col": cols.astype(np.int32)})
