"""bench/gpu_check.py's CPU smoke run (`--cpu-smoke`): every section that can run on a CPU, whole runs included, so
the script's code stays exercised where no GPU is. A file of its own: the longest test of the waiting worker's
(tests/waiting_workers.py, SHARED_FILES), and the script's other tests, short, go to whichever worker is free."""
import json
import os

import pytest

from pace import pace
from runner.machine.hardware import cpu_bf16_here
from test_gpu_check import BENCH, CUDA_ONLY, ROOT, SECTIONS, gpu_check

WHOLE_RUNS = ("fork_safety", "audio")  # whole `runner run`s on a CPU smoke run
# on the path of every Python process the smoke run starts, from a relative PYTHONPATH entry: each writes its
# folder and command line, so the test sees which children found that entry
SITE = """import os, sys
with open(os.environ["GPU_CHECK_STARTED"], "a") as log:
    log.write(os.getcwd() + "\\t" + " ".join(sys.orig_argv) + "\\n")
"""


@pytest.mark.slow
def test_cpu_smoke_runs_every_section_that_runs_on_a_cpu(tmp_path):
    # from a folder other than bench/, with relative PYTHONPATH entries (as an offline machine's site folder was
    # given): the runs, started from the project's folder, must still find what those entries hold
    elsewhere, started = tmp_path / "elsewhere", tmp_path / "started.txt"
    (elsewhere / "site").mkdir(parents=True)
    (elsewhere / "site" / "sitecustomize.py").write_text(SITE)
    out = tmp_path / "gpu.json"
    done = gpu_check("--cpu-smoke", "--out", str(out), "--pace", str(pace()), cwd=elsewhere,
                     GPU_CHECK_STARTED=str(started),
                     paths=(os.path.relpath(ROOT, elsewhere), os.path.relpath(BENCH, elsewhere), "site"))
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
    # bf16 only where the CPU runs it natively (emulated it is 8x slower than fp32, and the runner never trains it)
    assert {row["precision"] for row in timed} == ({"fp32", "bf16"} if cpu_bf16_here() else {"fp32"})
    assert all(row["images_per_second"] > 0 for row in timed)
    configs = {row["config"]: row for row in results["planned_vs_failure"]["rows"]}
    assert configs["failure"]["images_per_second"] > 0 and configs["planned"]["images_per_second"] > 0
    assert results["fork_safety"]["cuda_started_in_parent"] is None
    # what a CPU busy with other work does not change: a fold started, the run ended within its budget with a
    # valid submission (a fold may or may not finish in the seconds a smoke run gives)
    for section in WHOLE_RUNS:
        run = results[section]
        assert run["folds_started"] >= 1 and run["returncode"] == 0, run
        assert run["wall_seconds"] <= run["budget"] + 1.0 and run["test_score"] is not None, run
        assert run["killed"] == [] or all("stacks" in unit for unit in run["killed"]), run
    assert results["audio"]["augment"] == "spectrogram"
    refusal = results["leased_gpus"]
    assert refusal["unknown_card_refused"] is True and refusal["refusal_returncode"] == 2, refusal
    assert results["text_finetune"]["tokens_per_second"] > 0 and results["text_finetune"]["epochs"] >= 1
    assert results["image_to_image"]["epochs"] >= 1 and results["image_to_image"]["cv"] < 0.207  # below the noisy
    assert [row["section"] for row in results["rows"]] == list(SECTIONS)
    passes = [line for line in done.stdout.splitlines() if line.startswith("PASS ")]
    assert len(passes) == len(SECTIONS) - len(CUDA_ONLY)
    assert done.stdout.strip().splitlines()[-1].startswith(f"gpu-check: {len(passes)} of {len(SECTIONS)} PASS, 0 FAIL")
    # the whale run and the refused one started in the project's folder, and found the relative entry's module
    children = [line.split("\t") for line in started.read_text().splitlines()]
    runs = [argv for folder, argv in children if folder == str(ROOT) and "runner.cli run" in argv]
    assert any("run whale" in argv for argv in runs) and any("--gpus GPU-0000" in argv for argv in runs), children
