"""The `memory` group of bench/gpu_check.py's sections: hardware (`probe_hardware` as the planner sees it, torch's
view of the device, a C compiler and Python's headers), memory (`estimate_memory` against the measured warm peak),
confirm_batch (the probe reaching the target share of the device) and oom_backoff (real CUDA out-of-memory errors,
in the probe and in the training loop's recovery), each with its private helpers and constants."""
from __future__ import annotations

import os
import shutil
import sysconfig
import time
from pathlib import Path
from unittest import mock

import torch

from gpu_common import (CLASSES, NEEDS_CUDA, Check, error_pct, failed, image_settings, mib, probe_model, probed,
                        release)

OOM_START_FACTOR = 4  # the probe starts this many times above the batch the estimate fits: several real OOMs first
RECOVER_MODEL = ("resnet18", 224)  # small and fast: the recovery loop is what is under test, not the model
RECOVER_START = 512  # the batch the mid-fold OOM hits
RECOVER_FITS = 64  # the ballast leaves room for this batch (twice its estimate): the loop must step down to it
RECOVER_ROWS = 1088  # 1024 train rows (two steps at the starting batch; drop_last needs rows >= batch) + 64 val
RECOVER_SECONDS = 300  # the recovering fold's deadline: one epoch at each batch tried takes seconds


# --- 1. hardware ---------------------------------------------------------------------------------------------

def nvml_driver() -> str | None:
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            driver = pynvml.nvmlSystemGetDriverVersion()
            return driver.decode() if isinstance(driver, bytes) else driver
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver or no library: nothing to report
        return None


