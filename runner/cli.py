"""Command line: `runner run | grade | plan | weights | demo-data | demo | specs`."""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from pathlib import Path

from runner.common.budget import Budget, interrupt, parse_duration, parse_size, process_start
from runner.common.errors import Interrupted, RunnerError
from runner.common.leaving import leave
from runner.watchdog import end_units, watchdog

log = logging.getLogger("runner")

# a named machine's weights cache is not this one's: its plan shows what the machine does once they are pulled
PULLED_REASON = ("weights: planned for a named machine as if every model `runner weights list` names were pulled "
                 "there (`--weights here`: with this machine's cache)")


def _engines(text: str | None) -> list[str] | None:
    """--engines lightgbm,catboost: those engines only (each must be registered)."""
    if not text:
        return None
    from runner.planning.registry import engine_names

    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in engine_names()]
    if unknown:
        raise RunnerError(f"--engines: unknown engine(s) {unknown}; registered: {', '.join(engine_names())}")
    return names


def _interrupt(signal_number: int, _frame) -> None:
    interrupt(signal_number)


def _run(args) -> int:
    from runner.console import console, plan_table, run_progress, setup_logging, summary_table
    from runner.supervisor import run_competition

    signal.signal(signal.SIGTERM, _interrupt)  # Docker and Prefect ask with SIGTERM first: end cleanly
    from runner.common.stacks import register

    register()  # `kill -USR1 PID` prints where the supervisor's threads are, as every unit's does into its log
    os.environ["HF_HUB_OFFLINE"] = "1"  # a run reads pretrained weights from the local cache only
    budget = Budget(parse_duration(args.budget), process_start(), args.cut)
    out = Path(args.out)
    watchdog(budget, out / "report.json")
    setup_logging(out / "run.log", args.verbose)
    with run_progress(budget) as status:
        report = run_competition(args.competition, Path(args.data), budget, out,
                                 on_plan=lambda plan: console.print(plan_table(plan)), on_status=status,
                                 engines=_engines(args.engines), gpus=args.gpus, memory=args.memory,
                                 max_members=args.max_members)
    console.print(summary_table(report))
    if report.error:  # plain lines: the message must survive any terminal width
        failed = report.status == "failed"  # a fault of the runner's, not of the input: its traceback in report.json
        print(f"runner: {'failed' if failed else 'error'}: {report.error}", file=sys.stderr)
        print(f"runner: the best valid submission so far is {report.submission}", file=sys.stderr)
        return 1 if failed else 2
    return 0


def _grade(args) -> int:
    from runner.competition.grade import compare, grade
    from runner.competition.catalog import load_spec

    spec = load_spec(args.competition)
    report = grade(Path(args.submission), spec, Path(args.answers), Path(args.leaderboard) if args.leaderboard
                   else None)
    out = report.to_json()
    if args.against:
        other = grade(Path(args.against), spec, Path(args.answers))
        out["against"] = dict(submission=args.against, score=other.score, error=other.error)
        if report.valid_submission and other.valid_submission:
            out["against"]["edge"] = compare(Path(args.submission), Path(args.against), spec,
                                             Path(args.answers)).to_json()
    print(json.dumps(out, indent=2))
    return 0 if report.valid_submission else 1


def _plan(args) -> int:
    import dataclasses
    import tempfile

    from runner.console import console, plan_table
    from runner.data.loading import load_dataset
    from runner.planning.registry import pretrained_models, weight_models
    from runner.machine.hardware import probe_hardware
    from runner.machine.profiles import profile
    from runner.planning.planner import plan_for
    from runner.planning.portfolio import MAX_MEMBERS
    from runner.competition.catalog import load_spec

    spec = load_spec(args.competition, Path(args.data))
    budget = Budget(parse_duration(args.budget), process_start())
    hardware = probe_hardware() if args.hardware is None else profile(args.hardware)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="runner-plan-"))
    out.mkdir(parents=True, exist_ok=True)
    if spec.task == "unsupported":  # a rule writes it: nothing to read, measure or train
        print(f"{spec.id}: no member: {spec.note or 'no engine trains it'}; the {spec.baseline or 'sample'} rule "
              "writes its submission")
        return 0
    # read as a run on that machine reads it: masks a card learns larger are planned at its side
    dataset = load_dataset(spec, Path(args.data), out / "work", memory=hardware.ram_bytes,
                           accelerated=bool(hardware.gpus))
    pulled = args.hardware is not None and args.weights == "pulled"
    pretrained = pretrained_models() | frozenset(weight_models()) if pulled else None
    if args.size == "real":  # the data given is a replica: plan the real competition from its shape
        from runner.planning.planner import data_shape, measure_costs
        from runner.planning.real_size import plan_at_real_size
        from runner.planning.registry import get_engine

        side = (spec.real.side if spec.real else 0) or dataset.image_side
        at_side = dataclasses.replace(dataset, image_side=side)
        estimates = {n: c for n, c in measure_costs(spec, at_side, hardware, budget.seconds, out, here=False).items()
                     if get_engine(n).accelerated}  # the card's costs estimated from FLOPs at the real images' side
        plan, fit = plan_at_real_size(spec, data_shape(dataset), hardware, budget,
                                      pretrained if pretrained is not None else pretrained_models(), estimates)
        console.print(plan_table(plan))
        print(f"at the real size: memory {fit.memory_bytes / 2**30:.1f} GiB of {hardware.ram_bytes / 2**30:.0f} "
              f"({'fits' if fit.memory_fits else 'DOES NOT FIT'}); disk {fit.disk_bytes / 2**30:.1f} GiB of "
              f"{hardware.disk_free_bytes / 2**30:.0f} free ({'fits' if fit.disk_fits else 'DOES NOT FIT'}); "
              f"window {'filled' if fit.window_filled else 'NOT FILLED'}")
        if args.out:
            plan.save(out / "plan.json")
        return 0
    plan, _ = plan_for(spec, dataset, hardware, budget, out, here=args.hardware is None,
                       engines=_engines(args.engines), pretrained=pretrained,
                       max_members=args.max_members or MAX_MEMBERS)
    if pulled:
        plan = plan.model_copy(update=dict(reasons=(*plan.reasons, PULLED_REASON)))
    console.print(plan_table(plan))
    if args.out:
        plan.save(out / "plan.json")
    return 0


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:  # argparse names the option and this reason
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def _demo_data(args) -> int:
    from runner.demo import write_demo
    from runner.demo._layout import parse_scale

    scale = parse_scale(args.scale)
    for competition in args.competitions:  # one process for many: `make up` writes 23
        print(write_demo(competition, Path(args.out), seed=args.seed, scale=scale))
    return 0


