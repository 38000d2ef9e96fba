"""A synthetic multi-modal-gesture-recognition: recorded sequences of Italian gestures, each a `SampleXXXXX.zip`
(its audio as WAV, colour, depth and user-mask videos as MP4, and a Matlab `_data.mat` with the skeleton frames
and each gesture's name and frames), packed in tarballs as Kaggle gives them; MLE-bench's split makes
training4.tar.gz the test (`test.tar.gz`) and keeps training1-3 with their labels in training.csv (`Id` the
zip's last four digits, `Sequence` the gestures' numbers in the order made), the unlabelled validation tarballs
and the extra archives (devel01-40.7z, valid_all_files_combined.7z, sample_code_mmrgc.zip) as they are. The sample,
randomPredictions.csv, gives each test sequence a random order of all 20 gestures; the answers are in
private/test.csv. As in MLE-bench's copy, the test zips' `_data.mat` still hold their labels.

A sequence makes 8 to 20 of the 20 gestures, each once, the commoner gestures more often and earlier on. The
audio says each gesture as a tone of its own pitch; the videos are placeholders. The training sequence nearest all
the others (the medoid) is the honest constant answer: no engine reads these recordings yet.
"""
from __future__ import annotations

import io
import tarfile
import wave
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import py7zr
from scipy.io import savemat

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._sounds import burst, to_pcm16

GESTURES = ("vattene", "vieniqui", "perfetto", "furbo", "cheduepalle", "chevuoi", "daccordo", "seipazzo",
            "combinato", "freganiente", "ok", "cosatifarei", "basta", "prendere", "noncenepiu", "fame", "tantotempo",
            "buonissimo", "messidaccordo", "sonostufo")  # numbered 1 to 20 in this order
PER_TARBALL, VALIDATION = 16, 4  # the replica's own sequences in each training tarball, each validation one
REAL_PER_TARBALL, REAL_VALIDATION = 100, 95  # roughly: about 400 labelled sequences in four tarballs
LEAST = 3
LENGTH = (8, 21)  # gestures a sequence makes
POPULARITY = 0.93 ** np.arange(len(GESTURES))  # how often each gesture is made, commonest first
RATE, FRAMES_PER_GESTURE = 4_000, 4  # the audio's rate; video frames a gesture lasts (at 20 fps)
MP4 = b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom" + b"\x00\x00\x00\x08free"  # a placeholder video's bytes


def sizes(scale: float | str = 1.0) -> tuple[int, int]:
    """(sequences in each of the four training tarballs, in each validation tarball) at `scale`."""
    scale = parse_scale(scale)
    return scaled(PER_TARBALL, REAL_PER_TARBALL, scale, LEAST), scaled(VALIDATION, REAL_VALIDATION, scale, 1)


def _sequence(rng: np.random.Generator) -> list[int]:
    """The gestures' numbers in the order made: common ones more often, and earlier (drawn by weight without
    replacement)."""
    count = int(rng.integers(*LENGTH))
    return [int(g) + 1 for g in rng.choice(len(GESTURES), count, replace=False, p=POPULARITY / POPULARITY.sum())]


def _recording(number: int, gestures: list[int], rng: np.random.Generator) -> bytes:
    """SampleXXXXX.zip: audio, three placeholder videos and the Matlab data of one recorded sequence."""
    name = f"Sample{number:05d}"
    audio = np.concatenate([burst(RATE // 10, RATE, 200.0 + 60 * g, 200.0 + 60 * g) for g in gestures]
                           or [np.zeros(RATE // 10)])
    wav = io.BytesIO()
    with wave.open(wav, "wb") as out:
        out.setnchannels(1), out.setsampwidth(2), out.setframerate(RATE)
        out.writeframes(to_pcm16(audio + rng.normal(0, 0.01, len(audio))).astype("<i2").tobytes())
    frames = FRAMES_PER_GESTURE * max(1, len(gestures))
    labels = np.array([(GESTURES[g - 1], 1 + k * FRAMES_PER_GESTURE, (k + 1) * FRAMES_PER_GESTURE)
                       for k, g in enumerate(gestures)],
                      dtype=[("Name", object), ("Begin", float), ("End", float)])
    skeleton = rng.normal(0, 1, (frames, 20, 3)).astype(np.float32)
    video = {"NumFrames": float(frames), "FrameRate": 20.0, "MaxDepth": 3000.0,
             "Frames": np.array([{"Skeleton": {"WorldPosition": s}} for s in skeleton], dtype=object),
             "Labels": labels}
    mat = io.BytesIO()
    savemat(mat, {"Video": video})
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{name}_audio.wav", wav.getvalue())
        for kind in ("color", "depth", "user"):
            archive.writestr(f"{name}_{kind}.mp4", MP4)
        archive.writestr(f"{name}_data.mat", mat.getvalue())
    return packed.getvalue()


def _tarball(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (training.csv, test.csv, randomPredictions.csv, the tarballs, the extra archives,
    description.md) and prepared/private/test.csv."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    per_tarball, validation = sizes(scale)
    labelled = {}
    for part in range(4):  # training1-4; the fourth is the test
        members = {}
        for k in range(per_tarball):
            number = 1 + part * per_tarball + k
            labelled[number] = _sequence(rng)
            members[f"Sample{number:05d}.zip"] = _recording(number, labelled[number], rng)
        _tarball(public / ("test.tar.gz" if part == 3 else f"training{part + 1}.tar.gz"), members)
    first_validation = 4 * per_tarball + 1
    for part in range(3):
        numbers = range(first_validation + part * validation, first_validation + (part + 1) * validation)
        _tarball(public / f"validation{part + 1}.tar.gz",
                 {f"Sample{n:05d}.zip": _recording(n, _sequence(rng), rng) for n in numbers})
    table = pd.DataFrame({"Id": [f"{n:04d}" for n in labelled],
                          "Sequence": [" ".join(map(str, s)) for s in labelled.values()]})
    test_ids = [f"{n:04d}" for n in range(1 + 3 * per_tarball, 1 + 4 * per_tarball)]
    table[~table["Id"].isin(test_ids)].to_csv(public / "training.csv", index=False)
    table[table["Id"].isin(test_ids)].to_csv(private / "test.csv", index=False)
    pd.DataFrame({"Id": test_ids}).to_csv(public / "test.csv", index=False)
    shuffled = [" ".join(str(g + 1) for g in rng.permutation(len(GESTURES))) for _ in test_ids]
    pd.DataFrame({"Id": test_ids, "Sequence": shuffled}).to_csv(public / "randomPredictions.csv", index=False)
    with py7zr.SevenZipFile(public / "devel01-40.7z", "w") as archive:
        archive.writestr("devel01/devel01_1.avi placeholder\n", "devel01/README.txt")
    with py7zr.SevenZipFile(public / "valid_all_files_combined.7z", "w") as archive:
        archive.writestr("validation samples, all files combined\n", "README.txt")
    with zipfile.ZipFile(public / "sample_code_mmrgc.zip", "w") as archive:
        archive.writestr("sample_code_mmrgc/main.m", "% Matlab sample code placeholder\n")
    describe(public, "Multi-modal Gesture Recognition",
             "Predict, for each test sequence (test.tar.gz's SampleXXXXX.zip, Id its last four digits), the "
             "gestures made, by number (1-20), in order, space-separated.",
             "Submissions are scored on the sum of the Levenshtein distances between each predicted and true "
             "sequence over the total number of true gestures.",
             "Submit `Id,Sequence` for every Id of test.csv.")
