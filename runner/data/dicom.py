"""DICOM as pictures: one id's DICOM files (a file, a folder of them such as a CT study's slices or an MRI case's
sequences, or a list of them such as a breast's mammograms) made into one gray picture the image engines train on.

The files are grouped into series by their SeriesInstanceUID (their folder where a file has none). A series of
one two-dimensional image is one panel; a series of slices (or a multi-frame file) is a volume, seen as three
maximum-intensity projections, through its depth, its height and its width (axial, coronal and sagittal for a CT):
a bright lesion or a fracture line shows in them wherever its slice is, and a spine's levels run down the latter
two. Pixels are taken to the modality's units (rescale slope and intercept: Hounsfield units for a CT), then
through the first file's VOI LUT or window (the range the modality means to be seen) into 8 bits, MONOCHROME1
inverted so that dense is always bright. The panels, series after series in the order of their folders or
numbers, fill a near-square grid, stretched to a square: the engines crop a square out of a picture's middle.
Compressed pixel data (JPEG lossless, JPEG-LS, JPEG 2000, RLE) is decoded by pydicom's pylibjpeg plugins.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
from PIL import Image

log = logging.getLogger(__name__)

MAX_SLICES = 64  # slices of one series decoded, evenly spaced: a projection needs the volume's extent, and a
# 1 mm CT study has 300 to 1,000 of them, each a decode of its own
PANEL_SIDE = 256  # each panel's side in the picture (a smaller image is not enlarged): the CNN crops from it
SCALE_PERCENTILES = (0.5, 99.5)  # an image without a window is mapped to 8 bits between these of its values
BEYOND = 1e7  # a value beyond any window's either end: what the window maps it to is the end of its range
HEADER_TAGS = ("SeriesInstanceUID", "InstanceNumber", "ImagePositionPatient")  # what orders a study's files


def _natural(path: Path) -> tuple:
    """A sort key that puts Image-2 before Image-10 (the numbers in a name compared as numbers)."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path.as_posix()))


def files_of(entry) -> list[Path]:
    """The DICOM files of one id: a folder's files at any depth (hidden ones left out), a list's, or the file."""
    if isinstance(entry, (list, tuple)):
        return sorted((Path(p) for p in entry), key=_natural)
    entry = Path(entry)
    if entry.is_dir():
        return sorted((p for p in entry.rglob("*") if p.is_file() and not p.name.startswith(".")), key=_natural)
    return [entry]


def _header(path: Path):
    import pydicom

    return pydicom.dcmread(path, stop_before_pixels=True, specific_tags=list(HEADER_TAGS), force=True)


def _slice_order(headers: list) -> list[int]:
    """The files of one series in the order of their slices: by position along the slice axis where every file has
    one, else by instance number, else as their names sort."""
    positions = [h.get("ImagePositionPatient") for h in headers]
    if all(p is not None and len(p) == 3 for p in positions):
        return sorted(range(len(headers)), key=lambda k: float(positions[k][2]))
    numbers = [h.get("InstanceNumber") for h in headers]
    if all(n is not None for n in numbers):
        return sorted(range(len(headers)), key=lambda k: int(numbers[k]))
    return list(range(len(headers)))


def series_of(files: list[Path]) -> list[list[Path]]:
    """The files grouped into series (by SeriesInstanceUID, else their folder), each in slice order; the series in
    the order their first files sort."""
    groups: dict[str, list] = {}
    for path in files:
        header = _header(path)
        key = str(header.get("SeriesInstanceUID") or path.parent)
        groups.setdefault(key, []).append((path, header))
    series = []
    for members in groups.values():
        order = _slice_order([h for _, h in members])
        series.append([members[k][0] for k in order])
    return sorted(series, key=lambda s: _natural(s[0]))


def _evenly(paths: list[Path], most: int) -> list[Path]:
    if len(paths) <= most:
        return paths
    return [paths[k] for k in np.unique(np.linspace(0, len(paths) - 1, most).round().astype(int))]


def _modality_values(dataset) -> np.ndarray:
    """The pixels in the modality's units (a frame per slice: (frames, rows, columns))."""
    from pydicom.pixels import apply_modality_lut

    pixels = dataset.pixel_array
    if pixels.ndim == 3 and dataset.get("SamplesPerPixel", 1) > 1:  # colour: its luminance
        pixels = pixels.mean(axis=-1)
    values = np.asarray(apply_modality_lut(pixels, dataset), dtype=np.float32)
    return values[None] if values.ndim == 2 else values


