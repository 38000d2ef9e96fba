"""The install's own helper (tools/uv_index_args.py): uv is handed the indexes and wheel folders pip reads."""
import os
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).parents[1] / "tools" / "uv_index_args.py"
sys.path.insert(0, str(TOOL.parent))

from uv_index_args import uv_args  # noqa: E402


def test_each_setting_once_the_first_default_index_and_pips_weighing_of_indexes():
    settings = [("find-links", "/wheels"), ("index-url", "https://mirror/simple"), ("extra-index-url", "file:///a"),
                ("find-links", "/wheels"), ("index-url", "https://pypi.org/simple"), ("extra-index-url", "file:///b")]
    assert uv_args(settings) == ["--find-links=/wheels", "--index-url=https://mirror/simple",
                                 "--extra-index-url=file:///a", "--extra-index-url=file:///b",
                                 "--index-strategy=unsafe-best-match"]
    assert uv_args([("find-links", "/wheels")]) == ["--find-links=/wheels"]  # one index: no strategy to choose
    assert uv_args([]) == []


def test_what_pip_reads_from_its_files_and_variables_reaches_uv(tmp_path):
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nextra-index-url = file:///first/simple file:///second/simple\n")
    env = {**os.environ, "PIP_CONFIG_FILE": str(config), "PIP_FIND_LINKS": str(tmp_path / "wheels")}
    printed = subprocess.run([sys.executable, str(TOOL)], env=env, capture_output=True, text=True, check=True)
    args = printed.stdout.split()
    assert f"--find-links={tmp_path / 'wheels'}" in args
    first, second = args.index("--extra-index-url=file:///first/simple"), args.index(
        "--extra-index-url=file:///second/simple")
    assert first < second and args[-1] == "--index-strategy=unsafe-best-match"
