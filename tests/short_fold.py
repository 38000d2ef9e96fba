"""A short fold of an image engine on a cache a test wrote, the shape the centre-point engines' tests share: the rows
split into training, validation and test, the fold trained against a paced deadline (its network's imports paid
before the clock starts), then its time, its predictions' shapes and its epoch log checked."""
from __future__ import annotations

import importlib
import time
from pathlib import Path

import numpy as np

from pace import paced
from runner.engines.base import EPOCH_LOG, FoldData
from runner.planning.registry import get_engine


def short_fold(spec, engine: str, settings, cache: Path, y: np.ndarray, counts: tuple[int, int, int], out_dir: Path,
               seconds: float, slack: float, warm: str):
    """(the fold's result, the validation rows) of `engine` trained for `seconds` (paced, `slack` more allowed to
    end) on `counts` (training, validation, test) rows of `y` read from `cache`; `warm`: the module whose import
    brings torch and timm in before the clock starts."""
    n_train, n_val, n_test = counts
    train, val, test = np.split(np.arange(len(y)), [n_train, n_train + n_val])
    data = FoldData(spec, None, train, y[train], val, y[val], test, str(cache))
    importlib.import_module(warm)
    started = time.monotonic()
    result = get_engine(engine).train_fold(settings, data, out_dir, time.monotonic() + paced(seconds))
    assert time.monotonic() - started < paced(seconds) + slack
    assert result.val_pred.shape == (n_val, y.shape[1]) and result.test_pred.shape == (n_test, y.shape[1])
    assert len((Path(out_dir) / EPOCH_LOG).read_text().splitlines()) == result.epochs >= result.best_epoch >= 1
    return result, val
