"""bench/suite_cpu.py's plugin: a test's CPU counts the processes it started, those nobody waited on included."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

from suite_cpu_plugin import GROUP_VARIABLE, OUT_VARIABLE, remove_groups  # noqa: E402

BURN_SECONDS = 0.6  # of CPU, spent by a grandchild the test starts and leaves to init
# a test that starts a detached grandchild (its parent, a shell, exits at once: nobody waits on it) and waits for
# its file, written once it has burnt its CPU
DETACHED = f"""
import subprocess, sys, time
from pathlib import Path

def test_leaves_a_busy_grandchild(tmp_path):
    done = tmp_path / "done"
    burn = "import resource, sys; " \\
           "t = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2]); " \\
           "exec('while t() < {BURN_SECONDS}: pass'); open(sys.argv[1], 'w').close()"
    subprocess.run(["sh", "-c", f'"{{sys.executable}}" -c "{{burn}}" {{done}} &'], check=True)
    end = time.monotonic() + 120
    while not done.exists() and time.monotonic() < end:
        time.sleep(0.05)
    assert done.exists()
"""


def test_a_grandchild_nobody_waited_on_is_counted_where_the_worker_has_a_group(tmp_path):
    site, lines = tmp_path / "site", tmp_path / "lines"
    site.mkdir()
    shutil.copy(BENCH / "suite_cpu_plugin.py", site)  # alone on the path, as the bench puts it
    (tmp_path / "test_detached.py").write_text(DETACHED)
    prefix = f"suite-cpu-test-{os.getpid()}"
    # a session of its own: not an xdist worker's (the plugin names its lines and group by the worker) nor the
    # outer session's options
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update({"PYTHONPATH": str(site), OUT_VARIABLE: str(lines), GROUP_VARIABLE: prefix})
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "suite_cpu_plugin", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_detached.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = [json.loads(text) for text in (lines / "main.jsonl").read_text().splitlines()]
    assert line["test"].endswith("test_leaves_a_busy_grandchild") and line["end"] > line["start"]
    remove_groups(prefix)  # the session and the grandchild have ended
    if line["counted"] == "rusage":  # no group could be made here: the grandchild is not in the count
        assert line["cpu"] < BURN_SECONDS, line
    else:
        assert line["cpu"] >= BURN_SECONDS, line
