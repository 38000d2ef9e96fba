"""Frozen features: a pretrained image backbone from the local weights cache embeds every image once (`prepare`,
on a GPU when there is one), and each fold fits a cheap head on the embeddings: a logistic regression (classes) or
ridge (values), and k nearest neighbours by cosine. What strong image solutions blend beside the fine-tuned
network, at a fraction of its cost; the head's folds take cores, not the GPU.
"""
from __future__ import annotations

import dataclasses
import logging
from multiprocessing.pool import ThreadPool
from pathlib import Path
from typing import Literal

import numpy as np

from runner.engines.oneshot import (BOOSTED_ROUNDS, MAX_BOOSTED_SECONDS, STARTUP_SECONDS, OneShotEngine,
                                    boosted_head, boosted_seconds, cosine_neighbours, one_shot_member,
                                    standardised_linear)
from runner.planning.portfolio import Member, PlanContext, Settings

log = logging.getLogger(__name__)

# backbones whose pretrained weights, when cached, give the embeddings: strongest first, with their widths. A GPU
# takes the strongest cached one; a CPU the cheapest (every image goes through it once)
FEATURE_MODELS = {"convnext_tiny": 768, "efficientnet_b0": 1280, "resnet50": 2048, "efficientnet_lite0": 1280,
                  "resnet18": 512}
CPU_SIDE, GPU_SIDE, MIN_SIDE = 128, 224, 64  # an ImageNet backbone wants some pixels; a CPU cannot afford 224
CPU_IMAGES_PER_CORE_SECOND = 45.0  # at 128 px: efficientnet_lite0 embedded 99 images/s, resnet18 120, on 2 cores here
GPU_IMAGES_PER_SECOND = 1500.0  # at 224 px; not measured (no GPU here): a conservative guess for a ResNet-50 in bf16
DECODES_PER_CORE_SECOND = 400.0  # opening and resizing an image here, beside the network
# reading the weights into the network in the prepare process (0.2 s for efficientnet_lite0 here): torch and timm
# are imported once in the fork server (`preload`), not in it; 8 s that assumed their import had planned the demo's
# embeddings at 23 s where they took 10
LOAD_SECONDS = 1.0
# rows x widths x classes a logistic regression fits per second on one core: on the dog-breed demo's embeddings
# (768 rows x 1,280 x 120 breeds) 1.7-2.5 s a fold on the slower CPU, about 5e7; 8e6 had planned 15 s
CELLS_PER_SECOND = 4e7
NEIGHBOUR_CELLS_PER_SECOND = 2e8  # training rows x rows asked x width that kNN compares per second here
PRIOR_GAIN = 0.02  # a second view of the images, from another training; errors unlike the fine-tuned net's
KNN_PRIOR_GAIN = 0.005
BOOSTED_PRIOR_GAIN = 0.005  # trees on the embeddings: non-linear where the linear head is not
BATCH = 64


class FeatureSettings(Settings):
    model: str = "resnet18"
    side: int = CPU_SIDE
    head: Literal["linear", "knn", "boosted"] = "linear"
    C: float = 1.0
    k: int = 15


def feature_side(image_side: int, gpu: bool) -> int:
    """The images' own side within [MIN_SIDE, the device's cap]: never more pixels than the device affords."""
    cap = GPU_SIDE if gpu else CPU_SIDE
    return min(cap, max(MIN_SIDE, image_side or cap))


