"""The `cold_start` group of bench/gpu_check.py's sections: cold_start measures, for each GPU ladder rung a plan
may take on this card (its local weights counted), under each cuDNN policy (benchmark on as folds train today,
off, and on with a small `benchmark_limit`), the first training step's seconds and the steady training images a
second, each in a fresh process: cuDNN's search and its compiled plans live and die with a process, so a cold
start is one process's. The rows become a table (`policy_table`): per rung, the policy that trains a given number
of images soonest and how many images repay each policy's slower start. `bare_loop` is the same measurement for
one model and batch, the loop a run's member is compared against (the dog_breed section).

Each measurement is a process forked from a server that imported torch, timm and the measuring module and never
started CUDA, as the runner's fold processes are forked from its fork server: what is measured is the card's
start, not Python's imports. A step is timed by the measuring process's own code (`time_candidate`), so the
first step here is the start-up the planner reads from measuring."""
from __future__ import annotations

import dataclasses
import multiprocessing
import os
import time

from gpu_common import CLASSES, Check, child_env

# the policies, cheapest start first: a section cut short by its budget still has the ones the card can start soonest
POLICY_ORDER = ("no_benchmark", "benchmark_limit_3", "benchmark")
# one process's cap: a first step longer is recorded as at least this (47 s on an H200); a loan's short command
# may set it lower (GPU_COLD_START_CAP)
MEASUREMENT_SECONDS = float(os.environ.get("GPU_COLD_START_CAP", 90.0))
REAP_SECONDS = 5.0  # past its cap a process that sent nothing more is killed
# the section's own budget: no process starts that could not end within it (GPU_COLD_START_SECONDS: a loan's)
SECTION_SECONDS = float(os.environ.get("GPU_COLD_START_SECONDS", 360.0))
# a loan's short command may measure fewer: these models' rungs, in this order (comma-separated), under these
# policies (GPU_COLD_START_MODELS, GPU_COLD_START_POLICIES; empty: every rung, every policy)
MODELS = tuple(m for m in os.environ.get("GPU_COLD_START_MODELS", "").split(",") if m)
POLICIES = tuple(p for p in os.environ.get("GPU_COLD_START_POLICIES", "").split(",") if p) or POLICY_ORDER
# the images a policy's choice is shown for: the dog-breed run's fold, 16 epochs of 3,840 photos (an H200, 180 s)
TABLE_IMAGES = 16 * 3840
PRELOAD = ["torch", "timm", "runner.engines.timm.measure", "gpu_cold_start"]  # as the runner's fork server preloads


@dataclasses.dataclass(frozen=True)
class Rung:
    model: str
    size: int
    batch: int
    precision: str


def measured(rung: Rung, policy: str, device: str, conn, cap: float = MEASUREMENT_SECONDS,
             wait: float = 0.0) -> None:
    """In the fresh process: the policy set, CUDA started (timed apart), then the rung timed by the measuring
    process's code until `cap` seconds from its start; what it found sent through `conn` as it goes (a start, its
    first step, the whole timing), so a process killed inside its first step still tells how long that step ran.
    `wait`: seconds each training step waits before its backward pass (the measuring module's hook), for tests on a
    CPU."""
    import torch

    from runner.engines.timm.costs import Candidate
    from runner.engines.timm.cudnn import apply_policy
    from runner.engines.timm.measure import STEP_WAIT_VARIABLE, Found, OutOfTime, Watch, time_candidate

    os.environ[STEP_WAIT_VARIABLE] = str(wait)
    apply_policy(policy)
    started = time.monotonic()
    if device == "cuda":
        torch.zeros(1, device=device)
        torch.cuda.synchronize()
    else:  # a CPU shared with other work: threads of one process wait on each other at barriers (the smoke's rule)
        torch.set_num_threads(1)
    row = dict(cuda_seconds=round(time.monotonic() - started, 2))
    candidate = Candidate(rung.model, rung.size, rung.precision, rung.batch)
    found = Found(on_change=lambda now: conn.send(dict(row, starting=now.starting, startup=list(now.startup))))
    watch = Watch(candidate, device, started + cap, found)
    try:
        timed = time_candidate(candidate, device, CLASSES, watch)
        row.update(images_per_second=round(1 / timed.train_seconds_per_sample, 1),
                   infer_images_per_second=round(1 / timed.infer_seconds_per_sample, 1))
    except OutOfTime:
        row["stopped"] = f"past {cap:.0f} s before its steps were timed"
    except Exception as exc:  # noqa: BLE001 - an out-of-memory or a CUDA error is the row's result
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
    watch.stopped()  # left inside its first step: the start-up so far
    if device == "cuda":
        row["peak_reserved_mib"] = round(torch.cuda.max_memory_reserved() / 2**20, 1)
    conn.send(dict(row, starting=None, startup=list(found.startup), done=True))


