"""TFRecord files of `tf.train.Example`s written without TensorFlow: each record framed by its length and the
masked CRC-32C of the length and of the data, each Example a protocol buffer of named features (bytes or int64
lists), as cassava's `train_tfrecords/` and `test_tfrecords/` shards hold `image`, `image_name` and `target`."""
from __future__ import annotations

import struct
from pathlib import Path

CASTAGNOLI = 0x82F63B78  # CRC-32C's polynomial, reflected
MASK_DELTA = 0xA282EAD8  # TFRecord's mask of a CRC
_TABLE = []
for _byte in range(256):
    _crc = _byte
    for _ in range(8):
        _crc = (_crc >> 1) ^ (CASTAGNOLI if _crc & 1 else 0)
    _TABLE.append(_crc)


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + MASK_DELTA) & 0xFFFFFFFF


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _feature(value: bytes | int) -> bytes:
    """A Feature: a BytesList (field 1) of one value, or a packed Int64List (field 3) of one non-negative value."""
    if isinstance(value, int):
        return _field(3, _field(1, _varint(value)))
    return _field(1, _field(1, value))


def example(features: dict[str, bytes | int]) -> bytes:
    """A serialised tf.train.Example: Features (field 1) holding a map entry (key 1, Feature 2) per feature."""
    entries = b"".join(_field(1, _field(1, key.encode()) + _field(2, _feature(value)))
                       for key, value in features.items())
    return _field(1, entries)


def write_records(path: Path, records: list[bytes]) -> None:
    """A TFRecord file of the records."""
    with open(path, "wb") as handle:
        for data in records:
            length = struct.pack("<Q", len(data))
            handle.write(length + struct.pack("<I", masked(crc32c(length))) + data +
                         struct.pack("<I", masked(crc32c(data))))
