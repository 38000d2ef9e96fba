"""The detector network: a timm encoder (`features_only`) under a light FPN-ish decoder to stride 4 (each deeper
level upsampled and added to the next one's 1x1 projection, then a 3x3 convolution), and CenterNet's heads there:
a heatmap logit per finding class, and a class's box width, height and centre offset (heatmaps.REGRESSION a class);
beside them one no-finding logit an image from the deepest level, pooled. Imported only by fold processes."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from runner.engines.centres.heatmaps import REGRESSION

PRIOR = 0.1  # CenterNet's heatmap bias: every cell starts at this probability, so the focal loss starts calm
STRIDE = 4  # the heads' stride: a 64 px radiograph gives 16 x 16 cells, its smallest findings (3 px) within one


def _head(width: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(width, outputs, 1))


class CentreNet(nn.Module):
    """(heatmap logits (batch, classes, cells, cells), regression (batch, classes, REGRESSION, cells, cells),
    no-finding logits (batch,)) for images (batch, 3, side, side) in [0, 1], `side` a multiple of the encoder's
    stride; each image standardised on its own (a radiograph's exposure and inversion aside)."""

    def __init__(self, encoder: nn.Module, classes: int, width: int):
        super().__init__()
        self.encoder, self.classes = encoder, classes
        channels = encoder.feature_info.channels()
        self.first = list(encoder.feature_info.reduction()).index(STRIDE)  # the level at the heads' stride
        self.lateral = nn.ModuleList([nn.Conv2d(c, width, 1) for c in channels[self.first:]])
        self.smooth = nn.Sequential(nn.Conv2d(width, width, 3, padding=1, bias=False), nn.BatchNorm2d(width),
                                    nn.ReLU(inplace=True))
        self.heat = _head(width, classes)
        self.regression = _head(width, classes * REGRESSION)
        self.no_finding = nn.Linear(channels[-1], 1)
        nn.init.constant_(self.heat[-1].bias, float(np.log(PRIOR / (1 - PRIOR))))

    def decoded(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the decoder's map at the heads' stride, the encoder's deepest level) of standardised images."""
        mean = images.mean(dim=(1, 2, 3), keepdim=True)
        x = (images - mean) / (images.std(dim=(1, 2, 3), keepdim=True) + 1e-3)
        features = self.encoder(x)[self.first:]
        h = self.lateral[-1](features[-1])
        for lateral, level in zip(reversed(self.lateral[:-1]), reversed(features[:-1])):
            h = lateral(level) + F.interpolate(h, size=level.shape[-2:], mode="nearest")
        return self.smooth(h), features[-1]

    def boxes(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(heatmap logits, regression) of the decoder's map."""
        return self.heat(h), self.regression(h).view(len(h), self.classes, REGRESSION, *h.shape[-2:])

    def forward(self, images: torch.Tensor):
        h, deepest = self.decoded(images)
        return (*self.boxes(h), self.no_finding(deepest.mean(dim=(2, 3)))[:, 0])


class CharacterNet(CentreNet):
    """A reader of characters on pages: (heatmap logits (batch, 1, cells, cells), regression (batch, 1,
    REGRESSION, cells, cells), code embeddings (batch, width, cells, cells)). One heatmap finds characters whatever
    their code; `classify` names the code of an embedding taken at a character's centre, among the fold's `codes`
    (gathered at centres only: thousands of codes at every cell of a page would not fit a card)."""

    def __init__(self, encoder: nn.Module, codes: int, width: int):
        super().__init__(encoder, 1, width)
        del self.no_finding  # a page's characters have no no-finding class
        self.embedding = _head(width, width)
        self.classify = nn.Linear(width, codes)

    def forward(self, images: torch.Tensor):
        h, _ = self.decoded(images)
        return (*self.boxes(h), self.embedding(h))


def as_input(pixels, device: torch.device) -> torch.Tensor:
    """uint8 (n, side, side, 3) pixels as floats (n, 3, side, side) in [0, 1] on `device`."""
    tensor = torch.from_numpy(np.ascontiguousarray(pixels)).to(device)
    return tensor.permute(0, 3, 1, 2).float().div_(255)


def unmirrored(heads):
    """The heads of mirrored images turned back: the maps flipped, each centre's offset across its cell mirrored
    (a centre `offset` into cell j of the mirror is 1 - offset into cell cells-1-j of the image)."""
    heat, regression, no_finding = heads
    regression = regression.flip(-1)
    regression[:, :, 2] = 1 - regression[:, :, 2]
    return heat.flip(-1), regression, no_finding


@torch.inference_mode()
def outputs(model: nn.Module, images, batch: int, device: torch.device, autocast):
    """The network's three outputs for uint8 images (n, side, side, 3), in batches, as float tensors on the CPU:
    the mean of each image's and its mirror image's (test-time augmentation); None for no images."""
    model.eval()
    parts = []
    for start in range(0, len(images), batch):
        x = as_input(images[start:start + batch], device)
        with autocast:
            plain, mirror = ([t.float() for t in model(view)] for view in (x, x.flip(-1)))
        parts.append([((a + b) / 2).cpu() for a, b in zip(plain, unmirrored(mirror))])
    return tuple(torch.cat(p) for p in zip(*parts)) if parts else None
