"""The plan: a portfolio of members from every engine that can train on this competition's inputs.

`make_plan` is a pure function of the spec, the hardware, the training window, the data's shape and the measured
costs, so tests can plan for an H100 on a laptop. Engines that want an accelerator (`accelerated`) plan first,
for the GPU slots, holding the cores their folds' loaders need; the others share the remaining cores (the CPU
lane). Members are ordered by expected gain per core-second, after the lead: the member with the best prior on
the competition's own input (tables: LightGBM; texts: TF-IDF; images: the CNN), so a strong model lands early.
"""
from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np
from pydantic_core import to_jsonable_python

from runner.common.atomic import write_json
from runner.common.budget import Budget
from runner.planning.registry import engine_names, get_engine, pretrained_models
from runner.machine.hardware import GiB, Hardware
from runner.machine.monitor import tree_memory
from runner.planning.portfolio import MAX_MEMBERS, TARGET_MEMORY_FRACTION, DataShape, Member, Plan, PlanContext
from runner.competition.spec import CompetitionSpec
from runner.planning.unit_memory import dataset_bytes, with_memory

if TYPE_CHECKING:
    from runner.data.dataset import Dataset

PRIMARY_INPUT = {"tabular": "table", "text": "text", "image": "image", "audio": "audio", "image_to_image": "table",
                 "text_normalization": "table"}
# the views a task's dataset carries (runner.data.loading), side columns in a table apart: what its engines are
# judged by before the data is read
TASK_VIEWS = {"tabular": ("table",), "text": ("text",), "image": ("image",), "audio": ("audio",),
              "image_to_image": ("table", "page"), "text_normalization": ("table",)}
# a fork server started before the data is read wants a core of its own beside the supervisor reading it and the
# measuring process timing candidates (a busy core would make every candidate look slower), and one to spare
EARLY_SERVER_CORES = 4
CPU_RESERVE_SHARE = 0.25  # of the cores, kept from GPU folds' loaders when CPU members can run beside them
FEW_FOLDS_WINDOW = 30.0  # below this many seconds of training, at most 3 folds (each fold pays its start-up)
LONG_TEXT_PERCENTILE = 95  # a text model's max length covers this share of the texts whole; the rest are cut
# of the window's core-seconds: a `cheap_first` member this cheap goes before the lead. 5% kept LightGBM on the
# pixels of sklearn's digits (16 core-s) behind a CNN at 60 s, whose blend then lost to LightGBM alone (0.18 / 0.08)
CHEAP_FIRST_SHARE = 0.2
# members within this share of each other's expected gain per core-second are a tie (the priors are not finer than
# that), and the cheaper goes first: near the window's close a costlier one cut before its last fold gives nothing,
# where the cheaper would have finished (plant pathology's replica on a busy core: LightGBM on the pixels, tied with
# the logistic member at half its cost, was cut and the logistic never ran)
NEAR_TIE = 0.2
# when no member's shortest fold fits the window, the cheapest is still tried if it measured at most this many times
# the window: a machine busy while measuring times everything slower (one run on two busy cores timed TF-IDF's
# 3 s fold at 53 s, planned nothing and kept the class prior); its folds end at their deadlines, so only time that
# nothing else could use is risked
STILL_TRIED = 4.0
SCALED = ("fold_seconds", "min_fold_seconds", "max_fold_seconds", "prepare_seconds", "step_seconds", "startup_seconds")

log = logging.getLogger("runner")


def data_shape(dataset) -> DataShape:
    """The planner's view of a Dataset: sizes only."""
    table = dataset.views.get("table")
    text = dataset.views.get("text")
    targets = dataset.y.shape[1] if dataset.y.ndim == 2 else 1
    lengths = np.array([len(t) for part in text for t in part]) if text else np.zeros(0)
    return DataShape(len(dataset.y), dataset.n_test, table[0].shape[1] if table else 0,
                     len(dataset.classes or ()), targets, dataset.inputs, int(lengths.sum()), dataset.image_side,
                     int(np.percentile(lengths, LONG_TEXT_PERCENTILE)) if len(lengths) else 0, dataset.source_pixels,
                     dataset.decode_seconds, dataset_bytes(dataset))


def applicable(spec: CompetitionSpec, data: DataShape, names: list[str] | None = None) -> list[str]:
    """Engines (by name, registry order) that can train on this competition's inputs."""
    if spec.task == "unsupported":
        return []
    return [n for n in (engine_names() if names is None else names) if get_engine(n).applies(spec, data.inputs)]