def _demo(args) -> int:
    from runner.console import setup_logging
    from runner.demo import run_demo

    setup_logging(Path(args.out) / "demo.log", args.verbose)
    run_demo(Path(args.out), args.budget, args.competitions)
    return 0


def _specs(args) -> int:
    """Every competition with a spec, a line each: id, MLE-bench split, task, submission format, metric, aliases."""
    from runner.competition.catalog import known_specs
    from runner.competition.mlebench import split_of

    specs = list(known_specs().values())
    rows = [(s.id, split_of(s.id), s.task, s.submission, s.metric) for s in specs]
    widths = [max(len(row[k]) for row in rows) for k in range(5)]
    for spec, row in zip(specs, rows):  # columns as wide as their longest value
        print(*(f"{cell:{w}s}" for cell, w in zip(row, widths)), f"aliases: {', '.join(spec.aliases)}")
    print(f"{len(specs)} competitions")
    return 0


def _weights(args) -> int:
    """pull: download into the HF cache; import: file a local checkpoint there; list: what the ladder has."""
    from runner.common import weights
    from runner.console import console, weights_table
    from runner.planning.registry import weight_models

    cache = Path(args.cache) if args.cache else None
    if args.action == "pull":
        failed = 0
        for model in args.models:
            try:
                print(f"{model}: {weights.pull(model, cache)}")
            except RunnerError as exc:
                print(f"runner: error: {exc}", file=sys.stderr)
                failed += 1
        return 2 if failed else 0
    if args.action == "import":
        print(f"{args.model}: {weights.import_file(args.model, Path(args.file), cache)}")
        return 0
    rows = [(m, weights.hub_id(m), weights.find_weights(m, cache)) for m in weight_models()]
    console.print(weights_table(rows, cache or weights.default_cache()))
    return 0


