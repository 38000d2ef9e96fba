"""What the networks trained on pictures from scratch share (the box detector, the mask U-Net): a
timm encoder's feature maps (`features_only`) from the local cache's pretrained weights where it holds them
(nothing is downloaded here), else random init. Imported by fold processes only: it imports timm."""
from __future__ import annotations

import logging

log = logging.getLogger("runner.backbones")


def create_encoder(name: str, levels: int):
    """The encoder's first `levels` feature maps, from local pretrained weights where the cache has them, else
    random init; and which of the two it is."""
    import timm

    from runner.common.weights import find_weights, timm_source

    indices = tuple(range(levels))
    weights = find_weights(name)
    if weights is not None:
        try:
            return timm.create_model(name, pretrained=True, features_only=True, out_indices=indices,
                                     **timm_source(weights)), f"pretrained: {weights.label}"
        except Exception as exc:  # noqa: BLE001 - a corrupt or partial checkpoint fails in many ways; all mean the same
            log.warning("%s: weights in %s could not be loaded (%s): random init", name, weights.label, exc)
    return timm.create_model(name, pretrained=False, features_only=True, out_indices=indices), "random init"
