"""A synthetic hotel-id-2021-fgvc8: JPEG photos of hotel rooms, the training ones under train_images/<chain>/ (one
folder per hotel chain, 0 for none) and listed in train.csv `image,chain,hotel_id,timestamp`, the test ones flat in
test_images/ and listed only by the sample, as MLE-bench's 90/10 random split of the real train set lays them out;
private/test.csv holds the test rows whole. The sample ranks the same five hotel ids for every photo.

Each hotel furnishes its rooms its own way: a chain's hotels share a wall colour and a way of placing the bed, and
each hotel has its own bedspread, floor, headboard and picture on the wall; a bathroom shows only the walls and
tiles of the headboard's colour. A photo views a room from a little
further left or right, nearer or further, in its own light. Photos of one hotel look alike, so a model that
compares them (pixels, embeddings, a CNN) ranks the right hotel high; the prior (the five hotels with the most
training photos) scores near nothing, as the real one does.

`sizes(scale)`: 32x24 photos at a factor of the replica's own counts; at REAL the real counts at 640x480.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageFilter

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, folders, grain, hex_ids, render, textured, to_image

SHAPE = (32, 24)  # the replica's photos (width, height)
REAL_SHAPE = (640, 480)  # the real photos vary; most are about this size
HOTELS = 80  # the replica's hotels
REAL_HOTELS = 7_770  # the real competition's: 97,554 photos, 87,798 to MLE-bench's train and 9,756 to its test
CHAINS = 8  # chains of the replica's hotels, beside chain 0 (no chain)
REAL_CHAINS = 87
PHOTOS = (2, 14)  # photos a hotel has, drawn uniformly in this range (12.5 on average in the real set)
TEST_SHARE = 0.1  # MLE-bench's split
BATHROOMS = 0.3  # photos of a bathroom: only its walls and tiles tell the hotel
SAMPLE_IDS = "36363 53586 18807 64314 60181"  # what the real sample ranks for every photo
DESIGN = 240  # a larger photo's long side while it is drawn
GRAIN = 7
CHUNK = 16
FIRST_DAY = np.datetime64("2016-01-01T00:00:00")  # the photos' timestamps lie in the five years after it


def sizes(scale: float | str = 1.0) -> Sizes:
    """The hotels (as `train`: photos follow from their counts) and the photo sizes at `scale`."""
    scale = parse_scale(scale)
    shape = REAL_SHAPE if is_real(scale) else SHAPE
    return Sizes(scaled(HOTELS, REAL_HOTELS, scale, 6), 0, shape, shape)


def _hotels(count: int, rng: np.random.Generator, chains: int) -> pd.DataFrame:
    """Each hotel's id, chain and furnishing: wall (its chain's), bedspread, floor, headboard and picture colours,
    and where the bed and the picture stand."""
    chain_walls = rng.uniform(70, 230, (chains + 1, 3))
    chain_beds = rng.uniform(0.25, 0.75, chains + 1)
    chain = rng.integers(0, chains + 1, count)
    ids = rng.choice(np.arange(100, 100_000), count, replace=False)
    return pd.DataFrame({
        "hotel_id": ids, "chain": chain, "wall": list(chain_walls[chain] + rng.normal(0, 12, (count, 3))),
        "spread": list(rng.uniform(20, 240, (count, 3))), "floor": list(rng.uniform(30, 200, (count, 3))),
        "head": list(rng.uniform(10, 200, (count, 3))), "art": list(rng.uniform(0, 255, (count, 3))),
        "bed_x": chain_beds[chain] + rng.normal(0, 0.05, count), "art_x": rng.uniform(0.15, 0.85, count),
        "art_w": rng.uniform(0.1, 0.3, count)})


def photo(hotel: pd.Series, rng: np.random.Generator, shape: tuple[int, int] = SHAPE) -> Image.Image:
    """One view of a room of `hotel` at `shape` (width, height)."""
    width, height = shape
    factor = min(1.0, DESIGN / max(width, height))
    w, h = max(SHAPE[0] * 2, round(width * factor)), max(SHAPE[1] * 2, round(height * factor))
    light = rng.uniform(0.75, 1.2)
    pan, zoom = rng.normal(0, 0.1), rng.uniform(0.85, 1.15)
    horizon = h * (0.55 + rng.normal(0, 0.04))
    canvas = textured(rng, h, w, np.asarray(hotel["wall"]) * light, swing=12, noise=4)
    y, x = np.mgrid[:h, :w]
    u = ((x / w - 0.5) / zoom + 0.5 + pan)  # where each pixel looks in the room, across 0..1
    floor = y > horizon
    canvas[floor] = np.asarray(hotel["floor"]) * light + rng.normal(0, 6, (int(floor.sum()), 3))
    if rng.random() < BATHROOMS:  # tiles of the headboard's colour, a white tub and a mirror
        canvas[floor] = np.asarray(hotel["head"]) * light + rng.normal(0, 6, (int(floor.sum()), 3))
        tub = (np.abs(u - 0.5) < 0.3) & (y > horizon - h * 0.1) & (y < horizon + h * 0.15)
        mirror = (np.abs(u - 0.5) < 0.12) & (y > h * 0.1) & (y < h * 0.35)
        canvas[tub], canvas[mirror] = 235 * light, 190 * light
        return _finished(canvas, rng, width, height, w, h)
    art = (np.abs(u - hotel["art_x"]) < hotel["art_w"] / 2) & (y > h * 0.15) & (y < h * 0.35)
    canvas[art] = np.asarray(hotel["art"]) * light
    bed_u = np.abs(u - hotel["bed_x"])
    head = (bed_u < 0.2) & (y > horizon - h * 0.25) & (y <= horizon - h * 0.05)
    canvas[head] = np.asarray(hotel["head"]) * light
    spread = (bed_u < 0.24) & (y > horizon - h * 0.05) & (y < horizon + h * 0.25)
    canvas[spread] = np.asarray(hotel["spread"]) * light + rng.normal(0, 5, (int(spread.sum()), 3))
    return _finished(canvas, rng, width, height, w, h)


def _finished(canvas: np.ndarray, rng: np.random.Generator, width: int, height: int, w: int, h: int) -> Image.Image:
    """The drawn canvas (w x h) as a photo of width x height, grained where it was enlarged."""
    image = to_image(canvas).filter(ImageFilter.SMOOTH)
    image = image.resize((width, height), Image.BICUBIC if width > w else Image.LANCZOS)
    return grain(image, rng, GRAIN) if width > w else image


def _photos(items: list[tuple[Path, pd.Series]], seed: int, shape: tuple[int, int]) -> list:
    """Write each (path, hotel)'s photo: one task's chunk, from its own seed."""
    rng = np.random.default_rng(seed)
    for path, hotel in items:
        photo(hotel, rng, shape).save(path, quality=int(rng.integers(80, 95)))
    return []


def _timestamps(count: int, rng: np.random.Generator) -> list[str]:
    seconds = rng.integers(0, 5 * 365 * 86_400, count)
    return [str(t).replace("T", " ") for t in FIRST_DAY + seconds.astype("timedelta64[s]")]


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, train_images/<chain>/, test_images/, sample_submission.csv) and
    prepared/private/test.csv."""
    size = sizes(scale)
    public, private = folders(root, "train_images", "test_images")
    hotels = _hotels(size.train, rng, CHAINS if not is_real(parse_scale(scale)) else REAL_CHAINS)
    counts = rng.integers(PHOTOS[0], PHOTOS[1] + 1, len(hotels))
    which = rng.permutation(np.repeat(np.arange(len(hotels)), counts))
    rows = pd.DataFrame({"image": [f"{h}.jpg" for h in hex_ids(rng, len(which), 16)],
                         "chain": hotels["chain"].to_numpy()[which], "hotel_id": hotels["hotel_id"].to_numpy()[which],
                         "timestamp": _timestamps(len(which), rng)})
    to_test = np.zeros(len(rows), dtype=bool)
    to_test[rng.choice(len(rows), round(TEST_SHARE * len(rows)), replace=False)] = True
    train, test = rows.loc[~to_test], rows.loc[to_test]
    for chain in train["chain"].unique():
        (public / "train_images" / str(chain)).mkdir(exist_ok=True)
    paths = [public / "train_images" / str(c) / i for c, i in zip(train["chain"], train["image"])] + \
        [public / "test_images" / i for i in test["image"]]
    items = list(zip(paths, (hotels.iloc[k] for k in np.r_[which[~to_test], which[to_test]])))
    render(partial(_photos, shape=size.smallest), items, rng, CHUNK, size.pixels(len(items)))
    train.to_csv(public / "train.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    test[["image"]].assign(hotel_id=SAMPLE_IDS).to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Hotel-ID to Combat Human Trafficking 2021 - FGVC8",
             "Identify the hotel each photo in test_images/ was taken in: rank up to five hotel ids (train.csv's "
             "`hotel_id`), best first, space-separated. Training photos are in train_images/<chain>/.",
             "Submissions are evaluated on the Mean Average Precision @ 5 (MAP@5).",
             "Submit `image,hotel_id` for every test image.")
