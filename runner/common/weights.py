"""Pretrained weights, the way users have them: timm's checkpoints and transformers' model repositories in the
standard Hugging Face cache.

A model is a timm name (`convnext_tiny`) or, for text, a hub repository (`microsoft/deberta-v3-base`: a name
with a slash). `runner weights pull MODEL...` downloads each model's default pretrained checkpoint (a text model's
config and tokenizer files with it) through huggingface_hub into the cache (the user's, or `--cache DIR`: a
folder to bake into an image or mount read-only). Runs never reach a hub: fold processes load through timm's own
hub path (or transformers', from the snapshot folder) with `HF_HUB_OFFLINE=1`, which reads the cache only.
`runner weights import MODEL FILE` puts a checkpoint file a user already has into the same layout (the tensors
are matched to timm's by name, or by position and shape when the names differ), so it loads the same way.

The older form still works: `$RUNNER_WEIGHTS_DIR/<model>.safetensors|.pth|.bin` is used first when present.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from runner.common.errors import RunnerError

SUFFIXES = (".safetensors", ".pth", ".bin")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")  # what timm's hub path looks for, in its order
CACHE_ENV = "RUNNER_HF_CACHE"  # a run's cache folder when it is not the user's default HF cache
# what a text model needs beside its weights: its config and its tokenizer (a vocabulary, a SentencePiece model
# or a tokenizer.json, by family)
TEXT_FILES = ("config.json", "tokenizer*", "special_tokens_map.json", "vocab.txt", "*.model", "added_tokens.json")
IMPORTED_REVISION = "0" * 40  # the commit an imported checkpoint is filed under (it came from no hub)


@dataclass(frozen=True)
class Weights:
    """Where a model's pretrained weights are: a plain file, or a Hugging Face cache holding its hub id."""

    model: str
    path: Path  # the checkpoint file
    hub_id: str | None = None  # set when the file is in an HF cache
    cache: Path | None = None

    @property
    def label(self) -> str:
        return f"{self.hub_id} from {self.cache}" if self.hub_id else self.path.name


def default_cache() -> Path:
    """The HF cache a run reads: `RUNNER_HF_CACHE`, else huggingface_hub's own (HF_HUB_CACHE, HF_HOME/hub, ...)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def is_repository(model: str) -> bool:
    """A text model, named by its hub repository (owner/name), not a timm model."""
    return "/" in model


def hub_id(model: str) -> str | None:
    """The hub repository of timm's default pretrained tag for `model` (None when timm knows none); a text
    model is its own repository."""
    if is_repository(model):
        return model
    from timm.models import get_pretrained_cfg, is_model

    if not is_model(model):
        raise RunnerError(f"weights: {model!r} is not a timm model")
    cfg = get_pretrained_cfg(model)
    return cfg.hf_hub_id if cfg is not None and cfg.hf_hub_id else None


def _repo_folder(cache: Path, repo: str) -> Path:
    return cache / ("models--" + repo.replace("/", "--"))


def cached_file(cache: Path, repo: str) -> Path | None:
    """The checkpoint of `repo` at its main revision in an HF cache, as huggingface_hub resolves it offline."""
    folder = _repo_folder(cache, repo)
    try:
        revision = (folder / "refs" / "main").read_text().strip()
    except OSError:
        return None
    return next((f for name in WEIGHT_FILES if (f := folder / "snapshots" / revision / name).is_file()), None)


def cached_repos(model: str, cache: Path) -> list[str]:
    """timm's hub repositories of `model` in the cache (`timm/<model>` and `timm/<model>.<tag>`), by folder name
    alone: the supervisor checks for weights without importing timm."""
    if is_repository(model):
        return [model] if _repo_folder(cache, model).is_dir() else []
    prefix = "models--timm--" + model
    try:
        names = sorted(p.name for p in cache.iterdir() if p.name == prefix or p.name.startswith(prefix + "."))
    except OSError:
        return []
    return [n[len("models--"):].replace("--", "/", 1) for n in names]


def find_weights(model: str, cache: Path | None = None) -> Weights | None:
    """A model's local weights: a `RUNNER_WEIGHTS_DIR` file first, then a checkpoint of one of its timm hub
    repositories in the HF cache; None when there are none (nothing is ever downloaded here)."""
    folder = os.environ.get("RUNNER_WEIGHTS_DIR")
    if folder:
        plain = next((p for s in SUFFIXES if (p := Path(folder) / f"{model}{s}").is_file()), None)
        if plain:
            return Weights(model, plain)
    cache = cache or default_cache()
    for repo in cached_repos(model, cache):
        found = cached_file(cache, repo)
        if found:
            return Weights(model, found, repo, cache)
    return None


def timm_source(weights: Weights) -> dict:
    """The arguments that make `timm.create_model(..., pretrained=True)` read these local weights: the HF cache
    through timm's hub path (offline), or a plain file."""
    if weights.hub_id:
        return dict(cache_dir=str(weights.cache), pretrained_cfg_overlay=dict(hf_hub_id=weights.hub_id))
    return dict(pretrained_cfg_overlay=dict(file=str(weights.path)))


