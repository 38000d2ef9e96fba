"""The local backend: `runner run` as a process group, with the hard deadline enforced from outside."""
import pandas as pd
import pytest

from pace import paced
from runner.deploy.launch import Launch
from runner.deploy.containers import blocked_folders
from runner.deploy.local import run_local

pytestmark = pytest.mark.slow  # whole runs through processes, containers or Prefect: the fast subset leaves them out


def test_local_launch_streams_the_log_and_ends_cleanly(spaceship, tmp_path):
    lines = []
    # 10 s and one member (the run ends once it is trained): what is asserted is the stream and the clean end, not
    # what the run trains. Stretched by the machine's pace (tests/pace.py): at pace 2.5, on the core the waiting
    # worker shares, scikit-learn's import outlasted 10 s, and the run kept its baseline before training began
    result = run_local(Launch("spaceship", str(spaceship / "prepared" / "public"), str(tmp_path), paced(10),
                              max_members=1), on_line=lines.append)
    assert result.exit_code == 0 and not result.killed_at_deadline
    assert any("Plan:" in line for line in lines) and any("training ended at" in line for line in lines)


def test_the_hard_deadline_kills_the_group_and_keeps_the_last_submission(dog_breed, tmp_path):
    settings = Launch("dog-breed", str(dog_breed / "prepared" / "public"), str(tmp_path), 120, kill_after_seconds=8)
    result = run_local(settings, on_line=lambda _: None)
    assert result.killed_at_deadline and result.wall_seconds < 15
    sample = pd.read_csv(dog_breed / "prepared" / "public" / "sample_submission.csv")
    assert pd.read_csv(tmp_path / "submission.csv")["id"].tolist() == sample["id"].tolist()


def test_a_mounted_folder_the_container_user_cannot_enter_is_named(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / ".venv").mkdir(parents=True)
    checkout.chmod(0o700)  # what `mktemp -d` gives a fresh clone
    mounts = {checkout, checkout / ".venv"}
    assert blocked_folders(mounts, uid=1000, gid=1000) == [checkout]
    assert blocked_folders(mounts, uid=checkout.stat().st_uid, gid=1000) == []  # its owner may enter
    checkout.chmod(0o755)
    assert blocked_folders(mounts, uid=1000, gid=1000) == []
    (checkout / ".venv").chmod(0o750)  # group members only
    assert blocked_folders(mounts, uid=1000, gid=(checkout / ".venv").stat().st_gid) == []
    assert blocked_folders(mounts, uid=1000, gid=4321) == [checkout / ".venv"]
