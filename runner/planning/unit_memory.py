"""How many units the run's memory holds at once, as well as its cores: each unit (a fold, a prepare step) reads
the whole dataset the supervisor handed over and makes its own train and validation matrices, so a table of
millions of rows held by one fold a core fills a leased node's memory long before its cores. The estimate is
the data's size in memory times the copies a fold makes, plus what a unit's process holds before any data."""
from __future__ import annotations

import numpy as np
import pandas as pd

from runner.planning.portfolio import Plan

GiB = 2**30
UNIT_BASE_BYTES = GiB // 2  # a unit's process with its engine's libraries imported, before any data
DATASET_COPIES = 3  # the dataset a unit reads, its fold's train and validation rows, and its engine's own matrix
UNITS_SHARE = 0.8  # of the run's memory its units may hold together: the supervisor keeps its copy in the rest


def view_bytes(inputs) -> int:
    """Bytes of one view's inputs in memory: a table, an array, or a list of texts or paths."""
    if isinstance(inputs, pd.DataFrame):
        return int(inputs.memory_usage(index=False, deep=False).sum()) + 64 * int(
            (inputs.dtypes == object).sum()) * len(inputs)  # an object cell: a pointer and a small string
    if isinstance(inputs, np.ndarray):
        return int(inputs.nbytes)
    return sum(len(str(x)) + 64 for x in inputs) if inputs is not None else 0


def dataset_bytes(dataset) -> int:
    """The dataset's size in memory: every view's train and test inputs and the targets."""
    views = sum(view_bytes(part) for train, test in dataset.views.values() for part in (train, test))
    return int(views + dataset.y.nbytes)


def unit_bytes(data_bytes: int) -> int:
    return int(UNIT_BASE_BYTES + DATASET_COPIES * data_bytes)


def with_memory(plan: Plan, ram_bytes: int, data_bytes: int, held_bytes: int = 0) -> Plan:
    """The plan with what one unit is expected to hold and what its units may hold together (the run's memory
    less the supervisor: its copy of the data, or what it was measured to hold, `held_bytes`, where that is more:
    its libraries and the files as read; in a run told 3 GiB it held 1.1 GiB, six times its data); a reason where
    memory, not cores, bounds how many run at once."""
    each, room = unit_bytes(data_bytes), int(UNITS_SHARE * ram_bytes - max(data_bytes, held_bytes))
    at_once = max(1, room // each)
    cores = max([plan.cpus // max(1, m.threads) for m in plan.members if m.slot == "cpu"] or [0])
    reasons = plan.reasons
    if at_once < cores:
        reasons += (f"memory: a unit holds ~{each / GiB:.1f} GiB ({data_bytes / GiB:.2f} GiB of data, "
                    f"{DATASET_COPIES} copies, and the process), the run's units {max(0, room) / GiB:.1f} GiB of its "
                    f"{ram_bytes / GiB:.0f} GiB (the supervisor holds {max(data_bytes, held_bytes) / GiB:.1f}): at "
                    f"most {at_once} at once, where the cores would run {cores}",)
    return plan.model_copy(update=dict(unit_bytes=each, memory_bytes=max(room, each), reasons=reasons))
