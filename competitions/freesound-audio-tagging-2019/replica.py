"""A synthetic freesound-audio-tagging-2019: WAV clips each tagged with one or more of 80 sound classes, as the
competition ships them (MLE-bench copies Kaggle's files as they are): train_curated.csv and train_noisy.csv
(`fname,labels`, the labels comma-separated), the clips in train_curated.zip, train_noisy.zip and test.zip, the
sample with a column per class in the vocabulary's order; the answers (private/test.csv) a 0/1 column per class.

Each class is a sound of its own: one of sixteen pitches (from 200 Hz up, each a fifth above the last) with one of
five shapes: held, pulsing, rising, falling, or a burst of noise around the pitch. A clip holds one class's sound,
or two at once; the noisy clips' tags are wrong a third of the time, as web tags are. The per-band statistics of
the clips rank the right tags above most others; the same ranking for every clip (by how often each class is
tagged) scores a lwlrap of about 0.06, the sample's zeros about 0.013.

`sizes(scale)`: one-second 8 kHz clips at a factor of the replica's own counts; at REAL the 4,970 curated, 19,815
noisy and 3,361 test clips at 44.1 kHz, 7 s long (15 s for the noisy ones).
"""
from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import folders, hex_ids
from runner.demo._sounds import to_pcm16

CLASSES = (
    "Accelerating_and_revving_and_vroom", "Accordion", "Acoustic_guitar", "Applause", "Bark", "Bass_drum",
    "Bass_guitar", "Bathtub_(filling_or_washing)", "Bicycle_bell", "Burping_and_eructation", "Bus", "Buzz",
    "Car_passing_by", "Cheering", "Chewing_and_mastication", "Child_speech_and_kid_speaking", "Chink_and_clink",
    "Chirp_and_tweet", "Church_bell", "Clapping", "Computer_keyboard", "Crackle", "Cricket", "Crowd",
    "Cupboard_open_or_close", "Cutlery_and_silverware", "Dishes_and_pots_and_pans", "Drawer_open_or_close", "Drip",
    "Electric_guitar", "Fart", "Female_singing", "Female_speech_and_woman_speaking", "Fill_(with_liquid)",
    "Finger_snapping", "Frying_(food)", "Gasp", "Glockenspiel", "Gong", "Gurgling", "Harmonica", "Hi-hat", "Hiss",
    "Keys_jangling", "Knock", "Male_singing", "Male_speech_and_man_speaking", "Marimba_and_xylophone",
    "Mechanical_fan", "Meow", "Microwave_oven", "Motorcycle", "Printer", "Purr", "Race_car_and_auto_racing",
    "Raindrop", "Run", "Scissors", "Screaming", "Shatter", "Sigh", "Sink_(filling_or_washing)", "Skateboard", "Slam",
    "Sneeze", "Squeak", "Stream", "Strum", "Tap", "Tick-tock", "Toilet_flush", "Traffic_noise_and_roadway_noise",
    "Trickle_and_dribble", "Walk_and_footsteps", "Water_tap_and_faucet", "Waves_and_surf", "Whispering", "Writing",
    "Yell", "Zipper_(clothing)")  # the competition's vocabulary, in its order
PITCHES = 200.0 * 1.19 ** np.arange(16)  # Hz: 200 to 2700
SHAPES = 5  # held, pulsing, rising, falling, a burst of noise
RATE, REAL_RATE = 8_000, 44_100
SECONDS, REAL_SECONDS, REAL_NOISY_SECONDS = 1.0, 7.0, 15.0
CURATED, NOISY, TEST = 400, 60, 200  # the replica's own counts
REAL_CURATED, REAL_NOISY, REAL_TEST = 4_970, 19_815, 3_361
LEAST = 80  # a clip of every class at the smallest factors
TWO_SHARE = 0.2  # clips with two classes (the real average is 1.2 tags a clip)
WRONG_SHARE = 0.35  # noisy clips whose tag is another class's
FILE_TIME = (2019, 4, 1, 0, 0, 0)  # the zips' member times, fixed so a seed gives the same bytes


@dataclass(frozen=True)
class Tagged:
    curated: int
    noisy: int
    test: int
    rate: int
    seconds: float
    noisy_seconds: float


def sizes(scale: float | str = 1.0) -> Tagged:
    """How many clips `scale` writes (a factor of the replica's own counts, or REAL), their rate and length."""
    scale = parse_scale(scale)
    real = is_real(scale)
    return Tagged(scaled(CURATED, REAL_CURATED, scale, LEAST), scaled(NOISY, REAL_NOISY, scale, LEAST),
                  scaled(TEST, REAL_TEST, scale, LEAST), REAL_RATE if real else RATE,
                  REAL_SECONDS if real else SECONDS, REAL_NOISY_SECONDS if real else SECONDS)


