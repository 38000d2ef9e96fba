"""Augmentation where the model trains: RandomResizedCrop and a flip on uint8 squares from the image cache, then the
model's normalisation; the loader ships pixels and does no per-image work. Spectrograms (time across, pitch down)
take what suits sound instead: a crop in time only, no flip (a flipped up-sweep is a down-sweep, another sound),
and SpecAugment's masks of a few frames and a few bands."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

CROP_SCALE = (0.35, 1.0)  # RandomResizedCrop's area share: a wider floor than ImageNet's 0.08 for small data
CROP_RATIO = (3 / 4, 4 / 3)  # and its aspect ratios
TIME_CROP = (0.7, 1.0)  # spectrograms: the share of the clip's frames a crop keeps (a time shift), all its bands
MASK_SHARE = 0.15  # SpecAugment: each mask covers up to this share of the frames, or of the bands


class DeviceAugment:
    """RandomResizedCrop and a horizontal flip, then the model's normalisation, done where the model trains. On a
    GPU the whole batch is cropped in one `grid_sample` (one affine map per image, the flip a negated x scale); on
    a CPU each crop is resized on its own in uint8 (antialiased, torchvision's fast path), several times cheaper
    there than a float `grid_sample`. The loader only ships uint8 squares, four times smaller than float, and its
    workers do no per-image work (timm's prefetcher idea, taken as far as the crop)."""

    def __init__(self, size: int, mean, std, interpolation: str, device: torch.device, memory_format,
                 batched: bool | None = None, sound: bool = False):
        self.size, self.device, self.memory_format, self.sound = size, device, memory_format, sound
        self.batched = device.type != "cpu" if batched is None else batched
        self.mode = "bicubic" if interpolation == "bicubic" else "bilinear"
        self.mean = torch.tensor(mean, device=device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor(std, device=device).view(1, 3, 1, 1) * 255

    def crop_boxes(self, n: int) -> torch.Tensor:
        """Per image (width, height, centre x, centre y) as shares of the square, drawn as torchvision's
        RandomResizedCrop draws them (area share and log aspect ratio uniform), clipped to the square; for a
        spectrogram a stretch of its frames with every band."""
        if self.sound:
            width, height = torch.empty(n).uniform_(*TIME_CROP), torch.ones(n)
            return torch.stack([width, height, (1 - width) * torch.rand(n) + width / 2, height / 2], dim=1)
        area = torch.empty(n).uniform_(*CROP_SCALE)
        ratio = torch.exp(torch.empty(n).uniform_(*np.log(CROP_RATIO)))
        width, height = (area * ratio).sqrt().clamp(max=1.0), (area / ratio).sqrt().clamp(max=1.0)
        cx = (1 - width) * torch.rand(n) + width / 2
        cy = (1 - height) * torch.rand(n) + height / 2
        return torch.stack([width, height, cx, cy], dim=1)

    def train(self, images: torch.Tensor) -> torch.Tensor:
        # bilinear whatever the model's own: the crop's interpolation is part of the augmentation (timm's training
        # transform draws it at random), and bicubic cost a CPU step 5% here
        boxes, flips = self.crop_boxes(len(images)), torch.rand(len(images)) < (0.0 if self.sound else 0.5)
        crop = self._crop_batch if self.batched else self._crop_each
        out = self._normalise(crop(images, boxes, flips))
        return self._mask(out) if self.sound else out

    def _mask(self, batch: torch.Tensor) -> torch.Tensor:
        """SpecAugment on the normalised batch: per spectrogram one run of frames and one of bands set to 0 (the
        normalised mean), each up to MASK_SHARE of its axis."""
        n, size = len(batch), self.size
        spans = (torch.rand(n, 2) * MASK_SHARE * size).long()
        starts = (torch.rand(n, 2) * (size - spans)).long()
        axis = torch.arange(size)
        frames = (axis >= starts[:, :1]) & (axis < (starts + spans)[:, :1])  # n x size, across (time)
        bands = (axis >= starts[:, 1:]) & (axis < (starts + spans)[:, 1:])  # n x size, down (pitch)
        keep = ~(frames[:, None, :] | bands[:, :, None])
        return batch.mul_(keep[:, None].to(batch.device, batch.dtype))

    def _crop_batch(self, images: torch.Tensor, boxes: torch.Tensor, flips: torch.Tensor) -> torch.Tensor:
        images = images.to(self.device, non_blocking=True).float()
        width, height, cx, cy = boxes.T
        theta = torch.zeros(len(images), 2, 3)  # output [-1, 1] -> input [-1, 1] coordinates
        theta[:, 0, 0], theta[:, 0, 2] = torch.where(flips, -width, width), 2 * cx - 1
        theta[:, 1, 1], theta[:, 1, 2] = height, 2 * cy - 1
        grid = F.affine_grid(theta.to(self.device), [len(images), 3, self.size, self.size], align_corners=False)
        return F.grid_sample(images, grid, mode="bilinear", padding_mode="border", align_corners=False)

    def _crop_each(self, images: torch.Tensor, boxes: torch.Tensor, flips: torch.Tensor) -> torch.Tensor:
        rows, cols = images.shape[-2:]
        out = torch.empty(len(images), 3, self.size, self.size, dtype=images.dtype,
                          memory_format=torch.channels_last)
        for i, (width, height, cx, cy) in enumerate(boxes.tolist()):
            w, h = max(1, round(width * cols)), max(1, round(height * rows))
            x0, y0 = min(cols - w, max(0, round(cx * cols - w / 2))), min(rows - h, max(0, round(cy * rows - h / 2)))
            resized = F.interpolate(images[i:i + 1, :, y0:y0 + h, x0:x0 + w], size=(self.size, self.size),
                                    mode="bilinear", antialias=True, align_corners=False)[0]
            out[i] = resized.flip(-1) if flips[i] else resized
        return out.to(self.device).float()

    def eval(self, images: torch.Tensor) -> torch.Tensor:
        images = images.to(self.device, non_blocking=True).float()
        if images.shape[-1] != self.size:
            images = F.interpolate(images, size=(self.size, self.size), mode=self.mode, antialias=True,
                                   align_corners=False)
        return self._normalise(images)

    def _normalise(self, images: torch.Tensor) -> torch.Tensor:
        """In place on the float batch just made: no temporaries the size of the batch."""
        return images.sub_(self.mean).div_(self.std).contiguous(memory_format=self.memory_format)
