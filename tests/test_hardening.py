"""Untrusted data in, untrusted container out: each attack reproduced against what it exploited, and refused now."""
import io
import json
import os
import time
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from conftest import TOY_ENGINE, run_cli
from pace import paced
from runner.common.errors import InputError, SpecError
from runner.competition.grade import grade
from runner.deploy.launch import Launch, LaunchResult, collect
from runner.deploy.containers import container_config
from runner.competition.catalog import load_spec
from runner.common.untrusted import copy_out


def spaceship_copy(spaceship, tmp_path) -> Path:
    import shutil

    root = tmp_path / "competition"
    shutil.copytree(spaceship, root)
    return root


# --- the container's output ---------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_submission_linked_to_the_answers_is_not_what_gets_graded(spaceship, tmp_path):
    answers = spaceship / "prepared" / "private" / "test.csv"
    launch = Launch("spaceship", str(spaceship / "prepared" / "public"), str(tmp_path / "out"), 30)
    run = Path(launch.run_dir)
    run.mkdir(parents=True)
    (run / "submission.csv").symlink_to(answers)  # what code in a container could plant
    (run / "report.json").write_text("{}")
    spec = load_spec("spaceship")
    # the attack: grading what the run left, following the link, scores the answers against themselves
    assert grade(run / "submission.csv", spec, answers.parent).score == 1.0
    result = collect(launch, LaunchResult("docker", 0, False, 1.0))
    assert result.collected["submission.csv"].startswith(f"{run / 'submission.csv'}: refused")
    assert result.collected["report.json"] == "copied"
    graded = grade(Path(launch.out_dir) / "submission.csv", spec, answers.parent)
    assert graded.score is None and not graded.valid_submission


def test_outputs_that_are_not_regular_files_or_too_large_are_refused(tmp_path):
    run, host = tmp_path / "run", tmp_path / "host"
    run.mkdir()
    os.mkfifo(run / "submission.csv")  # would block a reader forever
    (run / "report.json").symlink_to("/etc/passwd")
    with open(run / "monitor.jsonl", "wb") as handle:
        handle.truncate(300 * 2**20)  # beyond its cap
    started = time.monotonic()
    outcome = copy_out(run, host)
    assert time.monotonic() - started < 5
    assert "not a regular file" in outcome["submission.csv"]
    assert "link" in outcome["report.json"] and "more than" in outcome["monitor.jsonl"]
    assert not any(host.glob("*")) if host.exists() else True


def test_a_plot_written_over_a_link_replaces_the_link_not_its_target(tmp_path):
    from runner.plot import fold_timeline
    from runner.results.report import RunReport

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "folds.png").symlink_to(victim)
    fold_timeline(RunReport("c", "trained", "accuracy", False, 60, 30, "s.csv", "x"), out / "folds.png")
    assert victim.read_text() == "precious"
    assert not (out / "folds.png").is_symlink() and (out / "folds.png").stat().st_size > 1000


# --- inputs -----------------------------------------------------------------------------------------------------

def test_a_sample_linked_outside_the_data_folder_is_refused(spaceship, tmp_path):
    root = spaceship_copy(spaceship, tmp_path)
    secret = tmp_path / "secret.csv"
    secret.write_text("PassengerId,Transported\nsecret,True\n")
    secret.chmod(0o600)
    sample = root / "prepared" / "public" / "sample_submission.csv"
    sample.unlink()
    sample.symlink_to(secret)
    result = run_cli("run", "spaceship", "--data", str(root / "prepared" / "public"), "--budget", "10s", "--out",
                     str(tmp_path / "out"))
    assert result.returncode == 2 and "refused: it leads outside" in result.stderr
    assert not (tmp_path / "out" / "submission.csv").exists()  # the secret was not copied out


