"""Sound clips decoded once into a cache of log-mel spectrograms, shared read-only by every audio member's folds.

The image cache's idea for audio: decoding (WAV, AIFF, FLAC, OGG through libsndfile, which the `soundfile` wheel
carries) and resampling are the slow part; members then read a memory-mapped (clips x mels x frames) float16
array. One rate, one clip length and one frame size for the whole competition, chosen from the clips' headers.
"""
from __future__ import annotations

import fcntl
import logging
from dataclasses import dataclass
from math import gcd
from multiprocessing.pool import ThreadPool
from pathlib import Path

import numpy as np
from numpy.lib.format import open_memmap

from runner.common.atomic import replacing
from runner.data.image_draw import decode_seconds

log = logging.getLogger(__name__)

MAX_RATE = 16_000  # Hz: speech, birds and whales all sit below 8 kHz; higher rates only cost decoding
MAX_CLIP_SECONDS = 10.0  # longer clips are cut: a 10 s spectrogram already holds several hundred frames
FRAME_SECONDS = 0.064  # one FFT frame: fine enough in time for a call, ~16 Hz bins at 16 kHz
MIN_FFT = 256  # even at 2 kHz (whale clips) a frame has 129 bins for the mel bands to pool
MELS = 64  # mel bands: the usual front end of audio CNNs (PANNs, BirdCLEF solutions use 64-128)
HEADER_SAMPLE = 64  # clips whose headers give the competition's rate and length: a median, read in milliseconds
FLOOR_DB = -100.0  # the log's floor: silence, and clips that cannot be read
CACHE = "spectrograms.npy"  # in the run's work folder, beside the mask of the clips that decoded


@dataclass(frozen=True)
class Framing:
    """How every clip of a competition becomes a spectrogram."""

    rate: int  # Hz, after resampling
    samples: int  # per clip, after cutting or padding with silence
    n_fft: int
    hop: int
    mels: int

    @property
    def frames(self) -> int:
        return 1 + max(0, self.samples - self.n_fft) // self.hop