def row_of(rung: Rung, policy: str, said: dict | None, stopped_at: float,
           cap: float = MEASUREMENT_SECONDS) -> dict:
    """A table row from what the process said last: its first step's seconds (at least the time it ran where it
    was stopped inside it), its steady images a second where they were timed."""
    said = said or {}
    row = dict(model=rung.model, size=rung.size, batch=rung.batch, precision=rung.precision, policy=policy,
               **{k: v for k, v in said.items() if k not in ("starting", "startup", "done")})
    first = said.get("startup") or []
    if first:
        row.update(first_step_seconds=first[0].seconds, first_step_ended=first[0].ended)
    elif said.get("starting") is not None:
        row.update(first_step_seconds=said["starting"].stopped(stopped_at).seconds, first_step_ended=False)
    if not said.get("done"):
        row["stopped"] = f"killed past its {cap:.0f} s cap"
    return row


def in_fresh_process(context, rung: Rung, policy: str, device: str, wait: float = 0.0,
                     cap: float = MEASUREMENT_SECONDS) -> dict:
    """One measurement in a process of its own, forked from the context's server; killed past its cap."""
    reader, writer = context.Pipe(duplex=False)
    process = context.Process(target=measured, args=(rung, policy, device, writer, cap, wait), daemon=True)
    process.start()
    writer.close()
    said, end = None, time.monotonic() + cap + REAP_SECONDS
    try:
        while not (said or {}).get("done") and reader.poll(max(0.0, end - time.monotonic())):
            said = reader.recv()
    except EOFError:  # it died: what it said last stands
        pass
    stopped_at = time.monotonic()
    if process.is_alive():
        process.kill()
    process.join(REAP_SECONDS)
    row = row_of(rung, policy, said, stopped_at, cap)
    if process.exitcode not in (0, None) and not said:
        row["error"] = f"the process ended with {process.exitcode} before it said anything"
    return row


def fork_server():
    """A multiprocessing context whose processes are forked from a server that imported PRELOAD (no CUDA). The
    server is started with this process's environment: the project and bench/ go on its PYTHONPATH first."""
    os.environ["PYTHONPATH"] = child_env()["PYTHONPATH"]
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def rungs(check: Check) -> list[Rung]:
    """The rungs a plan for this card may take (its local weights counted), those with weights first, each at the
    batch the measuring process times it at (the largest multiple of 8 up to 256 in half the card)."""
    from runner.planning.registry import get_engine
    from runner.engines.timm.costs import Candidate
    from runner.engines.timm.estimates import ladder_estimates
    from runner.engines.timm.ladder import ladder
    from runner.engines.timm.measure import timing_batches
    from runner.machine.hardware import probe_hardware

    import torch

    pretrained = get_engine("timm").pretrained()
    chosen = sorted(ladder(probe_hardware(), 0, pretrained), key=lambda rung: rung[0] not in pretrained)
    candidates = [Candidate(m, s, check.precision, 32) for m, s in chosen]
    memory, _ = ladder_estimates(candidates)
    timed = timing_batches(candidates, memory, torch.cuda.get_device_properties(0).total_memory)
    return [Rung(c.model, c.image_size, c.batch, c.precision) for c in timed]


