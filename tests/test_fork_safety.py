"""CUDA is never started in the supervisor or the fork server, whose children would then fail on their first
CUDA call ("Cannot re-initialize CUDA in forked subprocess"): a whole image run goes through a guard that records
and refuses any CUDA start in those two processes (tests/cuda_guard), and the guard is shown to catch one."""
import json
import os
import subprocess
import sys

import pytest

from conftest import TESTS, run_cli

pytestmark = pytest.mark.slow  # a whole run through processes

GUARD = TESTS / "cuda_guard"


def guarded(log) -> dict:
    path = os.pathsep.join(p for p in (str(GUARD), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "RUNNER_CUDA_GUARD_LOG": str(log)}


def test_the_guard_records_a_cuda_start_in_a_guarded_process(tmp_path):
    log = tmp_path / "cuda.log"
    code = "import multiprocessing.forkserver, torch; torch.cuda.is_available()"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, **guarded(log)})
    assert result.returncode != 0 and "CUDA started in a parent process" in result.stderr
    assert "_cuda_getDeviceCount" in log.read_text()


def test_an_image_run_starts_no_cuda_in_the_supervisor_or_the_fork_server(dog_breed, tmp_path):
    log, out = tmp_path / "cuda.log", tmp_path / "out"
    result = run_cli("run", "dog-breed", "--data", str(dog_breed / "prepared" / "public"), "--budget", "30s",
                     "--out", str(out), "--engines", "timm", env=guarded(log))
    assert not log.exists(), log.read_text()
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    trained = [m for m in report["members"] if m["name"].startswith("timm") and m["folds_done"] >= 1]
    assert trained, report["members"]  # the CNN's units were forked and trained under the guard