def framing(paths: list[Path | None]) -> Framing:
    """The rate (the clips' median, at most MAX_RATE) and length (their median, at most MAX_CLIP_SECONDS) of up to
    HEADER_SAMPLE clips spread over the list, read from their headers; frames of FRAME_SECONDS, hop a quarter."""
    import soundfile

    present = [p for p in paths if p is not None]
    rates, seconds = [], []
    for k in np.unique(np.linspace(0, len(present) - 1, min(HEADER_SAMPLE, len(present))).astype(int)):
        try:
            info = soundfile.info(str(present[k]))
        except (RuntimeError, OSError, ValueError):  # soundfile raises LibsndfileError, a RuntimeError
            continue
        rates.append(info.samplerate)
        seconds.append(info.frames / max(1, info.samplerate))
    rate = int(min(MAX_RATE, np.median(rates))) if rates else MAX_RATE
    length = float(min(MAX_CLIP_SECONDS, np.median(seconds))) if seconds else 1.0
    n_fft = max(MIN_FFT, 1 << int(round(np.log2(rate * FRAME_SECONDS))))
    samples = max(n_fft, int(round(length * rate)))
    return Framing(rate, samples, n_fft, n_fft // 4, min(MELS, n_fft // 4))


def decode(path: Path | None, rate: int, samples: int) -> np.ndarray | None:
    """A clip as mono float32 at `rate`, cut or padded with silence to `samples`; None when it cannot be read."""
    import soundfile

    if path is None:
        return None
    try:
        signal, native = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (RuntimeError, OSError, ValueError) as exc:
        log.debug("cannot decode %s: %s", path, exc)
        return None
    signal = signal.mean(axis=1)
    if native != rate and len(signal):
        from scipy.signal import resample_poly  # here: clips at the competition's rate never pay its import

        common = gcd(int(native), rate)
        signal = resample_poly(signal, rate // common, int(native) // common).astype(np.float32)
    out = np.zeros(samples, dtype=np.float32)
    out[:min(samples, len(signal))] = signal[:samples]
    return out


def mel_filters(rate: int, n_fft: int, mels: int) -> np.ndarray:
    """(mels x n_fft // 2 + 1) triangular filters evenly spaced on the HTK mel scale from 0 Hz to Nyquist."""
    def to_mel(hz):
        return 2595.0 * np.log10(1.0 + np.asarray(hz) / 700.0)

    edges = 700.0 * (10 ** (np.linspace(0.0, to_mel(rate / 2), mels + 2) / 2595.0) - 1.0)
    bins = np.linspace(0.0, rate / 2, n_fft // 2 + 1)
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (bins - lower) / np.maximum(centre - lower, 1e-9)
    falling = (upper - bins) / np.maximum(upper - centre, 1e-9)
    return np.clip(np.minimum(rising, falling), 0.0, None).astype(np.float32)


def log_mel(signal: np.ndarray, shape: Framing, filters: np.ndarray) -> np.ndarray:
    """(mels x frames) float32 decibels of a clip's mel power spectrogram (Hann frames), floored at FLOOR_DB."""
    frames = np.lib.stride_tricks.sliding_window_view(signal, shape.n_fft)[::shape.hop][:shape.frames]
    power = np.abs(np.fft.rfft(frames * np.hanning(shape.n_fft).astype(np.float32), axis=1)) ** 2
    return np.maximum(10.0 * np.log10(power @ filters.T + 1e-10), FLOOR_DB).T.astype(np.float32)


def clip_spectrum(path: Path | None, shape: Framing, filters: np.ndarray) -> np.ndarray | None:
    """One clip's log-mel spectrogram (mels x frames), or None when it cannot be read."""
    signal = decode(path, shape.rate, shape.samples)
    return None if signal is None else log_mel(signal, shape, filters)


def clip_seconds(paths: list[Path | None]) -> float:
    """One core's seconds to make one clip's spectrogram, measured as an image's decode is (a median over a few
    clips: runner.data.image_draw); 0.0 when none decodes. Clips differ by 50x in what that costs (a second at
    2 kHz, ten at 44.1 kHz resampled), so the audio members' prepare steps are planned from this."""
    shape = framing(paths)
    filters = mel_filters(shape.rate, shape.n_fft, shape.mels)
    return decode_seconds(paths, lambda path, _side: clip_spectrum(path, shape, filters))


def spectrogram_cache(paths: list[Path | None], out: Path, workers: int) -> tuple[np.ndarray, Framing]:
    """Write every clip's log-mel spectrogram into `out` (.npy, clips x mels x frames, float16); returns a mask
    of the clips that decoded (the others stay at FLOOR_DB) and the framing used."""
    shape = framing(paths)
    filters = mel_filters(shape.rate, shape.n_fft, shape.mels)
    cache = open_memmap(out, mode="w+", dtype=np.float16, shape=(len(paths), shape.mels, shape.frames))
    ok = np.zeros(len(paths), dtype=bool)

    def one(path):
        return clip_spectrum(path, shape, filters)

    # threads: libsndfile and numpy's FFT work outside the GIL, and no fork from a process that runs threads
    with ThreadPool(max(1, workers)) as pool:
        for i, spectrum in enumerate(pool.imap(one, paths, chunksize=8)):
            cache[i] = FLOOR_DB if spectrum is None else spectrum
            ok[i] = spectrum is not None
    cache.flush()
    return ok, shape


def spectrograms(paths: list[Path | None], work: Path, workers: int) -> tuple[np.ndarray, np.ndarray]:
    """(clips x mels x frames memory map, mask of the clips that decoded) for the run: computed by the first audio
    member's prepare step and read by every later one (a lock makes a second step that starts meanwhile wait for
    the first's rather than decode everything again)."""
    out, mask = work / CACHE, work / (CACHE + ".ok.npy")
    work.mkdir(parents=True, exist_ok=True)
    with open(work / (CACHE + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not mask.exists():
            ok, shape = spectrogram_cache(paths, out, workers)
            log.info("%d clips as %d mel bands x %d frames (%d Hz, %d-sample frames)", len(paths), shape.mels,
                     shape.frames, shape.rate, shape.n_fft)
            with replacing(mask) as tmp, open(tmp, "wb") as handle:  # the mask says the cache is whole
                np.save(handle, ok)
    return np.load(out, mmap_mode="r"), np.load(mask)
