"""Which GPUs a run may use: the list given by `runner run --gpus` or an inherited `CUDA_VISIBLE_DEVICES`, read
in every form CUDA reads it (indices, `GPU-` UUIDs or their unique prefixes, `MIG-` UUIDs) and resolved against
the cards this machine has, by their UUIDs.

A fold process is handed its card's UUID, never a slot number: a runner restricted to GPUs 2 and 5 starts its
folds on 2 and 5, whatever order CUDA would number them in. A list it cannot read, or a card this machine does not
have, is an error naming where the list came from, never a silent run on the CPU.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from runner.common.errors import RunnerError

NO_GPU = {"", "-1", "none"}  # the usual ways to hide every GPU from CUDA (and `--gpus none`)
ENTRY = re.compile(r"^(\d+|GPU-[0-9A-Fa-f-]+|MIG-[0-9A-Za-z/-]+)$")  # what CUDA_VISIBLE_DEVICES holds


class DeviceError(RunnerError):
    """GPUs named by `--gpus` or `CUDA_VISIBLE_DEVICES` that cannot be read, or that this machine does not have."""


@dataclass(frozen=True)
class Card:
    """One device NVML can address: a whole GPU (by its index in PCI bus order, as nvidia-smi numbers them) or a
    MIG instance on one (index None)."""
    uuid: str
    index: int | None = None


def requested(gpus: str | None, environ: dict[str, str]) -> tuple[str, str | None]:
    """(where the list comes from, the list): `--gpus` when given, else `CUDA_VISIBLE_DEVICES`, else (…, None):
    every card the machine has."""
    if gpus is not None:
        return "--gpus", gpus
    return "CUDA_VISIBLE_DEVICES", environ.get("CUDA_VISIBLE_DEVICES")


def parse(text: str, source: str) -> tuple[str, ...]:
    """The entries of a device list, each checked for a form CUDA accepts; () for a list that hides every GPU."""
    if text.strip().lower() in NO_GPU:
        return ()
    entries = tuple(e.strip() for e in text.split(","))
    for entry in entries:
        if not ENTRY.match(entry):
            raise DeviceError(f"{source}={text!r}: cannot read {entry!r} as a GPU; use indices (2,5), UUIDs "
                              "(GPU-8f3a…) or MIG UUIDs (MIG-…), separated by commas, or 'none'")
    return entries


def _match(entry: str, cards: tuple[Card, ...]) -> list[Card]:
    if entry.isdigit():
        return [c for c in cards if c.index == int(entry)]
    return [c for c in cards if c.uuid.lower().startswith(entry.lower())]  # CUDA takes a unique UUID prefix


def select(entries: tuple[str, ...], cards: tuple[Card, ...], source: str) -> tuple[str, ...]:
    """The UUIDs of the cards `entries` name, in their order; an entry naming no card, several, or a card named
    before is an error that says which cards there are."""
    chosen: list[str] = []
    for entry in entries:
        found = _match(entry, cards)
        if len(found) != 1:
            have = ", ".join(f"{c.index} ({c.uuid})" if c.index is not None else c.uuid for c in cards) or "none"
            why = "names more than one card" if found else "is not a GPU of this machine"
            raise DeviceError(f"{source}: {entry!r} {why}; this machine's GPUs: {have}")
        if found[0].uuid in chosen:
            raise DeviceError(f"{source}: {entry!r} names {found[0].uuid} a second time")
        chosen.append(found[0].uuid)
    return tuple(chosen)


def machine_cards(nvml) -> tuple[Card, ...]:
    """Every GPU NVML sees, and every MIG instance on them."""
    cards = []
    for index in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        cards.append(Card(nvml.nvmlDeviceGetUUID(handle), index))
        try:
            slots = nvml.nvmlDeviceGetMaxMigDeviceCount(handle)
        except nvml.NVMLError:  # no MIG on this card or driver
            continue
        for slot in range(slots):
            try:
                cards.append(Card(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot))))
            except nvml.NVMLError:  # an empty MIG slot
                continue
    return tuple(cards)


def visible(gpus: str | None, environ: dict[str, str], nvml) -> tuple[str, ...]:
    """The UUIDs of the cards this run may use. `nvml` is the started NVML module, or None where no driver
    answers: then a list that names any GPU is an error, and no list means none."""
    source, text = requested(gpus, environ)
    entries = parse(text, source) if text is not None else None
    if nvml is None:
        if entries:
            raise DeviceError(f"{source}={text!r} names GPUs, but no NVIDIA driver answers on this machine "
                              "(NVML could not start); leave it out (or give 'none') to run on the CPU")
        return ()
    cards = machine_cards(nvml)
    if entries is None:
        return tuple(c.uuid for c in cards if c.index is not None)
    return select(entries, cards, source)
