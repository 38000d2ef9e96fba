"""The `runs` group of bench/gpu_check.py's sections, whole `runner run`s as a user starts them: fork_safety (the
dog-breed demo's CNN under tests/cuda_guard, its fold processes sampled in NVML), leased_gpus (that run's folds on
its leased card alone; a card the machine lacks refused), audio (the whale replica) and image_to_image (the
denoising replica), each with its private helpers and constants."""
from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

import torch

from gpu_common import (EXIT_SLACK, REPO, RUN_GRACE, Check, child_env, dog_breed_demo, folds_started, graded,
                        read_report, runner_run, with_killed)

GUARD = REPO / "tests" / "cuda_guard"  # sitecustomize that refuses CUDA in the supervisor and the fork server
NO_SUCH_CARD = "GPU-00000000-0000-0000-0000-000000000000"
# seconds for the run given NO_SUCH_CARD, which must stop at reading `--gpus`, spending none of them: room for a
# loaded machine's imports and data reading to get there (5 s did not, on a CPU busy with other work)
REFUSAL_BUDGET = 30
# the audio run's engines; its budget is the whole runs' (Sizes.run_seconds): a CPU smoke run needs about 12 s for
# one fold of the CNN alone, and asserts only that a fold started: 20 s leave room for the fork server's torch
# import on a core another test shares (about 10 s there)
AUDIO_ENGINES = {"cuda": "spectrogram,sound", "cpu": "spectrogram"}
DENOISE_RUN = 90  # seconds: the denoising replica's whole run on a GPU (its U-Net folds take seconds each)
DENOISE_FOLD_SECONDS = 6.0  # the smoke run's one U-Net fold on the CPU
NOISY_RMSE = 0.207  # the denoising replica's noisy test pages submitted as they are (bench/results/modalities.json)


# --- 9. fork safety and a leased card, in one guarded whole run ------------------------------------------------

def card_uuids() -> list[str]:
    import pynvml

    pynvml.nvmlInit()
    try:
        return [pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
                for i in range(pynvml.nvmlDeviceGetCount())]
    finally:
        pynvml.nvmlShutdown()


def compute_pids() -> dict[str, set[int]]:
    """The processes NVML sees computing on each card, by UUID."""
    import pynvml

    pynvml.nvmlInit()
    try:
        found = {}
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            running = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            found[pynvml.nvmlDeviceGetUUID(handle)] = {p.pid for p in running}
        return found
    finally:
        pynvml.nvmlShutdown()


def guarded_run(check: Check, public: Path, gpus: str, log: Path) -> tuple[subprocess.Popen, dict, Path, float]:
    """`runner run` under the guard, NVML's compute processes sampled (on CUDA) while it runs; with its wall
    seconds timed from here."""
    import psutil

    out = check.work / "guarded-run"
    # the guard first, then whatever the caller's path held (packages installed beside the interpreter's, offline)
    env = child_env(GUARD, REPO, RUNNER_CUDA_GUARD_LOG=str(log))
    started = time.monotonic()
    # its output to a file, not a pipe: a pipe nobody reads until the end would stop the run once full
    with open(check.work / "guarded-run.out", "w") as output:
        process = subprocess.Popen([sys.executable, "-m", "runner.cli", "run", "dog-breed", "--data", str(public),
                                    "--budget", f"{check.sizes.run_seconds}s", "--out", str(out), "--engines", "timm",
                                    "--gpus", gpus], cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT)
    seen: dict[str, set[int]] = {}
    deadline = started + check.sizes.run_seconds + RUN_GRACE
    while process.poll() is None:
        if check.cuda:
            ours = {p.pid for p in psutil.Process(process.pid).children(recursive=True)} | {process.pid}
            for card, pids in compute_pids().items():
                seen.setdefault(card, set()).update(pids & ours)
        with contextlib.suppress(subprocess.TimeoutExpired):  # returns the moment it ends: its wall time is ours
            process.wait(timeout=0.5)
        if time.monotonic() > deadline:
            process.kill()
            process.wait()
    return process, seen, out, round(time.monotonic() - started, 1)


