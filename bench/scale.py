"""Every Lite competition at the size a sweep meets: what each stage of a run costs as the data grows, and whether a
whole run at the real size keeps its promise.

For each replica and each share of the real competition's size (`runner demo-data ID --scale real/8` ... `real`),
on this machine, in one process per run:
- generation: the replica written (seconds, and the disk its public folder takes);
- a run with the sweep's budget (`runner run ID --budget 600s`), stopped (SIGTERM) once its first fold has ended:
  reading (the baseline to the data loaded), every prepare step (each member's prepare unit), the plan (data loaded
  to planned, the measuring included) and the first fold (its unit's seconds, and when it ended); the peak memory of
  the run's whole process tree (PSS, sampled each second from outside it) and the most disk its work folder (the
  caches: decoded images, spectrograms, the fold hand-off) held; what the run said it sampled;
- with `--full`, the run at the largest share asked (the real size, unless the replica cannot be made at it in the
  time there is: said in its row's share) goes on to its end instead: exit code, wall, the submission graded by
  MLE-bench's rules against the sample submission's grade. Goal: exit 0, wall <= budget, better than the sample,
  tree peak <= 16 GiB.
How each stage grows: the slope of log(seconds) on log(size) over the shares run (1: linear; below: the run
sampled or a fixed cost dominates; above 1.25: worse than the data, said in the row).

    python scale.py [--only ID ...] [--scales real/8 real/4 real/2 real] [--budget 600] [--full] [--root DIR]
    python scale.py --table    # the results as docs/performance.md's table

Writes bench/results/scale.json; the rows run replace those of the same competition, share and mode, the others
are kept. Data is generated under --root (the system's temporary folder by default) and removed after each
competition unless --keep.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

from _common import RESULTS, save
from quality import commit
from runner.common.csvfiles import find_sample, read_csv_file
from runner.demo import replicas, resolve
from runner.units.tasks import PREPARE
from runner.competition.grade import grade
from runner.common.metrics import better
from runner.machine.monitor import tree_memory
from runner.competition.catalog import load_spec
from runner.results.submission import write_atomic

SHARES = ("real/8", "real/4", "real/2", "real")
BUDGET = 600  # the sweep's budget per competition: 10 minutes
MEMORY_GOAL = 16 * 2**30  # the tree's peak within this on a 24 GiB machine
SAMPLE_EVERY = 1.0  # seconds between memory samples (each reads every process's smaps)
STOP_GRACE = 60  # seconds a stopped run has to write its report and end before it is killed
LINEAR, WORSE = 1.0, 1.25  # growth exponents: as the data, and beyond what noise explains


def share_of(scale: str) -> float:
    return 1.0 if scale == "real" else 1.0 / float(scale.split("/")[1])


def disk_bytes(folder: Path) -> int:
    total = 0
    for path, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(path, name)).st_size
            except OSError:
                continue
    return total


class Watch:
    """Samples a running command's tree memory and its work folder's disk, from a thread, until stopped."""

    def __init__(self, pid: int, work: Path):
        self.process, self.work = psutil.Process(pid), work
        self.peak_pss = self.peak_disk = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_pss = max(self.peak_pss, tree_memory(self.process))
            self.peak_disk = max(self.peak_disk, disk_bytes(self.work)) if self.work.is_dir() else self.peak_disk
            self._stop.wait(SAMPLE_EVERY)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def generate(competition: str, scale: str, root: Path) -> tuple[Path, float]:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "runner.cli", "demo-data", competition, "--out", str(root),
                    "--scale", scale], check=True, capture_output=True, text=True)
    return root / competition, time.monotonic() - started


def first_fold_ended(report_path: Path) -> bool:
    """Whether the report names a training fold (not a prepare step) that has ended."""
    try:
        report = json.loads(report_path.read_text())
    except (OSError, ValueError):
        return False
    return any(f["fold"] != PREPARE for f in report.get("folds", ()))


def run(competition: str, public: Path, out: Path, budget: int, full: bool) -> dict:
    """`runner run` in its own process, watched; stopped after its first fold unless `full`."""
    shutil.rmtree(out, ignore_errors=True)
    started = time.monotonic()
    process = subprocess.Popen([sys.executable, "-m", "runner.cli", "run", competition, "--data", str(public),
                                "--budget", f"{budget}s", "--out", str(out)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    watch, stopped_at = Watch(process.pid, out / "work"), None
    while process.poll() is None:
        if not full and stopped_at is None and first_fold_ended(out / "report.json"):
            stopped_at = time.monotonic() - started
            process.send_signal(signal.SIGTERM)
        if stopped_at is not None and time.monotonic() - started > stopped_at + STOP_GRACE:
            process.kill()
        time.sleep(0.5)
    wall = time.monotonic() - started
    watch.stop()
    stderr = process.stderr.read()[-2000:] if process.stderr else ""
    return dict(exit_code=process.returncode, wall=round(wall, 1), stopped_at=stopped_at and round(stopped_at, 1),
                stop_seconds=stopped_at and round(wall - stopped_at, 1),  # SIGTERM to exit: a stop must be prompt
                peak_pss_gib=round(watch.peak_pss / 2**30, 2), peak_cache_gib=round(watch.peak_disk / 2**30, 3),
                stderr_tail=None if process.returncode == 0 or (stopped_at and not full) else stderr)


def stages(report: dict) -> dict:
    """Seconds of each stage, from the report's marks and unit records."""
    timings = report.get("timings", {})
    units = report.get("units", ())
    folds = [u for u in units if u["fold"] != PREPARE]
    first = min(folds, key=lambda u: u["end"], default=None)
    loaded, planned = timings.get("data_loaded"), timings.get("planned")
    return dict(
        read=round(loaded - timings.get("baseline_written", 0.0), 2) if loaded is not None else None,
        plan=round(planned - loaded, 2) if None not in (loaded, planned) else None,
        prepare={u["member"]: round(u["end"] - u["start"], 2) for u in units if u["fold"] == PREPARE},
        first_fold=round(first["end"] - first["start"], 2) if first else None,
        first_fold_member=first["member"] if first else None,
        first_fold_ended_at=round(first["end"], 2) if first else None,
        training_done=timings.get("training_done"), marks=timings)