def pull(model: str, cache: Path | None) -> Path:
    """Download `model`'s pretrained checkpoint (a text model's config and tokenizer files with it) into the HF
    cache; the checkpoint's path there."""
    from huggingface_hub.errors import LocalEntryNotFoundError

    repo = hub_id(model)
    if repo is None:
        raise RunnerError(f"weights: timm has no pretrained checkpoint for {model}")
    try:
        if is_repository(model):
            _download(repo, TEXT_FILES, cache)  # weights without their config and tokenizer cannot load
        return _first_weights(repo, cache)
    except LocalEntryNotFoundError as exc:  # offline, or the hub unreachable, and not in the cache
        raise RunnerError(f"weights: could not download {repo}: the hub cannot be reached and the cache has "
                          f"no copy ({str(exc)[:160]})") from exc
    except RunnerError:
        raise
    except Exception as exc:  # noqa: BLE001 - huggingface_hub raises many kinds; each gets the same line
        raise RunnerError(f"weights: could not download {repo} ({type(exc).__name__}: {exc})") from exc


def _first_weights(repo: str, cache: Path | None) -> Path:
    """The first of WEIGHT_FILES the repository has, downloaded."""
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    last: Exception | None = None
    for name in WEIGHT_FILES:
        try:
            return _download(repo, (name,), cache)
        except LocalEntryNotFoundError:  # a kind of EntryNotFoundError: no hub, not "no such file"
            raise
        except EntryNotFoundError as exc:  # the next name; any other failure is the hub's or the network's
            last = exc
    raise RunnerError(f"weights: {repo} has none of {', '.join(WEIGHT_FILES)}: {last}")


def _download(repo: str, patterns: tuple[str, ...], cache: Path | None) -> Path:
    """The files of `repo` matching `patterns`, downloaded into the cache: one file's path, or the snapshot's."""
    from huggingface_hub import hf_hub_download, snapshot_download

    if len(patterns) == 1 and "*" not in patterns[0]:
        return Path(hf_hub_download(repo, patterns[0], cache_dir=cache))
    return Path(snapshot_download(repo, allow_patterns=list(patterns), cache_dir=cache))


def _matched(model: str, source: dict) -> dict:
    """`source` renamed to timm's parameter names: by name when they match, else by position and shape."""
    import timm

    target = timm.create_model(model, pretrained=False).state_dict()
    if set(source) == set(target):
        return source
    theirs = [(k, v) for k, v in source.items() if not k.endswith("num_batches_tracked")]
    ours = [(k, v) for k, v in target.items() if not k.endswith("num_batches_tracked")]
    shapes = [tuple(v.shape) for _, v in theirs], [tuple(v.shape) for _, v in ours]
    if shapes[0] != shapes[1]:
        raise RunnerError(f"weights: the checkpoint's {len(theirs)} tensors do not match {model}'s {len(ours)} "
                          "by name, nor by position and shape")
    return {k: v for (k, _), (_, v) in zip(ours, theirs)}


def import_file(model: str, file: Path, cache: Path | None) -> Path:
    """File a local checkpoint under `model`'s hub id in the HF cache (blob, snapshot link, refs/main), so runs
    load it through timm's hub path like a downloaded one; its path in the cache."""
    import safetensors.torch
    import torch

    repo = hub_id(model)
    if repo is None or is_repository(model):
        raise RunnerError(f"weights: import files timm checkpoints; {model} has no timm pretrained tag to file it "
                          "under (a text model is pulled with its tokenizer: `runner weights pull`)")
    try:
        loaded = torch.load(file, map_location="cpu", weights_only=True) if file.suffix != ".safetensors" \
            else safetensors.torch.load_file(str(file))
    except Exception as exc:  # noqa: BLE001 - a corrupt file fails in many ways; each is named the same way
        raise RunnerError(f"weights: cannot read {file}: {exc}") from exc
    state = loaded.get("state_dict", loaded) if isinstance(loaded, dict) else None
    if not isinstance(state, dict):
        raise RunnerError(f"weights: {file} holds no state dict")
    matched = {k: v.contiguous() for k, v in _matched(model, state).items()}
    folder = _repo_folder(cache or default_cache(), repo)
    (folder / "blobs").mkdir(parents=True, exist_ok=True)
    tmp = folder / "blobs" / f".import-{os.getpid()}"
    safetensors.torch.save_file(matched, str(tmp))
    blob = folder / "blobs" / hashlib.sha256(tmp.read_bytes()).hexdigest()
    tmp.replace(blob)
    snapshot = folder / "snapshots" / IMPORTED_REVISION
    snapshot.mkdir(parents=True, exist_ok=True)
    link = snapshot / WEIGHT_FILES[0]
    link.unlink(missing_ok=True)
    link.symlink_to(os.path.relpath(blob, snapshot))
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / "main").write_text(IMPORTED_REVISION)
    return link
