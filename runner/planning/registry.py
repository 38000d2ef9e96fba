"""The engine registry: engine names to their classes, loaded when first asked for.

The supervisor, the slots and the fold worker only ever meet engines through this registry and the interface in
`runner.engines.base`: adding an engine is one module (or package) named by its key and one line in `REGISTRY`
(or a `name=module:Class` entry in $RUNNER_ENGINES, for engines that live outside this package). It names the
engines' modules in strings only: the plan's vocabulary stays below the engines, which speak it.
"""
from __future__ import annotations

import importlib
import os
from functools import cache

# name -> "module:Class". Order is only the order engines are asked for members; the plan orders them by value.
REGISTRY = {
    "lightgbm": "runner.engines.lightgbm:LightGbm",
    "catboost": "runner.engines.catboost:CatBoost",
    "xgboost": "runner.engines.xgboost:XGBoost",
    "linear": "runner.engines.linear:Linear",
    "knn": "runner.engines.knn:Knn",
    "tfidf": "runner.engines.tfidf:Tfidf",
    "encoder": "runner.engines.encoder:SentenceEncoder",
    "finetune": "runner.engines.finetune.engine:FineTune",
    "timm": "runner.engines.timm.engine:Timm",
    "pixels": "runner.engines.pixels:Pixels",
    "features": "runner.engines.features:Features",
    "spectrogram": "runner.engines.timm.spectrogram:Spectrogram",
    "sound": "runner.engines.sound:Sound",
    "unet": "runner.engines.unet.engine:Restore",
    "masks": "runner.engines.masks.engine:Masks",
    "boxes": "runner.engines.boxes:Boxes",
    "centres": "runner.engines.centres.engine:Centres",
    "characters": "runner.engines.centres.characters:Characters",
}
EXTRA_ENGINES_VARIABLE = "RUNNER_ENGINES"  # "name=module:Class,..." adds engines; fold processes inherit it


def _entries() -> dict[str, str]:
    entries = dict(REGISTRY)
    for item in filter(None, os.environ.get(EXTRA_ENGINES_VARIABLE, "").split(",")):
        name, _, ref = item.partition("=")
        entries[name.strip()] = ref.strip()
    return entries


def engine_names() -> list[str]:
    return list(_entries())


@cache
def _load(name: str, ref: str):
    module, _, cls = ref.partition(":")
    return getattr(importlib.import_module(module), cls)()


def get_engine(name: str):
    """The engine registered under `name`, a `runner.engines.base.Engine` (KeyError naming the known ones
    otherwise). Unannotated on purpose: this module names the engines in strings only, so that the plan's
    vocabulary, which parses each member's settings through it, stays below the engines that speak it."""
    entries = _entries()
    if name not in entries:
        raise KeyError(f"no engine {name!r}; registered: {', '.join(entries)}")
    return _load(name, entries[name])


def pretrained_models() -> frozenset[str]:
    """Every engine's models with local pretrained weights (what planning prefers)."""
    return frozenset().union(*(get_engine(name).pretrained() for name in engine_names()))


def weight_models() -> tuple[str, ...]:
    """Every model some engine can start from pretrained weights, once each, in registry order."""
    return tuple(dict.fromkeys(m for name in engine_names() for m in get_engine(name).weights()))
