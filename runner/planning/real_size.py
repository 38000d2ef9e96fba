"""The plan for a competition at its real size, made from its replica: the replica's shape grown to the counts the
spec's `real` names (rows or items, gigabytes, the images' side), then cut by the rules a run of that size meets
when it reads its data (a table beyond what the budget trains is sampled to ROWS_PER_BUDGET_SECOND a second of
budget; training images beyond what DECODE_SHARE of the budget decodes on the run's cores are drawn at random),
and planned on the named machine with each engine's rules (costs measured on a replica say nothing of the real
data's). What it would sample is said first in the plan's reasons, and whether the real data fits the machine's
memory, disk and training window is checked beside it (`RealFit`)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from runner.common.budget import Budget
from runner.common.errors import RunnerError
from runner.common.sampling import Sampled
from runner.competition.spec import CompetitionSpec
from runner.data.canvas import at_side, card_side, side_for
from runner.data.image_draw import DECODE_SHARE, LEAST_TRAIN
from runner.data.mask_targets import held_bytes, mask_columns
from runner.data.reading import LARGE_TABLE_BYTES, sampled_rows
from runner.machine.hardware import GiB, Hardware
from runner.planning.planner import make_plan
from runner.planning.portfolio import DataShape, Plan
from runner.planning.unit_memory import unit_bytes

# a photo's decode at the real size against the replica's: JPEG's draft mode decodes a large photo at an eighth of
# its side, so the cost grows with its pixels over 8 x 8 (at least the replica's, a small image's fixed cost)
DRAFT_SCALE = 8
CACHE_SIDE = 384  # the largest side a plan's image cache holds a picture at (the ladder's big rungs)
CACHE_BYTES_PER_PIXEL = 3  # RGB, 8 bits
DISK_SHARE = 0.8  # of the machine's free disk the data, as shipped, and the run's caches may fill


@dataclass(frozen=True)
class RealFit:
    """Whether a plan at the real size fits the machine: its memory (the supervisor's copy of the data and one unit
    beside it: fewer units at once where more do not fit, said in the plan), its disk (the data as shipped and the
    image cache) and the window (the members it plans end in it)."""

    memory_bytes: int  # the least the run holds: the supervisor's copy of the data and one unit
    memory_fits: bool
    disk_bytes: int
    disk_fits: bool
    window_filled: bool  # members were planned and none of them is left out for time
    sampled: tuple[Sampled, ...]


def grown(data: DataShape, spec: CompetitionSpec) -> DataShape:
    """The replica's shape at the spec's real counts: rows, characters and bytes in proportion, images at the
    real side, their decode as JPEG's draft mode grows it."""
    real = spec.real
    if real is None or not real.train:
        raise RunnerError(f"spec {spec.id}: no real size (`real:`) to plan for")
    rows = max(1, data.n_train + data.n_test)
    whole = (real.train + real.test) / rows
    side = real.side or data.image_side
    decode = data.decode_seconds
    if data.image_side and side > data.image_side:
        decode *= max(1.0, (side / data.image_side) ** 2 / DRAFT_SCALE ** 2)
    return dataclasses.replace(data, n_train=real.train, n_test=real.test, text_chars=int(data.text_chars * whole),
                               image_side=side, train_pixels=int(data.train_pixels * real.train / max(1, data.n_train)),
                               decode_seconds=decode, data_bytes=int(data.data_bytes * whole))


def read_at_size(data: DataShape, budget_seconds: float, hardware: Hardware, source: str) -> tuple[DataShape, tuple]:
    """What reading the real data keeps, by the data layer's own rules: (the shape trained on, what was cut)."""
    cut = []
    if "image" in data.inputs and data.decode_seconds > 0:
        images = int(DECODE_SHARE * budget_seconds * max(1, hardware.cpus) / data.decode_seconds)
        most = max(LEAST_TRAIN, images - data.n_test)
        if data.n_train > most:
            cut.append(Sampled(what="training images", kept=most, of=data.n_train, how="drawn at random",
                               source=source, why=f"decoding every image at the real size takes "
                               f"~{(data.n_train + data.n_test) * data.decode_seconds / hardware.cpus:.0f} s on "
                               f"{hardware.cpus} cores, more than {DECODE_SHARE:.0%} of the budget"))
            data = dataclasses.replace(data, n_train=most, data_bytes=int(data.data_bytes * most / data.n_train))
    elif "table" in data.inputs and data.data_bytes > LARGE_TABLE_BYTES:
        rows = sampled_rows(budget_seconds, None)
        if data.n_train > rows:
            cut.append(Sampled(what="training rows", kept=rows, of=data.n_train, how="drawn evenly through the file",
                               source=source, why="what the budget affords"))
            data = dataclasses.replace(data, n_train=rows, data_bytes=int(data.data_bytes * rows / data.n_train))
    return data, tuple(cut)