def sampled(report: dict) -> list:
    """What the run said it trained on a part of (the report's own field where it has one, else its warnings)."""
    if report.get("sampled"):
        return list(report["sampled"])
    return [w for w in report.get("warnings", ()) if any(k in w for k in ("drawn evenly", "what the budget",
                                                                         "affords"))]


def graded(competition: str, root: Path, out: Path) -> dict:
    """The run's submission and the competition's sample, each graded by MLE-bench's rules (a sample shipped
    zipped, as text normalization's, is graded as the CSV inside)."""
    spec, private = load_spec(competition), root / "prepared" / "private"
    score = grade(out / "submission.csv", spec, private)
    given = find_sample(root / "prepared" / "public", spec.sample_submission)
    write_atomic(read_csv_file(given, literal=True), out / "sample.csv")
    sample = grade(out / "sample.csv", spec, private)
    beats = None if score.score is None or sample.score is None else better(spec.metric, score.score, sample.score)
    return dict(score=score.score, score_error=score.error, sample_score=sample.score, beats_sample=beats)


def measure(competition: str, scale: str, root: Path, budget: int, full: bool) -> dict:
    data, generated = generate(competition, scale, root)
    public = data / "prepared" / "public"
    out = root / f"{competition}-run"
    row = dict(competition=competition, scale=scale, share=share_of(scale), mode="full" if full else "stages",
               commit=commit(), cores=len(os.sched_getaffinity(0)),  # a lane pinned by taskset has fewer
               budget=budget, generate_seconds=round(generated, 1), data_gib=round(disk_bytes(public) / 2**30, 3),
               load=[round(x, 1) for x in os.getloadavg()])
    row.update(run(competition, public, out, budget, full))
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").is_file() else {}
    planned = (report.get("plan") or {}).get("members", ())
    row["planned"] = {m["name"]: dict(fold_seconds=m["fold_seconds"], threads=m["threads"], folds=m["folds"],
                                      prepare_seconds=m.get("prepare_seconds", 0.0)) for m in planned}
    predict: dict[str, float] = {}  # each member's slowest test prediction in a fold
    for f in (f for f in report.get("folds", ()) if f["fold"] != PREPARE):
        predict[f["member"]] = max(predict.get(f["member"], 0.0), f.get("predict_seconds", 0.0))
    row["predict_seconds"] = predict
    row.update(status=report.get("status"), stages=stages(report), sampled=sampled(report),
               error=report.get("error"), killed=len(report.get("killed", ())))
    if full:
        row.update(graded(competition, data, out))
        row["goal_met"] = bool(row["exit_code"] == 0 and row["wall"] <= budget and row["beats_sample"]
                               and row["peak_pss_gib"] * 2**30 <= MEMORY_GOAL)
    print(json.dumps({k: v for k, v in row.items() if k != "stderr_tail"}), flush=True)
    return row


def _slope(points: list[tuple[float, float]]) -> float | None:
    points = [(s, t) for s, t in points if t and t > 0]
    if len({s for s, _ in points}) < 2:
        return None
    x, y = np.log([s for s, _ in points]), np.log([t for _, t in points])
    return round(float(np.polyfit(x, y, 1)[0]), 2)


