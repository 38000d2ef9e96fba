"""The Prefect flows with the local backend, and in a container, under a real (test) Prefect server."""
import asyncio
import dataclasses
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from prefect.artifacts import Artifact
from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

from flows.compete import compete
from flows.sweep import result_of, sweep
from conftest import IMAGE
from pace import paced
from runner.competition.grade import grade
from runner.competition.catalog import load_spec

pytestmark = pytest.mark.slow  # whole runs through processes, containers or Prefect: the fast subset leaves them out


def test_compete_runs_grades_and_publishes_artifacts(prefect_server, spaceship, demo_root, tmp_path):
    # 12 s: at 8 s, on a core another test's run took half of, the run was still importing scikit-learn at the
    # watchdog (exit 124, the baseline kept); one member (max_members), so on a quiet core the run ends once it has
    # learned, within 6 s, instead of filling the window with the others. Stretched by the machine's pace
    # (tests/pace.py): on the slower CPU (pace 2.79), beside the deployment stack's runs, its supervisor was still
    # importing scikit-learn when the 12 s window closed (exit 124 again)
    budget = paced(12)
    state = compete(competition="spaceship", budget=f"{budget}s", data_root=str(demo_root), out_root=str(tmp_path),
                    max_members=1, return_state=True)
    summary = state.result()
    assert summary["grade"]["valid_submission"]
    assert summary["launch"]["backend"] == "local" and summary["launch"]["exit_code"] == 0
    out = tmp_path / "spaceship-titanic"
    # what the flow graded is the run's own submission, and says what the run made of its window: a model that learned
    # (accuracy well above the run's baseline: 0.85 on a quiet core against the class prior's ~0.56) or, where a busy
    # core left it no fold or a fold cut after its first round (CV no better than the prior's), the baseline it kept
    # (whether a run trains is the end-to-end tests' to show)
    spec, private = load_spec("spaceship"), demo_root / "spaceship-titanic" / "prepared" / "private"
    report = json.loads((out / "report.json").read_text())
    assert summary["grade"]["score"] == grade(out / "submission.csv", spec, private).score
    assert summary["status"] == report["status"] and summary["budget_seconds"] == budget
    assert len(report["plan"]["members"]) == 1 and report["plan"]["max_members"] == 1  # the flow's max_members
    baseline = grade(Path(report["submission"]).with_name("baseline.csv"), spec, private).score  # the run's folder
    if report["submission_source"].startswith("blend:"):
        assert summary["grade"]["score"] > baseline + 0.05, (summary["grade"]["score"], baseline)
    else:
        assert summary["grade"]["score"] == baseline, report["submission_source"]
    assert (out / "folds.png").stat().st_size > 1000 and (out / "compete.json").is_file()
    markdown = Artifact.get("run-summary")
    assert "spaceship-titanic" in markdown.data and "Plan" in markdown.data
    folds = Artifact.get("folds")
    assert len(json.loads(folds.data)) == len(json.loads((out / "report.json").read_text())["folds"])
    # what a sweep on another machine reads of it: through the API, with this machine's files gone
    shutil.rmtree(out)
    row = result_of(state.state_details.flow_run_id)
    assert row["competition_id"] == "spaceship-titanic" and row["score"] == summary["grade"]["score"]
    assert row["valid"] and row["wall_seconds"] == summary["wall_seconds"]


def test_a_run_that_kept_its_baseline_publishes_empty_tables_not_an_earlier_runs(prefect_server, tmp_path):
    """Under a key the latest artifact is the one the run page shows: a run with no fold (its window closed while
    it was still importing, on a busy core) publishes empty members and folds tables, so an earlier run's do not
    stand for its own."""
    from flows.compete import publish
    from runner.results.report import RunReport

    ran = RunReport(competition="spaceship-titanic", status="trained", metric="accuracy", lower_is_better=False,
                    budget_seconds=12, wall_seconds=11, submission=str(tmp_path / "submission.csv"),
                    submission_source="blend: lightgbm",
                    folds=({"member": "lightgbm", "fold": 0, "status": "completed", "score": 0.8, "epochs": 40,
                            "wall_seconds": 2.0},),
                    members=({"name": "lightgbm", "engine": "lightgbm", "slot": "cpu", "folds_done": 1},))
    launched = dict(backend="local", killed_at_deadline=False)
    publish(ran, None, launched, str(tmp_path))  # a task run of its own, as in the flow
    assert len(json.loads(Artifact.get("folds").data)) == 1 and len(json.loads(Artifact.get("members").data)) == 1
    kept = dataclasses.replace(ran, status="baseline", submission_source="baseline: class prior", folds=(),
                               members=())
    publish(kept, None, launched, str(tmp_path))
    assert json.loads(Artifact.get("folds").data) == [] and json.loads(Artifact.get("members").data) == []


def test_a_strict_slot_that_does_not_exist_stops_the_run(prefect_server, spaceship, demo_root, tmp_path):
    with pytest.raises(Exception, match="no-such-slot"):
        compete(competition="spaceship", budget="8s", data_root=str(demo_root), out_root=str(tmp_path),
                slot="no-such-slot")
    assert not (tmp_path / "spaceship-titanic" / "submission.csv").exists()


def test_local_sweep_holds_a_slot_for_each_launch_and_writes_a_table_and_grading_jsonl(prefect_server, spaceship,
                                                                                      tmp_path):
    """Each competition's launch holds a slot of a strict global concurrency limit of one (the limit exists: a
    missing one stops the run, above) and releases it; the sweep's table and grading lines follow."""
    async def create():
        async with get_client() as client:
            await client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name="test-slot", limit=1))

    asyncio.run(create())
    data_root = tmp_path / "data"  # holds only spaceship-titanic: dog-breed is reported missing
    shutil.copytree(spaceship, data_root / "spaceship-titanic")
    result = sweep(split="demo", budget="8s", data_root=str(data_root), out_root=str(tmp_path / "out"),
                   max_members=1, slot="test-slot")
    assert [r["competition_id"] for r in result["rows"]] == ["spaceship-titanic"]
    assert result["missing"] == ["dog-breed-identification"]
    lines = [json.loads(line) for line in open(result["jsonl"])]
    assert {line["competition_id"] for line in lines} >= {"spaceship-titanic"}
    assert all(pd.read_csv(line["submission_path"]).shape[0] > 0 for line in lines)
    table = json.loads(Artifact.get("sweep-demo").data)
    assert any(row["competition_id"] == "spaceship-titanic" and row["valid"] for row in table)

    async def held():
        async with get_client() as client:
            return (await client.read_global_concurrency_limit_by_name("test-slot")).active_slots

    assert asyncio.run(held()) == 0  # the launch gave its slot back


def test_the_compete_flow_runs_the_competition_in_a_container(engine, prefect_server, spaceship, demo_root,
                                                              tmp_path):
    summary = compete(competition="spaceship", budget=f"{paced(12)}s", data_root=str(demo_root), out_root=str(tmp_path),
                      backend="docker", image=IMAGE, host_python=True, max_members=1)
    assert summary["launch"]["backend"] == "docker" and summary["launch"]["exit_code"] == 0
    assert summary["grade"]["valid_submission"] and summary["grade"]["score"] > 0.7
    assert summary["submission_path"] == str((tmp_path / "spaceship-titanic" / "submission.csv").resolve())
    # the run page names the file on this machine, not the path the container wrote it to
    assert f"`{summary['submission_path']}`" in Artifact.get("run-summary").data