def _cheap_first(members: list[Member], window_seconds: float, cores: int, one_lane: bool,
                 lead: Member | None) -> list[Member]:
    """Members whose engines ask to go first (`cheap_first`) and cost at most CHEAP_FIRST_SHARE of the window's
    core-seconds, where the lead would otherwise hold what they need until the window closes: every core on a
    machine with one lane, behind a lead that fills its window; the GPU, for a prepare step that computes there,
    beside GPU members."""
    fills = lead is not None and get_engine(lead.engine).fills_window
    return [m for m in members if get_engine(m.engine).cheap_first and ((one_lane and fills) or
                                                                       (not one_lane and m.prepare_slot == "gpu"))
            and m.core_seconds <= CHEAP_FIRST_SHARE * window_seconds * cores]


def _by_gain_per_second(members: list[Member]) -> list[Member]:
    """Best expected gain per core-second first; members within NEAR_TIE of the first of their run of ties,
    cheapest first."""
    ordered, ties = [], []
    for member in sorted(members, key=lambda m: m.gain_per_second, reverse=True):
        if ties and member.gain_per_second < (1 - NEAR_TIE) * ties[0].gain_per_second:
            ordered += sorted(ties, key=lambda m: m.core_seconds)
            ties = []
        ties.append(member)
    return ordered + sorted(ties, key=lambda m: m.core_seconds)


def _lead_first(members: list[Member], spec: CompetitionSpec) -> list[Member]:
    ordered = _by_gain_per_second(members)
    primary = PRIMARY_INPUT.get(spec.task)
    own = [m for m in ordered if get_engine(m.engine).inputs == primary and not m.left_out]
    if not own:
        return ordered
    lead = max(own, key=lambda m: m.expected_gain)
    return [lead] + [m for m in ordered if m is not lead]


def _still_tried(too_slow: list[Member], window_seconds: float) -> Member | None:
    """The cheapest member that did not fit, its times scaled to fit the window, where it measured at most
    STILL_TRIED times it (None otherwise)."""
    cheapest = min(too_slow, key=lambda m: m.min_fold_seconds + m.prepare_seconds, default=None)
    need = cheapest.min_fold_seconds + cheapest.prepare_seconds if cheapest else 0.0
    if cheapest is None or need > STILL_TRIED * window_seconds:
        return None
    scale = 0.9 * window_seconds / need
    return cheapest.model_copy(update={k: round(getattr(cheapest, k) * scale, 2) for k in SCALED})


def _devices(hardware: Hardware) -> tuple[str, ...]:
    """Each GPU slot's card: its UUID, or its place in the list where a named profile has none."""
    return tuple(g.device or str(i) for i, g in enumerate(hardware.gpus))


def _others_on_gpus(hardware: Hardware) -> list[str]:
    return [f"GPU {i} ({g.device or g.name}): {g.others_bytes / GiB:.1f} GiB of {g.memory_bytes / GiB:.0f} GiB in "
            f"use by other processes when probed: the plan aims at "
            f"{g.memory_target(TARGET_MEMORY_FRACTION):.0%} of its memory, not {TARGET_MEMORY_FRACTION:.0%}"
            for i, g in enumerate(hardware.gpus) if g.others_bytes]


