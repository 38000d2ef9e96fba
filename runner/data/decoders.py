"""Files that are no picture or clip, turned once into what the engines read, by the spec's `decode`: each decoder
takes every training and test row's file and gives the views it makes (an image view of pictures it wrote under
the work folder, a table view of each file's statistics). A file it cannot read gives its row no input: a
training row is skipped, a test row gets the prior.

- `array_image`: a NumPy array per item (`.npy`): a 2-D array is a gray picture; a 3-D one with its channels
  first is a colour picture of up to three of them, more panels stacked top to bottom (seti's six cadence
  frames); each scaled from its 1st to its 99th percentile into 8 bits, so a faint line stands out of the noise.
- `dicom_image`: an id's DICOM file, folder of them (a study's slices, a case's sequences) or list of them (a
  breast's views), as one square gray picture of its series' panels (runner.data.dicom).
"""
from __future__ import annotations

import logging
import os
import time
from multiprocessing.pool import ThreadPool
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image

from runner.common.atomic import replacing
from runner.common.errors import InputError
from runner.competition.spec import CompetitionSpec
from runner.data.dicom import dicom_picture

log = logging.getLogger(__name__)

SCALE_PERCENTILES = (1.0, 99.0)  # an array's values mapped to 0..255 between these: outliers do not wash it out
MAX_PANELS_AS_COLOUR = 3  # channels that make one colour picture; more are stacked as gray panels
DECODED = "decoded"  # the work folder's sub-folder of what decoders write
PROBES = 4  # training files decoded and timed first: what one costs, before the budget draws the rest


def scaled(values: np.ndarray) -> np.ndarray:
    """8-bit values of an array scaled between its SCALE_PERCENTILES (a constant array is mid-gray)."""
    values = np.nan_to_num(np.asarray(values, dtype=np.float32))
    low, high = np.percentile(values, SCALE_PERCENTILES)
    if high <= low:
        return np.full(values.shape, 128, dtype=np.uint8)
    return (np.clip((values - low) / (high - low), 0, 1) * 255).astype(np.uint8)


def array_picture(array: np.ndarray) -> Image.Image:
    """A picture of a 2-D array, or of a 3-D one with its channels (panels) first."""
    array = np.squeeze(np.asarray(array))
    if array.ndim == 2:
        return Image.fromarray(scaled(array), "L")
    if array.ndim != 3:
        raise ValueError(f"an array of {array.ndim} dimensions is no picture")
    if array.shape[0] <= MAX_PANELS_AS_COLOUR:
        channels = [scaled(c) for c in array] + [scaled(array[-1])] * (3 - array.shape[0])
        return Image.fromarray(np.stack(channels[:3], axis=-1), "RGB")
    return Image.fromarray(scaled(np.concatenate(list(array), axis=0)), "L")


def decode_threads() -> int:
    """Threads that decode side by side: the cores this process may run on (its container's, its lease's). The
    decoders' libraries (numpy, PIL, pydicom's JPEG plugins) let go of the interpreter while they work."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _pictures(paths: list, folder: Path, read: Callable[[Path], np.ndarray | Image.Image]) -> list[Path | None]:
    """Each file's picture (an array made one, or a picture as read) written as PNG under `folder` (None where
    unreadable), once: a picture there is reused. Written whole or not at all, several at a time."""
    folder.mkdir(parents=True, exist_ok=True)

    def one(k: int) -> Path | None:
        path, target = paths[k], folder / f"{k}.png"
        if path is None or target.exists():
            return None if path is None else target
        try:
            made = read(path)
            with replacing(target) as written:
                (made if isinstance(made, Image.Image) else array_picture(made)).save(written, format="PNG")
            return target
        except (OSError, ValueError) as exc:
            log.warning("%s: cannot be read as a picture: %s", path, exc)
            return None

    with ThreadPool(max(1, min(decode_threads(), len(paths)))) as pool:
        return pool.map(one, range(len(paths)))


def array_image(spec: CompetitionSpec, train: list[Path | None], test: list[Path | None],
                work_dir: Path) -> dict[str, tuple]:
    read = lambda path: np.load(path, allow_pickle=False)
    root = Path(work_dir) / DECODED
    return {"image": (_pictures(train, root / "train", read), _pictures(test, root / "test", read))}


def dicom_image(spec: CompetitionSpec, train: list, test: list, work_dir: Path) -> dict[str, tuple]:
    root = Path(work_dir) / DECODED
    return {"image": (_pictures(train, root / "train", dicom_picture), _pictures(test, root / "test", dicom_picture))}


# a spec's `decode` -> the decoder of that kind of file
DECODERS: dict[str, Callable[[CompetitionSpec, list, list, Path], dict[str, tuple]]] = {"array_image": array_image,
                                                                                       "dicom_image": dicom_image}


def probe_seconds(spec: CompetitionSpec, train: list, work_dir: Path) -> float:
    """Seconds one thread takes to decode one training file: PROBES of them, spread over the list, decoded side by
    side and timed (0.0 when there are none); their pictures stay, for the decode that follows to reuse."""
    present = [k for k, path in enumerate(train) if path is not None]
    if not present:
        return 0.0
    chosen = {present[i] for i in np.unique(np.linspace(0, len(present) - 1, min(PROBES, len(present))).astype(int))}
    started = time.perf_counter()
    decode(spec, [path if k in chosen else None for k, path in enumerate(train)], [], work_dir)
    return (time.perf_counter() - started) * min(decode_threads(), len(chosen)) / len(chosen)


def decode(spec: CompetitionSpec, train: list[Path | None], test: list[Path | None], work_dir: Path) -> dict[str, tuple]:
    if spec.decode not in DECODERS:
        raise InputError(f"spec {spec.id}: no decoder {spec.decode!r}; known: {', '.join(DECODERS)}")
    return DECODERS[spec.decode](spec, train, test, Path(work_dir))
