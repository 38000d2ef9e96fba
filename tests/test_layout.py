"""What a move of modules between packages can break without a word, each pinned: the anchors that find files
from a module's own place (the code fingerprint a resumed run compares, the folders a container mounts, the
competitions folder), module names held in strings (the fork server's preload, whose ImportError Python's
forkserver swallows; `python -m runner.units.worker`; the watchdog's lookup of the unit processes), and
monkeypatches that must reach the module whose code looks the name up. Each check is also run on a made-up
example of the mistake it catches."""
import ast
import importlib
import importlib.util
import re
import shutil
from pathlib import Path


import runner
from runner.competition.catalog import competitions_dir

ROOT = Path(__file__).resolve().parent.parent
# folders whose text may name runner modules
SCANNED = ("runner", "flows", "bench", "tests", "docs", "docker", "competitions")
SCANNED_FILES = ("Makefile", "pyproject.toml", "prefect.yaml", "README.md")
DOTTED = re.compile(r"(?<![\w./-])runner(?:\.[a-z_][a-z0-9_]*)+")  # runner.units.worker, a module's attribute
LOGGER = re.compile(r"getLogger\([\"'][^\"']*[\"']\)")  # a logger's name looks like a module's and need not be one
CHECKERS = ("tests/test_layout.py", "tests/test_architecture.py")  # their made-up examples name what is not there


# --- anchors --------------------------------------------------------------------------------------------------

def test_the_package_anchor_is_the_runner_package_itself():
    assert runner.PACKAGE == Path(runner.__file__).resolve().parent
    assert (runner.PACKAGE / "cli.py").is_file() and (runner.PACKAGE / "units" / "worker.py").is_file()


