"""Samples what a run uses (CPU, the memory of the whole process tree, and each GPU's memory and utilisation
through NVML) into monitor.jsonl, once a second, from a background thread; the tree's memory as often as a
share of one core allows (a sample without `rss` did not read it)."""
from __future__ import annotations

import json
import threading
import time
from collections import deque
from pathlib import Path

import psutil

RECENT = 3600  # samples kept in memory: an hour at one a second
# of one core, the most the tree's memory may take: each process's proportional set size is the kernel walking its
# page tables, 33 ms of CPU a second for one with torch loaded (a 2-core machine's fold processes, fork server and
# supervisor: 7-10% of its CPU, read every second); at this share, every 5-8 s there and every second for a light tree
MEMORY_CPU_SHARE = 0.02


def tree_memory(root: psutil.Process | None = None) -> int:
    """Memory of a process (this one by default) and all its children (the fold processes and their loader
    workers), each counted by its proportional set size: pages forked loader workers share with their fold count
    once, not once per worker as resident sizes would (RSS where PSS cannot be read)."""
    root = root or psutil.Process()
    try:
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:  # the root has ended
        return 0
    total = 0
    for process in tree:
        try:
            total += getattr(process.memory_full_info(), "pss", 0) or process.memory_info().rss
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        except psutil.AccessDenied:
            try:
                total += process.memory_info().rss
            except psutil.Error:
                continue
    return total


def _handle(nvml, device: str):
    return nvml.nvmlDeviceGetHandleByIndex(int(device)) if device.isdigit() else \
        nvml.nvmlDeviceGetHandleByUUID(device)


class _Gpus:
    """NVML handles of the run's cards, in its slots' order (`devices`: UUIDs or indices; None: every card), or
    none on a machine without a driver."""

    def __init__(self, devices: tuple[str, ...] | None):
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nvml = pynvml
            devices = devices if devices is not None else [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
            self.handles = [_handle(pynvml, d) for d in devices]
        except Exception:
            self.nvml, self.handles = None, []

    def _read(self, handle) -> dict:
        """One card's memory and % of time a kernel ran; None for what it does not report (utilisation under MIG
        or vGPU), so one unsupported reading never ends the samples."""
        out: dict = dict(used=None, total=None, util=None)
        try:
            memory = self.nvml.nvmlDeviceGetMemoryInfo(handle)
            out.update(used=int(memory.used), total=int(memory.total))
            out["util"] = int(self.nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        except self.nvml.NVMLError:
            pass
        return out

    def sample(self) -> list[dict]:
        return [self._read(handle) for handle in self.handles]

    def close(self) -> None:
        if self.nvml is not None:
            self.nvml.nvmlShutdown()


class Monitor:
    """`with Monitor(path, started, devices):` samples until the block ends; `devices` are the run's cards by
    slot (None: every card the machine has)."""

    def __init__(self, path: Path, started: float, interval: float = 1.0, devices: tuple[str, ...] | None = None,
                 memory_share: float = MEMORY_CPU_SHARE):
        self.path, self.started, self.interval, self.devices = Path(path), started, interval, devices
        self.memory_share = memory_share
        self.samples: deque[dict] = deque(maxlen=RECENT)  # the latest, for the supervisor's rules
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="monitor", daemon=True)

    def _run(self) -> None:
        gpus = _Gpus(self.devices)
        psutil.cpu_percent()  # the first call only starts the measurement
        memory_at = 0.0  # when the tree's memory is read next
        try:
            with open(self.path, "w") as handle:  # this run's samples only
                while not self._stop.is_set():
                    now = time.monotonic()
                    line = dict(t=round(now - self.started, 2), cpu=psutil.cpu_percent())
                    if now >= memory_at:
                        spent = time.thread_time()
                        line["rss"] = tree_memory()
                        memory_at = now + (time.thread_time() - spent) / self.memory_share
                    line["gpus"] = gpus.sample()
                    self.samples.append(line)
                    handle.write(json.dumps(line) + "\n")
                    handle.flush()
                    self._stop.wait(self.interval)
        finally:
            gpus.close()

    def start(self) -> "Monitor":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def __enter__(self) -> "Monitor":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def read_samples(path: Path, most: int | None = None) -> list[dict]:
    """The samples written so far; while the monitor runs, a last line still being written is left for later.
    `most`: at most that many, evenly spaced over the run (parsing is what a long run's file costs)."""
    if not Path(path).is_file():
        return []
    text = Path(path).read_text()
    complete = text if text.endswith("\n") else text[: text.rfind("\n") + 1]
    lines = [line for line in complete.splitlines() if line.strip()]
    step = -(-len(lines) // most) if most and len(lines) > most else 1
    return [json.loads(line) for line in lines[::step]]


def busy_share(samples: list[dict], card: int, since: float, until: float) -> tuple[float | None, int]:
    """The share of [since, until] (seconds from the run's start) in which the card ran kernels, and how many
    samples said so: NVML's utilisation averaged over the card's samples in that span. The mean, not the share of
    samples above 0: NVML's figure is already the share of its last period (1/6 s to 1 s) in which a kernel ran,
    so a second with one short kernel counts for the little it was. None where no sample there reports it (no
    card, or one under MIG or vGPU, whose utilisation NVML does not give)."""
    busy = [s["gpus"][card]["util"] for s in samples
            if since <= s["t"] <= until and len(s["gpus"]) > card and s["gpus"][card].get("util") is not None]
    return (round(sum(busy) / len(busy) / 100, 3) if busy else None), len(busy)