def make_plan(spec: CompetitionSpec, hardware: Hardware, window_seconds: float, data: DataShape,
              costs: dict | None = None, pretrained: frozenset = frozenset(), seed: int = 0,
              engines: list[str] | None = None, held_bytes: int = 0, max_members: int = MAX_MEMBERS) -> Plan:
    """The plan for one run; `window_seconds` is the training time left (the budget up to its cut, less what has
    already been spent); `costs` holds each engine's measurements by name; `pretrained` names the image models
    with local weights; `engines` limits the portfolio to these names; `held_bytes` what the supervisor holds
    (measured where the plan is for this process; 0: its copy of the data); `max_members` the most members the
    run trains (the first ones in the plan's order are kept, the lead among them)."""
    costs = costs or {}
    names = applicable(spec, data, engines)
    if not names:
        why = spec.note or "no engine trains on its inputs"
        return Plan(members=(), folds=0, cpus=hardware.cpus, gpus=len(hardware.gpus), devices=_devices(hardware),
                    window_seconds=window_seconds,
                    seed=seed, reasons=(f"task {spec.task}: {why}; the sample submission is used",))
    folds = spec.folds if window_seconds >= FEW_FOLDS_WINDOW else min(spec.folds, 3)
    why = f"{window_seconds:.0f} s leave too little for more"
    if 2 <= data.n_train < folds:  # a fold validates on one item at least (vesuvius' two fragments)
        folds, why = data.n_train, f"{data.n_train} training items"
    reasons = [f"folds {folds}" + ("" if folds == spec.folds else f" (not {spec.folds}): {why}")]
    accelerated = [n for n in names if lane_of(n, hardware) == "gpu"]
    others = [n for n in names if n not in accelerated]
    context = PlanContext(spec, hardware, window_seconds, data, None, folds, hardware.cpus, bool(accelerated),
                          pretrained)
    reserve = max(1, int(CPU_RESERVE_SHARE * hardware.cpus)) if accelerated and others else 0
    gpu_members = [m for n in accelerated for m in get_engine(n).plan(
        dataclasses.replace(context, costs=costs.get(n), cores=hardware.cpus - reserve))]
    held = sum(m.threads * max(1, m.per_gpu) * len(hardware.gpus) for m in gpu_members if m.slot == "gpu")
    cpu_cores = max(1, hardware.cpus - held)
    cpu_members = [m for n in others for m in get_engine(n).plan(
        dataclasses.replace(context, costs=costs.get(n), cores=cpu_cores))]
    if hardware.busy_cpus:
        reasons.append(f"{hardware.busy_cpus} core(s) busy with other processes when probed: planned for "
                       f"{hardware.cpus}, so no fold runs more threads than there are cores for them")
    reasons.extend(hardware.notes)
    reasons.extend(_others_on_gpus(hardware) if gpu_members else ())
    if gpu_members:
        reasons.append(f"GPU lane: {len(hardware.gpus)} GPU(s); its folds hold {held} of {hardware.cpus} cores for "
                       f"compute and loaders" + (f" ({reserve} kept for CPU members)" if reserve else ""))
    if cpu_members:
        reasons.append(f"CPU lane: {cpu_cores} core(s) for {', '.join(m.name for m in cpu_members)}")
    members, too_slow, ordered = [], [], _lead_first(gpu_members + cpu_members, spec)
    first = _cheap_first(cpu_members, window_seconds, cpu_cores, not gpu_members, ordered[0] if ordered else None)
    for member in first + [m for m in ordered if all(m is not f for f in first)]:
        if member.left_out:
            reasons.append(f"not {member.name}: {member.left_out}")
            continue
        if member.min_fold_seconds + member.prepare_seconds > window_seconds:
            reasons.append(f"not {member.name}: even its shortest fold ({member.min_fold_seconds:.0f} s after "
                           f"{member.prepare_seconds:.0f} s of preparation) does not fit {window_seconds:.0f} s")
            too_slow.append(member)
            continue
        members.append(member.model_copy(update=dict(split_seed=seed)))
    if not members and (tried := _still_tried(too_slow, window_seconds)):
        members.append(tried.model_copy(update=dict(split_seed=seed)))
        reasons.append(f"{tried.name} tried all the same: nothing else fits, and its cost, measured at most "
                       f"{STILL_TRIED:g}x the window, may be a busy machine's; its times are taken as "
                       f"{tried.min_fold_seconds + tried.prepare_seconds:.0f} s, its folds end at their deadlines")
    if len(members) > max_members:
        members = _at_most(members, max_members, ordered[0].name, reasons)
    reasons.append("order: " + ", ".join(f"{m.name} ({m.expected_gain:.3f} expected gain, ~{m.core_seconds:.0f} "
                                         f"core-s)" for m in members)
                   + "; the lead first (after members that cost next to nothing and ask to go first), then by "
                     "expected gain per core-second (within a fifth of each other: cheaper first); when all have "
                     "run, bags of the "
                     "member with the largest blend weight follow while they fit and still improve CV")
    plan = Plan(members=tuple(members), folds=folds, cpus=hardware.cpus, gpus=len(hardware.gpus),
                devices=_devices(hardware), window_seconds=round(window_seconds, 1), seed=seed, reasons=tuple(reasons),
                lane_cores={"gpu": hardware.cpus - reserve, "cpu": cpu_cores}, max_members=max_members)
    return with_memory(plan, hardware.ram_bytes, data.data_bytes, held_bytes) if data.data_bytes else plan


