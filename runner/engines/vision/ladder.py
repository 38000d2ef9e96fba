"""The candidate ladders: the (model, image size) rungs a plan may choose from, best expected quality first, and
which of their models have local pretrained weights."""
from __future__ import annotations

from runner.engines.vision.costs import Candidate
from runner.hardware import Hardware

# best expected quality first: (model, image size)
GPU_CANDIDATES = (("eva02_large_patch14_448", 448), ("convnext_large", 384), ("convnext_base", 384),
                  ("tf_efficientnetv2_m", 384), ("convnext_base", 288), ("convnext_small", 288),
                  ("convnext_small", 224), ("convnext_tiny", 224), ("efficientnet_b0", 224), ("resnet18", 224),
                  ("resnet18", 128))
# from random init, rungs above this one do not pay on competition-sized data (thousands to tens of thousands of
# images): the ladder's top is for pretrained weights
SCRATCH_LARGEST = ("convnext_small", 224)
CPU_CANDIDATES = (("efficientnet_lite0", 128), ("resnet18", 96), ("mobilenetv3_small_100", 96),
                  ("mobilenetv3_small_100", 64))


def plannable(models: tuple, pretrained: frozenset[str]) -> list[tuple[str, int]]:
    """The rungs a plan may choose: those above SCRATCH_LARGEST only with local weights for their model."""
    too_large = set(models[:models.index(SCRATCH_LARGEST)]) if SCRATCH_LARGEST in models else set()
    return [(m, s) for m, s in models if m in pretrained or (m, s) not in too_large]


def image_candidates(hardware: Hardware, pretrained: frozenset[str] = frozenset()) -> list[Candidate]:
    """What to measure or estimate for this hardware: each model a plan may choose (see `plannable`) at each
    precision worth trying. Timing a rung no plan can take would only eat the measuring window."""
    if hardware.gpus:
        precision = "bf16" if hardware.gpus[0].bf16 else "fp16"
        return [Candidate(m, s, precision, 32) for m, s in plannable(GPU_CANDIDATES, pretrained)]
    # those with weights first (a plan prefers them), then cheapest first, so a short measuring window still
    # covers the models a short budget can afford
    order = sorted(reversed(CPU_CANDIDATES), key=lambda rung: rung[0] not in pretrained)
    return [Candidate(m, s, p, 32) for m, s in order for p in ("fp32", "bf16")]


def ladder_models() -> tuple[str, ...]:
    """Every model the ladders may plan, once each, in ladder order (what `runner weights list` shows)."""
    return tuple(dict.fromkeys(m for m, _ in GPU_CANDIDATES + CPU_CANDIDATES))