def _leases(args) -> int:
    """This node cut into leases for `make up`'s workers: a line each (name, queue, environment) with --shell."""
    from runner.deploy.leases import cpuset_text, this_node

    leases = this_node(args.cpu_leases, args.gpus_per_lease)
    for lease in leases:
        if args.shell:
            print(lease.name, lease.queue, *(f"{k}={v}" for k, v in lease.environment().items()))
        else:
            print(f"{lease.name:8s} queue {lease.queue}: GPUs {', '.join(lease.gpus) or 'none'}; cores "
                  f"{cpuset_text(lease.cpus)}; {lease.memory_gb:g} GiB")
    if not leases and not args.shell:
        print("no GPU on this machine: workers hold no lease (each run plans for the whole machine)")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="runner", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train and write OUT/submission.csv within the budget")
    run.add_argument("competition", help="MLE-bench id or alias (dog-breed, spaceship, ...)")
    run.add_argument("--data", required=True, help="the competition's prepared/public folder")
    run.add_argument("--budget", required=True, help="wall-clock budget: 2h, 30m, 1h30m, 90s")
    run.add_argument("--out", required=True, help="output folder")
    run.add_argument("--cut", type=float, default=0.85, help="fraction of the budget after which training stops")
    run.add_argument("--engines", help="comma-separated engines to use (default: every one that applies)")
    run.add_argument("--gpus", help="the GPUs this run may use: indices as nvidia-smi numbers them (2,5), UUIDs "
                                    "(GPU-…, MIG-…) or 'none' (default: CUDA_VISIBLE_DEVICES, else all)")
    run.add_argument("--memory", type=_size, default=None,
                     help="memory the run may use: 8G, 512M (default: the machine's, within its cgroup's limit)")
    run.add_argument("--max-members", type=_positive, default=None, metavar="N",
                     help="train at most N members: the plan's first ones, then extra ones while they still improve "
                          "CV (default 100); a run that has trained them ends before its window closes")
    run.add_argument("-v", "--verbose", action="store_true")
    run.set_defaults(func=_run)
    grade = sub.add_parser("grade", help="score a submission with MLE-bench's rules")
    grade.add_argument("submission")
    grade.add_argument("competition")
    grade.add_argument("--answers", required=True, help="the competition's prepared/private folder")
    grade.add_argument("--leaderboard", help="a leaderboard CSV with a 'score' column, best first")
    grade.add_argument("--against", metavar="OTHER_SUBMISSION",
                       help="also the edge over another submission: the score difference (positive: this one is "
                            "better) and its 90%% interval over resampled test rows")
    grade.set_defaults(func=_grade)
    plan = sub.add_parser("plan", help="print the plan a run would use")
    plan.add_argument("competition")
    plan.add_argument("--data", required=True)
    plan.add_argument("--budget", required=True)
    plan.add_argument("--out", help="write plan.json (and the measured costs) here")
    plan.add_argument("--engines", help="comma-separated engines to use (default: every one that applies)")
    plan.add_argument("--max-members", type=_positive, default=None, metavar="N",
                      help="plan at most N members, as `runner run --max-members` would")
    plan.add_argument("--hardware", help="plan for a named machine instead of this one: cpu, a10-24gb, l4-24gb, "
                      "a100-40gb, a100-80gb, h100-80gb, h200-141gb")
    plan.add_argument("--weights", choices=("pulled", "here"), default="pulled",
                      help="with --hardware: plan as if every model `runner weights list` names were pulled on that "
                           "machine (pulled, the default), or with this machine's cache (here)")
    plan.add_argument("--size", choices=("given", "real"), default="given",
                      help="plan for the data given (default), or for the real competition from a replica's data: "
                           "its shape grown to the spec's real size, and what a run would sample there said")
    plan.set_defaults(func=_plan)
    weights = sub.add_parser("weights", help="pretrained weights in the Hugging Face cache: pull, import, list")
    actions = weights.add_subparsers(dest="action", required=True)
    pull = actions.add_parser("pull", help="download timm's pretrained checkpoints into the cache")
    pull.add_argument("models", nargs="+")
    imported = actions.add_parser("import", help="file a local checkpoint under a model's hub id in the cache")
    imported.add_argument("model")
    imported.add_argument("file")
    listed = actions.add_parser("list", help="which models of the candidate ladder the cache holds")
    for action in (pull, imported, listed):
        action.add_argument("--cache", help="the HF cache folder (default: RUNNER_HF_CACHE, else the user's)")
        action.set_defaults(func=_weights)
    demo_data = sub.add_parser("demo-data", help="write synthetic competitions in the MLE-bench layout")
    demo_data.add_argument("competitions", nargs="+", metavar="competition")
    demo_data.add_argument("--out", required=True)
    demo_data.add_argument("--seed", type=int, default=0)
    demo_data.add_argument("--scale", default="1", help="'real' (as many rows, images, clips and tokens as the real "
                                                       "competition has), 'real/N' (the real counts over N, e.g. "
                                                       "real/8, all else as at real) or a factor of the replica's "
                                                       "own size")
    demo_data.set_defaults(func=_demo_data)
    demo = sub.add_parser("demo", help="generate, run and grade every demo competition")
    demo.add_argument("--out", default="runs/demo")
    demo.add_argument("--budget", default=None, help="budget per competition (default: each demo's own)")
    demo.add_argument("--competitions", nargs="*", default=None)
    demo.add_argument("-v", "--verbose", action="store_true")
    demo.set_defaults(func=_demo)
    specs = sub.add_parser("specs", help="list the competitions with a spec")
    specs.set_defaults(func=_specs)
    leases = sub.add_parser("leases", help="this node's GPUs, cores and memory cut into one lease per worker")
    leases.add_argument("--cpu-leases", type=int, default=1, help="leases without a GPU, for table competitions")
    leases.add_argument("--gpus-per-lease", type=int, default=1)
    leases.add_argument("--shell", action="store_true", help="one line per lease: name, queue, VAR=value ...")
    leases.set_defaults(func=_leases)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except RunnerError as exc:
        print(f"runner: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("runner: interrupted; the last valid submission is kept", file=sys.stderr)
        return 130
    except Interrupted as exc:
        print(f"runner: {exc}; the last valid submission is kept, and a run in the same --out resumes",
              file=sys.stderr)
        return 128 + exc.signal_number
    finally:
        end_units()


def console() -> None:
    """`runner ...` and `python -m runner.cli ...`: main(), then the process leaves without the interpreter's
    teardown (what it wrote is written, its log closed): a finished run's caller waits for nothing more."""
    leave(main())


if __name__ == "__main__":
    console()
