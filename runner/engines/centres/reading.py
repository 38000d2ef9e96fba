"""Training one fold of the character reader (runner.engines.centres.characters).

A fold's rows are pages of the image cache and their rows of points (runner.common.point_rows); each character's
box, in its page's pixels, is brought to the cache's cells by the page's own size (beside the cache: images.
sizes_path). The losses: the one heatmap's focal loss, the L1 of each centre's size and offset (the detector's),
and the cross-entropy of the code read from the embedding at each true centre, among the fold's codes (those its
training pages hold). Prediction keeps each page's likeliest heatmap peaks, as many as a row has slots, names each
peak's code and writes its box back in the page's pixels, with the confidence peak x the code's probability (a
point counts only with its code right). Pages are never mirrored: a mirrored character is another shape.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from runner.common import point_rows
from runner.engines.backbones import create_encoder
from runner.engines.base import EPOCH_LOG, EngineResult, FoldData, say_ready
from runner.engines.centres import heatmaps
from runner.engines.centres.images import sizes_path
from runner.engines.centres.network import CharacterNet, as_input
from runner.engines.centres.training import CacheRows, Radiographs, box_loss, focal_loss
from runner.engines.optimising import Epochs, Optimised, Progress, fit_epochs, fold_result, from_start_on_oom

MIN_PEAK = 0.02  # a heatmap peak below this is no character worth a slot (the cut is tuned far above it)
PREDICT_BATCH = 32  # pages a prediction pass holds at once


def known_codes(rows: np.ndarray) -> np.ndarray:
    """The codes (code points) the truth rows hold, sorted: the classes a fold's reader names."""
    grid = point_rows.slots(rows)
    return np.unique(grid[..., 1][grid[..., 0] >= point_rows.TRUE_FROM]).astype(np.int64)


@dataclass
class PageTargets:
    """A batch of pages' targets as tensors on the device: the heatmap's (heatmaps.encode_points), each character's
    centre cell (page, row, column) and its code's index among the fold's codes (-1: a code it does not know)."""

    heat: torch.Tensor
    regression: torch.Tensor
    centres: torch.Tensor
    where: torch.Tensor
    codes: torch.Tensor

    @classmethod
    def of(cls, rows: np.ndarray, sizes: np.ndarray, cells: int, vocabulary: np.ndarray,
           device: torch.device) -> PageTargets:
        boxes, codes = [], []
        for row, (width, height) in zip(point_rows.slots(rows), sizes):
            truth = row[row[:, 0] >= point_rows.TRUE_FROM]
            boxes.append(truth[:, 2:6] * np.array([cells / width, cells / height] * 2))
            codes.append(truth[:, 1])
        heat, regression, centres, where = heatmaps.encode_points(boxes, cells)
        codes = np.concatenate(codes).astype(np.int64) if codes else np.zeros(0, np.int64)
        index = np.searchsorted(vocabulary, codes).clip(0, max(0, len(vocabulary) - 1))
        known = len(vocabulary) > 0 and vocabulary[index] == codes
        index = np.where(known, index, -1)
        return cls(*(torch.from_numpy(a).to(device) for a in (heat, regression, centres, where, index)))


def reader_loss(model: CharacterNet, heads, targets: PageTargets, size_weight: float) -> torch.Tensor:
    """The heatmap's focal loss, the boxes' L1 at the true centres, the codes' cross-entropy there."""
    heat, regression, embedding = heads
    loss = focal_loss(heat.float(), targets) + box_loss(regression.float(), targets, size_weight)
    known = targets.codes >= 0
    if known.any():
        page, row, column = targets.where[known].T
        logits = model.classify(embedding[page, :, row, column])
        loss = loss + F.cross_entropy(logits.float(), targets.codes[known])
    return loss


def found(model: CharacterNet, heads, slots: int) -> tuple[np.ndarray, ...]:
    """Each page's likeliest peaks, at most `slots`: (confidence, code index, centre x, centre y, width, height),
    each (pages, peaks), in cells; a peak's confidence its heat times its code's probability (0: no peak)."""
    heat, regression, embedding = heads
    p = torch.sigmoid(heat[:, 0].float())
    cells_x = p.shape[-1]
    local = p >= F.max_pool2d(p[:, None], 3, stride=1, padding=1)[:, 0]
    score = torch.where(local & (p >= MIN_PEAK), p, torch.zeros_like(p)).flatten(1)
    peak, at = score.topk(min(slots, score.shape[1]), dim=1)
    reg = regression[:, 0].float().flatten(2).gather(2, at[:, None].expand(-1, heatmaps.REGRESSION, -1))
    taken = embedding.flatten(2).gather(2, at[:, None].expand(-1, embedding.shape[1], -1)).transpose(1, 2)
    sure, code = torch.softmax(model.classify(taken).float(), dim=-1).max(dim=-1)
    row, column = at // cells_x, at % cells_x
    parts = (peak * sure, code, column + reg[:, 2], row + reg[:, 3], reg[:, 0].abs(), reg[:, 1].abs())
    return tuple(t.detach().float().cpu().numpy() if t.is_floating_point() else t.cpu().numpy() for t in parts)