def policy_table(rows: list[dict], images: int = TABLE_IMAGES) -> list[dict]:
    """Per rung: each policy's first step and steady images a second; the policy that trains `images` soonest
    (its first step plus those images at its pace, where both were measured); and for each other policy the images
    past which it pays back its slower start against the quickest-starting one (None: it never does, or nothing
    to pay back)."""
    table: dict[tuple, dict] = {}
    for row in rows:
        key = (row["model"], row["size"], row["batch"])
        entry = table.setdefault(key, dict(model=row["model"], size=row["size"], batch=row["batch"], policies={}))
        entry["policies"][row["policy"]] = {k: row.get(k) for k in ("first_step_seconds", "first_step_ended",
                                                                     "images_per_second", "stopped", "error")}
    for entry in table.values():
        whole = {name: p for name, p in entry["policies"].items()
                 if p["images_per_second"] and p["first_step_seconds"] is not None}
        cost = {name: p["first_step_seconds"] + images / p["images_per_second"] for name, p in whole.items()}
        entry["soonest"] = min(cost, key=cost.get) if cost else None
        entry["seconds_for_images"] = {name: round(c, 1) for name, c in cost.items()}
        quickest = min(whole, key=lambda name: whole[name]["first_step_seconds"], default=None)
        entry["repays_after_images"] = {name: repays(whole[quickest], p) for name, p in whole.items()
                                        if name != quickest}
    return list(table.values())


def repays(quick: dict, slow: dict) -> int | None:
    """Images after which `slow` (a longer first step, a faster pace) has caught up with `quick`."""
    extra = slow["first_step_seconds"] - quick["first_step_seconds"]
    saved = 1 / quick["images_per_second"] - 1 / slow["images_per_second"]
    return round(extra / saved) if extra > 0 and saved > 0 else None


def measure_rows(context, chosen: list[Rung], device: str, seconds: float, policies=POLICY_ORDER) -> list[dict]:
    """Each rung under each policy, rung after rung, while the next measurement fits in `seconds`; a rung left
    out is a row saying so."""
    end, rows = time.monotonic() + seconds, []
    for rung in chosen:
        for policy in policies:
            if time.monotonic() + MEASUREMENT_SECONDS + REAP_SECONDS > end:
                rows.append(dict(model=rung.model, size=rung.size, batch=rung.batch, precision=rung.precision,
                                 policy=policy, stopped=f"not measured: the section's {seconds:.0f} s were spent"))
                continue
            rows.append(in_fresh_process(context, rung, policy, device))
    return rows


def cold_start(check: Check) -> dict:
    """The table: every rung a plan may take on this card, under every policy, a fresh process each."""
    chosen = rungs(check)
    if MODELS:
        chosen = sorted((r for r in chosen if r.model in MODELS), key=lambda r: MODELS.index(r.model))
    rows = measure_rows(fork_server(), chosen, check.device, SECTION_SECONDS, POLICIES)
    table = policy_table(rows)
    measured_rows = [r for r in rows if r.get("first_step_seconds") is not None]
    out = dict(rows=rows, table=table, images=TABLE_IMAGES, policies=list(POLICIES),
               ok=bool(measured_rows) and not any("error" in r for r in rows))
    out["summary"] = "; ".join(
        f"{e['model']}@{e['size']} b{e['batch']}: " + ", ".join(
            f"{name} {p['first_step_seconds'] if p['first_step_seconds'] is not None else '-'} s/"
            f"{p['images_per_second'] or '-'} img/s" for name, p in e["policies"].items())
        + f" -> {e['soonest']}" for e in table)
    return out


def bare_loop(rung: Rung, device: str) -> dict:
    """The bare training loop of one model and batch in a fresh process (random batches already on the device, no
    loader, no augmentation), under the policy folds train with: what a run's member is compared against."""
    from runner.engines.timm.cudnn import policy_name

    policy = policy_name()
    return dict(in_fresh_process(fork_server(), rung, policy, device), policy=policy)
