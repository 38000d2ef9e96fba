"""Every MLE-bench competition of a split on its replica, as a sweep would run it: `runner run` at a small budget
on this machine, the submission graded by MLE-bench's own graders (where a Python with `mlebench` is given: `make
mlebench-venv`; else by `runner grade`), beside the replica's sample and the run's honest prior (its baseline.csv).

For each competition: the run's exit code, wall and status; whether the submission is valid; its score, the
sample's and the prior's; the edge over the prior with its 90% interval over paired resamples of the test rows
(`runner grade --against`): **learned** when the interval's low end is above 0, **below the prior** when its high
end is below 0; and, where nothing was learned, why (the report's stop reason or the spec's note). Where MLE-bench
grades too, `runner grade` must give the same score (`agrees`).

Goals (issue: the whole of MLE-bench): every competition valid, none below its prior, at least 30 of the 53 beyond
Lite learned, every one not learned saying why.

    python mlebench_sweep.py [--split split75] [--only ID ...] [--budget 60] [--mlebench-python PATH] [--keep DIR [--regrade]]

Writes bench/results/mlebench.json after each competition (rows of those not run this time are kept) and prints the table of
docs/competitions.md.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from _common import RESULTS, save
from quality import commit
from runner.common.csvfiles import find_sample
from runner.common.errors import RunnerError
from runner.competition.catalog import load_spec
from runner.competition.grade import compare, grade
from runner.competition.mlebench import read_split, split_of
from runner.demo import write_demo

ROOT = Path(__file__).resolve().parent.parent
MLEBENCH_VENV = ROOT / ".mlebench-venv" / "bin" / "python"  # `make mlebench-venv`
GRADER = Path(__file__).resolve().parent / "mlebench_grade.py"  # run by that Python, not this one
RUN_MARGIN = 120  # seconds a run may take past its budget before the bench stops it (the runner ends in time)
RUN_RECORD = "run.json"  # a kept run's exit code and wall, so that it can be graded again without running it
AGREEMENT = 1e-4  # the scores are rounded to 5 places; closer than this they are one score
LEARNED_GOAL = 30  # competitions beyond Lite that must learn (of 53)


def outside() -> dict:
    """The environment for MLE-bench's Python: none of this project's import paths."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def mlebench_python(given: str | None) -> tuple[str, Path] | None:
    """(a Python with mlebench, MLE-bench's competitions folder), or None when there is none."""
    python = given or os.environ.get("MLEBENCH_PYTHON") or (str(MLEBENCH_VENV) if MLEBENCH_VENV.exists() else None)
    if python is None:
        return None
    found = subprocess.run([python, "-c", "import mlebench, pathlib; print(pathlib.Path(mlebench.__file__).parent"
                            " / 'competitions')"], capture_output=True, text=True, env=outside(), cwd="/")
    if found.returncode != 0:
        raise RunnerError(f"{python}: no mlebench to grade with: {found.stderr.strip()[-300:]}")
    return python, Path(found.stdout.strip())


def mlebench_scores(mlebench: tuple[str, Path] | None, requests: list[dict]) -> list[dict | None]:
    """MLE-bench's grade of each {"competition", "submission", "private"} (None for each without MLE-bench)."""
    if mlebench is None or not requests:
        return [None] * len(requests)
    python, competitions = mlebench
    done = subprocess.run([python, str(GRADER), str(competitions)], input="".join(json.dumps(r) + "\n"
                          for r in requests), capture_output=True, text=True, timeout=600, env=outside(), cwd="/")
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if len(answers) != len(requests):
        raise RunnerError(f"MLE-bench's grading answered {len(answers)} of {len(requests)}: {done.stderr[-500:]}")
    return answers


def sample_file(public: Path, spec, work: Path) -> Path | None:
    """The sample submission as the replica gives it, as a plain CSV (None where the public folder has none)."""
    path = find_sample(public, spec.sample_submission)
    if path is None:
        return None
    plain = work / "sample.csv"
    from runner.common.csvfiles import read_csv_file

    read_csv_file(path, literal=True).to_csv(plain, index=False)
    return plain


def run(competition: str, public: Path, out: Path, budget: int) -> tuple[int, float]:
    """`runner run` in its own process: (exit code, wall seconds)."""
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "runner.cli", "run", competition, "--data", str(public),
                               "--budget", f"{budget}s", "--out", str(out)], capture_output=True, text=True,
                              timeout=budget + RUN_MARGIN)
        code = done.returncode
    except subprocess.TimeoutExpired:
        code = 124
    return code, round(time.monotonic() - started, 1)


def kept_run(competition: str, public: Path, out: Path, budget: int, work: Path, regrade: bool) -> tuple[int, float]:
    """(exit code, wall seconds) of the run kept in `work` when regrading one, else of a new run (then kept)."""
    record = work / RUN_RECORD
    if regrade and record.exists():
        kept = json.loads(record.read_text())
        return kept["exit_code"], kept["wall"]
    code, wall = run(competition, public, out, budget)
    record.write_text(json.dumps(dict(exit_code=code, wall=wall)))
    return code, wall


def same_score(theirs: float | None, ours: float | None) -> bool:
    """Whether two graders gave one score: both invalid, both undefined (NaN: a constant's correlation) or close."""
    if theirs is None or ours is None:
        return theirs is None and ours is None
    if math.isnan(theirs) or math.isnan(ours):
        return math.isnan(theirs) and math.isnan(ours)
    return abs(theirs - ours) <= AGREEMENT


