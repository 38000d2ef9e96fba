"""A process's end: what leaving without the interpreter's teardown (`runner.common.leaving.leave`) saves a process
that has done its work, against the normal exit, on this machine, in one run.

- **Fresh interpreters**, each importing what one of the runner's processes imports, then ending: the normal
  exit (the interpreter tears down every module and object) against `leave` (threads joined, exit handlers run,
  output flushed, no teardown). torch and timm: the measuring process and a unit started on its own; scikit-learn,
  pandas and scipy: the supervisor of a table run.
- **The command line**: `runner run` ending at an input error (a data folder that does not exist), through
  `runner.cli.main` and the normal exit, against the `runner` command (`runner.cli.console`, which leaves).

Each pair run in turn (A B A B ...), the ratio taken pair by pair, medians reported; wall and CPU (user + system, the
child's own accounting). Goal: leaving takes at most 80% of the normal exit's wall for torch and timm.

    python bench/process_exit.py
"""
from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import save

RUNS = 7
GOAL = 0.8  # of the normal exit's wall, for the torch and timm process
LEAVE = "; from runner.common.leaving import leave; leave(0)"
IMPORTS = {"torch and timm": "import torch, timm",
           "scikit-learn, pandas and scipy": "import sklearn.model_selection, sklearn.metrics, pandas, scipy.stats"}


def timed(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of `command` to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, capture_output=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def paired(name: str, normal: list[str], leaving: list[str]) -> dict:
    timed(normal), timed(leaving)  # the files read once before counting
    pairs = [(timed(normal), timed(leaving)) for _ in range(RUNS)]
    row = dict(process=name, runs=RUNS,
               normal_wall=round(statistics.median(n[0] for n, _ in pairs), 2),
               leaving_wall=round(statistics.median(m[0] for _, m in pairs), 2),
               normal_cpu=round(statistics.median(n[1] for n, _ in pairs), 2),
               leaving_cpu=round(statistics.median(m[1] for _, m in pairs), 2),
               wall_ratio=round(statistics.median(m[0] / n[0] for n, m in pairs), 3))
    print(f"{name}: normal exit {row['normal_wall']} s ({row['normal_cpu']} s CPU), leaving {row['leaving_wall']} s "
          f"({row['leaving_cpu']} s CPU): {row['wall_ratio']} of the wall")
    return row


def main() -> None:
    python = sys.executable
    rows = [paired(name, [python, "-c", imports], [python, "-c", imports + LEAVE]) for name, imports in IMPORTS.items()]
    with tempfile.TemporaryDirectory() as folder:
        args = ["run", "spaceship", "--data", str(Path(folder) / "missing"), "--budget", "10s", "--out",
                str(Path(folder) / "out")]
        normal = [python, "-c", "import sys; from runner.cli import main; sys.exit(main())", *args]
        rows.append(paired("runner run, ending at an input error", normal, [python, "-m", "runner.cli", *args]))
    torch_row = rows[0]
    met = torch_row["wall_ratio"] <= GOAL
    print(f"goal (torch and timm at most {GOAL} of the normal exit's wall): {'met' if met else 'missed'}")
    save("process_exit", rows, goal=f"torch and timm leaving at most {GOAL} of the normal exit's wall",
         goal_met=met)


if __name__ == "__main__":
    main()
