"""The `dog_breed` group of bench/gpu_check.py's sections: dog_breed_run, a whole `runner run` of the dog-breed demo
at five times its photos (copies written at once and merged), every engine, which must end within its budget, beat
the class prior by a wide margin and train every CNN fold; it reports how the run used the card (`card_use`: its
busy share of the training window from the run's NVML samples, the CNN's training time in it, the CNN folds' images
a second against the bare training loop of the same model and batch on the same card); with its helpers and
constants."""
from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from runner.engines.timm.cudnn import policy_name

from gpu_common import EXIT_SLACK, REPO, Check, child_env, gpu_busy, graded, runner_run, with_killed

DOG_BREED_RUN = 180  # seconds: the realistic dog-breed run's budget on a card, every engine (no --engines)
# the demo written this many times (seeds 0, 1, ...; at once, a process each: one writes about 75 photos a second)
# and merged: 4,800 train and 1,200 test photos, five times the demo's (the real competition has 85 a breed)
DOG_BREED_COPIES = 5
BEAT_PRIOR = 0.5  # a wide margin: a log loss at most half the class prior's (ln 120 = 4.79 on the demo)
# the tables of a dog-breed demo, appended when copies are merged (the photos are moved)
DEMO_TABLES = ("prepared/public/labels.csv", "prepared/public/sample_submission.csv", "prepared/private/test.csv")
WRITE_DEMO = "import sys; from runner.demo import write_demo; print(write_demo('dog-breed', sys.argv[1], " \
             "seed=int(sys.argv[2])))"  # one copy, in its own process: prints the competition's folder
CNN_ENGINES = ("timm",)  # the members that train a CNN on the photos
PROBED = re.compile(r"batch (\d+) probed")  # a fold's message: the batch its probe confirmed


# --- 10. the dog-breed demo at a realistic size, every engine ---------------------------------------------------

def merge_demos(roots: list[Path]) -> Path:
    """Copies of one demo competition (the same layout and columns) merged into the first: their photos moved
    there, their tables' rows appended to its own; the others removed."""
    first = roots[0]
    for table in DEMO_TABLES:
        rows = [(root / table).read_text().splitlines(keepends=True) for root in roots]
        (first / table).write_text("".join(rows[0] + [line for other in rows[1:] for line in other[1:]]))
    for root in roots[1:]:
        for folder in ("train", "test"):
            for photo in (root / "prepared" / "public" / folder).iterdir():
                photo.rename(first / "prepared" / "public" / folder / photo.name)
        shutil.rmtree(root)
    return first


def many_photos(work: Path, copies: int) -> Path:
    """The dog-breed demo written `copies` times (seeds 0, 1, ...) by as many processes at once, merged into one
    competition of `copies` times the photos; its folder."""
    writers = [subprocess.Popen([sys.executable, "-c", WRITE_DEMO, str(work / f"copy{seed}"), str(seed)],
                                cwd=REPO, env=child_env(), stdout=subprocess.PIPE, text=True)
               for seed in range(copies)]
    written = [writer.communicate()[0] for writer in writers]
    if any(writer.returncode for writer in writers):
        raise RuntimeError(f"writing the dog-breed demo failed (exits {[w.returncode for w in writers]})")
    return merge_demos([Path(out.strip().splitlines()[-1]) for out in written])


def union_seconds(spans: list[tuple[float, float]], start: float, end: float) -> float:
    """Seconds of [start, end] that at least one of the spans covers."""
    covered, reach = 0.0, start
    for a, b in sorted((max(a, start), min(b, end)) for a, b in spans):
        if b > reach:
            covered += b - max(a, reach)
            reach = b
    return covered


