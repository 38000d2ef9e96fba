"""What a person sees: logging through rich, the plan's members, a live member table while training, a summary."""
from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.logging import RichHandler
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from runner.common.budget import Budget
from runner.planning.portfolio import Plan
from runner.results.report import RunReport

# not a terminal (CI, a log file): wide enough that paths and tables are not folded
console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)
SETTINGS_SHOWN = 6  # settings per member in the plan table (the rest are in plan.json)


def setup_logging(log_file: Path | None = None, verbose: bool = False) -> None:
    handlers: list[logging.Handler] = [RichHandler(console=console, show_path=False, markup=False)]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        file_handler = logging.FileHandler(log_file)
        file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handlers.append(file_handler)
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=handlers, force=True,
                        format="%(message)s")


def _settings(member) -> str:
    shown = {k: v for k, v in member.settings.model_dump().items()
             if k not in ("reasons", "seed") and v not in (None, 0, "", False)}
    return ", ".join(f"{k}={v}" for k, v in list(shown.items())[:SETTINGS_SHOWN])


def plan_table(plan: Plan) -> Table:
    table = Table(title=f"Plan: {len(plan.members)} members, {plan.cpus} cores, {plan.gpus} GPU(s), "
                        f"{plan.window_seconds:.0f} s of training", show_header=True)
    for column in ("member", "slot", "folds", "cores", "s/fold", "gain", "settings"):
        table.add_column(column)
    for m in plan.members:
        table.add_row(m.name, m.slot, str(m.folds), str(m.threads), f"{m.fold_seconds:.0f}",
                      f"{m.expected_gain:.3f}", _settings(m))
    table.caption = "\n".join(["why:", *plan.reasons, *(r for m in plan.members for r in m.reasons)])
    table.caption_justify = "left"
    return table


def member_table(report: RunReport, title: str) -> Table:
    """Planned members, and the extra members the blend uses; the other extras summed up in one row."""
    fmt = lambda v: "-" if v is None else f"{v:.5f}"
    table = Table(title=title)
    for column in ("member", "engine", "slot", "folds done", "CV", "weight", "seconds", "gain", "status"):
        table.add_column(column)
    extra = lambda m: m.get("bag_of") or m.get("repeat_of")
    hidden = [m for m in report.members if extra(m) and not m["weight"] and m["status"] == "done"]
    for m in report.members:
        if m in hidden:
            continue
        name = m["name"] + (f" (repeat of {m['repeat_of']})" if m.get("repeat_of") else
                            f" (bag of {m['bag_of']})" if m.get("bag_of") else "")
        table.add_row(name, m["engine"], m["slot"], f"{m['folds_done']}/{m['folds']}", fmt(m["cv"]),
                      f"{m['weight']:.2f}", f"{m['seconds']:.1f}", "-" if m["gain"] is None else f"{m['gain']:.4f}",
                      m["status"])
    if hidden:
        table.add_row(f"{len(hidden)} more extra members", "", "", str(sum(m["folds_done"] for m in hidden)), "",
                      "0.00", f"{sum(m['seconds'] for m in hidden):.1f}", "", "done")
    return table


def summary_table(report: RunReport) -> Table:
    fmt = lambda v: "-" if v is None else f"{v:.5f}"
    table = member_table(report, f"{report.competition}: {report.status}")
    ended = report.timings.get("training_done")
    table.caption = (f"blend CV {report.metric} {fmt(report.cv_score)} (baseline {fmt(report.baseline_cv_score)}); "
                     + (f"training ended at {ended:.0f} s ({ended / report.budget_seconds:.0%}): "
                        f"{report.stop_reason}; " if ended else "")
                     + f"wall {report.wall_seconds:.0f} s of {report.budget_seconds:.0f} s; {report.submission} "
                       f"({report.submission_source})")
    if report.card_usage is not None:  # how the cards were used: none for a run without one
        table.caption += "\n" + "\n".join(report.card_usage.say())
    return table


@contextmanager
def run_progress(budget: Budget):
    """A budget bar above the member table; yields a callback taking the report and the running units."""
    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    progress = Progress(*columns, console=console)
    task = progress.add_task("budget", total=budget.seconds)
    with Live(Group(progress), console=console, transient=True, refresh_per_second=2) as live:

        def status(report: RunReport, running: list) -> None:
            now = ", ".join(r.unit.name for r in running) or "-"
            progress.update(task, completed=min(budget.seconds, budget.elapsed()),
                            description=f"budget {budget.elapsed():.0f}/{budget.seconds:.0f} s  running: {now}")
            live.update(Group(progress, member_table(report, "members")))

        yield status


def weights_table(rows, cache: Path) -> Table:
    """`runner weights list`: each ladder model, its hub id, and whether (and where) local weights were found."""
    table = Table(title=f"pretrained weights for the candidate ladder (cache {cache})")
    for column in ("model", "hub id", "local weights", "MB"):
        table.add_column(column, overflow="fold")
    for model, hub, found in rows:
        size = f"{found.path.stat().st_size / 1e6:.1f}" if found else "-"
        where = ("cached" if found.hub_id else f"file {found.path}") if found else "missing: random init"
        table.add_row(model, hub or "(none in timm)", where, size)
    return table
