"""Where `make test`'s time goes: each test file's CPU (the processes its tests started included), the machine's busy
share over the suite, and the suite's wall against the ten-minute goal.

`make test` runs as it always does, with `bench/suite_cpu_plugin.py` loaded into every worker (each worker's
processes counted in a control group of its own) and the machine's CPU sampled from /proc/stat every second. The
files and tests are ranked by CPU: on 2 cores a suite that keeps the machine busy ends no sooner than its CPU over
two, so the ten-minute goal is a CPU budget, and this says which files spend it.

    python bench/suite_cpu.py [--top 25] [--command "make test"]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import save
from suite_cpu_plugin import GROUP_VARIABLE, OUT_VARIABLE, remove_groups

ROOT = Path(__file__).resolve().parent.parent
GOAL_SECONDS = 600  # the ten-minute goal: `make test` from a fresh clone, and CI's whole run
DEFAULT_COMMAND = "make test"
SAMPLE_SECONDS = 1.0  # how often the machine's CPU is read
PACE_LINE = re.compile(r"^pace ([0-9.]+):", re.MULTILINE)  # tests/conftest.py's summary line


def cpu_times() -> tuple[int, int]:
    """The machine's busy and total jiffies so far (/proc/stat's first line; idle and iowait are not busy)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4], sum(fields)


def sample(samples: list, stop: threading.Event) -> None:
    """(time, busy share of all cores) every SAMPLE_SECONDS until `stop`."""
    busy, total = cpu_times()
    while not stop.wait(SAMPLE_SECONDS):
        now_busy, now_total = cpu_times()
        samples.append((time.time(), (now_busy - busy) / max(1, now_total - total)))
        busy, total = now_busy, now_total


def read_lines(folder: Path) -> list[dict]:
    return [json.loads(line) for file in sorted(folder.glob("*.jsonl")) for line in file.read_text().splitlines()]


def by_file(tests: list[dict]) -> list[dict]:
    files = collections.defaultdict(lambda: dict(cpu=0.0, wall=0.0, tests=0, workers=set()))
    for test in tests:
        row = files[test["test"].split("::")[0]]
        row["cpu"] += test["cpu"]
        row["wall"] += test["end"] - test["start"]
        row["tests"] += 1
        row["workers"].add(test["worker"])
    return sorted(({"file": name, "cpu": round(row["cpu"], 1), "wall": round(row["wall"], 1), "tests": row["tests"],
                    "workers": sorted(row["workers"])} for name, row in files.items()), key=lambda r: -r["cpu"])


def summary(tests: list[dict], samples: list, wall: float, pace: float | None, cores: int) -> dict:
    start, end = min(t["start"] for t in tests), max(t["end"] for t in tests)
    during = [share for at, share in samples if start <= at <= end]
    busy = sum(during) / len(during) if during else None
    machine_cpu = busy * cores * (end - start) if busy is not None else None
    counted = sum(t["cpu"] for t in tests)
    return dict(command_seconds=round(wall, 1), tests_seconds=round(end - start, 1), tests=len(tests), pace=pace,
                cores=cores, machine_busy=round(busy, 3) if busy is not None else None,
                machine_cpu_seconds=round(machine_cpu, 1) if machine_cpu is not None else None,
                tests_cpu_seconds=round(counted, 1), counted=sorted({t["counted"] for t in tests}),
                goal_seconds=GOAL_SECONDS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--command", default=DEFAULT_COMMAND, help="the suite's command, run in the project's folder")
    parser.add_argument("--top", type=int, default=25, help="files and tests listed")
    args = parser.parse_args(argv)
    prefix = f"suite-cpu-{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="suite-cpu-") as folder:
        lines, site = Path(folder) / "lines", Path(folder) / "site"
        site.mkdir()
        # the plugin alone on the path (bench/'s other modules would shadow packages of the same names)
        shutil.copy(Path(__file__).with_name("suite_cpu_plugin.py"), site)
        env = {**os.environ, OUT_VARIABLE: str(lines), GROUP_VARIABLE: prefix,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
               "PYTEST_ADDOPTS": " ".join(filter(None, [os.environ.get("PYTEST_ADDOPTS"), "-p suite_cpu_plugin"]))}
        samples, stop = [], threading.Event()
        sampler = threading.Thread(target=sample, args=(samples, stop), daemon=True)
        sampler.start()
        started = time.monotonic()
        done = subprocess.run(args.command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.monotonic() - started
        stop.set()
        sampler.join()
        tests = read_lines(lines)
        for group in remove_groups(prefix):
            print(f"left {group}: its processes have not all ended", file=sys.stderr)
    print(done.stdout, done.stderr[-2000:], sep="\n")  # whole: a failure's report is in it
    if not tests:
        print("no test reported its CPU", file=sys.stderr)
        return 1
    pace = float(match.group(1)) if (match := PACE_LINE.search(done.stdout)) else None
    head = summary(tests, samples, wall, pace, os.cpu_count() or 1)
    head["goal_met"] = wall <= GOAL_SECONDS if args.command == DEFAULT_COMMAND else None  # only `make test`'s
    files = by_file(tests)
    heaviest = sorted(tests, key=lambda t: -t["cpu"])[:args.top]
    print(f"`{args.command}`: exit {done.returncode}, {head['command_seconds']} s ({head['tests']} tests in "
          f"{head['tests_seconds']} s at pace {pace}); machine busy {head['machine_busy']} of {head['cores']} cores; "
          f"tests counted {head['tests_cpu_seconds']} CPU-s of the machine's {head['machine_cpu_seconds']}")
    for row in files[:args.top]:
        print(f"{row['cpu']:8.1f} CPU-s {row['wall']:8.1f} s  {row['tests']:4d} tests  {row['file']}")
    if head["goal_met"] is not None:
        print(f"goal (`make test` in at most {GOAL_SECONDS} s): {'met' if head['goal_met'] else 'missed'}")
    save("suite_cpu", files, returncode=done.returncode, **head,
         heaviest_tests=[{"test": t["test"], "cpu": round(t["cpu"], 1), "wall": round(t["end"] - t["start"], 1)}
                         for t in heaviest])
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
