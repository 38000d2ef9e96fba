"""Training one U-Net fold: random patches of the fold's training pages, an L2 loss, whole validation and test
pages restored in tiles; it stops at an epoch boundary before the deadline, keeping the best epoch's model.

A fold's rows are pixels (`page` view: the noisy page's path, the clean one's, row and column): it learns from
every pixel of its training pages, and answers for the pixels its rows name.
"""
from __future__ import annotations

import gc
import logging
import time
from functools import partial

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from runner.common import metrics
from runner.data.pages import gray_image
from runner.engines.base import EPOCH_LOG, EngineResult, FoldData, say_ready
from runner.engines.networks import fold_share_of_card, probe_batch, warm_peak_bytes
from runner.engines.optimising import Epochs, Optimised, Progress, fit_epochs, fold_result, from_start_on_oom
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


def train(settings: RestoreSettings, data: FoldData, out_dir, deadline: float) -> EngineResult:
    torch.set_num_threads(settings.threads)
    torch.manual_seed(settings.seed)
    started = time.monotonic()
    patches = Patches(data.x_train, settings.patch, torch.device(settings.device), settings.seed)
    probe_started = time.monotonic()
    settings, probed = confirm_batch(settings, patches)
    probe_seconds = time.monotonic() - probe_started
    (out_dir / EPOCH_LOG).unlink(missing_ok=True)

    def attempt(tried: RestoreSettings):
        progress, net = Progress(tried.max_epochs), Restorer(tried)
        fallback, metric = float(np.mean(data.y_train)), data.spec.metric
        steps = patches.steps(tried.batch_size)

        def validated() -> tuple[float, np.ndarray]:
            val = net.answer(data.x_val, fallback)
            return metrics.score(metric, data.y_val, val), val

        run = Epochs(lambda: (patches.batch(tried.batch_size) for _ in range(steps)),
                     steps, validated,
                     len(data.x_test) / max(1, len(data.x_val)), partial(metrics.better, metric), score_name="",
                     unit="patches")
        say_ready(out_dir, probe_seconds)  # pages on the device, batch confirmed, net built: training follows
        return net, progress, fit_epochs(net, run, deadline, out_dir, progress)

    (net, progress, stopped), tried, backed_off = from_start_on_oom(settings, attempt)
    message = "; ".join(n for n in (f"{patches.side} px patches of {len(patches.pages)} pages", probed, *backed_off)
                        if n)
    return fold_result(net, progress, stopped, lambda: net.answer(data.x_test, float(np.mean(data.y_train))),
                       out_dir, started, message, settings.batch_size)