class Features(OneShotEngine):
    name = "features"
    inputs = "image"
    Settings = FeatureSettings
    # torch and timm for the prepare step's embeddings, the rest for the heads
    preload = ("torch", "timm", "sklearn.linear_model", "sklearn.neighbors", "sklearn.preprocessing",
               "runner.engines.features")
    search_space = dict(C=(0.1, 0.3, 1.0, 3.0, 10.0), k=(5, 10, 15, 25, 40))
    cheap_first = True  # on a GPU its embeddings take seconds and need the card before the network holds it

    def weights(self) -> tuple[str, ...]:
        return tuple(FEATURE_MODELS)

    def measure(self, dataset, hardware, seconds, work, here=True):
        return None  # nothing to time before the embeddings exist; the first fold's fit replaces the estimate

    def plan(self, context: PlanContext) -> list[Member]:
        cached = [m for m in FEATURE_MODELS if m in context.pretrained]
        if not cached:
            return []
        gpu = bool(context.hardware.gpus)
        model = cached[0] if gpu else cached[-1]
        data, width = context.data, FEATURE_MODELS[model]
        side = feature_side(data.image_side, gpu)
        images = data.n_train + data.n_test
        rate = GPU_IMAGES_PER_SECOND * (GPU_SIDE / side) ** 2 if gpu else \
            CPU_IMAGES_PER_CORE_SECOND * (CPU_SIDE / side) ** 2 * context.cores
        prepare = LOAD_SECONDS + images / rate + images * data.decode_each(DECODES_PER_CORE_SECOND) / context.cores
        rows = data.n_train * (context.folds - 1) / context.folds
        outputs = max(1, data.classes if context.spec.is_classification else data.targets)
        linear = rows * width * outputs / CELLS_PER_SECOND
        knn = rows * (data.n_train / context.folds + data.n_test) * width / NEIGHBOUR_CELLS_PER_SECOND
        where = "the GPU" if gpu else f"{context.cores} cores"
        why = f"{model} embeddings at {side} px, computed once on {where} (about {prepare:.0f} s, estimated)"
        head = "logistic regression" if context.spec.is_classification else "ridge"
        heads = [("", FeatureSettings(model=model, side=side), linear, PRIOR_GAIN, head),
                 ("-knn", FeatureSettings(model=model, side=side, head="knn"), knn, KNN_PRIOR_GAIN,
                  f"{FeatureSettings().k} nearest neighbours by cosine")]
        trees = boosted_seconds(rows, width, data.classes)
        if context.spec.is_classification and trees <= MAX_BOOSTED_SECONDS:  # where the rows allow
            heads.append(("-gbm", FeatureSettings(model=model, side=side, head="boosted"), trees, BOOSTED_PRIOR_GAIN,
                          f"LightGBM ({BOOSTED_ROUNDS} rounds)"))
        members = []
        for suffix, settings, fit, gain, what in heads:
            settings = settings.model_copy(update=dict(device="cuda" if gpu else "cpu"))
            member = one_shot_member(context, self.name, settings, STARTUP_SECONDS + fit, fit, gain,
                                     f"{what} on {why}")
            members.append(member.model_copy(update=dict(
                name=self.name + suffix, prepare_threads=context.cores, prepare_seconds=round(prepare, 1),
                prepare_slot="gpu" if gpu else "cpu")))
        return members

    def describe(self, context: PlanContext) -> str:
        return "a head on frozen embeddings"

    def prepare_key(self, settings: FeatureSettings) -> str:
        return f"features-{settings.model}-{settings.side}"

    def prepare(self, settings: FeatureSettings, dataset, work: Path, threads: int):
        train, test = dataset.views["image"]
        vectors, ok = embed(list(train) + list(test), settings, threads)
        n = len(train)
        untrainable = ~ok[:n] if dataset.untrainable is None else dataset.untrainable | ~ok[:n]
        views = {**dataset.views, "image": (vectors[:n], vectors[n:])}
        return dataclasses.replace(dataset, views=views, untrainable=untrainable)

    def model(self, settings: FeatureSettings, classification: bool, rows: int):
        if settings.head == "knn":
            return cosine_neighbours(classification, settings.k, rows)
        if settings.head == "boosted":
            return boosted_head(classification, settings.seed)
        return standardised_linear(classification, settings.C, max_iter=1000)


def embed(paths: list, settings: FeatureSettings, threads: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows × width float32 embeddings, a mask of the images that decoded): the backbone's pooled features, in
    batches, on the GPU in bf16 when the unit has one; an unreadable image gets a row of zeros."""
    import timm
    import torch

    from runner.data.dataset import decode_square
    from runner.common.errors import RunnerError
    from runner.common.weights import find_weights, timm_source

    torch.set_num_threads(max(1, threads))
    weights = find_weights(settings.model)
    if weights is None:
        raise RunnerError(f"{settings.model}: no local pretrained weights (runner weights pull {settings.model})")
    device = "cuda" if settings.device == "cuda" and torch.cuda.is_available() else "cpu"
    network = timm.create_model(settings.model, pretrained=True, num_classes=0, **timm_source(weights))
    network = network.eval().to(device)
    config = network.pretrained_cfg
    mean = torch.tensor(config.get("mean", (0.485, 0.456, 0.406)), device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor(config.get("std", (0.229, 0.224, 0.225)), device=device).view(1, 3, 1, 1) * 255
    vectors = np.zeros((len(paths), network.num_features), dtype=np.float32)
    ok = np.zeros(len(paths), dtype=bool)
    blank = np.zeros((settings.side, settings.side, 3), dtype=np.uint8)
    # threads decode each batch's images at once (Pillow leaves the GIL); the network then takes the batch
    with ThreadPool(max(1, threads)) as pool, torch.inference_mode(), \
            torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
        for start in range(0, len(paths), BATCH):
            images = pool.starmap(decode_square, [(p, settings.side) for p in paths[start:start + BATCH]])
            ok[start:start + len(images)] = [image is not None for image in images]
            batch = np.stack([blank if image is None else image for image in images])
            x = torch.from_numpy(batch).to(device).permute(0, 3, 1, 2).float()
            vectors[start:start + len(images)] = network((x - mean) / std).float().cpu().numpy()
    vectors[~ok] = 0.0
    return vectors, ok
