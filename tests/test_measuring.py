"""The measuring process as the planner starts it, on this CPU with tiny models: what it imports, its deadline
checked between a candidate's steps, and a start-up recorded for a candidate stopped in its first step, which the
plan then counts; one that stops answering, or overruns its window, is killed at its deadline, leaving what it timed
and its stacks. A slow step is a real wait inside the step (`STEP_WAIT_VARIABLE`), where a card's cold start
spends its seconds (the first backward pass: cuDNN's search)."""
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import alive, measuring_pid
from pace import paced
from runner.competition.catalog import load_spec
from runner.engines.timm import estimates as ladder
from runner.engines.timm.costs import Candidate, FirstStep, ImageCosts, StartUp
from runner.engines.timm.ladder import GPU_CANDIDATES
from runner.engines.timm.measure import READY, STEP_WAIT_VARIABLE
from runner.engines.timm.measuring import OVERRUN_SECONDS, REAP_SECONDS, gather_costs, prestart, release
from runner.machine.hardware import GiB, Gpu, Hardware
from runner.planning.planner import make_plan
from runner.planning.portfolio import DataShape

ROOT = Path(__file__).resolve().parent.parent
QUICK = Candidate("mobilenetv3_small_100", 64, "fp32", 8)  # a step in milliseconds on one core
HEAVY = ("pandas", "sklearn", "pydantic")  # what the engines' shared helpers pull, seconds of imports on 2 cores
# seconds of measuring window for a process whose imports are done (`_prestarted`), as a run's is where it starts
# it while the data is read: the candidate's model built and a few of its steps; stretched by the machine's pace
# (tests/pace.py) as every time limit here. The window that had to cover torch's and timm's import as well (3 s
# idle, 10.5 s with two other processes on each core, over 60 s on a slower CPU's busy first minute) made these
# tests wait minutes on such a machine
WINDOW = paced(5.0)
# seconds a measuring process may take to start and import torch and timm before its test gives up on it
IMPORTS_SECONDS = paced(90.0)

# written into a folder on the measuring process's PYTHONPATH: Python imports it at start, and at exit it leaves
# the process's own sys.modules in a file named for its pid, the module it ran on the first line
SITECUSTOMIZE = '''import atexit, os, sys


def _modules():
    main = getattr(sys.modules.get("__main__"), "__spec__", None)
    with open(os.path.join(os.environ["MODULES_OUT"], f"{os.getpid()}.txt"), "w") as out:
        out.write((main.name if main else "-") + "\\n" + "\\n".join(sorted(sys.modules)))


atexit.register(_modules)
'''


def _prestarted(work_dir: Path) -> int:
    """A measuring process started for `work_dir` as a run starts it (`prestart`), once it says its imports are
    done; its pid. Its window then holds what the test is about, not its imports, however long they took."""
    work_dir.mkdir(parents=True, exist_ok=True)
    prestart("cpu", work_dir, time.monotonic() + IMPORTS_SECONDS + 600.0)
    pid, log, end = measuring_pid(), work_dir / "measure.log", time.monotonic() + IMPORTS_SECONDS
    while READY not in (log.read_text(errors="replace") if log.exists() else ""):
        if time.monotonic() > end or not alive(pid):
            release(work_dir)
            raise AssertionError(f"no '{READY}' in {log} after {IMPORTS_SECONDS:.0f} s")
        time.sleep(0.05)
    return pid


def _modules_of_measuring(folder: Path) -> set[str]:
    """The top-level packages the measuring process had imported when it ended."""
    for dump in folder.glob("*.txt"):
        name, *modules = dump.read_text().splitlines()
        if name == "runner.engines.timm.measure":
            return {m.partition(".")[0] for m in modules}
    raise AssertionError(f"no measuring process wrote its modules into {folder}: {sorted(folder.iterdir())}")


