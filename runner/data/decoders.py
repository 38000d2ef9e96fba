"""Files that are no picture or clip, turned once into what the engines read, by the spec's `decode`: each decoder
takes every training and test row's file and gives the views it makes (an image view of pictures it wrote under
the work folder, a table view of each file's statistics). A file it cannot read gives its row no input: a
training row is skipped, a test row gets the prior.

- `array_image`: a NumPy array per item (`.npy`): a 2-D array is a gray picture; a 3-D one with its channels
  first is a colour picture of up to three of them, more panels stacked top to bottom (seti's six cadence
  frames); each scaled from its 1st to its 99th percentile into 8 bits, so a faint line stands out of the noise.
  A picture that is not square is squeezed into one (the engines crop pictures to squares: a tall stack of
  panels would lose its first and last). Beside the pictures, a table of each panel's statistics (level, spread,
  extremes, and its strongest row and column against the rest) for the table engines.
- `dicom_image`: an id's DICOM file, folder of them (a study's slices, a case's sequences) or list of them (a
  breast's views), as one square gray picture of its series' panels (runner.data.dicom).
- `band_composite`: an item's folder of band arrays (contrails' records) as one colour picture of its labelled
  frame, a channel per band or difference of two (runner.data.band_records).
- `slice_stack`: a slice of a series (uw-madison's MRI scans) with the slices before and after it as one colour
  picture, the three scaled together from their 1st to their 99th percentile (runner.data.slices).
- `volume_bands`: a fragment's folder of depth slices (vesuvius' papyrus) as one colour picture, three bands of its
  middle slices averaged and scaled together, at the canvas its masks are learned on (runner.data.fragments).
- `signal_statistics`: a table per item (CSV or parquet: a recording's channels as columns, such as volcanic
  sensors or EEG leads) as one row of per-channel statistics (runner.data.signal_statistics).

Decoding every file can take longer than a budget affords (tens of thousands of arrays): `decodable_train` times
the decoder on a few training files and draws the training files to what DECODE_SHARE of the budget decodes on
the run's cores (every test file is decoded); the decoders work on those cores at once.
"""
from __future__ import annotations

import logging
import tempfile
import time
from multiprocessing.pool import ThreadPool
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
from PIL import Image

from runner.common.atomic import replacing
from runner.common.errors import InputError
from runner.common.sampling import SAMPLING_SEED, Sampled
from runner.competition.spec import BandRecords, CompetitionSpec
from runner.data.band_records import layout
from runner.data.fragments import band_means
from runner.data.slices import neighbours
from runner.data.dicom import dicom_picture
from runner.data.image_draw import DECODE_SHARE, LEAST_TRAIN, PROBES
from runner.data.signal_statistics import signal_statistics

log = logging.getLogger(__name__)

SCALE_PERCENTILES = (1.0, 99.0)  # an array's values mapped to 0..255 between these: outliers do not wash it out
MAX_PANELS_AS_COLOUR = 3  # channels that make one colour picture; more are stacked as gray panels
DECODED = "decoded"  # the work folder's sub-folder of what decoders write
PANEL_STATISTICS = ("mean", "std", "min", "p1", "p50", "p99", "max", "row", "column")


def scaled(values: np.ndarray) -> np.ndarray:
    """8-bit values of an array scaled between its SCALE_PERCENTILES (a constant array is mid-gray)."""
    values = np.nan_to_num(np.asarray(values, dtype=np.float32))
    low, high = np.percentile(values, SCALE_PERCENTILES)
    if high <= low:
        return np.full(values.shape, 128, dtype=np.uint8)
    return (np.clip((values - low) / (high - low), 0, 1) * 255).astype(np.uint8)


def squared(picture: Image.Image) -> Image.Image:
    """A picture resized to a square of its shorter side (the engines crop a square out of the middle: a stack of
    panels would lose its first and last)."""
    width, height = picture.size
    if width == height:
        return picture
    side = min(width, height)
    return picture.resize((side, side), Image.BILINEAR, reducing_gap=2.0)


