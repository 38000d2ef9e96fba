"""`compete`: one competition, one container (or process), graded, with its story on the run page.

Each task calls one runner function; the flow only wires them. Run it through a deployment
(`prefect deployment run 'compete/dog-breed'`) or directly (`python -m flows.compete dog-breed --budget 5m`).
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from contextlib import nullcontext
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
from prefect.concurrency.sync import concurrency
from prefect.runtime import flow_run

from runner.common.atomic import write_json
from runner.common.budget import parse_duration
from runner.common.errors import RunnerError
from runner.competition.grade import grade
from runner.deploy.launch import Launch
from runner.deploy.backends import launch_competition
from runner.deploy.leases import Lease, leased
from runner.competition.mlebench import competition_dirs
from runner.machine.monitor import read_samples
from runner.plot import fold_timeline
from runner.results.report import RunReport
from runner.common.sampling import Sampled
from runner.competition.catalog import load_spec


@task
def locate(competition: str, data_root: str) -> tuple[str, str | None]:
    """The competition's public and (if present) private folders."""
    public, private = competition_dirs(Path(data_root), competition)
    return str(public), str(private) if private else None


@task
def launch(settings: Launch, backend: str, slot: str | None) -> dict:
    """Run the competition, streaming its log into the flow's log; holds a global concurrency slot meanwhile. A
    retry of the flow resumes from what the failed attempt finished."""
    logger = get_run_logger()
    if (flow_run.run_count or 1) > 1:
        settings = dataclasses.replace(settings, resume=True)
        logger.info("attempt %d: resuming from %s", flow_run.run_count, settings.out_dir)
    with concurrency(slot, occupy=1, strict=True) if slot else nullcontext():
        result = launch_competition(settings, backend, on_line=logger.info)
    return result.to_json()


@task
def collect(out_dir: str, launched: dict) -> RunReport:
    """The run's report, from the copy the host made of it (launch: nothing in the run's folder is trusted); a run
    that wrote none (it could not even read the sample submission) fails here."""
    get_run_logger().info("outputs collected: %s", launched.get("collected"))
    path = Path(out_dir) / "report.json"
    if launched.get("collected", {}).get("report.json") != "copied":
        raise RunnerError(f"the run left no report the host accepts ({launched.get('collected', {})}); exit code "
                          f"{launched['exit_code']}; see the launch log above")
    try:
        return RunReport.load(path)
    except (ValueError, TypeError) as exc:
        raise RunnerError(f"{path}: the run's report is malformed: {exc}") from exc


@task(retries=2, retry_delay_seconds=2)
def grade_run(submission: str, competition: str, private: str) -> dict:
    return grade(Path(submission), load_spec(competition), Path(private)).to_json()


def run_summary(report: RunReport, graded: dict | None, launched: dict, submission: Path) -> str:
    """The run page's summary in markdown: score, time, submission, what was trained on only a part of its data
    (first: a score from a share of the data is read as such), then the plan's reasons."""
    score = f"{graded['score']}" if graded else "not graded (no answers)"
    plan = report.plan or {}
    killed = ", killed at the hard deadline" if launched["killed_at_deadline"] else ""
    md = escape_markdown  # the report's strings come from the run: text, never markup
    lines = [f"# {md(report.competition)}", "",
             f"- test score ({md(report.metric)}): **{score}**; CV {md(report.cv_score)}; baseline CV "
             f"{md(report.baseline_cv_score)}",
             f"- {md(report.status)}: {md(report.wall_seconds)} s of {md(report.budget_seconds)} s "
             f"({launched['backend']}{killed})",
             f"- submission: `{submission}` ({md(report.submission_source)})",
             f"- training ended: {md(report.stop_reason)}", ""]
    said = [Sampled.model_validate(s).say() for s in report.sampled]
    if said:
        lines += ["## Trained on part of the data", "", *(f"- {md(line)}" for line in said), ""]
    if report.card_usage is not None:  # before the plan: whether the card worked is read with the score
        lines += ["## How the cards were used", "", *(f"- {md(line)}" for line in report.card_usage.say()), ""]
    lines += ["## Plan", "", *(f"- {md(reason)}" for reason in plan.get("reasons", ()) if reason not in said)]
    return "\n".join(lines)


