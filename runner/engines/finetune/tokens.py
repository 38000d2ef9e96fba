"""Texts as token ids, computed once for every fold, and batches that pad each text only to its bucket's longest.

Length bucketing: the rows are shuffled, cut into pools of BUCKET_POOL batches, each pool sorted by length and
cut into batches, and the batches shuffled: every batch holds texts of about one length, so a batch of tweets
is not padded to the length of an essay, and each epoch still sees the rows in a new order.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

PAD_MULTIPLE = 8  # batch widths are multiples of this: tensor cores want it, and a CPU builds its kernels for
# each new shape, so fewer distinct widths start faster
BUCKET_POOL = 50  # batches sorted together: long enough runs of similar lengths, still random across the epoch


def tokenise(folder: Path, texts: list[str], max_length: int) -> list[np.ndarray]:
    """Each text's token ids (special tokens included, cut at `max_length`), with the model's own tokenizer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    encoded = tokenizer(texts, truncation=True, max_length=max_length, add_special_tokens=True)["input_ids"]
    return [np.asarray(ids, dtype=np.int32) for ids in encoded]


def bucketed(lengths: np.ndarray, batch: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Row indices in batches of similar lengths, in a random order."""
    order = rng.permutation(len(lengths))
    pool = batch * BUCKET_POOL
    batches = []
    for start in range(0, len(order), pool):
        chunk = order[start:start + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches.extend(chunk[i:i + batch] for i in range(0, len(chunk), batch))
    return [batches[i] for i in rng.permutation(len(batches))]


def by_length(lengths: np.ndarray, batch: int) -> list[np.ndarray]:
    """Row indices in batches sorted by length (prediction: the least padding; the caller restores the order)."""
    order = np.argsort(lengths, kind="stable")
    return [order[i:i + batch] for i in range(0, len(order), batch)]


def padded(ids: list[np.ndarray], rows: np.ndarray, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """(input ids, attention mask) of `rows`, padded to the longest of them."""
    width = -(-max(len(ids[r]) for r in rows) // PAD_MULTIPLE) * PAD_MULTIPLE
    tokens = np.full((len(rows), width), pad, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        tokens[i, :len(ids[r])] = ids[r]
        mask[i, :len(ids[r])] = 1
    return tokens, mask
