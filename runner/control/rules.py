"""What a run learns while it trains, turned into changes for the units not yet started.

- **Re-planning** (`needs_replan`): the first epoch after warm-up (or a booster's first fold) is compared with
  what the plan expected; when it is more than REPLAN_TOLERANCE off, the member's engine plans it again for the
  window that is left with its costs corrected by what was measured (AutoGluon's "time left / folds left", applied to
  the rest of the plan: more or fewer folds and epochs, another model or image size, other rounds).
- **Start-up** (`startup_overran`, `startup_measured`, `with_startup`): a fold's start-up (process, data, and on a
  card the CUDA context, weights and batch probe) ends when the fold says it is ready. It is a cost of its own: one
  that overruns the member's estimate, or is measured apart from it, changes the member's start-up and its folds'
  least time, never its epoch pace, and never counts as the member's timed step.
- **Stalls** (`stalled`): a CNN fold with no new epoch for STALL_EPOCHS planned epochs after it said it was ready
  is held against the plan with the time it has waited; a step far slower than planned also makes the supervisor
  sample the cores again (other processes may have taken some since the start) and plan what starts next for
  those left.
- **Monitor rules** (`monitor_rules`), checked after every epoch of a GPU fold (and at ~60 s, from the monitor's
  samples, before its first epoch), each an action with its evidence:
  - device memory well under what the plan aimed for (under MEMORY_UNDER of it) -> later folds take a larger
    batch, or, where the batch is already as large as the data makes useful, one more fold shares that GPU;
  - data-wait above DATA_WAIT_LIMIT of an epoch -> later folds get more loader workers, from the cores nobody
    holds;
  - GPU utilisation under UTILISATION_LOW while memory is fine -> one more fold shares that GPU.
The functions here are pure: the supervisor hands them epoch lines and monitor samples and applies what they
return, so tests drive them with recorded lines, no GPU needed.
"""
from __future__ import annotations

from dataclasses import dataclass

from runner.planning.portfolio import Member
from runner.units.deadlines import startup_on_card

REPLAN_TOLERANCE = 0.3  # the first timed step more than 30% off the plan: plan the rest again
# a CNN's epoch held against the plan: the first also selects kernels and grows the allocator, which the planner's
# timing leaves out (dog-breed on this CPU: 1.4 s, then 1.0 s an epoch as planned; held against the first, a plan
# that was right lost a fold to a re-plan)
TIMED_EPOCH = 2
# a CNN fold with no new epoch for this many planned epochs (after STALL_GRACE_SECONDS) since it said it was
# ready is stalled: the time it has waited, a lower bound of its epoch, is held against the plan (seen: another
# process took a core after planning, and a 2-thread fold on the one left finished no epoch in 30 s)
STALL_EPOCHS = 5
# the first epoch's own warm-up after start-up (loader workers starting; on a card kernels chosen for shapes the
# batch probe did not run, such as an epoch's last, smaller batch); also what a start-up may overrun its estimate
# by before it is said (cudnn.benchmark's search, now off, took 7 s for resnet18 on an H200, ~47 s for
# efficientnet_lite0 with three folds starting at once; without it Lite2's folds start in 12-15 s)
STALL_GRACE_SECONDS = {"cpu": 10.0, "cuda": 25.0}
# a measured start-up this far from the member's estimate (and at least STARTUP_TOLERANCE_SECONDS) replaces it:
# a forked CPU fold starts in a second where four were planned, and the waves' deadlines should know
STARTUP_TOLERANCE = 0.3
STARTUP_TOLERANCE_SECONDS = 1.0
REPROBE_SECONDS = 30.0  # cores are sampled again at most this often (each sample takes half a second)
EXPECT_TOLERANCE = 0.1  # a first step closer than REPLAN_TOLERANCE but more than 10% off: later folds expect it
MEMORY_UNDER = 0.6  # of the memory a fold planned, under which it is under-using the device
DATA_WAIT_LIMIT = 0.2  # of an epoch spent waiting on the loader
UTILISATION_LOW = 50.0  # % busy, averaged over the samples of the last epoch
FIRST_CHECK_SECONDS = 60.0  # a GPU fold with no epoch yet: checked from the monitor's samples after this long
MAX_PER_GPU = 4  # folds sharing one GPU at the most
BATCH_GROWTH = 2.0  # at most this much larger a batch in one step (the probe then confirms it on the device)


@dataclass(frozen=True)
class Change:
    """A new version of a member for its units not yet started, and why."""

    member: Member
    action: str


def ratio(actual: float, expected: float) -> float | None:
    """actual / expected, or None when nothing was expected."""
    return actual / expected if expected > 0 and actual > 0 else None


def needs_replan(member: Member, actual_step_seconds: float) -> bool:
    """Whether a first real epoch (or round, or fit) is far enough from the plan's to plan the rest again; an
    unmeasured plan (expected 0) always is."""
    r = ratio(actual_step_seconds, member.step_seconds)
    return r is None or abs(r - 1) > REPLAN_TOLERANCE


def _grace(member: Member) -> float:
    return STALL_GRACE_SECONDS["cuda" if getattr(member.settings, "device", "cpu") == "cuda" else "cpu"]


def stalled(member: Member, waited: float) -> bool:
    """Whether a fold of `member` that has waited `waited` seconds for its next epoch since it was ready (or since
    its last epoch) is far behind the plan (a compiled model's first epoch also compiles, for a time nothing
    predicts: never judged)."""
    if getattr(member.settings, "compile", False):
        return False
    return member.step_seconds > 0 and waited > _grace(member) + STALL_EPOCHS * member.step_seconds


