"""CUDA is never started in the supervisor or the fork server, whose children would then fail on their first
CUDA call ("Cannot re-initialize CUDA in forked subprocess"). The guard (tests/cuda_guard) records and refuses any
CUDA start in those two processes; here it is shown to catch one. The whole image run under it, its CNN folds
trained, is bench/gpu_check.py's fork_safety section, which tests/test_gpu_check_smoke.py's CPU smoke run asserts
(and `make gpu-check` runs on a card)."""
import os
import subprocess
import sys

import pytest

from conftest import TESTS

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
