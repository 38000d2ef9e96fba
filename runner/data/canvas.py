"""Items whose masks are as large as their images (`mask.own_size`: hubmap's whole slides of 20,000-50,000 pixels a
side, vesuvius' fragments of 65 slices), learned on one square canvas and written back at each item's own size.

The canvas' side is measured on the training masks, not set by the spec: each item is shrunk by the factor that
brings its masks' median run (a glomerulus' chord, an ink stroke's width) down to OBJECT_RUN pixels, never
enlarged, so the objects keep the size a U-Net sees well whatever the slides' scale; the side is the training
items' median longer side at that factor. Each training mask is resized to the canvas (its image is too, by the
engines' caches) and written as a run-length string again, so that masks are read one way
(runner.data.mask_targets). The writer resizes each test item's probabilities to its own size (read from its
file's header into the sample's attrs) before cutting them.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from runner.common import rle
from runner.common.errors import InputError, InvalidSubmissionError
from runner.competition.spec import CompetitionSpec
from runner.data.mask_targets import held_bytes, mask_columns

# a mask's median run on the canvas: a glomerulus some 32 pixels across still spans two cells of a U-Net's
# stride-16 level, where the real slides' 250-pixel chords would need tiles of thousands of pixels to hold one
OBJECT_RUN = 32
CANVAS_MULTIPLE = 32  # the side rounded up to this: a 5-level encoder's stride divides it, no padding at the edge
MOST_SIDE = 8192  # the largest canvas: 64 M pixels an item, some 200 MB of image and 256 MB of float targets
FLOAT_RESIZE_PIXELS = 4_000_000  # an item larger than this is resized as 8-bit levels: a slide's floats take GBs
TIFF_SUFFIXES = (".tif", ".tiff")
ITEM_SIZES = "item_sizes"  # the sample's attrs key: each test item's (height, width), None where no file was found
ITEM_REGIONS = "item_regions"  # the sample's attrs key: each test item's region file (`mask.region`), or None
# of the machine's memory the supervisor's mask pixels may take where a card learns them at a larger side: the rest
# holds the data's other copies and the units training beside it
CARD_MEMORY_SHARE = 0.5


def image_size(path: Path) -> tuple[int, int]:
    """(height, width) of an image file from its header alone (a slide of billions of pixels is not read)."""
    try:
        if path.suffix.lower() in TIFF_SUFFIXES:
            import tifffile

            with tifffile.TiffFile(path) as tiff:
                page = tiff.pages[0]
                return int(page.imagelength), int(page.imagewidth)
        with Image.open(path) as image:
            return image.height, image.width
    except Exception as exc:  # any unreadable header: named
        raise InputError(f"{path}: cannot read the image's size: {exc}") from exc


def item_size(path: Path, region: str | None = None) -> tuple[int, int]:
    """An item's (height, width): its image file's, or for an item that is a folder (a fragment's slices) its
    region file's where it has one, else its first image's."""
    path = Path(path)
    if not path.is_dir():
        return image_size(path)
    if region and (path / region).is_file():
        return image_size(path / region)
    from runner.competition.spec import IMAGE_SUFFIXES

    found = sorted(p for p in path.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    if not found:
        raise InputError(f"{path}: no image in the item's folder: its size is unknown")
    return image_size(found[0])


def run_lengths(text) -> np.ndarray:
    """The lengths of a run-length string's runs (none for an empty cell)."""
    if not isinstance(text, str) or not text.strip():
        return np.zeros(0, dtype=np.int64)
    numbers = np.asarray(text.split(), dtype=np.int64)
    return numbers[1::2]


def canvas_side(sizes: list[tuple[int, int]], texts: list) -> tuple[int, int]:
    """(the canvas' side, the factor items are shrunk by): the factor bringing the masks' median run to
    OBJECT_RUN (at least 1), the side the training items' median longer side at it, rounded up to
    CANVAS_MULTIPLE and at most MOST_SIDE."""
    runs = np.concatenate([run_lengths(t) for t in texts] or [np.zeros(0, dtype=np.int64)])
    return side_for(float(np.median([max(size) for size in sizes])), float(np.median(runs)) if len(runs) else 0.0)


def side_for(longer: float, median_run: float) -> tuple[int, float]:
    """(the canvas' side, the factor) for items of a `longer` side whose masks' median run is `median_run` (0:
    none known, never shrunk)."""
    factor = max(1.0, median_run / OBJECT_RUN)
    side = int(np.ceil(longer / factor / CANVAS_MULTIPLE) * CANVAS_MULTIPLE)
    return max(CANVAS_MULTIPLE, min(MOST_SIDE, side)), factor


def resized(values: np.ndarray, height: int, width: int) -> np.ndarray:
    """A mask or a map of probabilities resized (bilinear) to `height` x `width`, as float32."""
    values = np.asarray(values, dtype=np.float32)
    if values.shape == (height, width):
        return values
    return np.asarray(Image.fromarray(values).resize((width, height), Image.BILINEAR))


def shrunk_mask(text, size: tuple[int, int], side: int, order: str, where: str) -> np.ndarray:
    """A training item's mask (run-length, at its own size) on the canvas: each canvas pixel in it where most of
    what it covers is."""
    if not isinstance(text, str) or not text.strip():
        return np.zeros((side, side), bool)
    try:
        mask = rle.decode(text, *size, order)
    except rle.RleError as exc:
        raise InputError(f"{where}: {exc}") from None
    picture = Image.fromarray(mask.astype(np.uint8) * 255)
    return np.asarray(picture.resize((side, side), Image.BOX)) >= 128


def on_canvas(spec: CompetitionSpec, train: pd.DataFrame, paths: list, columns: list[str],
              where: str) -> tuple[CompetitionSpec, pd.DataFrame, str]:
    """(the spec with the canvas as its masks' shape, the training rows whose file was found with their masks
    re-encoded on it, what was chosen): `paths` each training row's item (None: not found, left out)."""
    found = [p is not None for p in paths]
    if not any(found):
        raise InputError(f"{where}: no training item's file was found: their masks' sizes are unknown")
    train = train[found].reset_index(drop=True)
    sizes = [item_size(p, spec.mask.region) for p in paths if p is not None]
    missing = [c for c in columns if c not in train.columns]
    if missing:
        raise InputError(f"{where}: missing run-length column(s) {missing}")
    side, factor = canvas_side(sizes, [t for c in columns for t in train[c].tolist()])
    layout = spec.mask
    train = train.copy()
    for column in columns:
        train[column] = [rle.written(shrunk_mask(t, s, side, layout.order, f"{where}, row {k + 2}, {column!r}"),
                                     layout.order, "")
                         for k, (t, s) in enumerate(zip(train[column].tolist(), sizes))]
    spec = dataclasses.replace(spec, mask=dataclasses.replace(layout, shape=(side, side)))
    said = (f"masks learned on a {side}x{side} canvas: each of the {len(sizes)} training items (median longer side "
            f"{np.median([max(s) for s in sizes]):.0f} px) shrunk {factor:.1f}x, its masks' median run to "
            f"{OBJECT_RUN} px, and resized to it; written back at each test item's own size")
    return spec, train, said


def with_item_sizes(spec: CompetitionSpec, sample: pd.DataFrame, paths: list) -> None:
    """Each test item's size in the sample's attrs (`paths`: the sample's rows' items), read from its file's
    header: the writer gives each row its mask at its own size; and where the spec names a region file, each
    item's (the writer marks nothing outside it)."""
    sizes = []
    for path in paths:
        try:
            sizes.append(item_size(path, spec.mask.region) if path is not None else None)
        except InputError:
            sizes.append(None)
    sample.attrs[ITEM_SIZES] = sizes
    region = spec.mask.region
    sample.attrs[ITEM_REGIONS] = [Path(p) / region if region and p is not None and (Path(p) / region).is_file()
                                  else None for p in paths]


def test_paths(spec: CompetitionSpec, sample: pd.DataFrame, data_dir: Path) -> list[Path | None]:
    """Each sample row's test item: `<test_image_dir>/<id><suffix>` (a file, or a folder where the suffix is
    empty), None where there is none."""
    folder = Path(data_dir) / (spec.test_image_dir or "test")
    paths = [folder / f"{item}{spec.test_suffix or ''}" for item in sample[spec.id_column].astype(str)]
    return [p if p.exists() else None for p in paths]


def written_at_own_size(values: np.ndarray, shape: tuple[int, int], sizes: list, cut: float, least: int,
                        order: str, empty: str | None, regions: list | None = None) -> list[str]:
    """Each row's probabilities (on the learned `shape`) as a run-length string at its own size: resized to it,
    a pixel from `cut` on, and none outside the item's region file where it has one (`regions`: vesuvius' papyrus,
    outside which no ink is labelled); a mask of fewer than `least` pixels (counted at the learned size, where it
    was tuned) left empty, as is a row of unknown size. Where an empty mask cannot be written (`empty` None) a row's
    first pixel stands for it."""
    if sizes is None or len(sizes) != len(values):
        raise InvalidSubmissionError("the test items' sizes are unknown: each mask is written at its own size")
    regions = regions if regions is not None and len(regions) == len(values) else [None] * len(values)
    out = []
    for row, size, region in zip(np.nan_to_num(np.asarray(values, dtype=np.float32)), sizes, regions):
        square = row.reshape(shape)
        marked = size is not None and int((square >= cut).sum()) >= max(1, int(least))
        mask = _cut_at(square, size, cut) if marked else None
        if mask is not None and region is not None:
            mask &= _region(region, mask.shape)
        if mask is not None and mask.any():
            out.append(rle.encode(mask, order))
        else:
            out.append(empty if empty is not None else "1 1")
    return out


def _region(path: Path, shape: tuple[int, int]) -> np.ndarray:
    """A region file as a boolean mask of `shape` (nonzero inside); everywhere where it is unreadable, empty or of
    another size (nothing is taken away that the file does not clearly rule out)."""
    try:
        with Image.open(path) as image:
            region = np.asarray(image.convert("L")) > 0
    except Exception:  # an unreadable region rules nothing out
        return np.ones(shape, bool)
    return region if region.shape == tuple(shape) and region.any() else np.ones(shape, bool)


def _cut_at(square: np.ndarray, size: tuple[int, int], cut: float) -> np.ndarray:
    """The probabilities resized to `size` and cut: as 8-bit levels where the item is large, as floats otherwise."""
    height, width = size
    if height * width <= FLOAT_RESIZE_PIXELS:
        return resized(square, height, width) >= cut
    levels = Image.fromarray(np.clip(np.round(square * 255), 0, 255).astype(np.uint8))
    return np.asarray(levels.resize((width, height), Image.BILINEAR)) >= round(cut * 255)


def card_side(spec: CompetitionSpec, own_side: int, n_train: int, n_test: int, memory: int) -> int:
    """The side a card learns masks resized to one square at (`mask.card_side`): the items' own (median shorter)
    side, at most `card_side`, a multiple of CANVAS_MULTIPLE, the largest whose pixels the supervisor holds in
    CARD_MEMORY_SHARE of `memory`; never below the spec's `shape` (a CPU's side)."""
    least = max(spec.mask.shape)
    side = min(spec.mask.card_side, own_side) // CANVAS_MULTIPLE * CANVAS_MULTIPLE
    classes = max(1, len(mask_columns(spec)))
    while side > least and held_bytes(side * side * classes, n_train, n_test) > CARD_MEMORY_SHARE * memory:
        side -= CANVAS_MULTIPLE
    return max(least, side)


def at_side(spec: CompetitionSpec, side: int) -> CompetitionSpec:
    """The spec with its masks learned at `side` x `side`."""
    return dataclasses.replace(spec, mask=dataclasses.replace(spec.mask, shape=(side, side)))
