"""The `dog_breed` group of bench/gpu_check.py's sections: dog_breed_run, a whole `runner run` of the dog-breed demo
at five times its photos (copies written at once and merged), every engine, which must end within its budget and
beat the class prior by a wide margin; with its helpers and constants."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from gpu_common import EXIT_SLACK, REPO, Check, child_env, graded, runner_run, with_killed

DOG_BREED_RUN = 180  # seconds: the realistic dog-breed run's budget on a card, every engine (no --engines)
# the demo written this many times (seeds 0, 1, ...; at once, a process each: one writes about 75 photos a second)
# and merged: 4,800 train and 1,200 test photos, five times the demo's (the real competition has 85 a breed)
DOG_BREED_COPIES = 5
BEAT_PRIOR = 0.5  # a wide margin: a log loss at most half the class prior's (ln 120 = 4.79 on the demo)
# the tables of a dog-breed demo, appended when copies are merged (the photos are moved)
DEMO_TABLES = ("prepared/public/labels.csv", "prepared/public/sample_submission.csv", "prepared/private/test.csv")
WRITE_DEMO = "import sys; from runner.demo import write_demo; print(write_demo('dog-breed', sys.argv[1], " \
             "seed=int(sys.argv[2])))"  # one copy, in its own process: prints the competition's folder


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
                           for m in report.get("members", [])], output=(done.stdout + done.stderr)[-2000:])
    wide = [s is not None and p is not None and s <= BEAT_PRIOR * p for s, p in ((cv, prior_cv), (test, prior_test))]
    result["ok"] = done.returncode == 0 and wall <= DOG_BREED_RUN + EXIT_SLACK and all(wide)
    result["summary"] = f"{photos['train']} + {photos['test']} photos (written in {written} s), every engine: " \
                        f"exit {done.returncode} in {wall} s of {DOG_BREED_RUN}; log loss CV {cv} (prior " \
                        f"{prior_cv}), test {test} (prior {prior_test}); {result['blend']}; planned pretrained: " \
                        f"{', '.join(result['pretrained']) or 'none'}"
    return with_killed(result, report)
