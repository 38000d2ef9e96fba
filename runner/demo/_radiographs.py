"""Chest radiographs for the synthetic detection competitions: a chest drawn in shares of the picture (body, lungs,
heart, spine, ribs), findings painted onto it, and the picture written as a DICOM file (pydicom) with 12 bits
stored in 16, as the real studies are."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from runner.demo._pictures import smooth_field

UID_ROOT = "1.2.826.0.1.3680043.8.498."  # the root the real studies' anonymised UIDs share
BITS = 12  # bits stored of each 16-bit pixel
SECONDARY_CAPTURE = "1.2.840.10008.5.1.4.1.1.7"
EXPLICIT_LITTLE = "1.2.840.10008.1.2.1"


def uid(rng: np.random.Generator) -> str:
    """A DICOM UID under UID_ROOT, drawn from `rng` (a replica is the same for the same seed)."""
    return UID_ROOT + ".".join(str(int(v)) for v in rng.integers(1, 10 ** 9, 3))


def chest(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A float canvas in [0, 1]: dark lungs in a bright body, the heart and spine between them, faint ribs."""
    y, x = np.mgrid[:height, :width].astype(np.float32)
    u, v = x / width, y / height
    body = (((u - 0.5) / 0.47) ** 2 + ((v - 0.55) / 0.55) ** 2 <= 1).astype(np.float32)
    lungs = np.zeros_like(body)
    for side in (0.3, 0.7):
        lungs += ((u - side) / 0.16) ** 2 + ((v - 0.48) / 0.3) ** 2 <= 1
    heart = ((u - 0.56) / 0.14) ** 2 + ((v - 0.66) / 0.12) ** 2 <= 1
    spine = np.abs(u - 0.5) < 0.045
    ribs = 0.5 + 0.5 * np.sin(v * 2 * np.pi * 7 + np.abs(u - 0.5) * 6)
    canvas = 0.18 + 0.5 * body - 0.38 * np.clip(lungs, 0, 1) + 0.07 * ribs * lungs
    canvas = np.where(heart | spine, np.maximum(canvas, 0.62), canvas)
    canvas += 0.04 * smooth_field(rng, height, width, cells=5) + rng.normal(0, 0.02, (height, width))
    return np.clip(canvas, 0, 1)


def blob(canvas: np.ndarray, rng: np.random.Generator, box: tuple[float, float, float, float], strength: float,
         grain: float) -> None:
    """Brighten an ellipse filling `box` (x_min, y_min, x_max, y_max in pixels), with its own grain."""
    height, width = canvas.shape
    x0, y0, x1, y1 = box
    y, x = np.mgrid[:height, :width].astype(np.float32)
    inside = ((x - (x0 + x1) / 2) / max(0.5, (x1 - x0) / 2)) ** 2 + ((y - (y0 + y1) / 2) / max(0.5, (y1 - y0) / 2)) ** 2
    weight = np.clip(1.2 - inside, 0, 1)
    canvas += weight * (strength + grain * rng.normal(0, 1, canvas.shape))


def write_dicom(path: Path, canvas: np.ndarray, rng: np.random.Generator, *, study: str | None = None,
                series: str | None = None, instance: str | None = None, inverted: bool = False) -> None:
    """The canvas ([0, 1]) as a DICOM radiograph at `path`: MONOCHROME2, or MONOCHROME1 (white is low) when
    `inverted`; the UIDs given or drawn."""
    from pydicom.dataset import Dataset, FileMetaDataset

    pixels = np.clip(canvas, 0, 1) * (2 ** BITS - 1)
    pixels = ((2 ** BITS - 1) - pixels if inverted else pixels).round().astype(np.uint16)
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = SECONDARY_CAPTURE
    meta.MediaStorageSOPInstanceUID = instance or uid(rng)
    meta.TransferSyntaxUID = EXPLICIT_LITTLE
    data = Dataset()
    data.file_meta = meta
    data.SOPClassUID, data.SOPInstanceUID = SECONDARY_CAPTURE, meta.MediaStorageSOPInstanceUID
    data.StudyInstanceUID, data.SeriesInstanceUID = study or uid(rng), series or uid(rng)
    data.Modality, data.PatientSex = "DX", str(rng.choice(["M", "F"]))
    data.Rows, data.Columns = pixels.shape
    data.SamplesPerPixel, data.PhotometricInterpretation = 1, "MONOCHROME1" if inverted else "MONOCHROME2"
    data.BitsAllocated, data.BitsStored, data.HighBit, data.PixelRepresentation = 16, BITS, BITS - 1, 0
    data.PixelData = pixels.tobytes()
    data.save_as(path, enforce_file_format=True)
