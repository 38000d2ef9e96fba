"""Local pretrained weights: `$RUNNER_WEIGHTS_DIR/<model>.safetensors|.pth|.bin`. No model hub is ever contacted;
in production the folder is baked into the image or mounted."""
from __future__ import annotations

import os
from pathlib import Path

SUFFIXES = (".safetensors", ".pth", ".bin")


def find_weights(model: str) -> Path | None:
    folder = os.environ.get("RUNNER_WEIGHTS_DIR")
    if not folder:
        return None
    return next((Path(folder) / f"{model}{s}" for s in SUFFIXES if (Path(folder) / f"{model}{s}").is_file()), None)