def row_for(competition: str, budget: int, work: Path, mlebench, regrade: bool = False) -> dict:
    spec = load_spec(competition)
    kept = regrade and (work / RUN_RECORD).exists()
    root = work / "data" / spec.id if kept else write_demo(competition, work / "data")
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    out = work / "run"
    code, wall = kept_run(competition, public, out, budget, work, regrade)
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    files = {"submission": out / "submission.csv", "prior": out / "baseline.csv",
             "sample": sample_file(public, spec, work)}
    ours = {name: grade(path, spec, private) if path and path.exists() else None for name, path in files.items()}
    named = [(name, path) for name, path in files.items() if path and path.exists()]
    theirs = dict(zip([n for n, _ in named], mlebench_scores(
        mlebench, [dict(competition=competition, submission=str(p), private=str(private)) for _, p in named])))
    scored = lambda name: (theirs[name]["score"] if theirs.get(name) else ours[name].score) if ours.get(name) else None
    edge = None
    if ours["submission"] and ours["prior"] and ours["submission"].valid_submission and ours["prior"].valid_submission:
        edge = compare(files["submission"], files["prior"], spec, private).to_json()
    learned = edge is not None and edge["low"] > 0
    valid = theirs["submission"]["score"] is not None if theirs.get("submission") else \
        bool(ours["submission"] and ours["submission"].valid_submission)
    agrees = None if not theirs.get("submission") else all(
        same_score(theirs[n]["score"], ours[n].score) for n in theirs if theirs[n])
    return dict(competition=competition, split=split_of(competition), metric=spec.metric, budget=budget,
                lower_is_better=spec.lower_is_better, exit_code=code, wall=wall, status=report.get("status"),
                valid=valid, score=scored("submission"), sample_score=scored("sample"), prior_score=scored("prior"),
                edge=edge, learned=learned, below_prior=edge is not None and edge["high"] < 0,
                graded_by="MLE-bench" if theirs.get("submission") else "runner grade", agrees=agrees,
                why_not=None if learned else (report.get("stop_reason") or report.get("error") or spec.note),
                engines=sorted({m["engine"] for m in report.get("members", ()) if m.get("weight")}),
                errors={n: (theirs[n] or {}).get("error") for n in theirs if (theirs[n] or {}).get("error")})


def table(rows: list[dict]) -> str:
    """The markdown table of docs/competitions.md."""
    lines = ["| competition | split | metric | exit | valid | score | sample | prior | edge (90%) | learned |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda v: "-" if v is None else f"{v:.4g}"
    for r in rows:
        edge = r["edge"]
        shown = "-" if edge is None else f"{edge['value']:+.3g} [{edge['low']:+.3g}, {edge['high']:+.3g}]"
        lines.append(f"| {r['competition']} | {r['split']} | {r['metric']} | {r['exit_code']} | "
                     f"{'yes' if r['valid'] else 'NO'} | {fmt(r['score'])} | {fmt(r['sample_score'])} | "
                     f"{fmt(r['prior_score'])} | {shown} | "
                     f"{'yes' if r['learned'] else 'no: ' + str(r['why_not'] or '')[:90]} |")
    return "\n".join(lines)


def summary(rows: list[dict]) -> dict:
    beyond = [r for r in rows if r["split"] != "low"]
    return dict(valid=f"{sum(r['valid'] for r in rows)} of {len(rows)}",
                below_prior=[r["competition"] for r in rows if r["below_prior"]],
                learned_beyond_lite=f"{sum(r['learned'] for r in beyond)} of {len(beyond)}",
                learned_goal=LEARNED_GOAL, disagreeing=[r["competition"] for r in rows if r["agrees"] is False])


def merged(rows: list[dict]) -> list[dict]:
    """These rows saved in place of the saved rows of the same competitions; all rows, in split order."""
    path = RESULTS / "mlebench.json"
    ids = {r["competition"] for r in rows}
    kept = [r for r in json.loads(path.read_text())["rows"] if r["competition"] not in ids] if path.exists() else []
    order = read_split("split75") + read_split("dev")
    every = sorted(kept + rows, key=lambda r: order.index(r["competition"]) if r["competition"] in order else 999)
    save("mlebench", every, commit=commit(), **summary(every))
    return every


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="split75")
    parser.add_argument("--only", nargs="*", help="these competitions (ids or aliases); the others' rows are kept")
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--mlebench-python", help="a Python with mlebench installed (default: .mlebench-venv)")
    parser.add_argument("--keep", help="keep each competition's data and run here (default: a temporary folder)")
    parser.add_argument("--regrade", action="store_true",
                        help="with --keep: grade the runs kept there again instead of running them (new ones run)")
    args = parser.parse_args()
    mlebench = mlebench_python(args.mlebench_python)
    competitions = [load_spec(c).id for c in args.only] if args.only else read_split(args.split)
    every: list[dict] = []
    for competition in competitions:
        work = Path(args.keep) / competition if args.keep else Path(tempfile.mkdtemp(prefix=f"{competition}-"))
        work.mkdir(parents=True, exist_ok=True)
        row = row_for(competition, args.budget, work, mlebench, args.regrade)
        every = merged([row])  # saved after each one, so that a sweep cut short keeps what it did
        print(json.dumps({k: row[k] for k in ("competition", "exit_code", "valid", "score", "prior_score", "learned")}),
              flush=True)
    print(table(every))
    print(json.dumps(summary(every), indent=2))


if __name__ == "__main__":
    main()
