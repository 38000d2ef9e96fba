"""Training one U-Net fold: random patches of the fold's training pages, an L2 loss, whole validation and test
pages restored in tiles; it stops at an epoch boundary before the deadline, keeping the best epoch's model.

A fold's rows are pixels (`page` view: the noisy page's path, the clean one's, row and column): it learns from
every pixel of its training pages, and answers for the pixels its rows name.
"""
from __future__ import annotations

import gc
import logging
import time
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from runner.common import metrics
from runner.common.atomic import replacing
from runner.common.budget import past
from runner.data.pages import gray_image
from runner.engines.base import EPOCH_LOG, DeadlineReached, EngineResult, FoldData, say_ready
from runner.engines.networks import (EpochStats, epoch_seconds, fold_share_of_card, log_epoch, probe_batch,
                                     warm_peak_bytes)
from runner.engines.optimising import Optimised, from_start_on_oom
from runner.engines.unet.network import UNet, restore_page
from runner.engines.unet.planning import MIN_STEPS, RestoreSettings
from runner.engines.unet.shape import MULTIPLE

log = logging.getLogger("runner.restore")


class Patches:
    """Random training patches of the fold's pages, flipped at random, on the fold's device."""

    def __init__(self, rows: pd.DataFrame, patch: int, device: torch.device, seed: int):
        pairs = [(gray_image(n), gray_image(c))
                 for n, c in rows[["noisy", "clean"]].drop_duplicates().itertuples(index=False)]
        pairs = [(n, c) for n, c in pairs if n is not None and c is not None and n.shape == c.shape]
        self.side = min(patch, *(min(n.shape) for n, _ in pairs)) // MULTIPLE * MULTIPLE
        self.pages = [(torch.from_numpy(n).to(device), torch.from_numpy(c).to(device)) for n, c in pairs]
        areas = np.array([n.size for n, _ in pairs], dtype=float)
        self.pixels, self.weights = int(areas.sum()), areas / areas.sum()
        self.rng = np.random.default_rng(seed)

    def batch(self, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        noisy, clean, s = [], [], self.side
        for k in self.rng.choice(len(self.pages), size=size, p=self.weights):
            n, c = self.pages[k]
            top, left = (int(self.rng.integers(0, d - s + 1)) for d in n.shape)
            flips = [d for d, f in ((0, self.rng.random() < 0.5), (1, self.rng.random() < 0.5)) if f]
            for image, out in ((n, noisy), (c, clean)):
                crop = image[top:top + s, left:left + s]
                out.append(crop.flip(flips) if flips else crop)
        return torch.stack(noisy)[:, None], torch.stack(clean)[:, None]

    def steps(self, batch: int) -> int:
        """An epoch: as many patches as the pages have pixels, and at least MIN_STEPS batches (each epoch
        restores the validation pages once: on small pages that would otherwise cost more than the training)."""
        return max(MIN_STEPS, -(-self.pixels // (self.side * self.side * batch)))


class Restorer(Optimised):
    """One fold's network, optimiser and precision."""

    def __init__(self, settings: RestoreSettings):
        super().__init__(UNet(settings.width), settings)

    def step(self, noisy: torch.Tensor, clean: torch.Tensor) -> float:
        self.model.train()
        with self.autocast:
            loss = F.mse_loss(self.model(noisy).float(), clean)
        return self.update(loss)

    def answer(self, rows: pd.DataFrame, fallback: float) -> np.ndarray:
        """The restored intensity of each row's pixel (`fallback` where its page is missing or unreadable)."""
        self.model.eval()
        out = np.full(len(rows), fallback, dtype=np.float64)
        for path, index in rows.groupby("noisy", observed=True).indices.items():
            page = gray_image(path)
            if page is None:
                log.warning("%s: cannot read it: its pixels get %.3f", path, fallback)
                continue
            restored = restore_page(self.model, page, self.device, self.autocast)
            r, c = rows["row"].to_numpy()[index], rows["col"].to_numpy()[index]
            inside = (r >= 0) & (r < page.shape[0]) & (c >= 0) & (c < page.shape[1])
            out[index[inside]] = restored[r[inside], c[inside]]
        return out[:, None]


def confirm_batch(settings: RestoreSettings, patches: Patches) -> tuple[RestoreSettings, str]:
    """On a GPU, move the planned batch towards the fold's share of the target memory by real steps."""
    if settings.device != "cuda":
        return settings, ""
    share = fold_share_of_card(settings.per_gpu, settings.memory_target)

    def warm_peak(batch: int) -> int:
        gc.collect()
        torch.cuda.empty_cache()
        probe = Restorer(settings)
        noisy, clean = patches.batch(batch)
        try:
            return warm_peak_bytes(partial(probe.step, noisy, clean))
        finally:
            del probe
            torch.cuda.empty_cache()

    # the planned batch is already the largest the pages make useful (MIN_STEPS an epoch): the probe only lowers it
    result = probe_batch(warm_peak, settings.batch_size, share, target=settings.memory_target,
                         max_batch=settings.batch_size)
    return settings.model_copy(update=dict(batch_size=result.batch)), \
        f"batch {result.batch} probed: warm peak {result.fraction:.0%} of its share (tried {list(result.tried)})"


@dataclass
class Progress:
    epochs_planned: int
    epoch: int = 0
    best: float | None = None
    best_epoch: int = 0
    best_val: np.ndarray | None = None
    times: list[float] = field(default_factory=list)
    reserve: float = 1.0  # seconds kept for the test pages, from the validation pages' pace


def _epochs(settings: RestoreSettings, data: FoldData, patches: Patches, net: Restorer, deadline: float,
            out_dir, progress: Progress) -> bool:
    """Train until the planned epochs, the patience or the deadline; True when the deadline ended it."""
    p, metric, fallback = progress, data.spec.metric, float(np.mean(data.y_train))
    steps, val_pixels = patches.steps(settings.batch_size), max(1, len(data.x_val))
    if not p.epoch:  # the first epoch warms the rate up (from random init, at a high rate), then the planned decay
        net.schedule(max(0, round(settings.epochs) - 1) * steps, warmup=steps)
    while p.epoch < p.epochs_planned:
        t0, stats = time.monotonic(), EpochStats()
        for _ in range(steps):
            if past(deadline - p.reserve):
                return True
            stats.loss += net.step(*patches.batch(settings.batch_size))
            stats.samples += settings.batch_size
        stats.seconds, stats.loss = time.monotonic() - t0, stats.loss / steps
        v0 = time.monotonic()
        val = net.answer(data.x_val, fallback)
        p.reserve = 1.25 * (time.monotonic() - v0) * len(data.x_test) / val_pixels + 1.0
        score = metrics.score(metric, data.y_val, val)
        p.epoch += 1
        p.times.append(time.monotonic() - t0)
        log_epoch(out_dir / EPOCH_LOG, p.epoch, stats, score, net.device, p.times[-1], unit="patches")
        if p.best is None or metrics.better(metric, score, p.best):
            p.best, p.best_epoch, p.best_val = score, p.epoch, val
            with replacing(out_dir / "model.pt") as tmp:
                torch.save(net.model.state_dict(), tmp)
        left = deadline - time.monotonic() - p.reserve
        if p.epoch == 1:  # fit the cosine to the epochs the time left holds
            p.epochs_planned = max(1, min(settings.max_epochs, 1 + int(left // p.times[0])))
            net.schedule((p.epochs_planned - 1) * steps)
        if past(deadline - epoch_seconds(p.times) - p.reserve):
            return p.epoch < p.epochs_planned
        if p.epoch - p.best_epoch >= settings.patience:
            return False
    return False


def train(settings: RestoreSettings, data: FoldData, out_dir, deadline: float) -> EngineResult:
    torch.set_num_threads(settings.threads)
    torch.manual_seed(settings.seed)
    started = time.monotonic()
    patches = Patches(data.x_train, settings.patch, torch.device(settings.device), settings.seed)
    probe_started = time.monotonic()
    settings, probed = confirm_batch(settings, patches)
    probe_seconds = time.monotonic() - probe_started
    (out_dir / EPOCH_LOG).unlink(missing_ok=True)
    planned_batch = settings.batch_size

    def attempt(tried: RestoreSettings):
        progress = Progress(tried.max_epochs)
        net = Restorer(tried)
        say_ready(out_dir, probe_seconds)  # pages on the device, batch confirmed, net built: training follows
        return net, progress, _epochs(tried, data, patches, net, deadline, out_dir, progress)

    (net, progress, stopped), settings, backed_off = from_start_on_oom(settings, attempt)
    notes = [probed, *backed_off]
    if progress.best is None:
        raise DeadlineReached("no epoch finished before the fold's deadline")
    train_seconds, t0 = time.monotonic() - started, time.monotonic()
    net.model.load_state_dict(torch.load(out_dir / "model.pt", map_location=net.device, weights_only=True))
    test = net.answer(data.x_test, float(np.mean(data.y_train)))
    mean_epoch = epoch_seconds(progress.times)
    return EngineResult(progress.best_val, test, out_dir / "model.pt", epochs=progress.epoch,
                        best_epoch=progress.best_epoch, epoch_seconds=mean_epoch, min_train_seconds=mean_epoch,
                        train_seconds=train_seconds, predict_seconds=time.monotonic() - t0,
                        stopped_by_deadline=stopped,
                        message="; ".join(n for n in (f"{patches.side} px patches of {len(patches.pages)} pages",
                                                      *notes) if n),
                        changes={"batch_size": settings.batch_size} if settings.batch_size < planned_batch else {})