def growth(rows: list[dict]) -> dict[str, dict]:
    """Per competition, each stage's growth exponent over its shares (and the peak memory's and cache's)."""
    out: dict[str, dict] = {}
    for competition in sorted({r["competition"] for r in rows}):
        mine = sorted((r for r in rows if r["competition"] == competition), key=lambda r: r["share"])
        measures = {"read": lambda r: r["stages"]["read"], "plan": lambda r: r["stages"]["plan"],
                    "first_fold": lambda r: r["stages"]["first_fold"],
                    "prepare": lambda r: sum(r["stages"]["prepare"].values()) or None,
                    "peak_pss": lambda r: r["peak_pss_gib"], "cache": lambda r: r["peak_cache_gib"] or None}
        slopes = {name: _slope([(r["share"], f(r)) for r in mine]) for name, f in measures.items()}
        # a first fold is one member's: where a larger share's first fold was another member's (the CNN, not the
        # pixel table), only the shares whose first fold was the largest share's member are compared
        member = mine[-1]["stages"]["first_fold_member"]
        slopes["first_fold"] = _slope([(r["share"], r["stages"]["first_fold"]) for r in mine
                                       if r["stages"]["first_fold_member"] == member])
        worse = sorted(k for k, v in slopes.items() if v is not None and v > WORSE)
        out[competition] = dict(exponents=slopes, worse_than_linear=worse)
    return out


def committed_at(commit: str) -> int:
    """When a row's commit was made (0: not in this clone's history, such as a +dirty run's)."""
    done = subprocess.run(["git", "log", "-1", "--format=%ct", commit.split("+")[0]], cwd=Path(__file__).parent,
                          capture_output=True, text=True)
    return int(done.stdout.strip() or 0) if done.returncode == 0 else 0


def compared(rows: list[dict]) -> list[dict]:
    """The rows growth compares: for each competition and share, the newest (by its commit) of the stages rows and
    the real size's whole runs, one that reached its first fold before one that did not."""
    newest: dict[tuple, dict] = {}
    for r in (r for r in rows if r["mode"] == "stages" or r["scale"] == "real"):
        rank = (r["stages"]["first_fold"] is not None, committed_at(r["commit"]))
        key = (r["competition"], r["scale"])
        if key not in newest or rank > newest[key][0]:
            newest[key] = (rank, r)
    return [r for _, r in newest.values()]


def kept(fresh: list[dict]) -> list[dict]:
    path = RESULTS / "scale.json"
    old = json.loads(path.read_text())["rows"] if path.is_file() else []
    ran = {(r["competition"], r["scale"], r["mode"]) for r in fresh}
    rows = [r for r in old if (r["competition"], r["scale"], r["mode"]) not in ran] + fresh
    order = list(replicas())
    return sorted(rows, key=lambda r: (order.index(r["competition"]), r["share"], r["mode"]))


def table(path: Path = RESULTS / "scale.json") -> str:
    """The results as the markdown table docs/performance.md keeps."""
    data = json.loads(path.read_text())
    lines = ["| competition | share | commit | data GiB | read s | prepare s | plan s | first fold s (member) | "
             "tree PSS GiB | cache GiB | sampled | run |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        st = r["stages"]
        prepare = " + ".join(f"{v:.0f}" for v in st["prepare"].values()) or "-"
        fold = f"{st['first_fold']:.0f} ({st['first_fold_member']})" if st["first_fold"] is not None else "-"
        cut = "; ".join(f"{s['kept']:,} of {s['of']:,} {s['what'].split()[1]}" if isinstance(s, dict) else "yes"
                        for s in r["sampled"]) or "-"
        cores = f"{r['cores']} core" + ("s" if r["cores"] > 1 else "")
        run = (f"exit {r['exit_code']}, {r['wall']:.0f} s on {cores}, {r['score']} vs sample {r['sample_score']}"
               f"{'' if r.get('goal_met') else ' (goal missed)'}" if r["mode"] == "full" else
               r["status"] if r["status"] != "interrupted" else "stopped after its first fold")
        lines.append(f"| {r['competition']} | {r['scale']} | {r.get('commit', '?')} | {r['data_gib']:.2f} | {st['read'] if st['read'] is not None else '-'} | "
                     f"{prepare} | {st['plan'] if st['plan'] is not None else '-'} | {fold} | {r['peak_pss_gib']:.1f} | "
                     f"{r['peak_cache_gib']:.2f} | {cut} | {run} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--scales", nargs="*", default=list(SHARES))
    parser.add_argument("--budget", type=int, default=BUDGET)
    parser.add_argument("--full", action="store_true", help="at the largest share asked, run to the end and grade")
    parser.add_argument("--root", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    parser.add_argument("--table", action="store_true", help="print the results as a markdown table, run nothing")
    args = parser.parse_args()
    if args.table:
        print(table())
        return
    competitions = [resolve(c) for c in args.only] if args.only else list(replicas())
    root = Path(args.root or tempfile.mkdtemp(prefix="scale-"))
    fresh: list[dict] = []
    largest = max(args.scales, key=share_of)
    for competition in competitions:
        for scale in sorted(args.scales, key=share_of):
            full = args.full and scale == largest
            try:
                fresh.append(measure(competition, scale, root, args.budget, full))
            except subprocess.CalledProcessError as exc:  # the replica could not be written: said, and on
                print(f"{competition} {scale}: generation failed: {exc.stderr[-500:]}", flush=True)
            rows = kept(fresh)
            save("scale", rows, commit=commit(), growth=growth(compared(rows)))
        if not args.keep:
            shutil.rmtree(root / competition, ignore_errors=True)
            shutil.rmtree(root / f"{competition}-run", ignore_errors=True)


if __name__ == "__main__":
    main()
