"""A picture of a run: when each fold ran against the budget, and its score."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from runner.report import RunReport  # noqa: E402


def _memory(ax, samples: list[dict]) -> None:
    """Memory of the run's process tree and of each GPU over time."""
    times = [s["t"] for s in samples]
    ax.plot(times, [s["rss"] / 2**30 for s in samples], label="RAM (process tree)")
    for i in range(max((len(s["gpus"]) for s in samples), default=0)):
        ax.plot(times, [s["gpus"][i]["used"] / 2**30 if i < len(s["gpus"]) else 0 for s in samples],
                label=f"GPU {i} memory")
    ax.set_ylabel("GiB")
    ax.legend(loc="upper left", fontsize=7)


def fold_timeline(report: RunReport, path: Path, samples: list[dict] | None = None) -> Path:
    """Memory over time (when monitor samples are given) above bars from each fold's start to its end."""
    rows = 2 if samples else 1
    fig, axes = plt.subplots(rows, 1, sharex=True, squeeze=False,
                             figsize=(8, 1.2 + 0.4 * max(1, len(report.folds)) + (2.2 if samples else 0)))
    if samples:
        _memory(axes[0][0], samples)
    ax = axes[-1][0]
    for fold in report.folds:
        end = report.timings.get(f"fold_{fold['fold']}_done", 0.0)
        start = max(0.0, end - fold["wall_seconds"])
        colour = "tab:green" if fold["status"] in ("completed", "stopped") else "tab:red"
        ax.barh(fold["fold"], end - start, left=start, color=colour)
        label = f"{fold['score']:.4f}" if fold["score"] is not None else fold["status"]
        ax.text(end, fold["fold"], f" {label}", va="center", fontsize=8)
    cut = (report.plan or {}).get("training_seconds")
    ax.axvline(report.budget_seconds, color="black", linestyle="--", label="budget")
    ax.axvline(report.wall_seconds, color="tab:blue", linestyle=":", label="run ended")
    ax.set_xlim(0, max(report.budget_seconds, report.wall_seconds) * 1.03)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("fold")
    score = "-" if report.cv_score is None else f"{report.cv_score:.4f}"
    planned = f" (planned training {cut:.0f} s)" if cut else ""
    axes[0][0].set_title(f"{report.competition}: CV {report.metric} {score}{planned}", fontsize=9)
    ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
