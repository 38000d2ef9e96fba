"""Small real DICOM files for the replicas (pydicom writes them): one 16-bit monochrome image each, with the tags the
readers order and window them by (series, instance number, slice position, rescale, window, photometric
interpretation), uncompressed or JPEG 2000 lossless (as the real mammograms are)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

UID_ROOT = "1.2.826.0.1.3680043.8.498"  # a root for made-up UIDs (pydicom's own), numbers drawn after it
CT, MR, MAMMOGRAPHY = ("CT", "1.2.840.10008.5.1.4.1.1.2"), ("MR", "1.2.840.10008.5.1.4.1.1.4"), \
    ("MG", "1.2.840.10008.5.1.4.1.1.1.2")  # (modality, SOP class) of the images the replicas write


def uid(rng: np.random.Generator, root: str = UID_ROOT) -> str:
    """A UID under `root` drawn from `rng` (repeatable, unlike pydicom's generate_uid)."""
    return f"{root}.{int(rng.integers(10**8, 10**12))}.{int(rng.integers(10**5, 10**9))}"


@dataclass(frozen=True)
class Series:
    """What the files of one series share."""

    kind: tuple[str, str]  # CT, MR or MAMMOGRAPHY
    patient: str
    study: str
    series: str
    window: tuple[float, float] | None = None  # centre, width
    rescale: tuple[float, float] = (1.0, 0.0)  # slope, intercept: stored * slope + intercept = modality units
    monochrome1: bool = False  # stored inverted: dense is dark
    jpeg2000: bool = False


def write_image(path: Path, pixels: np.ndarray, series: Series, instance: int, position: float | None = None,
                sop: str | None = None) -> None:
    """One image of `pixels` (modality units; stored as unsigned 16-bit through the series' rescale)."""
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import JPEG2000Lossless, ExplicitVRLittleEndian

    slope, intercept = series.rescale
    values, window = np.asarray(pixels, dtype=np.float64), series.window
    if series.monochrome1:  # dense stored dark: the values turned over, and the window with them
        top = float(np.ceil(values.max()))
        values = top - values
        window = None if window is None else (top - window[0], window[1])
    stored = np.clip(np.round((values - intercept) / slope), 0, 65535)
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = series.kind[1]
    meta.MediaStorageSOPInstanceUID = sop or f"{series.series}.{instance}"
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID, ds.SOPInstanceUID = meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID
    ds.Modality, ds.PatientID = series.kind[0], series.patient
    ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.InstanceNumber = series.study, series.series, instance
    if position is not None:
        ds.ImagePositionPatient = [0.0, 0.0, float(position)]
    ds.Rows, ds.Columns = stored.shape
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME1" if series.monochrome1 else "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 0
    ds.RescaleSlope, ds.RescaleIntercept = slope, intercept
    if window is not None:
        ds.WindowCenter, ds.WindowWidth = window
    ds.PixelData = stored.astype(np.uint16).tobytes()
    if series.jpeg2000:
        ds.compress(JPEG2000Lossless, encoding_plugin="pylibjpeg")
    ds.save_as(path, enforce_file_format=True)
