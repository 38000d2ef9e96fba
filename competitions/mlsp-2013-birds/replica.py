"""A synthetic mlsp-2013-birds: short 16 kHz recordings where each of 19 species sings at its own pitch.

The layout is the re-indexed original: essential_data/ (folds, file names, labels with '?' for test, species list,
src_wavs/) and supplemental_data/ (spectrogram BMPs, segment features, rectangles, histogram_of_segments.txt).
Species are present with very different frequencies (about 50% down to 5%), so a per-species training frequency
already scores a pooled ROC AUC of about 0.74. Calls are often under the noise, and up to two down-sweeps that are no
species share each recording. Each species owns 2 of the 100 segment clusters, but the segmenter misses 40% of the
species present and adds clutter, so histogram_of_segments.txt alone is a weak model (LightGBM about 0.85); a model
of the audio's pitch reaches about 0.95; the all-zero sample submission scores 0.5.

`sizes(scale)` says how many recordings a scale writes and how long: half a second at a factor of the replica's own
count; at REAL the real 258 and 64, of 10 seconds. Calls, distractors and the segmenter's clutter come at the
same rate a second however long a recording is.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._sounds import Clips, burst, spectrogram, write_wav

SPECIES = (("BRCR", "Brown Creeper"), ("PAWR", "Pacific Wren"), ("PSFL", "Pacific-slope Flycatcher"),
           ("RBNU", "Red-breasted Nuthatch"), ("DEJU", "Dark-eyed Junco"), ("OSFL", "Olive-sided Flycatcher"),
           ("HETH", "Hermit Thrush"), ("CBCH", "Chestnut-backed Chickadee"), ("VATH", "Varied Thrush"),
           ("HEWA", "Hermit Warbler"), ("SWTH", "Swainson's Thrush"), ("HAFL", "Hammond's Flycatcher"),
           ("WETA", "Western Tanager"), ("BHGB", "Black-headed Grosbeak"), ("GCKI", "Golden Crowned Kinglet"),
           ("WAVI", "Warbling Vireo"), ("MGWA", "MacGillivray's Warbler"), ("STJA", "Stellar's Jay"),
           ("CONI", "Common Nighthawk"))
N_SPECIES = len(SPECIES)
SPECIES_HZ = np.linspace(1200, 6600, N_SPECIES)  # each species' call starts at its own pitch
RECORDINGS, TEST_FRACTION = 160, 0.2  # the real split keeps 20% of the renumbered recordings as test
REAL_RECORDINGS = 322  # the real competition's fold-0 recordings: 258 train and 64 test
LEAST = 20  # recordings at the smallest factors: 4 of them test, 76 graded (recording, species) pairs
NOISE_LEVEL = (0.3, 0.6)  # background noise's standard deviation, a recording's own
CALL_LEVEL = (0.2, 0.6)  # a call's amplitude: often under the noise, as distant birds are
DISTRACTORS = 2  # up to this many down-sweeps in a recording that are no species (rain, insects, other sounds)
RATE, SAMPLES = 16000, 8000  # 16 kHz mono, half a second keeps the replica small
REAL_SAMPLES = 160_000  # the real recordings are 10 seconds
SPAN = RATE  # a round of calls, distractors and clutter a second (the replica's half second has one)
FRAME, BINS = 256, 64  # spectrogram: 31 frames (625 at the real 10 s) x 64 rows of 125 Hz
CLUSTERS, PER_SPECIES, FEATURES = 100, 2, 38  # k-means codebook size, clusters each species owns, segment dims
DETECT = 0.6  # chance the segmenter finds a present species at all (faint calls in noise are often missed)
CLUTTER = 6  # up to this many segments of noise a recording adds, in clusters of any species
SILENT = 0.1  # recordings with no bird at all (a bare rec_id line)
EXAMPLES = 4  # training recordings with a hand-drawn segmentation example
SEGMENT_HEADER = "rec_id,[histogram of segment features]"  # the one header line the re-indexing writes to all three


def sizes(scale: float | str = 1.0) -> Clips:
    """How many recordings `scale` writes (a factor of the replica's own count, or REAL) and their length."""
    scale = parse_scale(scale)
    recordings = scaled(RECORDINGS, REAL_RECORDINGS, scale, LEAST)
    test = round(recordings * TEST_FRACTION)
    return Clips(recordings - test, test, RATE, REAL_SAMPLES if is_real(scale) else SAMPLES)


def _rounds(samples: int) -> int:
    """Rounds of calls, distractors and clutter in a recording of `samples`: one a SPAN, begun or whole."""
    return -(-samples // SPAN)


def _recording(labels: np.ndarray, samples: int, rng: np.random.Generator) -> tuple[np.ndarray, list]:
    """The signal and its calls as (species, start sample, length); background noise throughout."""
    signal, calls = rng.normal(0, rng.uniform(*NOISE_LEVEL), samples), []
    for species in np.flatnonzero(labels):
        for _ in range(int(rng.integers(1, 3)) * _rounds(samples)):
            length = int(rng.integers(1600, 3200))
            at = int(rng.integers(0, samples - length))
            hz = SPECIES_HZ[species]
            signal[at:at + length] += rng.uniform(*CALL_LEVEL) * burst(length, RATE, hz, hz + 300)
            calls.append((int(species), at, length))
    for _ in range(int(rng.integers(0, DISTRACTORS + 1)) * _rounds(samples)):  # not a bird: a down-sweep
        length, hz = int(rng.integers(1600, 3200)), rng.uniform(1200, 6900)
        at = int(rng.integers(0, samples - length))
        signal[at:at + length] += rng.uniform(*CALL_LEVEL) * burst(length, RATE, hz, hz - 300)
    return signal, calls


def _segments(calls, samples: int, centroids: np.ndarray, rng: np.random.Generator) -> list:
    """The baseline segmenter's output: (cluster, 38-d features, (min_x, max_x, min_y, max_y)) per segment."""
    segments, found = [], {s for s in {c[0] for c in calls} if rng.random() < DETECT}
    for species, at, length in calls:
        if species not in found:
            continue
        cluster = species * PER_SPECIES + int(rng.integers(0, PER_SPECIES))
        row = BINS - 1 - int(SPECIES_HZ[species] / (RATE / 2 / BINS))
        box = (at // FRAME, (at + length) // FRAME, max(row - 3, 0), min(row + 1, BINS - 1))
        segments.append((cluster, centroids[cluster] + rng.normal(0, 0.05, FEATURES), box))
    frames = samples // FRAME  # the spectrogram's width
    for _ in range(int(rng.integers(0, CLUTTER + 1)) * _rounds(samples)):
        cluster, x, y = int(rng.integers(0, CLUSTERS)), int(rng.integers(0, frames - 3)), int(rng.integers(0, BINS - 6))
        segments.append((cluster, centroids[cluster] + rng.normal(0, 0.05, FEATURES), (x, x + 3, y, y + 5)))
    return segments


def _histogram(segments) -> np.ndarray:
    counts = np.bincount([s[0] for s in segments], minlength=CLUSTERS).astype(float)
    return counts / counts.sum() if counts.sum() else counts


def _images(name: str, signal: np.ndarray, segments, supplemental: Path) -> np.ndarray:
    """Write the spectrogram, filtered spectrogram and segmentation outline BMPs; return the filtered pixels."""
    magnitude = spectrogram(signal, FRAME, BINS)
    plain = np.sqrt(magnitude / magnitude.max()) * 255
    filtered = np.clip(magnitude - np.median(magnitude, axis=1, keepdims=True), 0, None)
    filtered = np.sqrt(filtered / (filtered.max() or 1.0)) * 255
    Image.fromarray(plain.astype(np.uint8)).save(supplemental / "spectrograms" / f"{name}.bmp")
    Image.fromarray(filtered.astype(np.uint8)).save(supplemental / "filtered_spectrograms" / f"{name}.bmp")
    outlined = Image.fromarray(filtered.astype(np.uint8)).convert("RGB")
    draw = ImageDraw.Draw(outlined)
    for _, _, (x0, x1, y0, y1) in segments:
        draw.rectangle((x0, y0, x1, y1), outline=(255, 255, 0))
    outlined.save(supplemental / "supervised_segmentation" / f"{name}.bmp")
    return filtered.astype(np.uint8)


def _example(name: str, pixels: np.ndarray, segments, supplemental: Path) -> None:
    """A coarse hand segmentation: bird sound painted pure red on the spectrogram."""
    image = Image.fromarray(pixels).convert("RGB")
    draw = ImageDraw.Draw(image)
    for _, _, (x0, x1, y0, y1) in segments:
        draw.rectangle((x0, y0, x1, y1), fill=(255, 0, 0))
    image.save(supplemental / "segmentation_examples" / f"{name}.bmp")


def _overviews(crops: list[np.ndarray], centroids: np.ndarray, supplemental: Path) -> None:
    """segment_mosaic.bmp tiles segment crops; segment_clusters.bmp shows one tile per codebook cluster."""
    tiles = [np.asarray(Image.fromarray(c).resize((16, 16))) for c in crops[:64]] or [np.zeros((16, 16), np.uint8)]
    tiles += [np.zeros((16, 16), np.uint8)] * (-len(tiles) % 8)
    mosaic = np.vstack([np.hstack(tiles[i:i + 8]) for i in range(0, len(tiles), 8)])
    Image.fromarray(mosaic).save(supplemental / "segment_mosaic.bmp")
    shade = (centroids[:, :3] - centroids[:, :3].min()) / np.ptp(centroids[:, :3]) * 255
    grid = np.repeat(np.repeat(shade.reshape(10, 10, 3), 8, axis=0), 8, axis=1)
    Image.fromarray(grid.astype(np.uint8), "RGB").save(supplemental / "segment_clusters.bmp")


def _filenames(count: int, rng: np.random.Generator) -> list[str]:
    """Original-style names: site_date_time_index, e.g. PC1_20090606_050012_0010."""
    days = pd.Timestamp("2009-05-20") + pd.to_timedelta(rng.integers(0, 400, count), unit="D")
    return [f"PC{rng.integers(1, 14)}_{day:%Y%m%d}_{rng.integers(4, 10):02d}{rng.integers(0, 60):02d}00_{i:04d}"
            for i, day in enumerate(days)]


def _write_lines(path: Path, header: str, rows: list[str]) -> None:
    path.write_text("\n".join([header, *rows]) + "\n")


def _labels_txt(labels: np.ndarray, test: np.ndarray) -> list[str]:
    rows = []
    for rec_id, row in enumerate(labels):
        present = ",".join(str(s) for s in np.flatnonzero(row))
        rows.append(f"{rec_id},?" if test[rec_id] else f"{rec_id},{present}" if present else str(rec_id))
    return rows


def _essential(public: Path, names: list[str], labels: np.ndarray, test: np.ndarray) -> None:
    essential = public / "essential_data"
    pd.DataFrame({"rec_id": range(len(names)), "fold": test.astype(int)}).to_csv(
        essential / "CVfolds_2.txt", index=False)
    pd.DataFrame({"rec_id": range(len(names)), "filename": names}).to_csv(
        essential / "rec_id2filename.txt", index=False)
    _write_lines(essential / "rec_labels_test_hidden.txt", "rec_id,[labels]", _labels_txt(labels, test))
    _write_lines(essential / "species_list.txt", "class_id,code,species",
                 [f"{i},{code},{name}" for i, (code, name) in enumerate(SPECIES)])


def _submissions(public: Path, private: Path, labels: np.ndarray, test: np.ndarray) -> None:
    ids = [rec_id * 100 + s for rec_id in np.flatnonzero(test) for s in range(N_SPECIES)]
    truth = labels[test].reshape(-1).astype(int)
    pd.DataFrame({"Id": ids, "Probability": 0}).to_csv(public / "sample_submission.csv", index=False)
    pd.DataFrame({"Id": ids, "Probability": truth}).to_csv(private / "answers.csv", index=False)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (essential_data/, supplemental_data/, sample_submission.csv) and private/answers.csv,
    as many recordings as `sizes(scale)` says."""
    size = sizes(scale)
    recordings = size.train + size.test
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    supplemental = public / "supplemental_data"
    folders = ("spectrograms", "filtered_spectrograms", "supervised_segmentation", "segmentation_examples")
    for folder in (public / "essential_data" / "src_wavs", private, *(supplemental / f for f in folders)):
        folder.mkdir(parents=True, exist_ok=True)
    prevalence = rng.permutation(np.geomspace(0.5, 0.05, N_SPECIES))
    labels = (rng.random((recordings, N_SPECIES)) < prevalence) & (rng.random((recordings, 1)) >= SILENT)
    test = np.zeros(recordings, bool)
    test[rng.choice(recordings, size.test, replace=False)] = True
    names, centroids = _filenames(recordings, rng), rng.normal(0, 1, (CLUSTERS, FEATURES))
    histograms, features, rectangles, crops, examples = [], [], [], [], 0
    for rec_id, name in enumerate(names):
        signal, calls = _recording(labels[rec_id], size.samples, rng)
        write_wav(public / "essential_data" / "src_wavs" / f"{name}.wav", signal, RATE)
        segments = _segments(calls, size.samples, centroids, rng)
        pixels = _images(name, signal, segments, supplemental)
        if not test[rec_id] and segments and examples < EXAMPLES:
            _example(name, pixels, segments, supplemental)
            examples += 1
        histograms.append(f"{rec_id}," + ",".join(f"{v:.6f}" for v in _histogram(segments)))
        for k, (_, vector, (x0, x1, y0, y1)) in enumerate(segments):
            features.append(f"{rec_id},{k}," + ",".join(f"{v:.6f}" for v in vector))
            rectangles.append(f"{rec_id},{k},{x0},{x1},{y0},{y1},")
            crops.append(pixels[y0:y1 + 1, x0:x1 + 1])
    _overviews(crops, centroids, supplemental)
    for file, rows in (("histogram_of_segments", histograms), ("segment_features", features),
                       ("segment_rectangles", rectangles)):
        _write_lines(supplemental / f"{file}.txt", SEGMENT_HEADER, rows)
    _essential(public, names, labels, test)
    _submissions(public, private, labels, test)
    describe(public, "MLSP 2013 Bird Classification Challenge",
             "Predict, for every test recording (fold 1, labels shown as `?`), the probability that each of the "
             "19 species is present.",
             "Submissions are judged on area under the ROC curve, pooled over all (recording, species) pairs.",
             "Submit `Id,Probability` with Id = rec_id * 100 + species.")
