"""`sweep`: one `compete` run per competition of a split, graded, summed up in a medal table.

Through deployments (`via_deployments=True`, the scheduled `sweep/mle-bench-lite`) each competition becomes its
own flow run that any worker in the pool can pick up, so a sweep spreads over every GPU box; otherwise they run
here as subflows. Either way each launch holds a slot of a strict global concurrency limit.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.client.orchestration import get_client
from prefect.deployments import run_deployment

from flows.compete import RESULT_KEY, compete, result_row
from runner.competition.mlebench import deployment_name, read_split, write_grading_jsonl
from runner.competition.catalog import find_spec


@task
def competitions_with_data(split: str, data_root: str) -> tuple[list[str], list[str]]:
    """(ids with prepared data, ids without) of a split."""
    ids = [find_spec(c).id if find_spec(c) else c for c in read_split(split)]
    ready = [c for c in ids if (Path(data_root) / c / "prepared" / "public").is_dir()]
    return ready, [c for c in ids if c not in ready]


def result_of(flow_run_id) -> dict | None:
    """A compete run's outcome as it published it to the Prefect API (its `result` table artifact): a sweep reads
    it there, since the machine that ran it shares no disk with this one."""
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]), key=ArtifactFilterKey(any_=[RESULT_KEY])))
    if not found:
        return None
    data = found[0].data
    rows = json.loads(data) if isinstance(data, str) else data
    return rows[0] if rows else None


def _wait(flow_run_id, poll_seconds: float = 3.0):
    """The flow run once it reaches a final state."""
    with get_client(sync_client=True) as client:
        while True:
            flow_run = client.read_flow_run(flow_run_id)
            if flow_run.state is not None and flow_run.state.is_final():
                return flow_run
            time.sleep(poll_seconds)


@task
def run_via_deployments(ids: list[str], parameters: dict) -> list[dict]:
    """Start every competition's deployment at once, then wait for each; each outcome is read back through the
    API (the submission files themselves stay where each run wrote them: an `out_root` every box can write)."""
    started = [(c, run_deployment(deployment_name(c), parameters={**parameters, "competition": c}, timeout=0))
               for c in ids]
    rows = []
    for competition, flow_run in started:
        finished = _wait(flow_run.id)
        row = result_of(finished.id) if finished.state.is_completed() else None
        rows.append(row or dict(competition_id=competition, status=finished.state.name, submission_path=""))
    return rows


@task
def publish(rows: list[dict], missing: list[str], split: str, out_root: str) -> str:
    create_table_artifact(rows, key=f"sweep-{split}", description=f"{split}: score and medal per competition")
    valid = [r for r in rows if r.get("valid")]
    lines = [f"# sweep {split}", "", f"- {len(rows)} run(s), {len(valid)} valid submission(s), "
             f"{sum(bool(r.get('any_medal')) for r in rows)} medal(s)"]
    if missing:
        lines.append(f"- no prepared data for: {', '.join(missing)}")
    create_markdown_artifact("\n".join(lines), key=f"sweep-{split}-summary")
    return str(write_grading_jsonl([r for r in rows if r.get("submission_path")],
                                   Path(out_root) / f"sweep-{split}.jsonl"))


@flow(name="sweep", log_prints=True)
def sweep(split: str = "demo", budget: str = "10m", data_root: str = "runs/demo/data",
          out_root: str = "runs/prefect", backend: str = "local", via_deployments: bool = False,
          slot: str | None = None, host_python: bool = False, max_members: int | None = None) -> dict:
    """Every competition of `split` that has data under `data_root` (each run training at most `max_members`
    members, when given); returns the rows and the grading JSONL."""
    ready, missing = competitions_with_data(split, data_root)
    parameters = dict(budget=budget, data_root=data_root, out_root=out_root, backend=backend, slot=slot,
                      host_python=host_python, max_members=max_members)
    if via_deployments:
        rows = run_via_deployments(ready, parameters)
    else:
        rows = [result_row(compete(competition=c, **parameters)) for c in ready]
    jsonl = publish(rows, missing, split, out_root)
    get_run_logger().info("grading input for `mlebench grade --submission %s`", jsonl)
    return dict(rows=rows, missing=missing, jsonl=jsonl)
