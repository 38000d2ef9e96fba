"""bench/gpu_check.py (`make gpu-check`): without a GPU it names every section as SKIP with the reason and writes
nothing; its CPU smoke run goes through every section that can run on a CPU, so the script's code stays
exercised where no GPU is."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
SECTIONS = ("hardware", "memory", "confirm_batch", "shared_gpu", "monitor", "precision_layout_compile",
            "oom_backoff", "planned_vs_failure", "fork_safety", "leased_gpus", "text_finetune", "audio",
            "image_to_image")
CUDA_ONLY = ("confirm_batch", "shared_gpu", "oom_backoff", "leased_gpus")


def gpu_check(*args: str) -> subprocess.CompletedProcess:
    """The script as `make gpu-check` runs it: from bench/, with the project and bench/ on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(BENCH)])}
    return subprocess.run([sys.executable, "gpu_check.py", *args], cwd=BENCH, capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible: the check would run for real")
def test_without_a_gpu_it_skips_and_writes_nothing():
    result_file = BENCH / "results" / "gpu.json"
    before = result_file.stat().st_mtime_ns if result_file.exists() else None
    done = gpu_check()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    reason = "no NVIDIA GPU visible (torch.cuda.is_available() is False)"
    assert lines[:-1] == [f"SKIP {section}: {reason}" for section in SECTIONS]
    assert lines[-1] == f"gpu-check: 0 of {len(SECTIONS)} PASS, 0 FAIL; nothing written"
    assert (result_file.stat().st_mtime_ns if result_file.exists() else None) == before


@pytest.mark.slow
def test_cpu_smoke_runs_every_section_that_runs_on_a_cpu(tmp_path):
    out = tmp_path / "gpu.json"
    done = gpu_check("--cpu-smoke", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(out.read_text())
    assert set(SECTIONS) <= set(results)
    for section in CUDA_ONLY:
        assert results[section] == {"skipped": "needs CUDA"}
    for section in set(SECTIONS) - set(CUDA_ONLY):
        assert results[section]["ok"] is True, results[section]
    assert results["hardware"]["hardware"]["cpus"] >= 1
    assert all(row["estimate_mib"] > 0 for row in results["memory"]["rows"])
    assert results["monitor"]["samples"] >= 1 and results["monitor"]["images_trained"] > 0
    timed = [row for row in results["precision_layout_compile"]["rows"] if "skipped" not in row]
    assert {row["precision"] for row in timed} == {"fp32", "bf16"}
    assert all(row["images_per_second"] > 0 for row in timed)
    configs = {row["config"]: row for row in results["planned_vs_failure"]["rows"]}
    assert configs["failure"]["images_per_second"] > 0 and configs["planned"]["images_per_second"] > 0
    assert results["fork_safety"]["folds_done"] >= 1 and results["fork_safety"]["cuda_started_in_parent"] is None
    assert results["text_finetune"]["tokens_per_second"] > 0 and results["text_finetune"]["epochs"] >= 1
    assert results["audio"]["folds_done"] >= 1 and results["audio"]["augment"] == "spectrogram"
    assert results["image_to_image"]["epochs"] >= 1 and results["image_to_image"]["cv"] < 0.207  # below the noisy
    assert [row["section"] for row in results["rows"]] == list(SECTIONS)
    passes = [line for line in done.stdout.splitlines() if line.startswith("PASS ")]
    assert len(passes) == len(SECTIONS) - len(CUDA_ONLY)
    assert done.stdout.strip().splitlines()[-1].startswith(f"gpu-check: {len(passes)} of {len(SECTIONS)} PASS, 0 FAIL")


def test_only_runs_the_sections_named_and_keeps_the_others_figures(tmp_path, monkeypatch):
    out = tmp_path / "gpu.json"
    out.write_text(json.dumps({"memory": {"ok": True, "from": "an earlier run"}}))
    done = gpu_check("--cpu-smoke", "--out", str(out), "--only", "hardware")
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(out.read_text())
    assert results["memory"] == {"ok": True, "from": "an earlier run"} and results["hardware"]["ok"] is True
    assert [row["section"] for row in results["rows"]] == ["memory", "hardware"]
    monkeypatch.syspath_prepend(str(BENCH))  # as `make gpu-check` runs it
    import gpu_check as check

    with pytest.raises(SystemExit, match="no_such_section"):
        check.chosen("hardware,no_such_section")
