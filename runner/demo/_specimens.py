"""Pictures whose class a model can tell: each class a look (a hue and a shape of its own) drawn on a background
that says nothing of the class, at a jittered place, size, angle and shade, with pixel noise. The replicas of the
classification competitions whose real pictures are species, products or animals (herbarium, inaturalist,
iwildcam, cdiscount) draw their classes with it: a pixel table's logistic regression finds the hue, a CNN the shape
too, and no two classes look alike.
"""
from __future__ import annotations

import colorsys
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from runner.demo._pictures import textured, to_image

SHAPES = ("disc", "square", "triangle", "diamond", "cross", "ring", "bar", "star")
DESIGN = 256  # a larger picture's long side while it is drawn; it is enlarged after (drawing stays fast)


@dataclass(frozen=True)
class Look:
    """How one class looks: its colour (RGB) and its shape."""

    colour: tuple[float, float, float]
    shape: str


def looks(count: int, rng: np.random.Generator) -> list[Look]:
    """`count` looks, hues spread evenly round the colour wheel (in a random order) and shapes in turn, so no two
    classes share both."""
    hues = (np.arange(count) / count + rng.uniform(0, 1 / max(1, count))) % 1.0
    order = rng.permutation(count)
    out = []
    for k in range(count):
        value = 0.85 if k % 2 == 0 else 0.6  # neighbours in hue differ in brightness too
        red, green, blue = colorsys.hsv_to_rgb(float(hues[order[k]]), 0.8, value)
        out.append(Look((255 * red, 255 * green, 255 * blue), SHAPES[k % len(SHAPES)]))
    return out


def _outline(shape: str, cx: float, cy: float, r: float, angle: float) -> list[tuple[float, float]]:
    """A polygon of the shape, centred at (cx, cy), of radius r, turned by angle."""
    if shape in ("disc", "ring"):
        t = np.linspace(0, 2 * np.pi, 24, endpoint=False)
        points = np.stack([np.cos(t), np.sin(t)], axis=1)
    elif shape == "square":
        points = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * 0.8
    elif shape == "triangle":
        t = np.pi / 2 + np.arange(3) * 2 * np.pi / 3
        points = np.stack([np.cos(t), -np.sin(t)], axis=1)
    elif shape == "diamond":
        points = np.array([[0, -1], [0.6, 0], [0, 1], [-0.6, 0]])
    elif shape == "cross":
        a, b = 0.3, 1.0
        points = np.array([[-a, -b], [a, -b], [a, -a], [b, -a], [b, a], [a, a], [a, b], [-a, b], [-a, a],
                           [-b, a], [-b, -a], [-a, -a]])
    elif shape == "bar":
        points = np.array([[-1, -0.3], [1, -0.3], [1, 0.3], [-1, 0.3]])
    else:  # star
        t = np.pi / 2 + np.arange(10) * np.pi / 5
        radii = np.where(np.arange(10) % 2 == 0, 1.0, 0.45)
        points = np.stack([radii * np.cos(t), -radii * np.sin(t)], axis=1)
    turn = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    placed = points @ turn.T * r + np.array([cx, cy])
    return [tuple(p) for p in placed]


def mask_of(look: Look, width: int, height: int, cx: float, cy: float, r: float, angle: float) -> np.ndarray:
    """The boolean mask of one shape (a ring is a disc with its middle left out)."""
    image = Image.new("L", (width, height))
    draw = ImageDraw.Draw(image)
    draw.polygon(_outline(look.shape, cx, cy, r, angle), fill=255)
    if look.shape == "ring":
        draw.polygon(_outline("disc", cx, cy, 0.55 * r, 0), fill=0)
    return np.asarray(image) > 0


def specimen(look: Look | None, rng: np.random.Generator, shape: tuple[int, int], background, size: float = 0.32,
             swing: float = 30, noise: float = 8, copies: int = 1, shade: float = 25) -> Image.Image:
    """A picture of `shape` (width, height) on a textured `background` colour, with `copies` of the look (none for
    None: an empty scene), each at a jittered place, a radius of about `size` of the shorter side, a turn and a
    shade of `shade` levels; enlarged after drawing when larger than DESIGN."""
    width, height = shape
    factor = min(1.0, DESIGN / max(width, height))
    w, h = max(8, round(width * factor)), max(8, round(height * factor))
    canvas = textured(rng, h, w, background, swing=swing, noise=noise)
    for _ in range(copies if look is not None else 0):
        r = size * min(w, h) * rng.uniform(0.8, 1.2)
        cx, cy = rng.uniform(r, max(r + 1, w - r)), rng.uniform(r, max(r + 1, h - r))
        mask = mask_of(look, w, h, cx, cy, r, rng.uniform(0, 2 * np.pi))
        colour = np.asarray(look.colour) + rng.normal(0, shade, 3)
        canvas[mask] = colour + rng.normal(0, noise, (int(mask.sum()), 3))
    image = to_image(canvas).filter(ImageFilter.SMOOTH)
    return image if (w, h) == (width, height) else image.resize((width, height), Image.BICUBIC)
