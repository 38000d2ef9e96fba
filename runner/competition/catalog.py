"""Finding a competition's spec: `competitions/<id>/spec.yaml` by id or alias, or, for any other MLE-bench id,
inferred from its public folder (runner.competition.inference). A competition is a folder: its spec beside the
generator of its replica (`replica.py`) and whatever else it alone needs."""
from __future__ import annotations

import os
from pathlib import Path

import yaml

# libyaml's parser where PyYAML was built with it: all 23 specs in 5 ms instead of 47 (every load_spec reads them)
SPEC_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

from runner import PACKAGE
from runner.common.csvfiles import find_sample
from runner.common.errors import SpecError
from runner.competition.inference import infer_spec
from runner.competition.spec import CompetitionSpec


def competitions_dir() -> Path:
    """The folder of spec files: $RUNNER_COMPETITIONS, else `competitions/` beside the package."""
    return Path(os.environ.get("RUNNER_COMPETITIONS", PACKAGE.parent / "competitions"))


def _load_yaml(path: Path) -> CompetitionSpec:
    try:
        data = yaml.load(path.read_text(), Loader=SPEC_LOADER)
    except (OSError, yaml.YAMLError) as exc:
        raise SpecError(f"{path}: cannot read spec: {exc}") from exc
    if "split_columns" in data:
        data["split_columns"] = [
            {"column": col, "sep": v["sep"], "into": v["into"]} for col, v in data["split_columns"].items()
        ]
    return CompetitionSpec.from_json(data)


SPEC_FILE = "spec.yaml"  # in each competition's folder


def spec_files() -> list[Path]:
    """Each competition folder's spec file, in the folders' order."""
    return sorted(competitions_dir().glob(f"*/{SPEC_FILE}"))


def known_specs() -> dict[str, CompetitionSpec]:
    """Every spec in the competitions folder, keyed by id; a spec whose id is not its folder's name is refused."""
    specs = {}
    for path in spec_files():
        spec = _load_yaml(path)
        if spec.id != path.parent.name:
            raise SpecError(f"{path}: id {spec.id!r} is not its folder's name {path.parent.name!r}")
        specs[spec.id] = spec
    return specs


def find_spec(name: str) -> CompetitionSpec | None:
    for spec in known_specs().values():
        if name == spec.id or name in spec.aliases:
            return spec
    return None


def load_spec(name: str, data_dir: Path | None = None) -> CompetitionSpec:
    """The spec for an id or alias; inferred from `data_dir` when the id is not known."""
    spec = find_spec(name)
    if spec is not None:
        return spec
    if data_dir is not None and find_sample(Path(data_dir)) is not None:
        return infer_spec(name, Path(data_dir))
    known = ", ".join(sorted(known_specs()))
    where = f"; no sample submission in {data_dir} either" if data_dir else ""
    raise SpecError(f"unknown competition {name!r}{where}. Known: {known}")
