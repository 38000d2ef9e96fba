"""Sound as a table: every clip's log-mel spectrogram (decoded once, `runner.data.sounds`) summarised into statistics a
CPU model can fit: per mel band its level, spread, percentiles and how fast it changes; the loudest band's track
over time (its slope tells an up-sweep from a down-sweep); and a coarse grid of the spectrogram itself. Two heads
share the table: standardised logistic regression (classes) or ridge (values), and LightGBM. The cheap audio
members that train on CPU slots beside the spectrogram CNN, and the textbook baseline of the field on their own.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

import numpy as np

from runner.engines.oneshot import BOOSTED_ROUNDS, MAX_BOOSTED_SECONDS, STARTUP_SECONDS, HeadsOnATable, boosted_seconds
from runner.planning.portfolio import Member, PlanContext, Settings

GRID = (16, 8)  # mel bands x time steps of the coarse grid: where in time and pitch the energy is, 128 columns
LOUD_SHARE = 0.25  # the loudest quarter of a clip's frames carries its calls; the rest is background
PERCENTILES = (10, 50, 90)
BAND_STATS = 4 + len(PERCENTILES)  # mean, std, max, mean |delta|, and the percentiles
MELS = 64  # planned as runner.data.sounds' usual band count (fewer at low rates only make it cheaper)
COLUMNS = MELS * BAND_STATS + GRID[0] * GRID[1] + 6
CLIPS_PER_CORE_SECOND = 150.0  # a clip's decode, resampling and FFT where the data has no measure: 0.3-8 ms here
CELLS_PER_SECOND = 8e6  # rows x columns x classes a logistic regression fits per second on one core here
PRIOR_GAIN = 0.02  # the whole model of the clips when no CNN runs; beside one, errors of another kind
BOOSTED_PRIOR_GAIN = 0.02  # trees find the few bands that matter where the linear head weighs them all


class SoundSettings(Settings):
    head: Literal["linear", "boosted"] = "linear"
    C: float = 0.1  # strong regularisation: neighbouring bands say much the same


def _slope(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per clip, the weighted least-squares slope of `values` (clips x frames) over time in [0, 1]."""
    t = np.linspace(0.0, 1.0, values.shape[1])[None, :]
    w = weights / np.maximum(weights.sum(axis=1, keepdims=True), 1e-9)
    t_mean, v_mean = (w * t).sum(axis=1, keepdims=True), (w * values).sum(axis=1, keepdims=True)
    cov = (w * (t - t_mean) * (values - v_mean)).sum(axis=1)
    return cov / np.maximum((w * (t - t_mean) ** 2).sum(axis=1), 1e-9)


def _track(spectra: np.ndarray) -> np.ndarray:
    """Six columns from the loudest band frame by frame, over the loudest LOUD_SHARE of frames: its slope in
    time, its mean and spread, the share of its steps that go up and down, and the loud frames' level."""
    level = spectra.max(axis=1)  # clips x frames
    cut = np.quantile(level, 1 - LOUD_SHARE, axis=1, keepdims=True)
    loud = (level >= cut).astype(np.float32)
    band = spectra.argmax(axis=1).astype(np.float32) / spectra.shape[1]
    steps = np.diff(band, axis=1) * loud[:, 1:] * loud[:, :-1]
    pairs = np.maximum((loud[:, 1:] * loud[:, :-1]).sum(axis=1), 1.0)
    mean = (band * loud).sum(axis=1) / loud.sum(axis=1)
    spread = np.sqrt((((band - mean[:, None]) ** 2) * loud).sum(axis=1) / loud.sum(axis=1))
    return np.stack([_slope(band, loud), mean, spread, (steps > 0).sum(axis=1) / pairs,
                     (steps < 0).sum(axis=1) / pairs, (level * loud).sum(axis=1) / loud.sum(axis=1)], axis=1)