def test_the_measuring_process_imports_no_pandas_sklearn_or_pydantic(tmp_path, monkeypatch, caplog):
    """On an H200 a measuring window ended while the process was still importing: it imported the engines' shared
    helpers for one constant, and with them pandas, pydantic and scikit-learn. Started as a run starts it (before
    the data is read: `prestart`, then the engine's `measure` hands its request to `gather_costs`), on this CPU
    with a tiny model, it times it with torch and timm alone, imported before its request came, and it is the
    process that measured: no second one is started."""
    site, dumps = tmp_path / "site", tmp_path / "modules"
    site.mkdir(), dumps.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", f"{site}:{ROOT}")
    monkeypatch.setenv("MODULES_OUT", str(dumps))
    prestart("cpu", tmp_path, time.monotonic() + paced(60.0))
    early = measuring_pid()
    with caplog.at_level(logging.INFO, logger="runner"):
        costs = gather_costs([QUICK], "cpu", 10, 1, paced(30.0), True, tmp_path)
    assert costs.throughput and not costs.note, costs.note  # it measured, and ended by itself
    assert "measuring in the process started" in caplog.text
    assert "measure: torch and timm imported in" in (tmp_path / "measure.log").read_text()
    imported = _modules_of_measuring(dumps)
    assert [p.stem for p in dumps.glob("*.txt")] == [str(early)]  # one measuring process, the early one
    assert {"torch", "timm"} <= imported
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_an_early_measuring_process_never_asked_is_killed_once_the_plan_is_made(tmp_path):
    """A run whose plan did not measure (no engine wanted it, or planning failed) ends the process it started
    before reading the data, imports or not."""
    end = prestart("cpu", tmp_path, time.monotonic() + 600.0)
    pid = measuring_pid()
    end()
    assert not alive(pid)


def test_an_early_measuring_process_leaves_when_the_run_that_started_it_has_gone(tmp_path):
    """A run killed while it reads its data (SIGKILL: nothing of it is left to end anything) leaves no measuring
    process waiting for a request that never comes, nor finishing imports nobody will use: it sees its parent
    gone, and leaves at once."""
    gone = subprocess.run([sys.executable, "-c", EARLY_AND_GONE, str(tmp_path)], capture_output=True, text=True,
                          timeout=paced(60.0), cwd=ROOT)
    assert gone.returncode == 0, gone.stderr
    pid = int(gone.stdout)
    end = time.monotonic() + paced(10.0)  # it looks every 20 ms from its start (here it left within 0.6 s)
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.1)
    assert not alive(pid)
    assert "no request came; leaving" in (tmp_path / "measure.log").read_text()


# a run that starts its measuring process early and is gone at once, ending nothing
EARLY_AND_GONE = """import os, sys, time
from pathlib import Path
import psutil
from runner.engines.timm.measuring import prestart
prestart("cpu", Path(sys.argv[1]), time.monotonic() + 600.0)
print(psutil.Process().children()[0].pid, flush=True)
os._exit(0)
"""


@pytest.mark.slow
def test_a_candidate_stopped_in_its_first_step_leaves_its_start_up_and_its_stacks(tmp_path, monkeypatch, caplog):
    """On an H200 measuring stopped at its 20 s deadline inside convnext_small's first backward pass (cuDNN's
    search) and left nothing. A first step that never returns in the window now leaves the candidate's start-up
    so far, marked as not ended, and the plan's note says it. The step is not waited for: the process writes its
    stacks past its deadline (where the time went: a step, or on a busy core still importing torch) and is killed
    just after; the run's log gets the dump from its innermost frame on. Started while the data is read, as a run
    starts it: the window is the candidate's."""
    monkeypatch.setenv(STEP_WAIT_VARIABLE, "600")
    _prestarted(tmp_path)
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="runner"):
        costs = gather_costs([QUICK], "cpu", 10, 1, WINDOW, True, tmp_path)
    took = time.monotonic() - started
    assert WINDOW <= took <= WINDOW + OVERRUN_SECONDS + REAP_SECONDS + 1.0, took
    assert costs.note.startswith("measuring stopped at its deadline") and not costs.throughput
    assert costs.starting is None and len(costs.startup) == 1
    startup = costs.startup[0]
    assert startup.candidate == QUICK and startup.device == "cpu" and not startup.ended
    assert 0 < startup.seconds <= took and startup.seconds <= WINDOW + OVERRUN_SECONDS + REAP_SECONDS
    assert "had not ended its first step" in costs.note
    dump = (tmp_path / "measure.log").read_text().splitlines()  # the measuring process's own log
    header = next(i for i, line in enumerate(dump) if line.endswith("(most recent call first):"))
    assert dump[header + 1].startswith('  File "'), dump
    assert f"measure: {dump[header]}" in caplog.text and f"measure: {dump[header + 1]}" in caplog.text


