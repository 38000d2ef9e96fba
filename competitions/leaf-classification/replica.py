"""A synthetic leaf-classification: 192 margin/shape/texture features per leaf, 99 species, silhouettes on disk.

Each species has its own prototype margin and texture histograms and shape curve; a leaf is its prototype plus
small noise, so logistic regression or kNN on the scaled features gets a log loss below 0.1 from 4 leaves per
species, while the uniform sample submission scores ln(99) = 4.60. The images (train and test mixed in one
folder) are black lobed silhouettes whose lobe count and aspect follow the species.

`sizes(scale)` says how many leaves a scale writes and how large their silhouettes are: 40-64 px a side at a factor
of the replica's own counts; at REAL the real 891 and 99 (9 and 1 a species), 300-1100 px a side.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import Sizes, folders, render

# the competition's 99 class names, as its sample submission and MLE-bench's grader list them
SPECIES = tuple("""
Acer_Capillipes Acer_Circinatum Acer_Mono Acer_Opalus Acer_Palmatum Acer_Pictum Acer_Platanoids Acer_Rubrum
Acer_Rufinerve Acer_Saccharinum Alnus_Cordata Alnus_Maximowiczii Alnus_Rubra Alnus_Sieboldiana Alnus_Viridis
Arundinaria_Simonii Betula_Austrosinensis Betula_Pendula Callicarpa_Bodinieri Castanea_Sativa Celtis_Koraiensis
Cercis_Siliquastrum Cornus_Chinensis Cornus_Controversa Cornus_Macrophylla Cotinus_Coggygria Crataegus_Monogyna
Cytisus_Battandieri Eucalyptus_Glaucescens Eucalyptus_Neglecta Eucalyptus_Urnigera Fagus_Sylvatica Ginkgo_Biloba
Ilex_Aquifolium Ilex_Cornuta Liquidambar_Styraciflua Liriodendron_Tulipifera Lithocarpus_Cleistocarpus
Lithocarpus_Edulis Magnolia_Heptapeta Magnolia_Salicifolia Morus_Nigra Olea_Europaea Phildelphus
Populus_Adenopoda Populus_Grandidentata Populus_Nigra Prunus_Avium Prunus_X_Shmittii Pterocarya_Stenoptera
Quercus_Afares Quercus_Agrifolia Quercus_Alnifolia Quercus_Brantii Quercus_Canariensis Quercus_Castaneifolia
Quercus_Cerris Quercus_Chrysolepis Quercus_Coccifera Quercus_Coccinea Quercus_Crassifolia Quercus_Crassipes
Quercus_Dolicholepis Quercus_Ellipsoidalis Quercus_Greggii Quercus_Hartwissiana Quercus_Ilex Quercus_Imbricaria
Quercus_Infectoria_sub Quercus_Kewensis Quercus_Nigra Quercus_Palustris Quercus_Phellos Quercus_Phillyraeoides
Quercus_Pontica Quercus_Pubescens Quercus_Pyrenaica Quercus_Rhysophylla Quercus_Rubra Quercus_Semecarpifolia
Quercus_Shumardii Quercus_Suber Quercus_Texana Quercus_Trojana Quercus_Variabilis Quercus_Vulcanica
Quercus_x_Hispanica Quercus_x_Turneri Rhododendron_x_Russellianum Salix_Fragilis Salix_Intergra Sorbus_Aria
Tilia_Oliveri Tilia_Platyphyllos Tilia_Tomentosa Ulmus_Bergmanniana Viburnum_Tinus Viburnum_x_Rhytidophylloides
Zelkova_Serrata
""".split())
BINS = 64  # margin, shape and texture each have 64 columns
TRAIN, TEST = 4 * 99, 99  # the replica's own counts: 4 leaves a species to learn from, 1 to test
REAL_TRAIN, REAL_TEST = 891, 99  # 990 labelled leaves, 10% of them the test split
# at the smallest factors: 2 leaves a species, so a stratified fold has one of each; test rows enough to grade
LEAST_TRAIN, LEAST_TEST = 2 * 99, 10
SIDES = ((40, 40), (64, 64))  # the replica's silhouettes: smallest and largest (width, height)
REAL_SIDES = ((300, 300), (1100, 1100))  # the real silhouettes differ in size too, hundreds of pixels a side
CHUNK = 64  # silhouettes one task draws
NOISE = 0.25  # per-leaf noise relative to the spread between species prototypes
MAX_ID = 1584  # the real ids run from 1 to 1584


def sizes(scale: float | str = 1.0) -> Sizes:
    """How many leaves `scale` writes (a factor of the replica's own counts, or REAL) and their silhouettes' sizes."""
    scale = parse_scale(scale)
    smallest, largest = REAL_SIDES if is_real(scale) else SIDES
    return Sizes(scaled(TRAIN, REAL_TRAIN, scale, LEAST_TRAIN), scaled(TEST, REAL_TEST, scale, LEAST_TEST),
                 smallest, largest)


def _per_species(count: int, rng: np.random.Generator) -> np.ndarray:
    """Leaves of each species, `count` in all: as even as can be, the odd ones to species drawn at random."""
    counts = np.full(len(SPECIES), count // len(SPECIES))
    counts[rng.choice(len(SPECIES), count % len(SPECIES), replace=False)] += 1
    return counts


def _histogram(count: int, rng: np.random.Generator) -> np.ndarray:
    return rng.dirichlet(np.full(BINS, 0.7), size=count)


def _prototypes(rng: np.random.Generator) -> dict[str, np.ndarray]:
    phase, freq = rng.uniform(0, 2 * np.pi, (len(SPECIES), 1)), rng.uniform(1, 4, (len(SPECIES), 1))
    curve = 6e-4 + 3e-4 * np.sin(freq * np.linspace(0, 2 * np.pi, BINS) + phase)
    return {"margin": _histogram(len(SPECIES), rng), "shape": curve, "texture": _histogram(len(SPECIES), rng)}


def _features(species: np.ndarray, protos: dict[str, np.ndarray], rng: np.random.Generator) -> pd.DataFrame:
    columns = {}
    for group, proto in protos.items():
        base = proto[species]
        noisy = np.clip(base + rng.normal(0, NOISE * proto.std(axis=0).mean(), base.shape), 0, None)
        if group != "shape":
            noisy /= noisy.sum(axis=1, keepdims=True)
        columns.update({f"{group}{j + 1}": np.round(noisy[:, j], 6) for j in range(BINS)})
    return pd.DataFrame(columns)


def _silhouette(species: int, width: int, height: int, rng: np.random.Generator) -> Image.Image:
    """A black leaf with the species' lobe count, depth and aspect, rotated and scaled at random."""
    lobes, depth, aspect = 1 + species % 7, 0.1 + 0.05 * (species // 7 % 5), 0.45 + 0.1 * (species // 35)
    theta = np.linspace(0, 2 * np.pi, 90, endpoint=False)
    radius = (1 + depth * np.cos(lobes * theta)) * min(width, height) * rng.uniform(0.3, 0.42)
    turn = rng.uniform(0, np.pi)
    x, y = radius * np.cos(theta), radius * np.sin(theta) * aspect
    cos, sin = np.cos(turn), np.sin(turn)
    points = list(zip(width / 2 + x * cos - y * sin, height / 2 + x * sin + y * cos))
    image = Image.new("L", (width, height), 255)
    ImageDraw.Draw(image).polygon(points, fill=0)
    return image


def _silhouettes(items: list[tuple[int, int, int, int]], seed: int, folder: Path) -> list:
    """Write folder/<id>.jpg for each (id, species, width, height): one task's chunk, drawn from its own seed."""
    rng = np.random.default_rng(seed)
    for leaf_id, kind, width, height in items:
        _silhouette(kind, width, height, rng).save(folder / f"{leaf_id}.jpg", quality=90)
    return []


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv, images/) and prepared/private/test.csv,
    as many leaves as `sizes(scale)` says."""
    size = sizes(scale)
    public, private = folders(root, "images")
    train_counts = _per_species(size.train, rng)
    species = np.concatenate([np.repeat(np.arange(len(SPECIES)), train_counts),
                              np.repeat(np.arange(len(SPECIES)), _per_species(size.test, rng))])
    ids = rng.choice(np.arange(1, max(MAX_ID, len(species)) + 1), size=len(species), replace=False)
    frame = pd.concat([pd.DataFrame({"id": ids, "species": np.array(SPECIES)[species]}),
                       _features(species, _prototypes(rng), rng)], axis=1)
    items = [(int(i), int(k), int(w), int(h)) for i, k, (w, h) in zip(ids, species, size.shapes(len(ids), rng))]
    render(partial(_silhouettes, folder=public / "images"), items, rng, CHUNK, size.pixels(len(ids)))
    cut = int(train_counts.sum())
    train = frame.iloc[:cut].sample(frac=1, random_state=rng)
    test = frame.iloc[cut:].sample(frac=1, random_state=rng)
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns="species").to_csv(public / "test.csv", index=False)
    test[["id"]].assign(**{s: 1 / len(SPECIES) for s in SPECIES}).to_csv(public / "sample_submission.csv",
                                                                          index=False)
    onehot = {s: (test["species"] == s).astype(int) for s in SPECIES}
    test[["id"]].assign(**onehot).to_csv(private / "test.csv", index=False)
    describe(public, "Leaf Classification",
             "Predict the species of each leaf from its margin, shape and texture features (images are optional).",
             "Submissions are evaluated using the multi-class logarithmic loss.",
             "Submit id and one probability column per species (99 columns), each row summing to 1.")
