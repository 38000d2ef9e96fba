"""The U-Net's shape as numbers: its levels, and what one pixel costs it in FLOPs and in activations kept for
the backward pass. Pure arithmetic, apart from the network itself, so planning never imports torch."""
from __future__ import annotations

LEVELS = 3  # resolutions: full, 1/2, 1/4 (two poolings: inputs are padded to a multiple of 4)
MULTIPLE = 2 ** (LEVELS - 1)


def flops_per_pixel(width: int) -> float:
    """Multiply-adds x 2 of one forward pass per full-resolution pixel (3x3 convolutions dominate)."""
    widths = [width * 2 ** k for k in range(LEVELS)]
    total, inputs = 0.0, 1
    for k, w in enumerate(widths):  # encoder: two convolutions a level, on 1/4**k of the pixels
        total += 9 * (inputs * w + w * w) / 4 ** k
        inputs = w
    for k, w in enumerate(widths[:-1]):  # decoder: the up-convolution, then two convolutions on the merge
        total += (4 * widths[k + 1] * w + 9 * (2 * w * w + w * w)) / 4 ** k
    return 2 * total


def activation_floats(width: int) -> float:
    """Floats kept for the backward pass per full-resolution pixel: each convolution's output, its norm's and
    its activation's (about three copies a layer), summed over the levels."""
    widths = [width * 2 ** k for k in range(LEVELS)]
    down = sum(2 * w / 4 ** k for k, w in enumerate(widths))
    up = sum((w + 2 * w + 2 * w) / 4 ** k for k, w in enumerate(widths[:-1]))
    return 3 * (down + up)


def parameters(width: int) -> int:
    """The net's weights: 3x3 convolutions of 46 w^2 inputs x outputs in all, two 2x2 up-convolutions of 10 w^2
    (457 w^2 weights, what torch counts to within 1%)."""
    return (46 * 9 + 10 * 4) * width * width

