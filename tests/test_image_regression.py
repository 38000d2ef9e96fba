"""The timm CNN fits values (petfinder's Pawpularity): a linear output per target fitted by MSE to the targets
standardised on the fold's training rows, and its outputs put back in the targets' units, so a fold of values in
the thousands predicts values in the thousands (the independent-sigmoid path of a label set would give 0-1)."""
import time

import numpy as np
import pytest
import torch

from runner.competition.catalog import load_spec
from runner.engines.base import FoldData
from runner.engines.timm.settings import ImageSettings
from runner.engines.timm.training import Trainer, train

PLAN = ImageSettings(model="resnet18", image_size=32, batch_size=8, precision="fp32", max_epochs=1, patience=5)


def value_fold(tmp_path, rows=48, side=40) -> FoldData:
    """Random images whose target is 1000 plus a hundred times their mean brightness (0-1)."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, (rows + 8, side, side, 3), dtype=np.uint8)
    cache = tmp_path / "images.npy"
    np.save(cache, images)
    y = (1000 + 100 * images[:rows].mean(axis=(1, 2, 3)) / 255)[:, None]
    train_rows, val_rows, test_rows = list(range(rows - 16)), list(range(rows - 16, rows)), list(range(rows, rows + 8))
    return FoldData(load_spec("petfinder"), None, train_rows, y[:-16], val_rows, y[-16:], test_rows, str(cache))


def test_a_value_fold_is_fitted_on_standardised_targets_and_answered_in_their_units(tmp_path):
    data = value_fold(tmp_path)
    trainer = Trainer(PLAN, data)
    assert trainer.regression and not trainer.multilabel
    labels = torch.as_tensor(data.y_train, dtype=torch.float32)
    centred = (data.y_train - data.y_train.mean()) / data.y_train.std()
    assert float(trainer.loss(torch.zeros_like(labels), labels)) == pytest.approx(float(np.mean(centred ** 2)),
                                                                                  rel=1e-4)
    assert float(trainer.outputs(torch.zeros((1, 1)))) == pytest.approx(float(data.y_train.mean()), rel=1e-6)


def test_a_cnn_fold_on_values_predicts_in_the_targets_units(tmp_path):
    data = value_fold(tmp_path)
    result = train(PLAN, data, tmp_path, time.monotonic() + 300)
    assert result.val_pred.shape == (16, 1) and result.test_pred.shape == (8, 1)
    assert np.abs(result.val_pred - data.y_val).mean() < 3 * data.y_train.std() + 1  # near 1000-1100, not 0-1
