"""Audio helpers for the audio replicas: their sizes, chirps, 16-bit WAV and AIFF writers, a magnitude spectrogram."""
from __future__ import annotations

import math
import struct
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PEAK = 32767  # full scale of a signed 16-bit sample


@dataclass(frozen=True)
class Clips:
    """How many clips an audio replica writes at a scale, and how long: `samples` at `rate` Hz each."""
    train: int
    test: int
    rate: int
    samples: int


def burst(length: int, rate: int, start_hz: float, end_hz: float) -> np.ndarray:
    """A Hann-windowed linear sweep of `length` samples from start_hz to end_hz: added where a call is, it costs
    its own length however long the recording."""
    t = np.arange(length) / rate
    sweep = (end_hz - start_hz) / max(length / rate, 1e-9)
    return np.sin(2 * np.pi * (start_hz * t + 0.5 * sweep * t * t)) * np.hanning(length)


def chirp(n: int, rate: int, start_hz: float, end_hz: float, at: int = 0, length: int | None = None) -> np.ndarray:
    """A Hann-windowed linear sweep from start_hz to end_hz, placed at sample `at` in a silent signal of n samples."""
    length = min(length or n, n - at)
    out = np.zeros(n)
    out[at:at + length] = burst(length, rate, start_hz, end_hz)
    return out


def to_pcm16(signal: np.ndarray) -> np.ndarray:
    """Scale a float signal so its peak is at 90% of full scale and round to int16."""
    peak = float(np.max(np.abs(signal))) or 1.0
    return np.round(signal / peak * 0.9 * PEAK).astype(np.int16)


def write_wav(path: Path, signal: np.ndarray, rate: int) -> None:
    """A mono 16-bit PCM WAV file."""
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(to_pcm16(signal).astype("<i2").tobytes())


def _extended(value: float) -> bytes:
    """An IEEE 754 80-bit extended float, as AIFF stores its sample rate."""
    if value == 0:
        return bytes(10)
    exponent = math.frexp(value)[1] - 1
    mantissa = int(value * 2 ** (63 - exponent))
    return struct.pack(">HQ", 16383 + exponent, mantissa)


def write_aiff(path: Path, signal: np.ndarray, rate: int) -> None:
    """A mono 16-bit big-endian AIFF file (FORM/AIFF with COMM and SSND chunks)."""
    data = to_pcm16(signal).astype(">i2").tobytes()
    comm = struct.pack(">hIh", 1, len(data) // 2, 16) + _extended(rate)
    ssnd = struct.pack(">II", 0, 0) + data
    body = b"AIFF" + b"COMM" + struct.pack(">I", len(comm)) + comm + b"SSND" + struct.pack(">I", len(ssnd)) + ssnd
    Path(path).write_bytes(b"FORM" + struct.pack(">I", len(body)) + body)


def spectrogram(signal: np.ndarray, frame: int, bins: int) -> np.ndarray:
    """Magnitude spectrogram, frequency rows high to low (as an image), `bins` rows, non-overlapping Hann frames."""
    frames = signal[: len(signal) // frame * frame].reshape(-1, frame) * np.hanning(frame)
    magnitude = np.abs(np.fft.rfft(frames, axis=1))[:, : frame // 2]
    pooled = magnitude.reshape(len(frames), bins, -1).mean(axis=2)
    return pooled.T[::-1]