def hardware(check: Check) -> dict:
    from runner.machine.hardware import probe_hardware

    found = probe_hardware().to_json()
    compilers = {name: shutil.which(name) for name in ("cc", "gcc", "clang")}
    out = dict(hardware=found, torch=torch.__version__, torch_cuda=torch.version.cuda,
               cuda_available=torch.cuda.is_available(), nvml_driver=nvml_driver(), compilers=compilers,
               python_headers=Path(sysconfig.get_paths()["include"], "Python.h").is_file())
    if check.cuda:
        props = torch.cuda.get_device_properties(0)
        out.update(device=props.name, compute_capability=[props.major, props.minor],
                   device_memory_gib=round(props.total_memory / 2**30, 1), torch_devices=torch.cuda.device_count())
        if not found["gpus"]:  # the planner would plan for a CPU on a machine whose GPU torch can use
            out.update(ok=False, error="probe_hardware found no GPU, torch sees "
                                       f"{torch.cuda.device_count()} (CUDA_VISIBLE_DEVICES="
                                       f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
    gpus = ", ".join(f"{g['name']} {g['memory_bytes'] / 2**30:.0f} GiB" for g in found["gpus"]) or "no GPU"
    out["summary"] = f"{gpus}; {found['cpus']} CPUs; driver {out['nvml_driver']}; torch CUDA {torch.version.cuda}; " \
                     f"compiler {'yes' if any(compilers.values()) else 'NONE'}, Python.h " \
                     f"{'yes' if out['python_headers'] else 'NONE'}"
    return out


# --- 2. memory estimate against the warm peak ----------------------------------------------------------------

def warm_peak_row(check: Check, model: str, size: int, batch: int, estimate) -> dict:
    """The measured warm peak (with the runtime constant, as `_warm_peak` returns it) against the estimate; also
    the allocator's own peak against the estimate without that constant."""
    from runner.engines.timm.training import _warm_peak
    from runner.engines.networks import CUDA_RUNTIME_BYTES

    peak = _warm_peak(image_settings(check, model, size, batch), CLASSES)(batch)
    allocator = peak - CUDA_RUNTIME_BYTES
    return dict(measured_mib=mib(peak), error_pct=error_pct(estimate.total(batch), peak),
                allocator_peak_mib=mib(allocator),
                allocator_error_pct=error_pct(estimate.on_device(0).total(batch), allocator))


def memory(check: Check) -> dict:
    from runner.engines.networks import CUDA_RUNTIME_BYTES
    from runner.engines.timm.memory import estimate_memory

    rows = []
    for model, size in check.sizes.memory_models:
        estimate = estimate_memory(model, size, check.precision, CLASSES).on_device(CUDA_RUNTIME_BYTES)
        for batch in check.sizes.memory_batches:
            row = dict(model=model, image_size=size, batch=batch, precision=check.precision,
                       per_sample_mib=mib(estimate.per_sample_bytes), estimate_mib=mib(estimate.total(batch)))
            try:
                row.update(warm_peak_row(check, model, size, batch, estimate) if check.cuda else
                           dict(measured=NEEDS_CUDA["skipped"]))
            except Exception as exc:  # noqa: BLE001 - one model failing leaves the other rows
                row.update(failed(exc))
            release()
            rows.append(row)
    out = dict(rows=rows, runtime_constant_mib=mib(CUDA_RUNTIME_BYTES))
    errors = [abs(r["error_pct"]) for r in rows if "error_pct" in r]
    if check.cuda:
        free, total = torch.cuda.mem_get_info()
        # device memory in use that torch's allocator does not hold: this process's CUDA context and library
        # handles (and any other process on the card), against the constant the planner adds
        out["outside_allocator_mib"] = mib(total - free - torch.cuda.memory_reserved())
        out["worst_error_pct"] = max(errors, default=None)
    if any("error" in r for r in rows):
        out["ok"] = False
    out["summary"] = f"worst error {max(errors):.1f}% over {len(errors)} rows; outside the allocator " \
                     f"{out['outside_allocator_mib']:.0f} MiB vs {out['runtime_constant_mib']:.0f} MiB assumed" \
        if errors else f"{len(rows)} estimates (no measurement on {check.device})"
    return out


# --- 3. confirm_batch ----------------------------------------------------------------------------------------

def confirm(check: Check) -> dict:
    from runner.engines.timm.training import confirm_batch

    model, size, start = probe_model(check)
    confirmed, note = confirm_batch(image_settings(check, model, size, start), CLASSES)
    out = dict(model=model, image_size=size, precision=check.precision, start_batch=start,
               **probed(confirmed, note))
    out["ok"] = out["within_target"]
    out["summary"] = f"{model}@{size}: batch {start} -> {out['batch']}, warm peak {out['fraction']} of the device " \
                     f"(target 0.8 +- 0.1), tried {out['tried']}"
    return out


# --- 7. out of memory -----------------------------------------------------------------------------------------

def probe_from_oom(check: Check) -> dict:
    """confirm_batch starting far above what fits: the probe's OOM back-off, against the fresh probe's batch."""
    from runner.engines.timm.training import confirm_batch
    from runner.engines.networks import decay_batch_step

    model, size, fits = probe_model(check)
    start = OOM_START_FACTOR * fits
    confirmed, note = confirm_batch(image_settings(check, model, size, start), CLASSES)
    out = dict(model=model, image_size=size, start_batch=start, **probed(confirmed, note))
    fresh = check.results.get("confirm_batch", {}).get("batch")
    if fresh:
        high, low = max(fresh, out["batch"]), min(fresh, out["batch"])
        out.update(fresh_probe_batch=fresh, within_one_step=low >= decay_batch_step(high))
    return out


def recovery_fold(check: Check):
    """A fold of random pixels in a decoded-image cache, as runner.engines.timm.training.train reads them."""
    import numpy as np

    from runner.engines.base import FoldData
    from runner.engines.timm.images import cache_side
    from runner.competition.catalog import load_spec

    side, rng = cache_side(RECOVER_MODEL[1]), np.random.default_rng(0)
    cache = check.work / "recover.npy"
    pixels = np.lib.format.open_memmap(cache, mode="w+", dtype=np.uint8, shape=(RECOVER_ROWS, side, side, 3))
    pixels[:] = rng.integers(0, 256, pixels.shape, dtype=np.uint8)
    pixels.flush()
    labels, train = rng.integers(0, CLASSES, RECOVER_ROWS), RECOVER_ROWS - 64
    rows = np.arange(RECOVER_ROWS)
    return FoldData(load_spec("dog-breed"), list(range(CLASSES)), rows[:train], labels[:train], rows[train:],
                    labels[train:], rows[train:], str(cache))


def recover_mid_fold(check: Check) -> dict:
    """runner.engines.timm.training.train's own loop meeting a real OOM in its first epoch: a ballast tensor
    holds all but room for RECOVER_FITS; the probe is bypassed so the planned batch reaches the loop."""
    from runner.engines.timm.training import train
    from runner.engines.timm.memory import estimate_memory

    model, size = RECOVER_MODEL
    data = recovery_fold(check)
    room = 2 * estimate_memory(model, size, check.precision, CLASSES).total(RECOVER_FITS)
    torch.cuda.init()
    free, _ = torch.cuda.mem_get_info()
    ballast = torch.empty(max(0, free - room), dtype=torch.uint8, device="cuda")
    settings = image_settings(check, model, size, RECOVER_START, epochs=1, max_epochs=1)
    out_dir = check.work / "recover"
    out_dir.mkdir(exist_ok=True)
    try:
        with mock.patch("runner.engines.timm.training.confirm_batch", lambda s, classes, max_batch=None: (s, "")):
            result = train(settings, data, out_dir, time.monotonic() + RECOVER_SECONDS)
    finally:
        del ballast
        release()
    return dict(model=model, image_size=size, start_batch=RECOVER_START, ballast_gib=round((free - room) / 2**30, 1),
                room_mib=mib(room), batch=result.changes.get("batch_size", RECOVER_START), epochs=result.epochs,
                message=result.message)


def oom_backoff(check: Check) -> dict:
    out = {}
    for name, part in (("probe", probe_from_oom), ("training_loop", recover_mid_fold)):
        try:
            out[name] = {"ok": True, **part(check)}
        except Exception as exc:  # noqa: BLE001 - the probe failing leaves the training loop's test
            out[name] = failed(exc)
        release()
    out["ok"] = all(part["ok"] for part in out.values())
    probe, loop = out["probe"], out["training_loop"]
    out["summary"] = f"probe {probe.get('start_batch')} -> {probe.get('batch', 'failed')} " \
                     f"(fresh probe {probe.get('fresh_probe_batch')}); training loop {RECOVER_START} -> " \
                     f"{loop.get('batch', 'failed')}"
    return out