def test_a_train_file_linked_outside_is_refused_and_the_baseline_still_written(spaceship, tmp_path):
    root = spaceship_copy(spaceship, tmp_path)
    train = root / "prepared" / "public" / "train.csv"
    outside = tmp_path / "elsewhere.csv"
    train.rename(outside)
    train.symlink_to(outside)
    result = run_cli("run", "spaceship", "--data", str(root / "prepared" / "public"), "--budget", "10s", "--out",
                     str(tmp_path / "out"))
    assert result.returncode == 2 and "train.csv: refused" in result.stderr
    assert grade(tmp_path / "out" / "submission.csv", load_spec("spaceship"),
                 root / "prepared" / "private").valid_submission


def test_an_image_folder_linked_to_the_root_is_not_walked(tmp_path):
    from runner.data.targets import _images_of

    public = tmp_path / "public"
    (public / "train").mkdir(parents=True)
    Image.new("RGB", (8, 8)).save(public / "train" / "a.jpg")
    (public / "train" / "everything").symlink_to("/")
    (public / "train" / "b.jpg").symlink_to("/etc/passwd")
    started = time.monotonic()
    paths = _images_of(public, "train", tmp_path / "work", pd.Series(["a", "b"]), ".jpg")
    assert time.monotonic() - started < 2
    assert paths[0] == public / "train" / "a.jpg" and paths[1] is None


