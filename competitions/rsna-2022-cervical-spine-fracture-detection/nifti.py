"""NIfTI-1 label volumes (`segmentations/<StudyInstanceUID>.nii`): a 352-byte header and the voxels, as the real
segmentations are laid out (values 1 to 7 the vertebrae C1 to C7, 0 the rest), written without a NIfTI library."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

HEADER_BYTES = 348  # NIfTI-1's header, then 4 bytes saying no extension follows
UINT8 = 2  # NIfTI's code for unsigned 8-bit voxels


def write_labels(path: Path, labels: np.ndarray, spacing: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> None:
    """`labels` (x, y, z) as unsigned 8-bit voxels of `spacing` millimetres, in one .nii file."""
    labels = np.asarray(labels, dtype=np.uint8)
    header = bytearray(HEADER_BYTES)
    struct.pack_into("<i", header, 0, HEADER_BYTES)
    header[38:39] = b"r"
    struct.pack_into("<8h", header, 40, 3, *labels.shape, 1, 1, 1, 1)
    struct.pack_into("<hhh", header, 70, UINT8, 8, 0)  # datatype, bits per voxel, first slice
    struct.pack_into("<8f", header, 76, 1.0, *spacing, 0.0, 0.0, 0.0, 0.0)
    struct.pack_into("<fff", header, 108, 352.0, 1.0, 0.0)  # voxels' offset, scale slope and intercept
    header[123:124] = bytes([2])  # millimetres
    struct.pack_into("<hh", header, 252, 0, 1)  # no qform; the sform below maps voxels to millimetres
    for row, values in enumerate(np.diag(spacing)):
        struct.pack_into("<4f", header, 280 + 16 * row, *values, 0.0)
    header[344:348] = b"n+1\x00"
    path.write_bytes(bytes(header) + b"\x00" * 4 + labels.tobytes(order="F"))
