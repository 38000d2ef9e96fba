import subprocess
import sys
import time

from runner.machine.monitor import Monitor, busy_share, read_samples
from runner.plot import fold_timeline
from runner.results.report import RunReport


def test_monitor_samples_the_process_tree(tmp_path):
    path = tmp_path / "monitor.jsonl"
    with Monitor(path, time.monotonic(), interval=0.1, memory_share=1.0):  # the memory read with every sample
        child = subprocess.Popen([sys.executable, "-c", "x = bytearray(600 * 2**20); import time; time.sleep(1.5)"])
        time.sleep(1.2)
        child.wait()
    samples = read_samples(path)
    assert len(samples) >= 5 and all(b["t"] >= a["t"] for a, b in zip(samples, samples[1:]))
    # the child's 600 MiB: the tree also holds the test session's other processes, whose memory moves meanwhile
    # (139 MiB of a 200 MiB child was seen once beside a 2 GiB session), so only half of it is asked for
    assert max(s["rss"] for s in samples) - min(s["rss"] for s in samples) > 300 * 2**20
    assert all(s["gpus"] == [] for s in samples)  # no GPU on this machine: none reported, nothing raised


def test_the_trees_memory_is_read_only_as_often_as_its_share_of_a_core_allows(tmp_path):
    """Each process's proportional set size costs the kernel a walk of its page tables (33 ms for one with torch
    loaded): at a share of a core so small that the next read would be hours away, the first sample reads the
    tree's memory and the others only the CPU and cards; the run's plot draws them all the same."""
    path = tmp_path / "monitor.jsonl"
    with Monitor(path, time.monotonic(), interval=0.05, memory_share=1e-9):
        time.sleep(0.6)
    samples = read_samples(path)
    assert len(samples) >= 2 and samples[0]["rss"] > 0  # however slow the first read on a busy machine
    assert all("rss" not in s and "cpu" in s and s["gpus"] == [] for s in samples[1:])
    report = RunReport("c", "trained", "accuracy", False, 60, 30, "s.csv", "x", cv_score=0.9,
                       units=(dict(fold=0, status="completed", score=0.9, threads=1, member="m", lane="cpu 0",
                                   start=0.0, end=0.5),), timings={"training_done": 0.5})
    assert fold_timeline(report, tmp_path / "plot.png", samples).stat().st_size > 5000


def test_the_run_plot_draws_memory_and_the_gpu_and_cpu_lanes(tmp_path):
    unit = dict(fold=0, status="completed", score=0.9, threads=1)
    units = (dict(unit, member="cnn", lane="gpu 0", start=2.0, end=25.0),
             dict(unit, member="lightgbm", lane="cpu 0", start=2.0, end=5.0),
             dict(unit, member="catboost", lane="cpu 0,1", start=5.0, end=9.0))
    report = RunReport("c", "trained", "accuracy", False, 60, 30, "s.csv", "x", cv_score=0.9, units=units,
                       timings={"training_done": 25.0}, actions=({"t": 12.0, "action": "batch 64 -> 128"},))
    samples = [dict(t=t, cpu=50.0, rss=2**30, gpus=[dict(used=2**33, total=2**34, util=90)]) for t in range(30)]
    path = fold_timeline(report, tmp_path / "plot.png", samples)
    assert path.stat().st_size > 5000
    from runner.plot import _lanes

    assert [lane for u in units for lane in _lanes(u)] == ["gpu 0", "cpu 0", "cpu 0", "cpu 1"]


def test_the_busy_share_is_the_mean_utilisation_not_the_share_of_samples_with_a_kernel():
    flicker = [dict(t=float(t), cpu=0.0, rss=0, gpus=[dict(used=1, total=2, util=10 if t % 2 else 0)])
               for t in range(100)]  # a short kernel every other second
    assert busy_share(flicker, 0, 0.0, 100.0) == (0.05, 100)
    assert busy_share(flicker, 0, 50.0, 59.0) == (0.05, 10)  # only the span's samples
    mig = [dict(s, gpus=[dict(used=1, total=2, util=None)]) for s in flicker]  # NVML gives no utilisation
    assert busy_share(mig, 0, 0.0, 100.0) == (None, 0)
    assert busy_share(flicker, 1, 0.0, 100.0) == (None, 0)  # a card the samples do not hold
    assert busy_share([dict(s, gpus=[]) for s in flicker], 0, 0.0, 100.0) == (None, 0)  # no card at all


def test_samples_are_read_while_the_monitor_writes_its_next_line(tmp_path):
    path = tmp_path / "monitor.jsonl"
    path.write_text('{"t": 0.0, "cpu": 1.0, "rss": 1, "gpus": []}\n{"t": 1.0, "cpu"')  # the second half-written
    assert read_samples(path) == [{"t": 0.0, "cpu": 1.0, "rss": 1, "gpus": []}]


def test_a_long_runs_samples_can_be_read_evenly_spaced_up_to_a_count(tmp_path):
    path = tmp_path / "monitor.jsonl"
    path.write_text("".join(f'{{"t": {t}.0, "cpu": 1.0, "rss": 1, "gpus": []}}\n' for t in range(1000)))
    spaced = read_samples(path, most=300)
    assert 250 <= len(spaced) <= 300 and spaced[0]["t"] == 0.0 and spaced[-1]["t"] >= 990.0
    gaps = {b["t"] - a["t"] for a, b in zip(spaced, spaced[1:])}
    assert len(gaps) == 1  # evenly spaced
    assert len(read_samples(path, most=5000)) == len(read_samples(path)) == 1000  # fewer than asked: all of them