@task
def publish(report: RunReport, graded: dict | None, launched: dict, out_dir: str) -> None:
    """Run page: a markdown summary with score, blend and plan, tables of members and folds, links to the report
    and plot."""
    plot = fold_timeline(report, Path(out_dir) / "folds.png", read_samples(Path(out_dir) / "monitor.jsonl"))
    submission = Path(out_dir, "submission.csv").resolve()  # the host's copy, not the path the run wrote
    create_markdown_artifact(run_summary(report, graded, launched, submission), key="run-summary",
                             description="plan, blend and score")
    # both tables even when empty (a run that kept its baseline): under a key the latest artifact is the one shown,
    # and an earlier run's table would stand for this run's
    members = [{k: m.get(k) for k in ("name", "engine", "slot", "folds_done", "folds", "cv", "weight", "seconds",
                                      "gain", "status")} for m in report.members]
    create_table_artifact(members, key="members", description="one row per member: CV, blend weight, seconds")
    rows = [{k: f[k] for k in ("member", "fold", "status", "score", "epochs", "wall_seconds")} for f in report.folds]
    create_table_artifact(rows, key="folds", description="one row per fold of each member")
    create_link_artifact(Path(out_dir, "report.json").resolve().as_uri(), link_text="report.json", key="report")
    create_link_artifact(plot.resolve().as_uri(), link_text="memory and fold timeline", key="plot")


@flow(name="compete", log_prints=True, retries=1)  # a crashed container resumes rather than restarts
def compete(competition: str, budget: str = "10m", data_root: str = "runs/demo/data",
            out_root: str = "runs/prefect", backend: str = "local", image: str = "competition-runner",
            gpus: str = "auto", host_python: bool = False, slot: str | None = None,
            weights_cache: str | None = None, max_members: int | None = None) -> dict:
    """Train one competition within `budget` and grade it when its answers are present (`weights_cache`: a
    Hugging Face cache of pretrained weights on the worker's machine, mounted read-only into the container;
    `max_members`: the run trains at most that many members, as `runner run --max-members`)."""
    spec = load_spec(competition)
    public, private = locate(competition, data_root)
    out_dir = str(confined(out_root) / spec.id)
    settings = leased(Launch(spec.id, public, out_dir, parse_duration(budget), image=image, gpus=gpus,
                             host_python=host_python, weights_cache=weights_cache, max_members=max_members),
                      Lease.from_environment(dict(os.environ)))  # the worker's cards, cores and memory, if it holds any
    launched = launch(settings, backend, slot)
    report = collect(out_dir, launched)
    submission = Path(out_dir, "submission.csv").resolve()  # the report names it as the run saw it (container)
    graded = grade_run(str(submission), spec.id, private) if private else None
    publish(report, graded, launched, out_dir)
    summary = dict(competition_id=spec.id, submission_path=str(submission),
                   status=report.status, cv_score=report.cv_score, wall_seconds=report.wall_seconds,
                   budget_seconds=report.budget_seconds, grade=graded, launch=launched)
    write_json(Path(out_dir) / "compete.json", summary)  # a rename over whatever is there, never through a link
    create_table_artifact([result_row(summary)], key=RESULT_KEY,  # what a sweep reads back through the API
                          description="this run's status, score and time, for a sweep on another machine")
    return summary


RESULT_KEY = "result"  # the artifact a sweep reads each compete run's outcome from


def result_row(summary: dict) -> dict:
    """One table row of a compete run's outcome (its grade flattened)."""
    graded = summary.get("grade") or {}
    return dict(competition_id=summary["competition_id"], submission_path=summary["submission_path"],
                status=summary["status"], score=graded.get("score"), valid=graded.get("valid_submission"),
                any_medal=graded.get("any_medal"), wall_seconds=summary["wall_seconds"],
                budget_seconds=summary["budget_seconds"])


def escape_markdown(value) -> str:
    """Any value as markdown text: its markup characters escaped."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>~])", r"\\\1", str(value))


def confined(out_root: str) -> Path:
    """`out_root` when it lies inside $RUNNER_OUT_ROOT (default: the working folder): a competition's folder in it
    is emptied before each run, so a parameter must not point that anywhere else."""
    root = Path(os.environ.get("RUNNER_OUT_ROOT") or Path.cwd()).resolve()
    path = Path(out_root).expanduser().resolve()
    if path != root and root not in path.parents:
        raise RunnerError(f"out_root {out_root!r} is outside {root} (set RUNNER_OUT_ROOT to allow another root)")
    return path


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("competition")
    parser.add_argument("--budget", default="10m")
    parser.add_argument("--data-root", default="runs/demo/data")
    parser.add_argument("--out-root", default="runs/prefect")
    parser.add_argument("--backend", default="local", choices=("local", "docker"))
    parser.add_argument("--image", default="competition-runner")
    parser.add_argument("--host-python", action="store_true", help="mount this machine's Python into the image")
    args = parser.parse_args()
    print(json.dumps(compete(args.competition, args.budget, args.data_root, args.out_root, args.backend,
                             args.image, host_python=args.host_python), indent=2))