def test_the_code_fingerprint_reads_every_module_and_changes_when_one_moves(tmp_path):
    """A resumed run reuses a fold only when the code that trained it is the code now: a module moved to another
    subpackage (same text, another path) is other code, so a run on code from before a move retrains."""
    from runner.results.resume import code_fingerprint

    copy = tmp_path / "runner"
    shutil.copytree(runner.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    fingerprint = code_fingerprint.__wrapped__  # uncached: the copy changes under the same path
    assert fingerprint(copy) == code_fingerprint()  # every .py file, read from the package's root
    (copy / "units" / "deadlines.py").rename(copy / "planning" / "deadlines.py")
    moved = fingerprint(copy)
    assert moved != code_fingerprint()
    (copy / "planning" / "deadlines.py").rename(copy / "units" / "deadlines.py")
    (copy / "results" / "oof.py").write_text((copy / "results" / "oof.py").read_text() + "\n# changed\n")
    assert fingerprint(copy) not in {moved, code_fingerprint()}  # a subpackage's module is read too


def test_a_container_mounts_the_whole_package_and_the_competitions_beside_it():
    from runner.deploy.containers import host_python_folders

    folders = host_python_folders()
    assert runner.PACKAGE in folders and competitions_dir().resolve() in folders


def test_the_competitions_folder_beside_the_package_holds_every_lite_spec(monkeypatch):
    monkeypatch.delenv("RUNNER_COMPETITIONS", raising=False)
    lite = (ROOT / "competitions" / "splits" / "mle-bench-lite.txt").read_text().split()
    assert competitions_dir().resolve() == (ROOT / "competitions").resolve()
    specs = {p.parent.name for p in competitions_dir().glob("*/spec.yaml")}
    assert len(lite) >= 20 and set(lite) <= specs


# --- names in strings -----------------------------------------------------------------------------------------

def _defined_names(module: str) -> set[str] | None:
    """The top-level names a module's source binds (without importing it), None when there is no such module."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    names = set()
    for node in ast.walk(ast.parse(Path(spec.origin).read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    if Path(spec.origin).name == "__init__.py":  # a package's modules are its names too
        names |= {p.stem for p in Path(spec.origin).parent.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    return names


def unresolved(name: str) -> bool:
    """True when a dotted runner name is no module, nor a name a module defines (`runner.units.worker.main`)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            names = _defined_names(module)
        except (ImportError, ValueError):  # a parent that is no package
            continue
        if names is not None:
            return cut < len(parts) and parts[cut] not in names and not parts[cut].startswith("__")
    return True


def dotted_names(text: str) -> set[str]:
    return {m.group(0).rstrip(".") for m in DOTTED.finditer(LOGGER.sub("", text))}


def _scanned_files() -> list[Path]:
    files = [ROOT / f for f in SCANNED_FILES if (ROOT / f).is_file()]
    for folder in SCANNED:
        files += [p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in {".py", ".md", ".sh", ".yaml",
                                                                                        ".toml", ""}
                  and "__pycache__" not in p.parts and "results" not in p.relative_to(ROOT).parts[:2]]
    return [f for f in files if str(f.relative_to(ROOT)) not in CHECKERS]


def test_every_runner_name_written_in_code_docs_or_build_files_resolves():
    """A name held in a string is not checked by any import: the fork server's preload, `-m runner.units.worker`,
    `sys.modules.get(...)`, a mock.patch target, the docs. Each must still name a module or what a module defines."""
    stale = {f"{path.relative_to(ROOT)}: {name}" for path in _scanned_files()
             for name in dotted_names(path.read_text(errors="replace")) if unresolved(name)}
    assert not stale, "names of modules that are not there:\n" + "\n".join(sorted(stale))


def test_the_name_check_finds_a_stale_name():
    text = ('Popen([sys.executable, "-m", "runner.fold_worker"]); see runner.units.worker.main and runner.units.'
            '\nlog = logging.getLogger("runner.vision")')
    assert dotted_names(text) == {"runner.fold_worker", "runner.units.worker.main", "runner.units"}
    assert [n for n in sorted(dotted_names(text)) if unresolved(n)] == ["runner.fold_worker"]
    assert unresolved("runner.units.worker.no_such_function") and not unresolved("runner.common")


def test_the_fork_servers_preload_imports():
    """Python's forkserver swallows an ImportError in its preload: a stale name there silently drops what it was
    for (the server's stderr file and stack dumps, the engines' libraries imported once)."""
    from runner.planning.registry import engine_names, get_engine
    from runner.units.fork_server import BASE_PRELOAD

    names = set(BASE_PRELOAD) | {m for n in engine_names() for m in get_engine(n).preload}
    missing = sorted(m for m in names if importlib.util.find_spec(m) is None)
    assert not missing, missing


def test_the_watchdog_finds_the_unit_processes_by_the_name_it_looks_up():
    """The watchdog looks the unit processes up in sys.modules (it must not import them): a stale name would find
    nothing and leave every unit running past the budget."""
    from runner.units import processes
    from runner.watchdog import PROCESSES

    assert importlib.import_module(PROCESSES) is processes
    assert all(callable(getattr(processes, f, None)) for f in ("live", "kill", "shutdown"))


# --- monkeypatches --------------------------------------------------------------------------------------------

def _names_loaded(tree: ast.AST, kind: type, field: str) -> set[str]:
    """The names functions in `tree` read when they run: bare names (ast.Name.id) or attributes (ast.Attribute.attr)."""
    return {getattr(n, field) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            for n in ast.walk(f) if isinstance(n, kind) and isinstance(n.ctx, ast.Load)}


def _attributes_read_by_runner() -> set[str]:
    """Every `something.name` the runner's functions read: a module's name reached through the module object
    (`module.generate(...)`) is looked up where it is patched."""
    return set().union(*(_names_loaded(ast.parse(p.read_text()), ast.Attribute, "attr")
                         for p in runner.PACKAGE.rglob("*.py")))


def _looked_up(module: str) -> set[str]:
    """Names a module's own functions look up when they run, and those read through a module object anywhere in
    the runner: a patch of any other name of the module reaches no code."""
    spec = importlib.util.find_spec(module)
    return _names_loaded(ast.parse(Path(spec.origin).read_text()), ast.Name, "id") | ATTRIBUTES


def _module_aliases(tree: ast.Module) -> dict[str, str]:
    """Local names bound to runner modules: `from runner.data import reading as data_module`, `import runner.x as y`."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("runner"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if importlib.util.find_spec(node.module) and _is_module(full):
                    aliases[a.asname or a.name] = full
        elif isinstance(node, ast.Import):
            aliases |= {a.asname: a.name for a in node.names if a.asname and a.name.startswith("runner")}
    return aliases


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def patches_that_reach_nothing(source: str) -> list[str]:
    """`monkeypatch.setattr(module, "NAME", ...)` and `monkeypatch.setattr("runner.x.NAME", ...)` /
    `mock.patch("runner.x.NAME")` whose module's code never looks NAME up: after a split, the name lives (and is
    used) elsewhere and the patch changes nothing."""
    tree = ast.parse(source)
    aliases = _module_aliases(tree)
    found = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.args
                and call.func.attr in {"setattr", "patch"}):
            continue
        first = call.args[0]
        if isinstance(first, ast.Name) and first.id in aliases and len(call.args) > 1 \
                and isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str):
            module, name = aliases[first.id], call.args[1].value
        elif isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("runner."):
            module, _, name = first.value.rpartition(".")
        else:
            continue
        if not _is_module(module) or name not in _looked_up(module):
            found.append(f"{module}.{name}")
    return found


ATTRIBUTES = _attributes_read_by_runner()


def test_every_monkeypatch_reaches_the_code_that_looks_the_name_up():
    wrong = {f"{p.relative_to(ROOT)}: {target}" for folder in ("tests", "bench") for p in (ROOT / folder).rglob("*.py")
             for target in patches_that_reach_nothing(p.read_text())}
    assert not wrong, "patches of a module that never looks the name up:\n" + "\n".join(sorted(wrong))


def test_the_patch_check_finds_a_patch_of_a_module_that_no_longer_uses_the_name():
    """data.py's reading limits moved to runner.data.reading: patched on runner.data.loading they would change
    nothing (there a monkeypatch of an absent name fails loudly; of an imported, unused one it would not)."""
    source = ("from runner.data import loading, reading\nfrom runner.data import targets as t\n"
              "def test(monkeypatch):\n    monkeypatch.setattr(reading, 'LARGE_TABLE_BYTES', 1)\n"
              "    monkeypatch.setattr(loading, 'LARGE_TABLE_BYTES', 1)\n    monkeypatch.setattr(t, 'InputError', 1)\n"
              "    mock.patch('runner.units.processes.child_environment')\n    mock.patch('runner.units.processes.nothing')\n")
    assert patches_that_reach_nothing(source) == ["runner.data.loading.LARGE_TABLE_BYTES",
                                                  "runner.units.processes.nothing"]