def array_picture(array: np.ndarray) -> Image.Image:
    """A picture of a 2-D array, or of a 3-D one with its channels (panels) first."""
    array = np.squeeze(np.asarray(array))
    if array.ndim == 2:
        return squared(Image.fromarray(scaled(array), "L"))
    if array.ndim != 3:
        raise ValueError(f"an array of {array.ndim} dimensions is no picture")
    if array.shape[0] <= MAX_PANELS_AS_COLOUR:
        channels = [scaled(c) for c in array] + [scaled(array[-1])] * (3 - array.shape[0])
        return squared(Image.fromarray(np.stack(channels[:3], axis=-1), "RGB"))
    return squared(Image.fromarray(scaled(np.concatenate(list(array), axis=0)), "L"))


def panel_statistics(array: np.ndarray) -> np.ndarray:
    """PANEL_STATISTICS of each 2-D panel of an array (a 2-D array is one panel): its level, spread and
    percentiles, and how far its strongest row and its strongest column stand above the panel's other rows and
    columns (in standard errors of their means: a faint line through noise)."""
    array = np.nan_to_num(np.asarray(array, dtype=np.float32))
    panels = array.reshape((-1, *array.shape[-2:])) if array.ndim >= 2 else array.reshape(1, 1, -1)
    rows = []
    for panel in panels:
        spread = float(panel.std()) or 1.0
        level = float(panel.mean())

        def strongest(means: np.ndarray, count: int) -> float:
            return float((means.max() - level) / spread * np.sqrt(count))

        rows.append([level, float(panel.std()), float(panel.min()), *np.percentile(panel, (1, 50, 99)),
                     float(panel.max()), strongest(panel.mean(axis=1), panel.shape[1]),
                     strongest(panel.mean(axis=0), panel.shape[0])])
    return np.asarray(rows, dtype=np.float32).ravel()


def _decoded(paths: list[Path | None], decode_one: Callable[[Path], object], workers: int) -> list:
    """`decode_one` of each path on `workers` threads (NumPy, PIL and the parsers work outside the GIL), None for
    a missing path or one that fails (said in the log)."""
    def one(path):
        if path is None:
            return None
        try:
            return decode_one(path)
        except (OSError, ValueError, EOFError) as exc:
            log.warning("%s: cannot be decoded: %s", path, exc)
            return None

    with ThreadPool(max(1, workers)) as pool:
        return pool.map(one, paths, chunksize=8)


def _array_views(paths: list[Path | None], folder: Path, workers: int) -> tuple[list, list]:
    """(picture paths, panel statistics) of each array file; None for both where it cannot be read."""
    folder.mkdir(parents=True, exist_ok=True)

    def one(job):
        k, path = job
        array = np.load(path, allow_pickle=False)
        target = folder / f"{k}.png"
        if not target.exists():
            array_picture(array).save(target)
        return target, panel_statistics(array)

    done = _decoded([(k, p) if p is not None else None for k, p in enumerate(paths)], one, workers)
    return [d[0] if d else None for d in done], [d[1] if d else None for d in done]


def _statistics_table(rows: list[np.ndarray | None], width: int) -> pd.DataFrame:
    """The panel statistics as a table: a row of NaN where an array could not be read, NaN past a shorter
    array's panels."""
    table = np.full((len(rows), width), np.nan, dtype=np.float32)
    for i, row in enumerate(rows):
        if row is not None:
            table[i, :min(width, len(row))] = row[:width]
    panels = width // len(PANEL_STATISTICS)
    return pd.DataFrame(table, columns=[f"panel{p}_{s}" for p in range(panels) for s in PANEL_STATISTICS])


