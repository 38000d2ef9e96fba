"""A synthetic bms-molecular-translation: black-and-white drawings of molecules, each with its InChI string, as
MLE-bench lays the competition out (its 80/20 split of the real train_labels.csv): train/<a>/<b>/<c>/<image_id>.png
and test/... by the id's first three characters, train_labels.csv `image_id,InChI`, extra_approved_InChIs.csv
(`InChI` strings without pictures), the answers in private/test.csv, and a sample that names water for every
picture.

A molecule is a chain of carbon atoms, some carrying an oxygen or a nitrogen; its picture draws the chain as a
zigzag of bonds with the heteroatoms' letters, turned by a random angle, with specks of noise; its InChI says the
formula, the chain's connections and its hydrogens, in the real string's layers. No engine writes a string from
a picture: the training string nearest to all the others, submitted for every picture, is the honest prior (a few
dozen edits here, as a typical string is on the real leaderboard); water costs more.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw, ImageFont

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import folders, hex_ids, render

TRAIN, TEST = 200, 60
REAL_TRAIN, REAL_TEST = 1_939_348, 484_838  # MLE-bench's 80/20 split of the 2,424,186 pictures
LEAST = 10
SIDE, REAL_SIDE = 96, 512  # the replica's square pictures; the real ones run from a few hundred pixels to 1,500
EXTRA = 40  # strings of extra_approved_InChIs.csv at the replica's size
SPECKS = 0.002  # of the pixels turned black at random, as the real scans' noise
CHUNK = 64  # pictures one task draws


def molecule(rng: np.random.Generator) -> tuple[int, dict[int, str]]:
    """A chain of 2 to 12 carbons and the heteroatoms hanging on some of them (position -> 'O' or 'N')."""
    carbons = int(rng.integers(2, 13))
    hanging = rng.choice(carbons, size=int(rng.integers(0, min(3, carbons) + 1)), replace=False)
    return carbons, {int(k): "O" if rng.random() < 0.6 else "N" for k in hanging}


def inchi(carbons: int, hetero: dict[int, str]) -> str:
    """The InChI of the chain: formula, connections (carbons 1..n along the chain, heteroatoms numbered after
    them) and hydrogens."""
    oxygens, nitrogens = sum(v == "O" for v in hetero.values()), sum(v == "N" for v in hetero.values())
    hydrogens = 2 * carbons + 2 + nitrogens
    count = lambda element, n: f"{element}{n if n > 1 else ''}" if n else ""  # noqa: E731 - a lone atom has no 1
    formula = count("C", carbons) + count("H", hydrogens) + count("N", nitrogens) + count("O", oxygens)
    number = {k: carbons + 1 + j for j, k in enumerate(sorted(hetero))}  # heteroatoms after the carbons
    chain = "-".join(f"{k + 1}" + (f"({number[k]})" if k in number else "") for k in range(carbons))
    ends = "1-" + str(carbons) if carbons > 1 else "1"
    return f"InChI=1S/{formula}/c{chain}/h{ends}H3" + (f",{min(number.values())}H" if hetero else "")


def picture(carbons: int, hetero: dict[int, str], side: int, rng: np.random.Generator) -> Image.Image:
    """The chain as a zigzag of bonds across a white square, the heteroatoms' letters at the ends of their bonds,
    turned by a random angle, with specks."""
    canvas = Image.new("L", (side, side), 255)
    draw = ImageDraw.Draw(canvas)
    step, angle = side * 0.8 / max(carbons, 2), rng.uniform(-0.6, 0.6)
    points = []
    for k in range(carbons):
        x, y = (k - (carbons - 1) / 2) * step, (step * 0.4) * (1 if k % 2 else -1)
        points.append((side / 2 + x * np.cos(angle) - y * np.sin(angle),
                       side / 2 + x * np.sin(angle) + y * np.cos(angle)))
    width = max(1, side // 64)
    draw.line(points, fill=0, width=width)
    font = ImageFont.load_default(size=max(8, side // 16))
    for k, atom in hetero.items():
        x, y = points[k]
        end = (x, y + step * 0.8 * (1 if k % 2 else -1))
        draw.line([points[k], end], fill=0, width=width)
        box = draw.textbbox(end, atom, font=font, anchor="mm")
        draw.rectangle(box, fill=255)
        draw.text(end, atom, fill=0, font=font, anchor="mm")
    pixels = np.asarray(canvas).copy()
    pixels[rng.random(pixels.shape) < SPECKS] = 0
    return Image.fromarray(pixels).convert("1")


def sizes(scale: float | str = 1.0) -> tuple[int, int, int]:
    """(train pictures, test pictures, side) at `scale`: a factor of the replica's own counts, or real."""
    scale = parse_scale(scale)
    return scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST), \
        REAL_SIDE if is_real(scale) else SIDE


def _nested(image_id: str) -> Path:
    return Path(image_id[0]) / image_id[1] / image_id[2] / f"{image_id}.png"


def _draw(items: list[tuple[str, int, dict, str]], seed: int, side: int) -> list:
    """Write each (image_id, carbons, heteroatoms, folder)'s picture in its nested place: one task's chunk, drawn
    from its own seed."""
    rng = np.random.default_rng(seed)
    for image_id, carbons, hetero, folder in items:
        path = Path(folder) / _nested(image_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        picture(carbons, hetero, side, rng).save(path)
    return []


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train/, test/, train_labels.csv, extra_approved_InChIs.csv, sample_submission.csv)
    and prepared/private/test.csv."""
    train_count, test_count, side = sizes(scale)
    public, private = folders(root, "train", "test")
    molecules = [molecule(rng) for _ in range(train_count + test_count)]
    ids = hex_ids(rng, len(molecules), 12)
    labels = pd.DataFrame({"image_id": ids, "InChI": [inchi(*m) for m in molecules]})
    train, answers = labels.iloc[:train_count], labels.iloc[train_count:].reset_index(drop=True)
    items = [(i, carbons, hetero, str(public / ("train" if k < train_count else "test")))
             for k, (i, (carbons, hetero)) in enumerate(zip(ids, molecules))]
    render(partial(_draw, side=side), items, rng, CHUNK, len(items) * side * side)
    train.to_csv(public / "train_labels.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)
    answers.assign(InChI="InChI=1S/H2O/h1H2").to_csv(public / "sample_submission.csv", index=False)
    pd.DataFrame({"InChI": [inchi(*molecule(rng)) for _ in range(EXTRA)]}).to_csv(
        public / "extra_approved_InChIs.csv", index=False)
    describe(public, "Bristol-Myers Squibb - Molecular Translation",
             "Translate each chemical structure picture in test/ (nested by the first three characters of its id) "
             "into its InChI string.",
             "Submissions are evaluated on the mean Levenshtein distance between the submitted and the true InChI "
             "strings.",
             "Submit `image_id,InChI` for every test picture.")