def _at_most(members: list[Member], most: int, lead: str, reasons: list[str]) -> list[Member]:
    """The first `most` members in the plan's order, the lead always among them (members that cost next to nothing
    go before it, but a cap of one means the strongest model, and on a card the member that uses it)."""
    kept = {lead} & {m.name for m in members}
    for member in members:
        if len(kept) >= most:
            break
        kept.add(member.name)
    among = f", the lead {lead} among them" if lead in kept else ""
    reasons.append(f"not {', '.join(m.name for m in members if m.name not in kept)}: at most {most} member(s) "
                   f"(--max-members){among}")
    return [m for m in members if m.name in kept]


def lane_of(engine: str, hardware: Hardware) -> str:
    return "gpu" if hardware.gpus and get_engine(engine).accelerated else "cpu"


def replan_context(spec: CompetitionSpec, hardware: Hardware, plan: Plan, member: Member, window_seconds: float,
                   data: DataShape, costs: object | None, pretrained: frozenset = frozenset()) -> PlanContext:
    """What a member's engine sees when it plans that member again, with the window that is left."""
    lane = lane_of(member.engine, hardware)
    return PlanContext(spec, hardware, window_seconds, data, costs, member.folds,
                       plan.lane_cores.get(lane, hardware.cpus), lane == "gpu", pretrained)


def prestart_measuring(spec: CompetitionSpec, hardware: Hardware, budget_seconds: float, work: Path, until: float,
                       engines: list[str] | None = None) -> list[Callable[[], None]]:
    """Each engine's start before the data is read (`Engine.prestart`: a measuring process importing meanwhile),
    for a run on this machine; what ends each once the plan is made."""
    if spec.task == "unsupported":
        return []
    names = engine_names() if engines is None else engines
    started = [get_engine(n).prestart(spec, hardware, budget_seconds, work, until) for n in names]
    return [end for end in started if end is not None]


def early_preload(spec: CompetitionSpec, hardware: Hardware, engines: list[str] | None = None) -> tuple[str, ...]:
    """What a fork server started before the data is read imports, on a machine with cores to spare for it
    (EARLY_SERVER_CORES): the libraries of every engine the task's own views could give a member, what a server
    started at the plan imported for such a run (a card's folds fork from it: nothing it imports may start CUDA);
    not the table engines' for side columns, which the data may not have (a plan with them replaces the server).
    Nothing elsewhere: the server then starts once the plan is made, with the plan's libraries."""
    if spec.task not in TASK_VIEWS or hardware.cpus < EARLY_SERVER_CORES:
        return ()
    views = frozenset(TASK_VIEWS[spec.task])
    engines = [get_engine(n) for n in (engine_names() if engines is None else engines)]
    return tuple(dict.fromkeys(m for engine in engines if engine.applies(spec, views) for m in engine.preload))


def measure_costs(spec: CompetitionSpec, dataset: Dataset, hardware: Hardware, budget_seconds: float, work: Path,
                  here: bool = True, engines: list[str] | None = None) -> dict:
    """Each applicable engine's measurements, within its share of the budget (a failed one plans without)."""
    costs = {}
    for name in applicable(spec, data_shape(dataset), engines):
        engine = get_engine(name)
        seconds = engine.measure_seconds(budget_seconds, hardware, here)
        if seconds <= 0:
            continue
        try:
            cost = engine.measure(dataset, hardware, seconds, work, here)
        except Exception as exc:  # planning goes on with the engine's unmeasured rule
            log.warning("measuring %s failed, planning without: %s: %s", name, type(exc).__name__, exc)
            continue
        if cost is not None:
            costs[name] = cost
    return costs


def plan_for(spec: CompetitionSpec, dataset: Dataset, hardware: Hardware, budget: Budget, out: Path,
             here: bool = True, engines: list[str] | None = None,
             pretrained: frozenset[str] | None = None, max_members: int = MAX_MEMBERS) -> tuple[Plan, dict]:
    """Measure what needs measuring, then plan the training window that is left (with `engines` only, if given;
    `pretrained`: the models with weights where the run will be, by default this machine's cache; at most
    `max_members` members); the plan and the costs it was made from."""
    spec = dataset.spec or spec  # as the data was read: masks' sizes measured on them (runner.data.canvas)
    costs = measure_costs(spec, dataset, hardware, budget.seconds, Path(out), here, engines)
    write_json(Path(out) / "costs.json", {n: to_jsonable_python(c, fallback=lambda o: o.to_json())
                                         for n, c in costs.items()})
    pretrained = pretrained_models() if pretrained is None else pretrained
    held = tree_memory() if here else 0  # this process and its fork server, the data read: what units cannot have
    return make_plan(spec, hardware, budget.training_left(), data_shape(dataset), costs, pretrained,
                     engines=engines, held_bytes=held, max_members=max_members), costs