def fork_safety(check: Check) -> dict:
    public = dog_breed_demo(check) / "prepared" / "public"
    log = check.work / "cuda-guard.log"
    leased = card_uuids()[-1] if check.cuda else "none"
    process, seen, out, wall = guarded_run(check, public, leased, log)
    report = read_report(out)
    member = next((m for m in report.get("members", []) if m["name"].startswith("timm")), {})
    device = (report.get("plan") or {}).get("members", [{}])[0].get("settings", {}).get("device")
    budget = check.sizes.run_seconds
    result = dict(returncode=process.returncode, wall_seconds=wall, budget=budget, leased=leased, data=str(public),
                  folds_started=folds_started(report, "timm"), folds_done=member.get("folds_done", 0),
                  cv=member.get("cv"), device=device, test_score=graded(out / "submission.csv", "dog-breed",
                                                                         public.parent / "private"),
                  cuda_started_in_parent=log.read_text()[:3000] if log.exists() else None,
                  fold_pids_by_card={k: sorted(v) for k, v in seen.items() if v},
                  output=(check.work / "guarded-run.out").read_text()[-2000:])
    # on a card a fold must finish; on a CPU smoke run shared with other work, one that started has been forked
    # by the guarded fork server, which is what the guard watches
    trained = result["folds_done"] >= 1 if check.cuda else result["folds_started"] >= 1
    ended = process.returncode == 0 and wall <= budget + EXIT_SLACK and result["test_score"] is not None
    result["ok"] = ended and not log.exists() and trained and device == ("cuda" if check.cuda else "cpu")
    result["summary"] = f"{result['folds_done']} fold(s) of the CNN done ({result['folds_started']} started) on " \
                        f"{device}, CV {result['cv']}, test {result['test_score']}, exit {process.returncode} in " \
                        f"{wall} s of {budget}; CUDA started in a parent: {'YES' if log.exists() else 'never'}"
    return with_killed(result, report)


def audio(check: Check) -> dict:
    from runner.demo import write_demo

    root = write_demo("the-icml-2013-whale-challenge-right-whale-redux", check.work / "audio-data") / "prepared"
    out, budget, engines = check.work / "audio-run", check.sizes.run_seconds, AUDIO_ENGINES[check.device]
    done, report, wall = runner_run("whale", root / "public", out, budget, "--engines", engines)
    cnn = next((m for m in report.get("members", []) if m["engine"] == "spectrogram"), {})
    planned = next((m for m in (report.get("plan") or {}).get("members", []) if m["engine"] == "spectrogram"), {})
    settings = planned.get("settings", {})
    result = dict(returncode=done.returncode, wall_seconds=wall, budget=budget, engines=engines,
                  folds_started=folds_started(report, cnn.get("name", "spectrogram")),
                  folds_done=cnn.get("folds_done", 0), cv=cnn.get("cv"), blend_cv=report.get("cv_score"),
                  test_score=graded(out / "submission.csv", "whale", root / "private"),
                  device=settings.get("device"), model=settings.get("model"), batch=settings.get("batch_size"),
                  per_gpu=settings.get("per_gpu"), augment=settings.get("augment"),
                  output=(done.stdout + done.stderr)[-2000:])
    # as fork_safety: on a CPU smoke run, a fold started (one may not finish on a CPU shared with other work)
    trained = result["folds_done"] >= 1 if check.cuda else result["folds_started"] >= 1
    result["ok"] = done.returncode == 0 and wall <= budget + EXIT_SLACK and result["test_score"] is not None \
        and trained and result["augment"] == "spectrogram" and result["device"] == check.device
    result["summary"] = f"{result['folds_done']} fold(s) of {result['model']} on spectrograms done " \
                        f"({result['folds_started']} started) on {result['device']} (batch {result['batch']}, " \
                        f"{result['per_gpu']} a card), CV {result['cv']}, blend {result['blend_cv']}, test " \
                        f"{result['test_score']}, exit {done.returncode} in {wall} s of {budget}"
    return with_killed(result, report)


