"""A synthetic tensorflow-speech-recognition-challenge: one-second WAV clips of spoken words, each in the folder of
its word (train/audio/<word>/<speaker>_nohash_<n>.wav), long recordings of noise in train/audio/_background_noise_/,
and the test clips renamed test/audio/clip_<8 digits>.wav, as MLE-bench's 90/10 split of the real train.7z lays
them out; the answers (private/test.csv) hold each test clip's folder name, the sample says `silence` for all.

Each word is a voiced sound of its own: a fundamental with its second harmonic, one of ten pitches, held steady,
rising or falling (thirty words); each speaker shifts the pitch a little, says it at another moment, louder or
softer, over background hiss. The noise recordings are hiss and hum alone. The per-band statistics of the clips
learn most of it; the sample's `silence` scores 0 (no answer is `silence`), the most frequent word about 0.05.

`sizes(scale)`: 8 kHz clips at a factor of the replica's own counts, 2-second noise recordings; at REAL the 64,727
files at 16 kHz, the noise recordings a minute long.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import folders, hex_ids, quota
from runner.demo._sounds import Clips, write_wav

CORE = ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go", "zero", "one", "two", "three",
        "four", "five", "six", "seven", "eight", "nine")  # ~2,370 clips each in the real data
AUXILIARY = ("bed", "bird", "cat", "dog", "happy", "house", "marvin", "sheila", "tree", "wow")  # ~1,730 each
WORDS = CORE + AUXILIARY
NOISE = "_background_noise_"
NOISE_FILES = ("doing_the_dishes", "dude_miaowing", "exercise_bike", "pink_noise", "running_tap", "white_noise")
RATE, REAL_RATE = 8_000, 16_000
NOISE_SECONDS, REAL_NOISE_SECONDS = 2, 60
TRAIN, TEST = 372, 180  # the replica's own counts (noise recordings included)
REAL_TRAIN, REAL_TEST = 58_254, 6_473  # MLE-bench's 90/10 split of the 64,727 files of train.7z
LEAST = 62  # two clips of every word at the smallest factors
PITCHES = 300.0 * 1.15 ** np.arange(10)  # Hz: the ten pitches, each 15% above the last
GLIDE = 1.5  # a rising word ends this many times its pitch, a falling one starts there
SPEAKER_SHIFT = 0.07  # a speaker's pitch, up to this share above or below
SPEAKERS = 60  # speakers in the replica (the real data has 1,881)


def sizes(scale: float | str = 1.0) -> Clips:
    """How many clips `scale` writes (a factor of the replica's own counts, or REAL) and how long (one second)."""
    scale = parse_scale(scale)
    rate = REAL_RATE if is_real(scale) else RATE
    return Clips(scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST), rate, rate)


def word(index: int, rate: int, samples: int, shift: float, rng: np.random.Generator) -> np.ndarray:
    """One clip of word `index`: its pitch (shifted by the speaker), steady, rising or falling, at a random moment."""
    pitch, glide = PITCHES[index % len(PITCHES)] * shift, (1.0, GLIDE, 1 / GLIDE)[index // len(PITCHES)]
    length = int(rng.uniform(0.4, 0.7) * samples)
    at = int(rng.integers(0, samples - length))
    t = np.arange(length) / rate
    frequency = pitch * glide ** (t / t[-1])
    phase = 2 * np.pi * np.cumsum(frequency) / rate
    voice = (np.sin(phase) + 0.5 * np.sin(2 * phase)) * np.hanning(length) * rng.uniform(0.5, 1.0)
    clip = rng.normal(0, 0.15, samples)
    clip[at:at + length] += voice
    return clip


def noise(seconds: int, rate: int, rng: np.random.Generator) -> np.ndarray:
    """A noise recording: hiss of a slowly varying loudness and a low hum."""
    n = seconds * rate
    t = np.arange(n) / rate
    return rng.normal(0, 1, n) * (0.3 + 0.2 * np.sin(2 * np.pi * t / 7)) + 0.2 * np.sin(2 * np.pi * 50 * t)


def _counts(total: int, rng: np.random.Generator) -> np.ndarray:
    """Each file's word index (len(WORDS) for a noise recording): six noise recordings, the words in their real
    shares."""
    shares = tuple(2370 if w in CORE else 1730 for w in WORDS)
    return np.concatenate([quota(shares, total - len(NOISE_FILES), rng), np.full(len(NOISE_FILES), len(WORDS))])


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train/audio/<word>/, test/audio/, sample_submission.csv) and prepared/private/test.csv,
    as many clips as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root, "train/audio", "test/audio")
    kinds = _counts(size.train + size.test, rng)
    speakers = hex_ids(rng, SPEAKERS, 8)
    shifts = 1 + rng.uniform(-SPEAKER_SHIFT, SPEAKER_SHIFT, SPEAKERS)
    seconds = REAL_NOISE_SECONDS if is_real(scale) else NOISE_SECONDS
    files, said = [], Counter()  # (folder, file name, signal); how often each speaker said each word
    for kind in kinds:
        if kind == len(WORDS):
            name = NOISE_FILES[said[NOISE]]
            said[NOISE] += 1
            files.append((NOISE, f"{name}.wav", noise(seconds, size.rate, rng)))
            continue
        speaker = int(rng.integers(SPEAKERS))
        repeat = said[WORDS[kind], speaker]
        said[WORDS[kind], speaker] += 1
        files.append((WORDS[kind], f"{speakers[speaker]}_nohash_{repeat}.wav",
                      word(int(kind), size.rate, size.samples, shifts[speaker], rng)))
    test = set(rng.choice(len(files), size.test, replace=False).tolist())
    answers = []
    for k, (label, name, signal) in enumerate(files):
        if k in test:
            continue
        (public / "train" / "audio" / label).mkdir(exist_ok=True)
        write_wav(public / "train" / "audio" / label / name, signal, size.rate)
    for index, k in enumerate(rng.permutation(sorted(test))):
        label, _, signal = files[k]
        write_wav(public / "test" / "audio" / f"clip_{index:08d}.wav", signal, size.rate)
        answers.append((f"clip_{index:08d}.wav", label))
    truth = pd.DataFrame(answers, columns=["fname", "label"])
    truth.to_csv(private / "test.csv", index=False)
    truth.assign(label="silence").to_csv(public / "sample_submission.csv", index=False)
    describe(public, "TensorFlow Speech Recognition Challenge",
             "Predict the word spoken in each test clip (test/audio/clip_*.wav); a training clip's word is the name "
             "of its folder in train/audio/ (_background_noise_ holds noise recordings).",
             "Submissions are evaluated on multiclass accuracy: the share of clips whose label is right.",
             "Submit `fname,label` for every test clip.")
