"""The mask network: a timm encoder (`features_only`) under a light U-Net decoder, each level upsampled to its
skip's size, merged with it and convolved, then brought back to the input's pixels beside the image itself (fine
edges the encoder's stride-2 stem never saw) and a 1x1 head with one logit per mask class. Imported only by fold
processes: planning reads its costs from `planning`, never from here."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # ImageNet's, what a pretrained encoder expects


def _block(inputs: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(inputs, outputs, 3, padding=1, bias=False), nn.BatchNorm2d(outputs),
                         nn.ReLU(inplace=True), nn.Conv2d(outputs, outputs, 3, padding=1, bias=False),
                         nn.BatchNorm2d(outputs), nn.ReLU(inplace=True))


class MaskNet(nn.Module):
    """Logits (batch, classes, height, width) for images (batch, 3, height, width) scaled to [0, 1], any size: the
    input is reflect-padded to the encoder's stride and the output cropped back."""

    def __init__(self, encoder: nn.Module, classes: int, width: int):
        super().__init__()
        self.encoder = encoder
        channels = encoder.feature_info.channels()
        self.stride = max(encoder.feature_info.reduction())
        self.register_buffer("mean", torch.tensor(MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(STD).view(1, 3, 1, 1), persistent=False)
        # deepest first: each merge takes the level below's `width` channels and its skip's own
        self.merge = nn.ModuleList([_block(channels[-1], width)] +
                                   [_block(width + c, width) for c in reversed(channels[:-1])])
        self.full = _block(width + 3, width // 2)
        self.head = nn.Conv2d(width // 2, classes, 1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        height, width = images.shape[-2:]
        pad_h, pad_w = -height % self.stride, -width % self.stride
        mode = "reflect" if min(height, width) > max(pad_h, pad_w) else "replicate"
        x = F.pad((images - self.mean) / self.std, (0, pad_w, 0, pad_h), mode=mode)
        features = self.encoder(x)
        h = self.merge[0](features[-1])
        for block, skip in zip(self.merge[1:], reversed(features[:-1])):
            h = block(torch.cat([skip, F.interpolate(h, size=skip.shape[-2:], mode="bilinear",
                                                     align_corners=False)], dim=1))
        h = F.interpolate(h, size=x.shape[-2:], mode="bilinear", align_corners=False)
        return self.head(self.full(torch.cat([h, x], dim=1)))[..., :height, :width]


@torch.inference_mode()
def predict_masks(model: nn.Module, images, batch: int, device: torch.device, autocast) -> "torch.Tensor":
    """Per-pixel probabilities (n, classes, height, width) on the CPU, the mean of each image's and its mirror
    image's (horizontal flip: test-time augmentation), in batches so memory stays bounded; `images` is a uint8
    array (n, height, width, 3)."""
    model.eval()
    out = []
    for start in range(0, len(images), batch):
        x = as_input(images[start:start + batch], device)
        with autocast:
            probabilities = torch.sigmoid(model(x).float()) + torch.sigmoid(model(x.flip(-1)).float()).flip(-1)
        out.append((probabilities / 2).cpu())
    return torch.cat(out) if out else torch.zeros(0)


def as_input(pixels, device: torch.device) -> torch.Tensor:
    """uint8 (n, height, width, 3) pixels as floats (n, 3, height, width) in [0, 1] on `device`."""
    import numpy as np

    tensor = torch.from_numpy(np.ascontiguousarray(pixels)).to(device)
    return tensor.permute(0, 3, 1, 2).float().div_(255)
