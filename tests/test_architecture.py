"""The import rules of docs/architecture.md, read from the code (ast; `if TYPE_CHECKING:` blocks left out, since
they run only for type checkers): no circles, no module importing a later stage, shared modules importing no
stage, no engine reaching into another engine, nothing outside an engine package importing it, and the
supervisor meeting engines through the registry alone."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / "runner"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# the pipeline's layers, earliest first: a module may import its own layer and earlier ones. `pkg.*` is a package
# and everything in it; a name without a star is that module alone (the plan vocabulary is the planning package's
# half that engines speak, the planner its half that speaks to engines)
LAYERS = (
    ("shared", {"runner", "runner.common.*"}),
    ("competition", {"runner.competition.*"}),
    ("data", {"runner.data.*"}),
    ("machine", {"runner.machine.*"}),
    ("plan vocabulary", {"runner.planning", "runner.planning.portfolio", "runner.planning.unit_memory",
                         "runner.planning.registry", "runner.engines", "runner.engines.base"}),
    ("engines", {"runner.engines.*"}),
    ("plan", {"runner.planning.planner", "runner.planning.real_size"}),
    ("units", {"runner.units.*"}),
    ("results", {"runner.results.*"}),
    ("control", {"runner.control.*"}),
    ("supervisor", {"runner.supervisor", "runner.watchdog"}),
    ("front", {"runner.cli", "runner.console", "runner.plot", "runner.deploy.*", "runner.demo.*"}),
)
ENGINE_HELPERS = {"base", "boosting", "oneshot", "tables", "networks", "image_cache", "optimising", "backbones"}  # what engines share: not an engine of their own
SUPERVISOR = {"runner.supervisor", "runner.results.run_folder", "runner.results.ensemble", "runner.control.controller",
              "runner.control.extra_members"}
MAX_TOP_MODULES = 12  # runner/'s own modules beside its packages: the front door, not a second flat folder
MAX_LINES = 450  # a module past this is two ideas (docs/architecture.md names any exception and why)


def modules() -> dict[str, Path]:
    found = {}
    for path in RUNNER.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if path.name == "__init__.py" else parts)] = path
    return found


MODULES = modules()


def _owner(name: str) -> str | None:
    """The longest runner module a dotted name starts with (`runner.competition.catalog.load_spec` -> `runner.competition.catalog`)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> set[str]:
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    type_only = {id(node) for test in ast.walk(tree) if isinstance(test, ast.If) and "TYPE_CHECKING" in
                 ast.unparse(test.test) for stmt in test.body for node in ast.walk(stmt)}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found |= {_owner(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            found |= {_owner(f"{base}.{alias.name}") for alias in node.names} | {_owner(base)}
    return found - {None, module}


GRAPH = {module: imports_of(module) for module in MODULES}


def _in(module: str, members: set[str]) -> bool:
    return module in members or any(m.endswith(".*") and (module == m[:-2] or module.startswith(m[:-1]))
                                    for m in members)


def layer_of(module: str) -> int:
    """The module's layer: one naming it exactly first (runner.planning.planner), else the package it is in."""
    for rank, (_, members) in enumerate(LAYERS):
        if module in members:
            return rank
    for rank, (_, members) in enumerate(LAYERS):
        if _in(module, members):
            return rank
    raise AssertionError(f"{module} is in no layer: place it in LAYERS and in docs/architecture.md")


def engine_of(module: str) -> str | None:
    """The engine a module belongs to (runner.engines.timm.training -> timm), None for the helpers."""
    parts = module.split(".")
    if len(parts) < 3 or parts[:2] != ["runner", "engines"] or parts[2] in ENGINE_HELPERS:
        return None
    return parts[2]


def test_every_module_has_a_layer_and_a_line_in_the_architecture_page():
    page = ARCHITECTURE.read_text()
    missing = [m for m in MODULES if not m.startswith("runner.demo.") and f"`{m}`" not in page]
    assert not missing, f"docs/architecture.md names no line for {missing}"
    for module in MODULES:
        layer_of(module)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v), on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                on.discard(w), component.append(w)
            on.discard(v)
            if component:
                found.append(sorted([v, *component]))

    for module in graph:
        if module not in index:
            visit(module)
    return found


def arrows_back(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} ({LAYERS[layer_of(m)][0]}) imports {i} ({LAYERS[layer_of(i)][0]})"
                  for m, found in graph.items() for i in found if layer_of(i) > layer_of(m))


def test_no_import_circles():
    assert not circles(GRAPH), f"import circles: {circles(GRAPH)}"


def test_no_module_imports_a_later_stage():
    assert not arrows_back(GRAPH), "arrows back:\n" + "\n".join(arrows_back(GRAPH))