def _denoising_fold(public: Path, work: Path) -> dict:
    """One U-Net fold of the replica on the CPU, for DENOISE_FOLD_SECONDS: the engine's code paths, not a score."""
    from runner.common import metrics
    from runner.data.loading import load_dataset
    from runner.planning.registry import get_engine
    from runner.engines.unet.planning import RestoreSettings
    from runner.units.worker import fold_data
    from runner.units.tasks import assign_folds
    from runner.competition.catalog import load_spec

    dataset = load_dataset(load_spec("denoising-dirty-documents"), public, work)
    data = fold_data(dataset, "page", assign_folds(dataset.y, False, 4, 0, groups=dataset.groups), 0)
    work.mkdir(parents=True, exist_ok=True)
    result = get_engine("unet").train_fold(RestoreSettings(width=8, batch_size=8, threads=torch.get_num_threads()),
                                           data, work, time.monotonic() + DENOISE_FOLD_SECONDS)
    return dict(folds_done=1, device="cpu", epochs=result.epochs, cv=metrics.score("rmse", data.y_val,
                                                                                    result.val_pred))


def image_to_image(check: Check) -> dict:
    from runner.demo import write_demo
    from runner.competition.grade import grade
    from runner.competition.catalog import load_spec

    public = write_demo("denoising-dirty-documents", check.work / "denoising-data") / "prepared"
    if not check.cuda:
        out = _denoising_fold(public / "public", check.work / "denoising-fold")
        out["ok"] = out["epochs"] >= 1
        out["summary"] = f"one U-Net fold on the CPU: {out['epochs']} epochs, validation RMSE {out['cv']:.4f}"
        return out
    run_dir = check.work / "denoising-run"
    done, report, wall = runner_run("denoising-dirty-documents", public / "public", run_dir, DENOISE_RUN,
                                    "--engines", "unet,lightgbm")
    net = next((m for m in report.get("members", []) if m["engine"] == "unet"), {})
    planned = next((m for m in (report.get("plan") or {}).get("members", []) if m["engine"] == "unet"), {})
    settings = planned.get("settings", {})
    graded = grade(run_dir / "submission.csv", load_spec("denoising-dirty-documents"), public / "private").score \
        if (run_dir / "submission.csv").is_file() else None
    out = dict(returncode=done.returncode, wall_seconds=wall, budget=DENOISE_RUN,
               folds_done=net.get("folds_done", 0), cv=net.get("cv"), blend_cv=report.get("cv_score"),
               test_rmse=graded, device=settings.get("device"), precision=settings.get("precision"),
               batch=settings.get("batch_size"), per_gpu=settings.get("per_gpu"),
               output=(done.stdout + done.stderr)[-2000:])
    out["ok"] = done.returncode == 0 and wall <= DENOISE_RUN + EXIT_SLACK and out["folds_done"] >= 1 and \
        out["device"] == "cuda" and graded is not None and graded < NOISY_RMSE
    out["summary"] = f"{out['folds_done']} U-Net fold(s) on {out['device']} ({out['precision']}, batch " \
                     f"{out['batch']}, {out['per_gpu']} a card), CV {out['cv']}, blend {out['blend_cv']}, test " \
                     f"RMSE {graded}, exit {done.returncode} in {wall} s of {DENOISE_RUN}"
    return with_killed(out, report)


def leased_gpus(check: Check) -> dict:
    run = check.results.get("fork_safety", {})
    # the demo's data (where write_demo put it, whether or not fork_safety ran in this process), so the run gets
    # past reading the sample submission to the check of `--gpus`
    refused, _, _ = runner_run("dog-breed", dog_breed_demo(check) / "prepared" / "public", check.work / "refused",
                               REFUSAL_BUDGET, "--gpus", NO_SUCH_CARD)
    said = refused.returncode == 2 and "--gpus" in refused.stderr
    out = dict(unknown_card_refused=said, refusal_returncode=refused.returncode,
               refusal=refused.stderr.strip().splitlines()[-2:])
    refusal = f"a card the machine lacks {'refused naming --gpus' if said else 'NOT refused'} " \
              f"(exit {refused.returncode})"
    if not check.cuda:  # no card for a fold process to appear on: the refusal alone
        return dict(out, ok=said, summary=f"{refusal}; fold processes on a card need CUDA")
    cards = run.get("fold_pids_by_card", {})
    on_lease = set(cards) <= {run.get("leased")} and bool(cards)
    out.update(leased=run.get("leased"), cards_with_fold_processes=sorted(cards), ok=said and on_lease)
    out["summary"] = f"fold processes on {sorted(cards) or 'no card NVML showed'} (leased {run.get('leased')}); " \
                     f"{refusal}"
    return out