def training_spans(report: dict, members: set[str]) -> list[tuple[float, float]]:
    """When each fold of `members` trained, in the run's seconds: its epochs, placed before its test predictions
    at its unit's end (a fold killed before predicting: its epochs lines, ending at its kill)."""
    ends = {(u["member"], u["fold"]): u["end"] for u in report.get("units") or [] if u.get("end") is not None}
    done = {(f["member"], f["fold"]): f for f in report.get("folds") or [] if f.get("member") in members}
    epochs: dict[tuple, float] = {}
    for line in report.get("epochs") or []:
        if line.get("member") in members:
            key = (line["member"], line["fold"])
            epochs[key] = epochs.get(key, 0.0) + line.get("seconds", 0.0)
    spans = []
    for key, end in ends.items():
        if key[0] not in members or key[1] < 0:
            continue
        fold = done.get(key)
        trained = fold["train_seconds"] if fold else epochs.get(key, 0.0)
        after = fold.get("predict_seconds", 0.0) if fold else 0.0
        if trained > 0:
            spans.append((end - after - trained, end - after))
    return spans


def card_use(report: dict, samples: list[dict]) -> dict:
    """How the run used its card in the training window (from planning's end to the cut, as the plan sized it):
    NVML's mean busy share over the samples in it, the seconds a CNN fold trained in it (folds side by side counted
    once), the planned CNN members' folds done of theirs (and apart, those of the repeats and bags the run added
    while the card had room), and the CNN folds' images a second (the median over their epochs
    after the first, each fold's own: folds sharing the card each get a part of it) and the batch they trained at."""
    start = (report.get("timings") or {}).get("planned")
    window = (report.get("plan") or {}).get("window_seconds")
    cnn = {m["name"]: m for m in report.get("members") or [] if m.get("engine") in CNN_ENGINES}
    planned = {m["name"]: m for m in (report.get("plan") or {}).get("members") or [] if m["name"] in cnn}
    extras = {name: m for name, m in cnn.items() if name not in planned}  # repeats and bags added to fill the card
    out = dict(cnn_folds_done=sum(m.get("folds_done") or 0 for name, m in cnn.items() if name in planned),
               cnn_folds=sum(m.get("folds") or 0 for name, m in cnn.items() if name in planned),
               extra_cnn_folds_done=sum(m.get("folds_done") or 0 for m in extras.values()),
               extra_cnn_folds=sum(m.get("folds") or 0 for m in extras.values()))
    if start is None or not window:
        return out
    inside = [s for s in samples if start <= s.get("t", -1) <= start + window]
    busy = gpu_busy(inside)
    trained = union_seconds(training_spans(report, set(cnn)), start, start + window)
    rates = [line["images_per_second"] for line in report.get("epochs") or []
             if line.get("member") in cnn and line.get("epoch", 1) > 1 and line.get("images_per_second")]
    batches = [int(m.group(1)) for f in report.get("folds") or [] if f.get("member") in cnn
               and (m := PROBED.search(f.get("message") or ""))]
    first = next(iter(planned.values()), None)
    out.update(window=[round(start, 1), round(start + window, 1)], samples=busy["samples"],
               busy_share=round(busy["gpu_util_mean"] / 100, 3) if busy["gpu_util_mean"] is not None else None,
               cnn_training_seconds=round(trained, 1), cnn_training_share=round(trained / window, 3),
               fold_images_per_second=round(statistics.median(rates), 1) if rates else None,
               batch=statistics.mode(batches) if batches else (first or {}).get("settings", {}).get("batch_size"),
               per_gpu=(first or {}).get("per_gpu"))
    if first:
        settings = first["settings"]
        out.update(model=settings["model"], image_size=settings["image_size"], precision=settings["precision"])
    return out


def against_bare_loop(use: dict, device: str) -> dict:
    """The bare training loop of the CNN member's model and batch on this card, in a fresh process, and the run's
    fold pace against it."""
    from gpu_cold_start import Rung, bare_loop

    if not use.get("model") or not use.get("batch"):
        return dict(bare_loop=None)
    bare = bare_loop(Rung(use["model"], use["image_size"], use["batch"], use["precision"]), device)
    rate = bare.get("images_per_second")
    fold = use.get("fold_images_per_second")
    return dict(bare_loop=bare, fold_vs_bare=round(fold / rate, 3) if fold and rate else None)