def _resized(values: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    if values.shape == shape:
        return values
    return np.asarray(Image.fromarray(values.astype(np.float32), "F").resize(shape[::-1], Image.BILINEAR))


def read_series(paths: list[Path]):
    """(the series' volume (slices, rows, columns) in modality units, its first file's dataset); at most
    MAX_SLICES slices, evenly spaced; a slice of another size is resized to the first's."""
    import pydicom

    first, slices = None, []
    for path in _evenly(paths, MAX_SLICES):
        dataset = pydicom.dcmread(path, force=True)
        values = _modality_values(dataset)
        if first is None:
            first = dataset
        shape = slices[0].shape if slices else values.shape[1:]
        slices.extend(_resized(frame, shape) for frame in values)
    return np.stack(slices), first


def projections(volume: np.ndarray) -> list[np.ndarray]:
    """One panel of a single image; three maximum-intensity projections of a volume (through its depth, height
    and width)."""
    if volume.shape[0] == 1:
        return [volume[0]]
    return [volume.max(axis=0), volume.max(axis=1), volume.max(axis=2)]


def _has_window(dataset) -> bool:
    return "VOILUTSequence" in dataset or ("WindowCenter" in dataset and "WindowWidth" in dataset)


def eight_bits(panel: np.ndarray, dataset) -> np.ndarray:
    """A panel in 8 bits: through the dataset's VOI LUT or window where it has one (its whole output range), else
    between SCALE_PERCENTILES of its values; MONOCHROME1 (dense is dark) inverted."""
    from pydicom.pixels import apply_voi_lut

    values = np.nan_to_num(np.asarray(panel, dtype=np.float64))
    low, high = np.percentile(values, SCALE_PERCENTILES)
    if _has_window(dataset):
        lookup = "VOILUTSequence" in dataset  # a table's entries are indexed by whole values
        kind = np.int64 if lookup else np.float64
        try:  # the window's own output range: what lies beyond it on either side is its darkest or brightest
            values = np.asarray(apply_voi_lut(np.round(values).astype(kind) if lookup else values, dataset),
                                dtype=np.float64)
            ends = apply_voi_lut(np.array([-BEYOND, BEYOND], dtype=kind), dataset)
            low, high = np.sort(np.asarray(ends, dtype=np.float64))
        except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:  # a malformed window
            log.debug("window not applied: %s", exc)
    scaled = np.zeros(values.shape) if high <= low else np.clip((values - low) / (high - low), 0, 1)
    if str(dataset.get("PhotometricInterpretation", "")).strip() == "MONOCHROME1":
        scaled = 1.0 - scaled
    return (scaled * 255).round().astype(np.uint8)


def _panel_side(panels: list[np.ndarray]) -> int:
    return min(PANEL_SIDE, max(max(p.shape) for p in panels))


def tiled(panels: list[np.ndarray]) -> Image.Image:
    """The panels in a near-square grid (as many columns as the square root of their count, rounded up), series
    after series, each a square of one side, the grid then stretched to a square of its longer side: the engines
    crop a square out of a picture's middle, which would cut a row or a column of panels away."""
    side = _panel_side(panels)
    columns = int(np.ceil(np.sqrt(len(panels))))
    rows = int(np.ceil(len(panels) / columns))
    canvas = Image.new("L", (side * columns, side * rows))
    for k, panel in enumerate(panels):
        canvas.paste(Image.fromarray(panel, "L").resize((side, side), Image.BILINEAR),
                     ((k % columns) * side, (k // columns) * side))
    longer = max(canvas.size)
    return canvas if canvas.width == canvas.height else canvas.resize((longer, longer), Image.BILINEAR)


# what reading a file that is no DICOM, or pixel data no plugin decodes, raises: such an id has no picture
UNREADABLE = (AttributeError, KeyError, IndexError, TypeError, RuntimeError, NotImplementedError, EOFError)


def dicom_picture(entry) -> Image.Image:
    """One id's DICOM file(s) as a square gray picture of their series' panels (see the module's docstring); a
    ValueError where they cannot be read as one."""
    try:
        return _picture(entry)
    except UNREADABLE as exc:  # pydicom's InvalidDicomError is a ValueError already
        raise ValueError(f"{type(exc).__name__}: {exc}") from exc


def _picture(entry) -> Image.Image:
    files = files_of(entry)
    if not files:
        raise ValueError(f"{entry}: no DICOM file")
    panels = []
    for paths in series_of(files):
        volume, first = read_series(paths)
        panels += [eight_bits(panel, first) for panel in projections(volume)]
    return tiled(panels)
