"""What a person sees: logging through rich, the plan as a table, progress while folds run, a summary."""
from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from runner.budget import Budget
from runner.planner import Plan
from runner.report import RunReport

# not a terminal (CI, a log file): wide enough that paths and tables are not folded
console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)


def setup_logging(log_file: Path | None = None, verbose: bool = False) -> None:
    handlers: list[logging.Handler] = [RichHandler(console=console, show_path=False, markup=False)]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        file_handler = logging.FileHandler(log_file)
        file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handlers.append(file_handler)
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=handlers, force=True,
                        format="%(message)s")


def plan_table(plan: Plan) -> Table:
    table = Table(title="Plan", show_header=True)
    table.add_column("setting")
    table.add_column("value")
    for key, value in plan.to_json().items():
        if key != "reasons" and value not in (None, 0, "", False):
            table.add_row(key, f"{value / 2**30:.2f} GiB" if key.endswith("_bytes") else str(value))
    for reason in plan.reasons:
        table.add_row("why", reason)
    return table


def summary_table(report: RunReport) -> Table:
    fmt = lambda v: "-" if v is None else f"{v:.5f}"
    table = Table(title=f"{report.competition}: {report.status}")
    for column in ("fold", "status", "score", "epochs/rounds", "seconds"):
        table.add_column(column)
    for fold in report.folds:
        table.add_row(str(fold["fold"]), fold["status"], fmt(fold["score"]), str(fold["epochs"]),
                      f"{fold['wall_seconds']:.0f}")
    table.caption = (f"CV {report.metric} {fmt(report.cv_score)} (baseline {fmt(report.baseline_cv_score)}); "
                     f"wall {report.wall_seconds:.0f} s of {report.budget_seconds:.0f} s; "
                     f"{report.submission} ({report.submission_source})")
    return table


@contextmanager
def run_progress(budget: Budget):
    """A budget bar and a status line; yields a callback taking the status text."""
    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("budget", total=budget.seconds)

        def status(text: str) -> None:
            progress.update(task, completed=min(budget.seconds, budget.elapsed()),
                            description=f"budget {budget.elapsed():.0f}/{budget.seconds:.0f} s  {text}")

        yield status