def array_image(spec: CompetitionSpec, train: list[Path | None], test: list[Path | None], work_dir: Path,
                workers: int = 1) -> dict[str, tuple]:
    """The image view (each array's picture) and the table view (its panels' statistics)."""
    root = Path(work_dir) / DECODED
    train_pictures, train_rows = _array_views(train, root / "train", workers)
    test_pictures, test_rows = _array_views(test, root / "test", workers)
    width = max((len(r) for r in train_rows + test_rows if r is not None), default=0)
    views = {"image": (train_pictures, test_pictures)}
    if width:
        views["table"] = (_statistics_table(train_rows, width), _statistics_table(test_rows, width))
    return views


def _pictures(paths: list, folder: Path, picture: Callable[[object], Image.Image], workers: int) -> list:
    """Each entry's picture written once as PNG under `folder`, whole or not at all (None where it cannot be
    read): a picture there is reused."""
    folder.mkdir(parents=True, exist_ok=True)

    def one(job):
        k, entry = job
        target = folder / f"{k}.png"
        if not target.exists():
            with replacing(target) as written:
                picture(entry).save(written, format="PNG")
        return target

    return _decoded([(k, p) if p is not None else None for k, p in enumerate(paths)], one, workers)


def dicom_image(spec: CompetitionSpec, train: list, test: list, work_dir: Path, workers: int = 1) -> dict[str, tuple]:
    """The image view: each id's DICOM file, folder or files as one picture (runner.data.dicom)."""
    root = Path(work_dir) / DECODED
    return {"image": (_pictures(train, root / "train", dicom_picture, workers),
                      _pictures(test, root / "test", dicom_picture, workers))}


def band_picture(bands: BandRecords) -> Callable[[Path], Image.Image]:
    """The picture of one item's folder: each channel its band (or band less band) at the labelled frame, scaled
    between its own SCALE_PERCENTILES; fewer than three channels repeated."""
    def picture(folder: Path) -> Image.Image:
        loaded: dict[int, np.ndarray] = {}

        def band(number: int) -> np.ndarray:
            if number not in loaded:
                values = np.load(Path(folder) / bands.file.format(band=number), allow_pickle=False)
                loaded[number] = (values[..., bands.frame] if values.ndim == 3 else values).astype(np.float32)
            return loaded[number]

        channels = [band(c[0]) - (band(c[1]) if len(c) > 1 else 0.0) for c in bands.channels]
        channels = (channels * 3)[:3]
        return Image.fromarray(np.stack([scaled(c) for c in channels], axis=-1), "RGB")

    return picture


def band_composite(spec: CompetitionSpec, train: list, test: list, work_dir: Path, workers: int = 1) -> dict[str, tuple]:
    """The image view: each item's folder of band arrays as one colour picture (runner.data.band_records)."""
    picture = band_picture(layout(spec))
    root = Path(work_dir) / DECODED
    return {"image": (_pictures(train, root / "train", picture, workers),
                      _pictures(test, root / "test", picture, workers))}


def volume_bands(spec: CompetitionSpec, train: list, test: list, work_dir: Path, workers: int = 1) -> dict[str, tuple]:
    """The image view: each fragment's folder of depth slices as one colour picture of three bands of its middle
    slices, scaled together, at the canvas its masks are learned on (runner.data.fragments)."""
    size = tuple(spec.mask.shape) if spec.mask is not None and spec.mask.shape else None

    def picture(folder: Path) -> Image.Image:
        return Image.fromarray(scaled(band_means(folder, size)), "RGB")

    root = Path(work_dir) / DECODED / (f"{size[0]}x{size[1]}" if size else "own")
    return {"image": (_pictures(train, root / "train", picture, workers),
                      _pictures(test, root / "test", picture, workers))}


def slice_picture(path: Path) -> Image.Image:
    """A slice and its neighbours in its series as one colour picture (before, itself, after), scaled together
    between their SCALE_PERCENTILES: an organ's shape changes with depth, which one slice does not show; a
    neighbour of another size stands in by the slice itself."""
    layers = [np.asarray(Image.open(p), dtype=np.float32) for p in neighbours(path)]
    layers = [layer if layer.shape == layers[1].shape else layers[1] for layer in layers]
    return Image.fromarray(scaled(np.stack(layers, axis=-1)), "RGB")