def pixel_bytes(spec: CompetitionSpec, real: DataShape) -> int:
    """What the supervisor holds of masks learned pixel by pixel (0 for any other competition): every training
    row's target pixels, every row's predicted pixels for two members and the blend; masks at the spec's shape,
    else the images' side."""
    if spec.learned_as != "pixels":
        return 0
    height, width = spec.mask.shape if spec.mask and spec.mask.shape else (real.image_side, real.image_side)
    pixels = height * width * max(1, len(mask_columns(spec)))  # a channel per mask class
    return held_bytes(pixels, real.n_train, real.n_test)


def on_real_canvas(spec: CompetitionSpec) -> CompetitionSpec:
    """A spec whose masks are learned on a measured canvas, with the canvas a real run would measure: the real
    items' side shrunk by their masks' real run (`real.mask_run`); as it is where the spec gives neither."""
    if spec.mask is None or not spec.mask.own_size or not (spec.real.side and spec.real.mask_run):
        return spec
    side, _ = side_for(spec.real.side, spec.real.mask_run)
    return dataclasses.replace(spec, mask=dataclasses.replace(spec.mask, shape=(side, side)))


def on_real_side(spec: CompetitionSpec, real: DataShape, hardware: Hardware) -> CompetitionSpec:
    """A spec whose masks a card learns larger (`mask.card_side`), at the side a real run on `hardware` reads them
    at: the real slices' side (`real.side`) within the memory the supervisor holds the real count's pixels in."""
    if not (hardware.gpus and spec.mask is not None and spec.mask.card_side and spec.mask.shape and spec.real.side):
        return spec
    return at_side(spec, card_side(spec, spec.real.side, real.n_train, real.n_test, hardware.ram_bytes))


def plan_at_real_size(spec: CompetitionSpec, replica: DataShape, hardware: Hardware, budget: Budget,
                      pretrained: frozenset = frozenset(), estimates: dict | None = None) -> tuple[Plan, RealFit]:
    """The plan a run of the real competition would make on `hardware` within `budget`, and how it fits there;
    `estimates`: the accelerated engines' costs estimated for that machine (the others plan by their rules)."""
    real = grown(replica, spec)
    spec = on_real_side(on_real_canvas(spec), real, hardware)
    data, sampled = read_at_size(real, budget.seconds, hardware, spec.id)
    plan = make_plan(spec, hardware, budget.training_left(), data, estimates, pretrained)
    said = tuple(s.say() for s in sampled)
    plan = plan.model_copy(update=dict(sampled=sampled, reasons=(
        *said, f"at the real size: {real.n_train:,} training and {real.n_test:,} test rows or items"
               + (f", {spec.real.gigabytes:g} GB as shipped" if spec.real.gigabytes else "")
               + "; costs estimated for the machine, or each engine's rules (none measured on the replica)",
        *plan.reasons)))
    cache = (real.n_train + real.n_test) * min(CACHE_SIDE, real.image_side or 0) ** 2 * CACHE_BYTES_PER_PIXEL
    disk = int(spec.real.gigabytes * GiB + cache)
    memory = unit_bytes(data.data_bytes) + data.data_bytes + pixel_bytes(spec, real)
    return plan, RealFit(memory_bytes=memory, memory_fits=memory <= hardware.ram_bytes, disk_bytes=disk,
                         disk_fits=disk <= DISK_SHARE * hardware.disk_free_bytes,
                         window_filled=bool(plan.members) and not any("does not fit" in r for r in plan.reasons),
                         sampled=sampled)
