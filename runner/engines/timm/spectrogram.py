"""The CNN engine on sound: every clip's log-mel spectrogram (decoded once, `runner.data.sounds`) made a picture the
image machinery trains on as it trains on photos: the same ladder, memory plan, batch probe, pretrained weights
when cached, GPU slots, fold deadlines and OOM back-off. Only the picture and the augmentation are the sound's
own: three channels (the level under the clip's peak, the level over each band's own floor, and its change from
frame to frame), a crop in time, no flip, SpecAugment's masks.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from runner.engines.timm.engine import Timm
from runner.engines.timm.settings import ImageSettings
from runner.planning.portfolio import Member, PlanContext

RANGE_DB = 80.0  # the level channel: this many dB under the clip's peak map to black
FLOOR_RANGE_DB = 30.0  # the over-the-floor channel: a band this far above its median is white
DELTA_RANGE_DB = 20.0  # the change channel: +-this many dB from one frame to the next span the channel


def picture(spectrum: np.ndarray, side: int) -> np.ndarray:
    """A (mels x frames) spectrogram in dB as a side x side x 3 uint8 picture, high pitch at the top."""
    from PIL import Image

    level = np.clip((spectrum - spectrum.max() + RANGE_DB) / RANGE_DB, 0, 1)
    floor = np.clip((spectrum - np.median(spectrum, axis=1, keepdims=True)) / FLOOR_RANGE_DB, 0, 1)
    delta = np.diff(spectrum, axis=1, prepend=spectrum[:, :1])
    change = np.clip(0.5 + delta / (2 * DELTA_RANGE_DB), 0, 1)
    channels = np.stack([level, floor, change], axis=2)[::-1]
    image = Image.fromarray(np.round(channels * 255).astype(np.uint8))
    return np.asarray(image.resize((side, side), Image.BILINEAR), dtype=np.uint8)


def picture_cache(spectra: np.ndarray, side: int, out: Path) -> None:
    """Every spectrogram as a picture in `out` (.npy, clips x side x side x 3), the image cache's layout."""
    from numpy.lib.format import open_memmap

    array = open_memmap(out, mode="w+", dtype=np.uint8, shape=(len(spectra), side, side, 3))
    for i in range(len(spectra)):
        array[i] = picture(np.asarray(spectra[i], dtype=np.float32), side)
    array.flush()


class Spectrogram(Timm):
    name = "spectrogram"
    inputs = "audio"

    def plan(self, context: PlanContext) -> list[Member]:
        return [self._as_sound(super().plan(context)[0], context)]

    def replan(self, context: PlanContext, member: Member, step_seconds: float) -> Member | None:
        again = super().replan(context, member, step_seconds)
        return again and self._as_sound(again, context)

    def _as_sound(self, member: Member, context: PlanContext) -> Member:
        side = context.data.image_side
        why = (f"spectrogram: every clip's {side}-band log-mel spectrogram as a {side} px picture (level, level over "
               "each band's floor, change), cropped in time, masked (SpecAugment), never flipped")
        settings = member.settings.model_copy(update=dict(augment="spectrogram",
                                                          reasons=(why, *member.settings.reasons)))
        return member.model_copy(update=dict(name=self.name, engine=self.name, settings=settings,
                                             reasons=(why, *member.reasons)))

    def prepare_key(self, settings: ImageSettings) -> str:
        return "spectrogram-" + super().prepare_key(settings)

    def prepare(self, settings: ImageSettings, dataset, work: Path, threads: int):
        from runner.engines.timm.images import cache_side
        from runner.data.sounds import spectrograms

        train, test = dataset.views["audio"]
        spectra, ok = spectrograms(list(train) + list(test), work, threads)
        side = cache_side(settings.image_size, settings.source_side)
        out = work / f"spectrogram_pictures_{side}.npy"
        picture_cache(spectra, side, out)
        n = len(train)
        untrainable = ~ok[:n] if dataset.untrainable is None else dataset.untrainable | ~ok[:n]
        views = {**dataset.views, "audio": (list(range(n)), list(range(n, len(ok))))}
        return dataclasses.replace(dataset, views=views, image_cache=str(out), untrainable=untrainable)