def slice_stack(spec: CompetitionSpec, train: list, test: list, work_dir: Path, workers: int = 1) -> dict[str, tuple]:
    """The image view: each slice file with its neighbours as one colour picture (runner.data.slices)."""
    root = Path(work_dir) / DECODED
    return {"image": (_pictures(train, root / "train", slice_picture, workers),
                      _pictures(test, root / "test", slice_picture, workers))}


# a spec's `decode` -> the decoder of that kind of file: (spec, training files, test files, work folder, workers)
DECODERS: dict[str, Callable[..., dict[str, tuple]]] = {
    "array_image": array_image,
    "signal_statistics": signal_statistics,
    "dicom_image": dicom_image,
    "band_composite": band_composite,
    "slice_stack": slice_stack,  # a slice and its neighbours in its series (uw-madison's scans)
    "volume_bands": volume_bands,  # a fragment's depth slices in three bands (vesuvius' papyrus)
}


def decodable_train(spec: CompetitionSpec, train: list[Path | None], test: list[Path | None], work_dir: Path,
                    budget_seconds: float, cores: int) -> tuple[list[Path | None], Sampled | None]:
    """The training files to decode (the others None) so that decoding them and every test file takes at most
    DECODE_SHARE of the budget on `cores`: the decoder timed on PROBES training files, the files drawn at random
    (at least LEAST_TRAIN), rows sharing a file kept or left together; and what was cut, or None."""
    files = list(dict.fromkeys(p for p in train if p is not None))
    probes = [files[k] for k in np.unique(np.linspace(0, len(files) - 1, min(PROBES, len(files))).astype(int))] \
        if files else []
    if not probes:
        return train, None
    Path(work_dir).mkdir(parents=True, exist_ok=True)
    decoder = _decoder(spec)
    with tempfile.TemporaryDirectory(dir=work_dir) as scratch:
        started = time.perf_counter()
        decoder(spec, probes, [], Path(scratch), 1)
        seconds_each = (time.perf_counter() - started) / len(probes)
    affordable = int(DECODE_SHARE * budget_seconds * max(1, cores) / max(seconds_each, 1e-6))
    most = max(LEAST_TRAIN, affordable - len(set(p for p in test if p is not None)))
    if len(files) <= most:
        return train, None
    chosen = {files[k] for k in np.random.default_rng(SAMPLING_SEED).choice(len(files), most, replace=False)}
    whole = (len(files) + len(test)) * seconds_each / max(1, cores)
    cut = Sampled(what="training files", kept=most, of=len(files), how="drawn at random",
                  source=str(Path(files[0]).parent),
                  why=f"decoding every file ({spec.decode}) takes ~{whole:.0f} s on {cores} core(s) "
                      f"({seconds_each * 1000:.0f} ms each), more than {DECODE_SHARE:.0%} of the "
                      f"{budget_seconds:.0f} s budget; every test file is decoded")
    return [p if p in chosen else None for p in train], cut


def _decoder(spec: CompetitionSpec) -> Callable[..., dict[str, tuple]]:
    if spec.decode not in DECODERS:
        raise InputError(f"spec {spec.id}: no decoder {spec.decode!r}; known: {', '.join(DECODERS)}")
    return DECODERS[spec.decode]


def decode(spec: CompetitionSpec, train: list[Path | None], test: list[Path | None], work_dir: Path,
           workers: int = 1) -> dict[str, tuple]:
    """The views the spec's decoder makes of every training and test file, on `workers` threads."""
    decoder = _decoder(spec)
    Path(work_dir).mkdir(parents=True, exist_ok=True)
    return decoder(spec, train, test, Path(work_dir), workers)