def startup_overran(member: Member, waited: float, together: int) -> bool:
    """Whether a fold of `member` still not ready after `waited` seconds, `together` folds starting on its card at
    once, is past its planned start-up and the grace (a member planned without a start-up of its own: never)."""
    expected = startup_on_card(member.startup_seconds, together)
    return member.startup_seconds > 0 and waited > expected + _grace(member)


def startup_measured(member: Member, seconds: float, together: int) -> float | None:
    """One fold's start-up alone, from a fold that was ready after `seconds` with `together` starting on its card
    at once, where it differs enough from the member's estimate to replace it (None: the estimate stands, or the
    member has none of its own)."""
    if member.startup_seconds <= 0:
        return None
    alone = seconds / (startup_on_card(1.0, together))
    off = abs(alone - member.startup_seconds)
    return alone if off > max(STARTUP_TOLERANCE_SECONDS, STARTUP_TOLERANCE * member.startup_seconds) else None


def with_startup(member: Member, alone: float) -> Member:
    """`member` whose folds expect `alone` seconds of start-up each (starting alone on a card): its folds' least,
    expected and longest walls move by the difference; its epoch pace and settings stay."""
    more = alone - member.startup_seconds
    walls = {k: round(max(0.0, getattr(member, k) + more), 1) if getattr(member, k) else 0.0
             for k in ("fold_seconds", "min_fold_seconds", "max_fold_seconds")}
    return member.model_copy(update=dict(startup_seconds=round(alone, 2), **walls))


def close_enough(member: Member, actual_step_seconds: float) -> bool:
    """Whether later folds may go on expecting the planned step (timing noise is larger than the difference)."""
    r = ratio(actual_step_seconds, member.step_seconds)
    return r is not None and abs(r - 1) <= EXPECT_TOLERANCE


def _settings(member: Member, **changes) -> Member:
    return member.model_copy(update=dict(settings=member.settings.model_copy(update=changes)))


def monitor_rules(member: Member, epoch: dict | None, samples: list[dict], gpu: int, free_cores: int,
                  useful_batch: int) -> list[Change]:
    """Changes for a GPU member's later folds, from its latest epoch line (None before the first) and the
    monitor's samples since that epoch began (each with `gpus`: used, total, util). `useful_batch`: the largest
    batch the data makes useful (at least 20 steps an epoch)."""
    settings = member.settings
    if getattr(settings, "device", "cpu") != "cuda" or not samples:
        return []
    changes: list[Change] = []
    planned = getattr(settings, "gpu_memory_fraction", 0.0) / max(1, member.per_gpu)  # one fold's share
    device = [s["gpus"][gpu] for s in samples if len(s["gpus"]) > gpu]
    used = epoch["device_memory_share"] if epoch and epoch.get("device_memory_share") else \
        max((d["used"] / d["total"] for d in device if d.get("used") is not None), default=0.0) / \
        max(1, member.per_gpu)
    util = [d["util"] for d in device if d.get("util") is not None]  # none under MIG: read as busy
    busy = sum(util) / len(util) if util else 100.0
    memory_low = planned > 0 and used < MEMORY_UNDER * planned
    if memory_low and settings.batch_size < useful_batch:
        batch = int(min(useful_batch, settings.batch_size * min(BATCH_GROWTH, planned / max(used, 1e-6)))) // 8 * 8
        if batch > settings.batch_size:
            changes.append(Change(_settings(member, batch_size=batch),
                                  f"{member.name}: a fold used {used:.0%} of the GPU where the plan aimed at "
                                  f"{planned:.0%}: later folds batch {batch} (was {settings.batch_size})"))
    elif (memory_low or busy < UTILISATION_LOW) and member.per_gpu < MAX_PER_GPU and used < planned:
        why = f"used {used:.0%} of its memory (planned {planned:.0%})" if memory_low else \
            f"kept the GPU {busy:.0f}% busy with memory to spare ({used:.0%} of {planned:.0%} planned)"
        changes.append(Change(member.model_copy(update=dict(per_gpu=member.per_gpu + 1)),
                              f"{member.name}: a fold {why}: {member.per_gpu + 1} folds share each GPU from now"))
    wait = epoch.get("data_wait", 0.0) if epoch else 0.0
    if wait > DATA_WAIT_LIMIT and free_cores > 0 and settings.num_workers > 0:
        workers = settings.num_workers + min(free_cores, settings.num_workers)
        changes.append(Change(_settings(member, num_workers=workers),
                              f"{member.name}: epoch {epoch['epoch']} waited on its loader {wait:.0%} of the time: "
                              f"later folds get {workers} loader workers (was {settings.num_workers})"))
    return changes


def combine(member: Member, changes: list[Change]) -> Change | None:
    """All changes for one member as one new version (settings and fields merged in order)."""
    if not changes:
        return None
    merged = member
    for change in changes:
        updates = {k: v for k, v in change.member.model_dump().items() if k != "settings"
                   and getattr(change.member, k) != getattr(member, k)}
        settings = {k: v for k, v in change.member.settings.model_dump().items()
                    if getattr(change.member.settings, k) != getattr(member.settings, k)}
        merged = merged.model_copy(update=dict(**updates, settings=merged.settings.model_copy(update=settings)))
    return Change(merged, "; ".join(c.action for c in changes))