def dog_breed_run(check: Check) -> dict:
    """The dog-breed demo at five times its photos, every engine, for DOG_BREED_RUN seconds: it must end within its
    budget and beat the class prior by a wide margin, in CV and on the private answers."""
    started = time.monotonic()
    root = many_photos(check.work / "dog-breed-data", DOG_BREED_COPIES)
    public, private, out = root / "prepared" / "public", root / "prepared" / "private", check.work / "dog-breed-run"
    photos = {split: len(list((public / split).iterdir())) for split in ("train", "test")}
    written = round(time.monotonic() - started, 1)
    done, report, wall = runner_run("dog-breed", public, out, DOG_BREED_RUN)
    cv, prior_cv = report.get("cv_score"), report.get("baseline_cv_score")
    test, prior_test = graded(out / "submission.csv", "dog-breed", private), graded(out / "baseline.csv",
                                                                                   "dog-breed", private)
    planned = (report.get("plan") or {}).get("members", [])
    result = dict(returncode=done.returncode, wall_seconds=wall, budget=DOG_BREED_RUN, photos=photos,
                  write_seconds=written, cv=cv, prior_cv=prior_cv, test_score=test, prior_test_score=prior_test,
                  blend=report.get("submission_source"), stop_reason=report.get("stop_reason"),
                  pretrained=[m["name"] for m in planned if m.get("settings", {}).get("init") == "pretrained"
                              or m.get("engine") == "features"],  # features: embeddings of a pretrained backbone
                  members=[{k: m.get(k) for k in ("name", "engine", "slot", "folds_done", "cv", "weight", "status")}
                           for m in report.get("members", [])], output=(done.stdout + done.stderr)[-2000:],
                  # when the run's stages ended: the measuring process and the fork server started before the data
                  # was read (on a machine with cores to spare), the plan, training, the submission
                  timings=report.get("timings") or {})
    from runner.machine.monitor import read_samples

    use = card_use(report, read_samples(out / "monitor.jsonl"))
    use.update(against_bare_loop(use, check.device))
    result["card_use"], result["cudnn_policy"] = use, policy_name()
    wide = [s is not None and p is not None and s <= BEAT_PRIOR * p for s, p in ((cv, prior_cv), (test, prior_test))]
    every_fold = use["cnn_folds"] > 0 and use["cnn_folds_done"] == use["cnn_folds"]
    result["ok"] = done.returncode == 0 and wall <= DOG_BREED_RUN + EXIT_SLACK and all(wide) and every_fold
    result["summary"] = f"{photos['train']} + {photos['test']} photos (written in {written} s), every engine: " \
                        f"exit {done.returncode} in {wall} s of {DOG_BREED_RUN}; log loss CV {cv} (prior " \
                        f"{prior_cv}), test {test} (prior {prior_test}); {result['blend']}; planned pretrained: " \
                        f"{', '.join(result['pretrained']) or 'none'}; cuDNN {result['cudnn_policy']}; " \
                        + card_line(use)
    return with_killed(result, report)


def card_line(use: dict) -> str:
    """The card's use in one line."""
    bare = (use.get("bare_loop") or {}).get("images_per_second")
    return (f"CNN folds {use['cnn_folds_done']} of {use['cnn_folds']} (added repeats and bags "
            f"{use.get('extra_cnn_folds_done')} of {use.get('extra_cnn_folds')}); in the {use.get('window')} s "
            f"training window the card was busy {use.get('busy_share')} of it and the CNN trained "
            f"{use.get('cnn_training_seconds')} s "
            f"({use.get('cnn_training_share')}); a fold {use.get('fold_images_per_second')} img/s at batch "
            f"{use.get('batch')} ({use.get('per_gpu')} a card) against the bare loop's {bare}")