def as_point_rows(parts: tuple[np.ndarray, ...], sizes: np.ndarray, cells: int, vocabulary: np.ndarray,
                  width: int) -> np.ndarray:
    """Rows of points of `width` columns from `found`'s peaks in cells, boxes in each page's pixels."""
    confidence, code, cx, cy, w, h = parts
    if not len(vocabulary):  # a fold whose training pages hold no character names none
        return np.zeros((len(sizes), width))
    scale_x, scale_y = sizes[:, :1] / cells, sizes[:, 1:] / cells
    w, h = w * scale_x, h * scale_y
    pages = np.stack([confidence, vocabulary[code].astype(np.float64), cx * scale_x - w / 2, cy * scale_y - h / 2,
                      w, h], axis=-1)
    return point_rows.as_rows([page[page[:, 0] > 0] for page in pages], width)


class Pages(Radiographs):
    """The fold's pages (rows of the cache), their own sizes and rows of points, served in shuffled batches."""

    def __init__(self, settings, data: FoldData):
        super().__init__(settings, data)
        sizes = np.load(sizes_path(data.image_cache))
        self.sizes = {part: sizes[np.asarray(rows, dtype=int)]
                      for part, rows in (("train", data.x_train), ("val", data.x_val), ("test", data.x_test))}
        self.vocabulary = known_codes(self.rows)
        self.width = self.rows.shape[1]

    def batches(self, batch: int, device: torch.device):
        """One epoch: every training page once (never mirrored)."""
        order = self.rng.permutation(len(self.train))
        for start in range(0, self.steps(batch) * batch, batch):
            rows = np.sort(order[start:start + batch])
            yield (as_input(self.train[rows], device),
                   PageTargets.of(self.rows[rows], self.sizes["train"][rows], self.cells, self.vocabulary, device))

    def read(self, reader: Reader, part: str, truth: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        """(the mean loss against `truth` where given, else 0; the rows of points read) of the `part`'s pages."""
        images: CacheRows = getattr(self, part)
        sizes, losses, rows = self.sizes[part], [], []
        reader.model.eval()
        with torch.inference_mode():
            for start in range(0, len(images), PREDICT_BATCH):
                chunk = slice(start, start + PREDICT_BATCH)
                with reader.autocast:
                    heads = reader.model(as_input(images[chunk], reader.device))
                if truth is not None:
                    targets = PageTargets.of(truth[chunk], sizes[chunk], self.cells, self.vocabulary, reader.device)
                    losses.append(float(reader_loss(reader.model, heads, targets, reader.settings.size_weight)))
                rows.append(as_point_rows(found(reader.model, heads, self.width // point_rows.SLOT_FIELDS),
                                          sizes[chunk], self.cells, self.vocabulary, self.width))
        out = np.concatenate(rows) if rows else np.zeros((0, self.width))
        return float(np.mean(losses)) if losses else 0.0, out


class Reader(Optimised):
    """One fold's network, optimiser and precision."""

    def __init__(self, settings, codes: int):
        encoder, self.init = create_encoder(settings.encoder, settings.levels)
        super().__init__(CharacterNet(encoder, max(1, codes), settings.decoder_width), settings)

    def step(self, images: torch.Tensor, targets: PageTargets) -> float:
        self.model.train()
        with self.autocast:
            heads = self.model(images)
            loss = reader_loss(self.model, heads, targets, self.settings.size_weight)
        return self.update(loss)


def train(settings, data: FoldData, out_dir, deadline: float) -> EngineResult:
    torch.set_num_threads(settings.threads)
    torch.manual_seed(settings.seed)
    started = time.monotonic()
    pages = Pages(settings, data)
    (out_dir / EPOCH_LOG).unlink(missing_ok=True)

    def attempt(tried):
        progress, net = Progress(tried.max_epochs), Reader(tried, len(pages.vocabulary))
        batch = min(tried.batch_size, max(1, len(pages.train)))
        run = Epochs(lambda: pages.batches(batch, net.device), pages.steps(batch),
                     lambda: pages.read(net, "val", pages.val_rows), len(pages.test) / max(1, len(pages.val)))
        say_ready(out_dir)  # pages in memory, net built: training follows
        return net, progress, fit_epochs(net, run, deadline, out_dir, progress)

    (net, progress, stopped), tried, notes = from_start_on_oom(settings, attempt)
    message = "; ".join((f"{tried.encoder} ({net.init}), {len(pages.train)} training pages at {tried.side} px, "
                         f"{len(pages.vocabulary)} codes", *notes))
    return fold_result(net, progress, stopped, lambda: pages.read(net, "test")[1], out_dir, started, message,
                       settings.batch_size)