def _measured_with_steps_of(window: float, folder: Path, monkeypatch, caplog) -> tuple[ImageCosts, float]:
    """The quick candidate measured in `window` with steps of a 4.5th of it, and the step's wait, by a process
    whose imports are done."""
    wait = window / 4.5
    monkeypatch.setenv(STEP_WAIT_VARIABLE, str(wait))
    _prestarted(folder)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="runner"):
        return gather_costs([QUICK], "cpu", 10, 1, window, True, folder), wait


def _second_step_overran(costs: ImageCosts) -> bool:
    """Killed at the deadline after its first step ended: the second step, always started, did not fit what the
    process's start left of the window."""
    return costs.note.startswith("measuring stopped at its deadline") and any(s.ended for s in costs.startup)


@pytest.mark.slow
def test_measuring_checks_its_deadline_between_a_candidates_steps(tmp_path, monkeypatch, caplog):
    """Steps of a 4.5th of the window each: the five training steps a candidate takes before it is timed never fit
    the window after the process's start, however soon its imports end. The process leaves the candidate before the
    step that would end past its deadline, and ends by itself (not killed, no stacks); its first step had ended, so
    the candidate's start-up is whole, at least that step's wait.
    The second step is started whatever the first took (the first is start-up, not pace), so the premise is that
    the candidate's start leaves two steps: the process is started early and its imports are done before the
    window (a window that covered them, 40 s stretched by the pace, took minutes on a slower CPU and still missed
    now and then); where the premise fails all the same (the model's build past 5/9 of the window on a busy core),
    the run is made once more at twice the window, and the assertions hold the second run."""
    window = paced(10.0)
    costs, wait = _measured_with_steps_of(window, tmp_path / "first", monkeypatch, caplog)
    if _second_step_overran(costs):
        logging.getLogger(__name__).warning("start-up left no room for a second step in %.0f s: again", window)
        costs, wait = _measured_with_steps_of(2 * window, tmp_path / "again", monkeypatch, caplog)
    assert not costs.note, costs.note  # not stopped: it ended by itself
    assert not costs.throughput and "left at the deadline" in caplog.text
    assert "most recent call first" not in caplog.text  # no stacks: it was not past its deadline
    assert [(s.candidate, s.ended) for s in costs.startup] == [(QUICK, True)]
    assert costs.startup[0].seconds >= wait


# a candidate that takes far longer to time than any measuring window here: ~20 s a step on 2 cores, 5 steps or more.
# The measuring process below computes on one thread: on a busy machine two threads of one process wait on each
# other for whole time slices, and a step of the quick candidate took seconds
SLOW_TO_TIME = Candidate("resnet18", 192, "fp32", 256)


def _timed_in(out) -> bool:
    """Whether the measuring process's file (written whole, by rename) holds a timed candidate yet."""
    try:
        return bool(json.loads(out.read_text())["throughput"])
    except (OSError, ValueError):
        return False


@pytest.mark.slow
def test_a_measuring_process_that_stops_answering_is_killed_at_its_deadline_and_what_it_wrote_stands(tmp_path):
    """The nemesis: once the measuring process has timed a first candidate it is stopped (SIGSTOP: as a hang in a
    driver call looks to the supervisor). It is killed just past its deadline, and the candidate it timed is
    planned from. Started while the data is read, as a run starts it: the window is for timing."""
    seconds, result, out = paced(8.0), {}, tmp_path / "measured_costs.json"
    pid = _prestarted(tmp_path)
    measuring = threading.Thread(target=lambda: result.update(costs=gather_costs(
        [QUICK, SLOW_TO_TIME], "cpu", 10, 1, seconds, True, tmp_path)))
    started = time.monotonic()
    measuring.start()
    while measuring.is_alive() and not _timed_in(out):
        time.sleep(0.01)
    os.kill(pid, signal.SIGSTOP)
    measuring.join(60)
    took = time.monotonic() - started
    assert seconds <= took <= seconds + OVERRUN_SECONDS + REAP_SECONDS + 1.0, took
    costs = result["costs"]
    assert costs.note.startswith("measuring stopped at its deadline")
    assert [t.candidate for t in costs.throughput] == [QUICK]


