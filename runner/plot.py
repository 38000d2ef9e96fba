"""A picture of a run: memory over time above the slots, one lane per GPU slot and CPU slot, each unit a bar
from its start to its end coloured by member."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from runner.common.atomic import replacing  # noqa: E402
from runner.results.report import RunReport  # noqa: E402

MAX_LEGEND = 12  # members named in the legend; the rest share a grey


def _memory(ax, samples: list[dict]) -> None:
    """Memory of the run's process tree and of each GPU over time."""
    times = [s["t"] for s in samples]
    read = [s for s in samples if "rss" in s]  # the tree's memory is read less often than the rest
    ax.plot([s["t"] for s in read], [s["rss"] / 2**30 for s in read], label="RAM (process tree)")
    for i in range(max((len(s["gpus"]) for s in samples), default=0)):
        ax.plot(times, [(s["gpus"][i]["used"] or 0) / 2**30 if i < len(s["gpus"]) else 0 for s in samples],
                label=f"GPU {i} memory")
    ax.set_ylabel("GiB")
    ax.legend(loc="upper left", fontsize=7)


def _lanes(unit: dict) -> list[str]:
    """The lanes a unit is drawn in: its GPU, or each core it held ("cpu 0,1" -> "cpu 0", "cpu 1")."""
    kind, _, numbers = unit["lane"].partition(" ")
    return [f"{kind} {n}" for n in numbers.split(",")]


def _lane_order(lane: str) -> tuple[int, int]:
    kind, _, number = lane.partition(" ")
    return (0 if kind == "gpu" else 1, int(number) if number.isdigit() else 0)


def fold_timeline(report: RunReport, path: Path, samples: list[dict] | None = None) -> Path:
    """Memory over time (when monitor samples are given) above the units in their GPU and CPU lanes."""
    units = [u for u in report.units if u["lane"] != "-"]
    lanes = sorted({lane for u in units for lane in _lanes(u)}, key=_lane_order)
    rows = 2 if samples else 1
    fig, axes = plt.subplots(rows, 1, sharex=True, squeeze=False,
                             figsize=(9, 1.4 + 0.35 * max(1, len(lanes)) + (2.2 if samples else 0)))
    if samples:
        _memory(axes[0][0], samples)
    ax = axes[-1][0]
    members = list(dict.fromkeys(u["member"] for u in units))
    colours = plt.get_cmap("tab20")
    for u in units:
        index = members.index(u["member"])
        colour = "tab:red" if u["status"] not in ("completed", "stopped") else \
            colours(index % 20) if index < MAX_LEGEND else "lightgrey"
        for lane in _lanes(u):
            ax.barh(lanes.index(lane), u["end"] - u["start"], left=u["start"], color=colour, edgecolor="white",
                    linewidth=0.3, label=u["member"] if index < MAX_LEGEND else "other members")
    for action in report.actions:
        ax.axvline(action["t"], color="tab:purple", linewidth=0.8, linestyle="-.")
    ended = report.timings.get("training_done")
    ax.axvline(report.budget_seconds, color="black", linestyle="--", label="budget")
    if ended:
        ax.axvline(ended, color="tab:blue", linestyle=":", label="training ended")
    ax.set_yticks(range(len(lanes)), lanes, fontsize=7)
    ax.set_xlim(0, max(report.budget_seconds, report.wall_seconds) * 1.03)
    ax.set_xlabel("seconds since start")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=6)
    score = "-" if report.cv_score is None else f"{report.cv_score:.4f}"
    axes[0][0].set_title(f"{report.competition}: blend CV {report.metric} {score}; "
                         f"{len(members)} members in {len(lanes)} lanes", fontsize=9)
    fig.tight_layout()
    with replacing(Path(path)) as tmp:  # a rename over whatever is there, never a write through a link
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return Path(path)
