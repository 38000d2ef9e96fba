"""Every competition with a spec planned at its real size on a named machine: `runner plan ID --data <its replica>
--size real --hardware h100-80gb --budget 2h`, the replica's shape grown to the real counts its spec names. For
each: the members and their models, what a run there would sample (rows, images) and why, and whether the real
data fits the machine's memory (the supervisor's copy and one unit), its disk (the data as shipped and the image
cache) and the training window. Goal: every one fits, every cut said.

    python real_plans.py [--only ID ...] [--hardware h100-80gb] [--budget 2h]

Writes bench/results/real_plans.json (rows of those not run this time are kept).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from pathlib import Path

from _common import RESULTS, save
from quality import commit
from runner.common.budget import Budget, parse_duration
from runner.competition.catalog import known_specs, load_spec
from runner.data.loading import load_dataset
from runner.demo import replicas, write_demo
from runner.machine.profiles import profile
from runner.planning.planner import data_shape, measure_costs
from runner.planning.real_size import DISK_SHARE, plan_at_real_size
from runner.planning.registry import get_engine, pretrained_models, weight_models


def row_for(competition: str, hardware_name: str, budget_text: str, work: Path) -> dict:
    spec = load_spec(competition)
    if spec.task == "unsupported":  # a rule writes it: no plan, the real data's disk still counted
        return dict(competition=competition, hardware=hardware_name, budget=budget_text,
                    real=dataclasses.asdict(spec.real), members=[], sampled=[], memory_gib=0.0, memory_fits=True,
                    disk_gib=spec.real.gigabytes, disk_fits=spec.real.gigabytes * 2**30 <= DISK_SHARE *
                    profile(hardware_name).disk_free_bytes, window_filled=True, cuts=[],
                    reason=f"the {spec.baseline} rule writes it: {spec.note}")
    root = write_demo(competition, work / "data")
    hardware, budget = profile(hardware_name), Budget.start(parse_duration(budget_text))
    dataset = load_dataset(spec, root / "prepared" / "public", work / "work")
    pretrained = pretrained_models() | frozenset(weight_models())  # as if pulled on that machine
    at_side = dataclasses.replace(dataset, image_side=spec.real.side or dataset.image_side)
    estimates = {n: c for n, c in measure_costs(spec, at_side, hardware, budget.seconds, work, here=False).items()
                 if get_engine(n).accelerated}
    plan, fit = plan_at_real_size(spec, data_shape(dataset), hardware, budget, pretrained, estimates)
    return dict(competition=competition, hardware=hardware_name, budget=budget_text, real=dataclasses.asdict(spec.real),
                members=[dict(name=m.name, slot=m.slot, folds=m.folds, settings={k: v for k, v in
                                                                                 m.settings.model_dump().items()
                                                                                 if k in ("model", "image_size",
                                                                                          "side", "batch")})
                         for m in plan.members],
                sampled=[s.say() for s in fit.sampled], memory_gib=round(fit.memory_bytes / 2**30, 2),
                memory_fits=fit.memory_fits, disk_gib=round(fit.disk_bytes / 2**30, 1), disk_fits=fit.disk_fits,
                window_filled=fit.window_filled or spec.task == "unsupported",
                cuts=[r for r in plan.reasons if "does not fit" in r],  # what the window leaves out, as the plan says
                reason=None if plan.members else plan.reasons[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--hardware", default="h100-80gb")
    parser.add_argument("--budget", default="2h")
    args = parser.parse_args()
    every = [c for c in known_specs() if c in replicas() and known_specs()[c].real]
    competitions = [load_spec(c).id for c in args.only] if args.only else every
    rows = []
    for competition in competitions:
        with tempfile.TemporaryDirectory(prefix=f"{competition}-") as work:
            row = row_for(competition, args.hardware, args.budget, Path(work))
        rows.append(row)
        print(json.dumps({k: row[k] for k in ("competition", "memory_fits", "disk_fits", "window_filled",
                                              "sampled", "cuts")}), flush=True)
    path = RESULTS / "real_plans.json"
    kept = [r for r in json.loads(path.read_text())["rows"] if r["competition"] not in set(competitions)] \
        if path.exists() else []
    rows = sorted(kept + rows, key=lambda r: r["competition"])
    fits = sum(r["memory_fits"] and r["disk_fits"] and r["window_filled"] for r in rows)
    save("real_plans", rows, commit=commit(), goal="every competition fits memory, disk and window at its real "
         "size, every cut said", goal_met=f"{fits} of {len(rows)}")
    print(f"{fits} of {len(rows)} fit")


if __name__ == "__main__":
    main()