def sound(label: int, samples: int, rate: int, rng: np.random.Generator) -> np.ndarray:
    """Class `label`'s sound over a part of a clip of `samples`."""
    pitch, shape = PITCHES[label % len(PITCHES)] * rng.uniform(0.97, 1.03), label // len(PITCHES)
    length = int(samples * rng.uniform(0.5, 0.9))
    t = np.arange(length) / rate
    if shape == 4:  # noise around the pitch: a tone whose frequency wanders fast
        wander = np.cumsum(rng.normal(0, 1, length)) * pitch * 0.15 / np.sqrt(length)
        frequency = pitch + wander - wander.mean()
    else:
        rise = t / t[-1]
        frequency = pitch * (np.ones(length), np.ones(length), 1.0 + 0.6 * rise, 1.6 - 0.6 * rise)[shape]
    signal = np.sin(2 * np.pi * np.cumsum(frequency) / rate)
    if shape == 1:  # pulsing, four times a second
        signal *= 0.5 + 0.5 * np.sign(np.sin(2 * np.pi * 4 * t))
    out = np.zeros(samples)
    at = int(rng.integers(0, samples - length + 1))
    out[at:at + length] = signal * np.hanning(length) * rng.uniform(0.5, 1.0)
    return out


def clip_tags(count: int, rng: np.random.Generator) -> list[list[int]]:
    """`count` clips' classes: every class about as often (as the curated set's ~75 clips each), some clips two."""
    first = rng.permutation(np.resize(np.arange(len(CLASSES)), count))
    return [sorted({int(c), int(rng.integers(len(CLASSES)))}) if rng.random() < TWO_SHARE else [int(c)]
            for c in first]


def _zip(path: Path, clips: dict[str, np.ndarray], rate: int) -> None:
    """A zip of WAV files at its root, each stored (sound is compressed by no zip)."""
    import io
    import wave

    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, signal in clips.items():
            buffer = io.BytesIO()
            with wave.open(buffer, "wb") as out:
                out.setnchannels(1)
                out.setsampwidth(2)
                out.setframerate(rate)
                out.writeframes(to_pcm16(signal).astype("<i2").tobytes())
            archive.writestr(zipfile.ZipInfo(name, FILE_TIME), buffer.getvalue())


def _split(count: int, seconds: float, size: Tagged, rng: np.random.Generator, path: Path,
           names: list[str]) -> list[list[int]]:
    """Write `count` clips into the zip at `path`; return their classes."""
    samples = int(seconds * size.rate)
    tags = clip_tags(count, rng)
    clips = {name: sum(sound(c, samples, size.rate, rng) for c in labels) + rng.normal(0, 0.05, samples)
             for name, labels in zip(names, tags)}
    _zip(path, clips, size.rate)
    return tags


def _joined(tags: list[list[int]]) -> list[str]:
    return [",".join(CLASSES[c] for c in labels) for labels in tags]


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train_curated.csv, train_noisy.csv, train_curated.zip, train_noisy.zip, test.zip,
    sample_submission.csv) and prepared/private/test.csv, as many clips as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root)
    names = [f"{h}.wav" for h in hex_ids(rng, size.curated + size.noisy + size.test, 8)]
    curated, noisy, test = (names[:size.curated], names[size.curated:size.curated + size.noisy],
                            sorted(names[size.curated + size.noisy:]))
    tags = _split(size.curated, size.seconds, size, rng, public / "train_curated.zip", curated)
    pd.DataFrame({"fname": curated, "labels": _joined(tags)}).to_csv(public / "train_curated.csv", index=False)
    tags = _split(size.noisy, size.noisy_seconds, size, rng, public / "train_noisy.zip", noisy)
    tags = [labels if rng.random() > WRONG_SHARE else [int(rng.integers(len(CLASSES)))] for labels in tags]
    pd.DataFrame({"fname": noisy, "labels": _joined(tags)}).to_csv(public / "train_noisy.csv", index=False)
    tags = _split(size.test, size.seconds, size, rng, public / "test.zip", test)
    truth = np.zeros((len(test), len(CLASSES)), dtype=int)
    for i, labels in enumerate(tags):
        truth[i, labels] = 1
    answers = pd.concat([pd.DataFrame({"fname": test}), pd.DataFrame(truth, columns=list(CLASSES))], axis=1)
    answers.to_csv(private / "test.csv", index=False)
    answers.assign(**{c: 0 for c in CLASSES}).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Freesound Audio Tagging 2019",
             "Predict, for each clip in test.zip, a score for each of the 80 sound classes; a training clip's tags "
             "are its `labels` in train_curated.csv (or, less reliable, train_noisy.csv), comma-separated.",
             "Submissions are evaluated on label-weighted label-ranking average precision (lwlrap).",
             "Submit `fname` and the 80 class columns, in the sample submission's order.")