def zip_of(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_a_zip_bomb_is_refused_before_anything_is_written(tmp_path):
    from runner.data.reading import image_folder

    public = tmp_path / "public"
    public.mkdir()
    zip_of(public / "train.zip", {"a.jpg": b"\0" * (200 * 2**20)})  # 200 MiB of zeros: a few hundred KiB zipped
    assert (public / "train.zip").stat().st_size < 2**20
    started = time.monotonic()
    with pytest.raises(InputError, match="expand .* times"):
        image_folder(public, "train.zip", tmp_path / "work")
    assert time.monotonic() - started < 2 and not (tmp_path / "work" / "extracted").exists()


def test_a_zip_extracts_its_images_only(tmp_path):
    from runner.data.reading import image_folder

    public = tmp_path / "public"
    public.mkdir()
    picture = io.BytesIO()
    Image.new("RGB", (8, 8)).save(picture, "PNG")
    zip_of(public / "train.zip", {"train/a.png": picture.getvalue(), "../../escape.sh": b"echo hi"})
    folder = image_folder(public, "train.zip", tmp_path / "work")
    assert [p.name for p in folder.rglob("*") if p.is_file() and p.name != ".complete"] == ["a.png"]
    assert not (tmp_path / "escape.sh").exists()


def test_a_pixel_bomb_is_refused_before_it_is_decoded(tmp_path):
    from runner.engines.timm.images import decode

    path = tmp_path / "bomb.png"
    Image.new("1", (12_000, 12_000)).save(path, optimize=True)  # 144 M pixels, a small file
    assert path.stat().st_size < 2**20
    started = time.monotonic()
    assert decode(path, 64) is None
    assert time.monotonic() - started < 1


@pytest.mark.slow
def test_a_one_line_megabyte_description_does_not_delay_the_baseline(spaceship, tmp_path):
    root = spaceship_copy(spaceship, tmp_path)
    (root / "prepared" / "public" / "description.md").write_text("column wise " * 100_000)  # 1.2 MB, one line
    result = run_cli("run", "some-unknown-competition", "--data", str(root / "prepared" / "public"), "--budget",
                     "8s", "--out", str(tmp_path / "out"), "--max-members", "1")
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["timings"]["baseline_written"] < paced(3)  # as the supervisor's imports take, on this machine


@pytest.mark.slow
def test_a_sample_with_only_ids_still_gives_a_valid_submission(spaceship, tmp_path):
    root = spaceship_copy(spaceship, tmp_path)
    sample = root / "prepared" / "public" / "sample_submission.csv"
    pd.read_csv(sample)[["PassengerId"]].to_csv(sample, index=False)
    result = run_cli("run", "spaceship", "--data", str(root / "prepared" / "public"), "--budget", "8s", "--out",
                     str(tmp_path / "out"), "--max-members", "1")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "no column(s) ['Transported']; added" in result.stderr
    assert grade(tmp_path / "out" / "submission.csv", load_spec("spaceship"),
                 root / "prepared" / "private").valid_submission


@pytest.mark.slow
def test_a_run_stuck_in_any_stage_ends_before_its_budget(spaceship, tmp_path):
    env = {**TOY_ENGINE, "TOY_PLAN_SECONDS": "60"}  # planning that would outlast the budget
    started = time.monotonic()
    result = run_cli("run", "spaceship", "--data", str(spaceship / "prepared" / "public"), "--budget", "8s",
                     "--out", str(tmp_path / "out"), "--engines", "toy", env=env)
    assert time.monotonic() - started < 8 + 1.5  # the interpreter's own start counts in the budget
    assert result.returncode == 124 and "the last valid submission is kept" in result.stderr
    assert grade(tmp_path / "out" / "submission.csv", load_spec("spaceship"),
                 spaceship / "prepared" / "private").valid_submission
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["status"] == "stopped" and "watchdog stopped it" in report["stop_reason"]


# --- the container and the flows ---------------------------------------------------------------------------------

def test_the_container_config_carries_every_limit(spaceship, tmp_path):
    config = container_config(Launch("spaceship", str(spaceship / "prepared" / "public"), str(tmp_path), 60,
                                     gpus="none", memory_gb=4, cpus=2), client=None)
    assert config["mem_limit"] == config["memswap_limit"] == "4096m" and config["nano_cpus"] == 2 * 10**9
    assert config["pids_limit"] > 0 and config["cap_drop"] == ["ALL"] and config["read_only"]
    assert config["security_opt"] == ["no-new-privileges:true"] and config["network_mode"] == "none"
    assert set(config["tmpfs"]) == {"/tmp", "/home/work"} and "size=2048m" in config["tmpfs"]["/home/work"]
    assert not config["user"].startswith("0:")
    defaults = container_config(Launch("spaceship", str(spaceship / "prepared" / "public"), str(tmp_path), 60,
                                       gpus="none"), client=None)
    assert defaults["mem_limit"] and defaults["nano_cpus"]  # limits by default, sized from this machine


def test_children_see_only_an_allow_listed_environment():
    from runner.units.processes import child_environment

    seen = child_environment({"PATH": "/bin", "PREFECT_API_KEY": "secret", "AWS_SECRET_ACCESS_KEY": "secret",
                              "RUNNER_ENGINES": "x=y:Z", "LC_ALL": "C", "OMP_NUM_THREADS": "2"})
    assert seen == {"PATH": "/bin", "RUNNER_ENGINES": "x=y:Z", "LC_ALL": "C", "OMP_NUM_THREADS": "2"}


def test_splits_are_names_and_out_roots_stay_under_their_root(tmp_path, monkeypatch):
    from flows.compete import confined, escape_markdown
    from runner.competition.mlebench import read_split

    assert "spaceship-titanic" in read_split("demo")
    with pytest.raises(SpecError, match="not found"):
        read_split("/etc/passwd")
    monkeypatch.setenv("RUNNER_OUT_ROOT", str(tmp_path))
    assert confined(str(tmp_path / "runs")) == (tmp_path / "runs").resolve()
    with pytest.raises(Exception, match="outside"):
        confined("/")
    assert escape_markdown("[click](http://x) *now*") == "\\[click\\]\\(http://x\\) \\*now\\*"


def test_outputs_keep_the_users_umask(tmp_path):
    import subprocess
    import sys

    code = "from runner.common.atomic import write_json; write_json(__import__('pathlib').Path('out.json'), {})"
    subprocess.run(["sh", "-c", f"umask 027 && {sys.executable} -c \"{code}\""], cwd=tmp_path, check=True)
    assert oct((tmp_path / "out.json").stat().st_mode & 0o777) == oct(0o640)