def _grid(spectra: np.ndarray) -> np.ndarray:
    """The spectrogram averaged into GRID cells (edges by np.array_split, so any size pools)."""
    rows = [part.mean(axis=1) for part in np.array_split(spectra, min(GRID[0], spectra.shape[1]), axis=1)]
    banded = np.stack(rows, axis=1)  # clips x bands x frames
    cells = [part.mean(axis=2) for part in np.array_split(banded, min(GRID[1], banded.shape[2]), axis=2)]
    return np.stack(cells, axis=2).reshape(len(spectra), -1)


def band_table(spectra: np.ndarray, chunk: int = 512) -> np.ndarray:
    """(clips x columns) float32 statistics of log-mel spectrograms (clips x mels x frames, decibels). Each
    clip's level is taken relative to its median, so a louder recording is not another sound."""
    parts = []
    for start in range(0, len(spectra), chunk):
        block = np.asarray(spectra[start:start + chunk], dtype=np.float32)
        block = block - np.median(block, axis=(1, 2), keepdims=True)
        stats = [block.mean(axis=2), block.std(axis=2), block.max(axis=2),
                 np.abs(np.diff(block, axis=2)).mean(axis=2) if block.shape[2] > 1 else np.zeros(block.shape[:2]),
                 *np.percentile(block, PERCENTILES, axis=2)]
        parts.append(np.concatenate([*stats, _grid(block), _track(block)], axis=1).astype(np.float32))
    return np.concatenate(parts) if parts else np.zeros((0, COLUMNS), dtype=np.float32)


class Sound(HeadsOnATable):
    name = "sound"
    inputs = "audio"
    preload = ("sklearn.linear_model", "sklearn.preprocessing", "lightgbm", "runner.engines.sound")
    Settings = SoundSettings
    search_space = dict(C=(0.01, 0.03, 0.1, 0.3, 1.0))
    prior_gain = PRIOR_GAIN

    def plan(self, context: PlanContext) -> list[Member]:
        data = context.data
        rows = data.n_train * (context.folds - 1) / context.folds
        outputs = max(1, data.classes if context.spec.is_classification else data.targets)
        clips = data.n_train + data.n_test
        prepare = STARTUP_SECONDS + clips * data.decode_each(CLIPS_PER_CORE_SECOND) / context.cores
        linear = rows * COLUMNS * outputs / CELLS_PER_SECOND
        heads = [("", SoundSettings(), linear, self.prior_gain, self.describe(context))]
        trees = boosted_seconds(rows, COLUMNS, data.classes)
        if context.spec.is_classification and trees <= MAX_BOOSTED_SECONDS:  # one LightGBM fits one target
            heads.append(("-gbm", SoundSettings(head="boosted"), trees, BOOSTED_PRIOR_GAIN,
                          f"LightGBM ({BOOSTED_ROUNDS} rounds) on the same band statistics"))
        return self.head_members(context, heads, prepare)

    def describe(self, context: PlanContext) -> str:
        head = "logistic regression" if context.spec.is_classification else "ridge"
        return (f"{head} on per-band log-mel statistics, the loudest band's track and a coarse spectrogram grid, "
                "standardised; every clip decoded once")

    def prepare_key(self, settings: SoundSettings) -> str:
        return "sound-bands"

    def prepare(self, settings: SoundSettings, dataset, work: Path, threads: int):
        from runner.data.sounds import spectrograms

        train, test = dataset.views["audio"]
        spectra, ok = spectrograms(list(train) + list(test), work, threads)
        table = band_table(spectra)
        n = len(train)
        untrainable = ~ok[:n] if dataset.untrainable is None else dataset.untrainable | ~ok[:n]
        warnings = list(dataset.warnings)
        if not ok.all():
            warnings.append(f"{int((~ok).sum())} clip(s) could not be decoded: silence in their place")
        views = {**dataset.views, "audio": (table[:n], table[n:])}
        return dataclasses.replace(dataset, views=views, untrainable=untrainable, warnings=warnings)
