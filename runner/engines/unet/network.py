"""The denoising network: a small U-Net that predicts a page's clean intensities as the noisy ones plus a learned
correction (residual learning, as DnCNN does), and the tiled pass that runs it over a whole page of any size."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from runner.engines.unet.shape import LEVELS, MULTIPLE

TILE = 256  # inference tiles' side (before their margins): bounds a page's memory however large it is
# context each tile sees beyond what it writes: the net's receptive field reaches 20 px from a pixel (two 3x3
# convolutions at each of three scales, down and up); a multiple of MULTIPLE keeps the poolings on the page's grid,
# so tiles give exactly what the whole page would
MARGIN = 24


def _block(inputs: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(inputs, outputs, 3, padding=1, bias=False), nn.BatchNorm2d(outputs),
                         nn.ReLU(inplace=True), nn.Conv2d(outputs, outputs, 3, padding=1, bias=False),
                         nn.BatchNorm2d(outputs), nn.ReLU(inplace=True))


class UNet(nn.Module):
    """`width` channels at full resolution, doubling at each level down; one gray channel in and out."""

    def __init__(self, width: int):
        super().__init__()
        widths = [width * 2 ** k for k in range(LEVELS)]
        self.down = nn.ModuleList([_block(1, widths[0])] + [_block(a, b) for a, b in zip(widths, widths[1:])])
        self.up = nn.ModuleList([nn.ConvTranspose2d(b, a, 2, stride=2) for a, b in zip(widths, widths[1:])])
        self.merge = nn.ModuleList([_block(2 * a, a) for a in widths[:-1]])
        self.head = nn.Conv2d(widths[0], 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips, h = [], x - 0.5
        for k, block in enumerate(self.down):
            h = block(h if k == 0 else nn.functional.max_pool2d(h, 2))
            skips.append(h)
        for k in reversed(range(LEVELS - 1)):
            h = self.merge[k](torch.cat([skips[k], self.up[k](h)], dim=1))
        return x + self.head(h)


def _padded(tile: torch.Tensor) -> tuple[torch.Tensor, int, int]:
    h, w = tile.shape[-2:]
    ph, pw = -h % MULTIPLE, -w % MULTIPLE
    mode = "reflect" if min(h, w) > max(ph, pw) else "replicate"
    return nn.functional.pad(tile, (0, pw, 0, ph), mode=mode), h, w


@torch.inference_mode()
def restore_page(model: nn.Module, page: np.ndarray, device: torch.device, autocast) -> np.ndarray:
    """The clean page (float32 in [0, 1]) from a noisy one, in TILE-sized pieces that each see MARGIN pixels of
    context around what they write, so a page of any size fits in memory and shows no seams."""
    image = torch.from_numpy(np.ascontiguousarray(page, dtype=np.float32))[None, None].to(device)
    height, width = page.shape
    out = np.empty((height, width), dtype=np.float32)
    for top in range(0, height, TILE):
        for left in range(0, width, TILE):
            y0, x0 = max(0, top - MARGIN), max(0, left - MARGIN)
            y1, x1 = min(height, top + TILE + MARGIN), min(width, left + TILE + MARGIN)
            tile, h, w = _padded(image[..., y0:y1, x0:x1])
            with autocast:
                clean = model(tile)[0, 0, :h, :w].float()
            rows, cols = min(TILE, height - top), min(TILE, width - left)
            out[top:top + rows, left:left + cols] = \
                clean[top - y0:top - y0 + rows, left - x0:left - x0 + cols].clamp(0, 1).cpu().numpy()
    return out