def test_shared_modules_import_only_shared_modules():
    shared = {m for m in GRAPH if layer_of(m) == 0}
    assert not {m: found - shared for m, found in GRAPH.items() if m in shared and found - shared}


def test_no_engine_imports_another_engines_modules():
    crossing = [(m, i) for m, found in GRAPH.items() for i in found
                if engine_of(m) and engine_of(i) and engine_of(m) != engine_of(i)]
    assert not crossing


@pytest.mark.parametrize("inside", ["runner.engines.timm", "runner.engines.finetune", "runner.engines.unet"])
def test_nothing_outside_an_engine_package_imports_it(inside):
    reaching = [(m, i) for m, found in GRAPH.items() for i in found
                if i.startswith(inside) and not m.startswith(inside)]
    assert not reaching


@pytest.mark.parametrize("module", sorted(SUPERVISOR))
def test_the_supervisor_meets_engines_through_the_registry_alone(module):
    assert not {i for i in GRAPH[module] if i.startswith("runner.engines")}


def test_the_checks_find_what_they_look_for():
    """On a made-up graph: the spec importing the planner is an arrow back, and a circle through it is found; a
    module of a package takes the package's layer, and the planner its own."""
    graph = {"runner.competition.spec": {"runner.planning.planner", "runner.common.metrics"},
             "runner.planning.planner": {"runner.competition.spec"}, "runner.common.metrics": set()}
    assert arrows_back(graph) == ["runner.competition.spec (competition) imports runner.planning.planner (plan)"]
    assert circles(graph) == [["runner.competition.spec", "runner.planning.planner"]]
    assert arrows_back({"runner.competition.spec": {"runner.common.metrics"}}) == []
    assert [LAYERS[layer_of(m)][0] for m in ("runner.data.textnorm.rules", "runner.planning.planner",
                                              "runner.planning.portfolio", "runner.engines.timm.training")] == [
        "data", "plan", "plan vocabulary", "engines"]
    with pytest.raises(AssertionError, match="in no layer"):
        layer_of("runner.somewhere_new")


def packages() -> list[Path]:
    """Every folder under runner/ that holds Python files."""
    return sorted({p.parent for p in RUNNER.rglob("*.py") if "__pycache__" not in p.parts})


def test_runner_shows_its_layers_few_modules_beside_packages_each_with_a_docstring():
    """`ls runner/` is the front door: a few modules (the command line, the supervisor, the console) beside the
    layer packages. A folder without `__init__.py` would be left out of the wheel and the docker image (both pack
    only packages), and each package says in one line what it holds."""
    top = [p.name for p in RUNNER.glob("*.py")]
    assert len(top) <= MAX_TOP_MODULES, sorted(top)
    for folder in packages():
        init = folder / "__init__.py"
        assert init.is_file(), f"{folder.relative_to(ROOT)} has Python files but no __init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and doc.strip(), f"{init.relative_to(ROOT)} has no docstring"


def test_the_packages_found_to_build_the_wheel_and_image_are_every_folder_with_code():
    from setuptools import find_packages

    found = set(find_packages(ROOT, include=["runner*"]))
    assert found == {".".join(f.relative_to(ROOT).parts) for f in packages()}


def test_no_module_is_two_ideas():
    long = {m: n for m, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    page = ARCHITECTURE.read_text()
    unexplained = {m: n for m, n in long.items() if f"`{m}` is longer than" not in page}
    assert not unexplained, f"over {MAX_LINES} lines with no reason in docs/architecture.md: {unexplained}"


def test_loading_every_engine_to_plan_imports_no_torch():
    """Engines import their libraries inside methods: a plan (what the supervisor makes) never pays for torch."""
    import subprocess
    import sys

    probe = ("import sys\nfrom runner.planning.registry import engine_names, get_engine\n"
             "loaded = [n for n in engine_names() if get_engine(n) and 'torch' in sys.modules]\nprint(loaded[:1])")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_every_engine_that_trains_on_a_gpu_has_the_fork_server_import_torch_once():
    """A fold that imports torch itself starts 8 s later (an H200 machine): its libraries come from the fork
    server, imported there once (never a CUDA start: tests/test_fork_safety.py)."""
    from runner.planning.registry import engine_names, get_engine

    accelerated = [get_engine(n) for n in engine_names() if get_engine(n).accelerated]
    assert len(accelerated) >= 4  # the CNN, the spectrogram CNN, the text fine-tune, the U-Net
    assert all("torch" in e.preload and any(m.startswith("runner.engines.") for m in e.preload)
               for e in accelerated), {e.name: e.preload for e in accelerated}