H100 = Hardware((Gpu("NVIDIA H100 80GB HBM3", 80 * GiB, 80 * GiB, (9, 0), 989.0),), 16, 128 * GiB, 64 * GiB,
                64 * GiB)
PHOTOS = DataShape(4800, 1200, classes=120, inputs=frozenset({"image"}), image_side=240)


def _estimated() -> ImageCosts:
    return ImageCosts(memory=tuple(ladder.memory_of(m, s, "bf16") for m, s in GPU_CANDIDATES),
                      flops={f"{m}@{s}": ladder.flops_of(m, s) for m, s in GPU_CANDIDATES})


def _cnn(costs: ImageCosts, window: float = 600.0):
    plan = make_plan(load_spec("dog-breed"), H100, window, PHOTOS, {"timm": costs}, engines=["timm"])
    return plan.member("timm")


def test_a_measured_start_up_is_planned_for_each_fold():
    """The planner reads a candidate's measured start-up: a first step that had not ended after 47 s (as
    efficientnet_lite0's did on an H200) makes each of its folds plan 47 s of start-up, not the usual 12, and the
    plan says where that came from; a start-up shorter than the usual one changes nothing."""
    plain = _cnn(_estimated())
    model, size = plain.settings.model, plain.settings.image_size
    candidate = Candidate(model, size, "bf16", 256)
    slow = _cnn(dataclasses.replace(_estimated(), startup=(StartUp(candidate, "cuda", 47.0, ended=False),)))
    quick = _cnn(dataclasses.replace(_estimated(), startup=(StartUp(candidate, "cuda", 2.0),)))
    assert (slow.settings.model, slow.settings.image_size) == (model, size)
    assert slow.min_fold_seconds == pytest.approx(plain.min_fold_seconds + 47.0 - 12.0, abs=0.2)
    assert (slow.startup_seconds, plain.startup_seconds) == (47.0, 12.0)  # the deadlines and the controller's
    assert any("start-up 47 s a fold" in r and "had not ended after 47.0 s" in r for r in slow.reasons)
    assert quick.min_fold_seconds == plain.min_fold_seconds and quick.fold_seconds == plain.fold_seconds
    assert not any("start-up" in r and "a fold:" in r for r in quick.reasons)


def test_costs_with_start_ups_round_trip_through_json():
    """What the measuring process writes (plain dataclasses) is what the supervisor reads back validated."""
    from runner.engines.timm.measuring import _with_startup

    written = ImageCosts(startup=(StartUp(QUICK, "cpu", 1.5),), starting=FirstStep(QUICK, "cpu", 100.0))
    read = ImageCosts.from_json(dataclasses.asdict(written))
    assert read == written
    stopped = _with_startup(read, 103.25)
    assert stopped.starting is None
    assert stopped.startup == (StartUp(QUICK, "cpu", 1.5), StartUp(QUICK, "cpu", 3.25, ended=False))


def test_the_cudnn_policy_is_the_one_the_environment_names(monkeypatch):
    """Folds and the measuring process choose cuDNN's kernels as RUNNER_CUDNN says (the default where it says
    nothing); a name that is no policy is an error naming the variable and the choices."""
    import torch

    from runner.engines.timm import cudnn

    monkeypatch.delenv(cudnn.POLICY_VARIABLE, raising=False)
    assert cudnn.policy_name() == cudnn.DEFAULT_POLICY
    kept = torch.backends.cudnn.benchmark, torch.backends.cudnn.benchmark_limit
    try:
        monkeypatch.setenv(cudnn.POLICY_VARIABLE, "benchmark_limit_3")
        assert cudnn.apply_policy() == "benchmark_limit_3"
        assert torch.backends.cudnn.benchmark and torch.backends.cudnn.benchmark_limit == 3
        assert cudnn.apply_policy("no_benchmark") == "no_benchmark" and not torch.backends.cudnn.benchmark
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cudnn.benchmark_limit = kept
    monkeypatch.setenv(cudnn.POLICY_VARIABLE, "fastest")
    with pytest.raises(ValueError, match=r"RUNNER_CUDNN='fastest' names no cuDNN policy.*no_benchmark"):
        cudnn.policy_name()
