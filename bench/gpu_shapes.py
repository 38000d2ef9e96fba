"""The `masks`, `boxes` and `points` groups of bench/gpu_check.py's sections: masks_run, whole `runner run`s of two
mask replicas on the card (tgs-salt's slices and contrails' band records, the mask engine alone), boxes_run, one of
vinbigdata's radiographs (the centre-point detector alone), and points_run, one of kuzushiji's pages (the
characters reader alone), SHAPES_RUN seconds each. Each run must end within its
budget with every planned fold of its engine trained on the card and beat its prior; it reports the folds' images a
second and batch, and the card's busy share over the training window from the run's NVML samples."""
from __future__ import annotations

import statistics
from pathlib import Path

from gpu_common import EXIT_SLACK, Check, gpu_busy, graded, runner_run, with_killed

SHAPES_RUN = 120  # seconds each run: the budget the mask and box replicas are learned in on 2 cores
MASKS = {"tgs-salt-identification-challenge": "masks",
         "google-research-identify-contrails-reduce-global-warming": "masks"}
BOXES = {"vinbigdata-chest-xray-abnormalities-detection": "centres"}
POINTS = {"kuzushiji-recognition": "characters"}


def card_share(report: dict, run_dir: Path) -> dict:
    """NVML's figures over the run's training window (from planning's end to the cut), from its monitor samples."""
    from runner.machine.monitor import read_samples

    start = (report.get("timings") or {}).get("planned")
    window = (report.get("plan") or {}).get("window_seconds")
    samples = read_samples(run_dir / "monitor.jsonl") if (run_dir / "monitor.jsonl").is_file() else []
    inside = [s for s in samples if start is not None and window and start <= s.get("t", -1) <= start + window]
    busy = gpu_busy(inside)
    return dict(busy_share=round(busy["gpu_util_mean"] / 100, 3) if busy["gpu_util_mean"] is not None else None,
                memory_used_max=busy["gpu_memory_used_max"], samples=busy["samples"])


def one_run(check: Check, competition: str, engine: str) -> dict:
    from runner.demo import write_demo

    root = write_demo(competition, check.work / f"{competition}-data") / "prepared"
    run_dir = check.work / f"{competition}-run"
    done, report, wall = runner_run(competition, root / "public", run_dir, SHAPES_RUN, "--engines", engine)
    planned = next((m for m in (report.get("plan") or {}).get("members", []) if m["engine"] == engine), {})
    settings = planned.get("settings", {})
    rates = [line["images_per_second"] for line in report.get("epochs") or []
             if line.get("member") == engine and line.get("epoch", 1) > 1 and line.get("images_per_second")]
    member = next((m for m in report.get("members") or [] if m["name"] == engine), {})
    score = graded(run_dir / "submission.csv", competition, root / "private")
    prior = graded(run_dir / "baseline.csv", competition, root / "private")
    out = dict(engine=engine, returncode=done.returncode, wall_seconds=wall, budget=SHAPES_RUN,
               folds=planned.get("folds"), folds_done=member.get("folds_done", 0), device=settings.get("device"),
               precision=settings.get("precision"), batch=settings.get("batch_size"), per_gpu=settings.get("per_gpu"),
               fold_images_per_second=round(statistics.median(rates), 1) if rates else None, test_score=score,
               prior_score=prior, **card_share(report, run_dir), output=(done.stdout + done.stderr)[-1500:])
    out["ok"] = done.returncode == 0 and wall <= SHAPES_RUN + EXIT_SLACK and out["device"] == "cuda" and \
        out["folds_done"] >= (out["folds"] or 1) and score is not None and prior is not None and score > prior
    return with_killed(out, report)


def shapes_run(check: Check, competitions: dict[str, str]) -> dict:
    """Each competition's whole run with its engine alone; ok when every one is."""
    runs = {competition: one_run(check, competition, engine) for competition, engine in competitions.items()}
    out = dict(runs=runs, ok=all(r["ok"] for r in runs.values()))
    out["summary"] = "; ".join(
        f"{c.split('-')[0]}: {r['engine']} {r['folds_done']}/{r['folds']} folds on {r['device']} ({r['precision']}, "
        f"batch {r['batch']}, {r['per_gpu']} a card, {r['fold_images_per_second']} img/s a fold, card busy "
        f"{r['busy_share']}), test {r['test_score']} against the prior's {r['prior_score']}, exit {r['returncode']} "
        f"in {r['wall_seconds']} s" for c, r in runs.items())
    return out


def masks_run(check: Check) -> dict:
    return shapes_run(check, MASKS)


def boxes_run(check: Check) -> dict:
    return shapes_run(check, BOXES)


def points_run(check: Check) -> dict:
    return shapes_run(check, POINTS)
