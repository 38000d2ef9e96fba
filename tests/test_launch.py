"""The local backend: `runner run` as a process group, with the hard deadline enforced from outside."""
import pandas as pd

from runner.launch import Launch, run_local


def test_local_launch_streams_the_log_and_ends_cleanly(spaceship, tmp_path):
    lines = []
    result = run_local(Launch("spaceship", str(spaceship / "prepared" / "public"), str(tmp_path), 20),
                       on_line=lines.append)
    assert result.exit_code == 0 and not result.killed_at_deadline
    assert any("fold" in line for line in lines)


def test_the_hard_deadline_kills_the_group_and_keeps_the_last_submission(dog_breed, tmp_path):
    settings = Launch("dog-breed", str(dog_breed / "prepared" / "public"), str(tmp_path), 120, kill_after_seconds=8)
    result = run_local(settings, on_line=lambda _: None)
    assert result.killed_at_deadline and result.wall_seconds < 15
    sample = pd.read_csv(dog_breed / "prepared" / "public" / "sample_submission.csv")
    assert pd.read_csv(tmp_path / "submission.csv")["id"].tolist() == sample["id"].tolist()
