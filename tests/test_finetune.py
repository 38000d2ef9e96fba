"""The text fine-tuning engine: plans for named GPUs on a jigsaw-sized set, a member left out on a CPU with its
reason, the pieces of a fold (length buckets, layer-wise rates, the schedule), text models in the HF cache, and a
real fine-tune of the bundled MiniLM that beats the class prior."""
import json
import time

import numpy as np
import pytest

from conftest import CORES
from runner.common import metrics
from runner.planning.registry import get_engine
from runner.engines.base import READY_FILE
from runner.engines.finetune.models import LADDER, SMALLEST, model_folder
from runner.engines.finetune.planning import MIN_EPOCHS, text_member
from runner.engines.finetune.tokens import bucketed, padded
from runner.planning.planner import make_plan
from runner.planning.portfolio import DataShape, PlanContext
from runner.machine.profiles import profile
from runner.competition.catalog import load_spec

JIGSAW = load_spec("jigsaw-toxic-comment-classification-challenge")
SPOOKY = load_spec("spooky")
# the jigsaw replica's comments repeated to the real set's size: 160k train and 153k test rows of ~394 characters,
# the 95th percentile at 1,350
JIGSAW_SIZED = DataShape(160_000, 153_000, 0, 0, 6, frozenset({"text"}), text_chars=313_000 * 394,
                         text_long_chars=1350)
EVERY_MODEL = frozenset(m.repo for m in LADDER)


def planned(machine: str, seconds: float, data=JIGSAW_SIZED, spec=JIGSAW, pretrained=EVERY_MODEL):
    hardware = profile(machine)
    return text_member(PlanContext(spec, hardware, seconds, data, None, spec.folds, hardware.cpus, True,
                                   pretrained))


@pytest.mark.parametrize("machine", ["a10-24gb", "h100-80gb"])
@pytest.mark.parametrize("seconds", [1800, 7200])
def test_a_gpu_plan_fills_the_window_and_the_cards_memory(machine, seconds):
    member = planned(machine, seconds)
    settings = member.settings
    assert not member.left_out and member.slot == "gpu"
    assert settings.model in EVERY_MODEL and settings.precision == "bf16"
    assert settings.max_length % 32 == 0 and 1350 / 4 <= settings.max_length <= 512  # the 95th percentile whole
    waves = -(-member.folds // (member.per_gpu * len(profile(machine).gpus)))
    assert member.folds >= 2 and settings.epochs >= MIN_EPOCHS
    assert waves * member.fold_seconds >= 0.8 * seconds, (waves, member.fold_seconds)
    assert waves * member.fold_seconds <= 1.01 * seconds
    assert 0.7 <= settings.gpu_memory_fraction <= 0.9, settings.gpu_memory_fraction
    assert settings.batch_size * settings.accumulation >= 16
    # its start-up (process, weights onto the card, batch probe) is its own, apart from the epochs: each wave pays it
    assert 0 < member.startup_seconds < member.min_fold_seconds - settings.epoch_seconds


def test_a_larger_card_or_a_longer_window_never_takes_a_smaller_model():
    rank = {m.repo: i for i, m in enumerate(LADDER)}  # 0 is the largest
    a10_short, a10_long = (planned("a10-24gb", s).settings.model for s in (1800, 7200))
    h100_short, h100_long = (planned("h100-80gb", s).settings.model for s in (1800, 7200))
    assert rank[a10_long] <= rank[a10_short] and rank[h100_short] <= rank[a10_short]
    assert rank[h100_long] == 0  # deberta-v3-large: two hours of an H100 are not spent in seconds


def test_a_first_epoch_three_times_slower_than_estimated_replans_the_window_left():
    member = planned("h100-80gb", 1800)
    hardware = profile("h100-80gb")
    context = PlanContext(JIGSAW, hardware, 1500, JIGSAW_SIZED, None, member.folds, hardware.cpus, True, EVERY_MODEL)
    again = get_engine("finetune").replan(context, member, 3 * member.step_seconds)
    rank = {m.repo: i for i, m in enumerate(LADDER)}
    assert again.settings.slowdown == pytest.approx(3.0, rel=0.01)
    assert rank[again.settings.model] > rank[member.settings.model] or again.settings.epochs < member.settings.epochs
    assert again.reasons[0].startswith("re-planned after a real epoch")


def test_without_the_larger_models_the_plan_says_how_to_get_them():
    member = planned("h100-80gb", 7200, pretrained=frozenset({SMALLEST.repo}))
    assert member.settings.model == SMALLEST.repo
    text = " ".join(member.reasons)
    assert "runner weights pull microsoft/deberta-v3-large" in text and "short of the window" in text


def spooky_sized(rows: int) -> DataShape:
    return DataShape(rows, rows // 2, 0, 3, 1, frozenset({"text"}), text_chars=150 * rows * 3 // 2,
                     text_long_chars=300)


def test_on_a_cpu_a_window_that_cannot_hold_two_epochs_leaves_the_member_out_with_the_reason():
    plan = make_plan(SPOOKY, profile("cpu"), 60, spooky_sized(20_000), pretrained=frozenset({SMALLEST.repo}))
    assert "finetune" not in [m.name for m in plan.members]
    reason = next(r for r in plan.reasons if r.startswith("not finetune"))
    assert reason.startswith("not finetune: all-MiniLM-L6-v2: 2 folds x") and f"at least {MIN_EPOCHS}" in reason
    assert "do not fit 30 s (50% of the 60 s window" in reason  # on a CPU it may take half the lane
    assert "tfidf" in [m.name for m in plan.members]  # the rest of the portfolio goes on


def test_on_a_cpu_a_window_that_holds_it_fine_tunes_the_smallest_model_after_tfidf():
    plan = make_plan(SPOOKY, profile("cpu"), 1800, spooky_sized(1000), pretrained=EVERY_MODEL)
    member = next(m for m in plan.members if m.name == "finetune")
    assert member.settings.model == SMALLEST.repo and member.slot == "cpu" and member.settings.device == "cpu"
    names = [m.name for m in plan.members]
    assert names.index("tfidf") < names.index("finetune")  # the cheap strong member lands first


def test_length_buckets_cover_every_row_once_with_little_padding():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 500, size=3000)
    batches = bucketed(lengths, 16, rng)
    rows = np.concatenate(batches)
    assert sorted(rows.tolist()) == list(range(3000))
    padded_tokens = sum(len(b) * lengths[b].max() for b in batches)
    assert padded_tokens < 1.15 * lengths.sum()  # unbucketed batches of 16 pad to ~1.9x here
    ids = [np.arange(n) for n in (3, 5)]
    tokens, mask = padded(ids, np.array([0, 1]), pad=0)
    assert tokens.shape == (2, 8) and mask.sum() == 8 and mask[0, 3:].sum() == 0  # widths in steps of 8


def test_layer_decay_gives_the_head_the_peak_rate_and_the_embeddings_the_least():
    pytest.importorskip("transformers")
    from runner.engines.finetune.training import Classifier, Schedule, layer_groups

    model = Classifier(model_folder(SMALLEST.repo), 3)
    groups = layer_groups(model, 1e-4, 0.9)
    head = next(g for g in groups if any(p is model.head.weight for p in g["params"]))
    embeddings = model.encoder.embeddings.word_embeddings.weight
    lowest = next(g for g in groups if any(p is embeddings for p in g["params"]))
    assert head["lr"] == pytest.approx(1e-4) and lowest["lr"] == pytest.approx(1e-4 * 0.9 ** 7)
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    assert all(g["weight_decay"] == 0 for g in groups if any(p.ndim == 1 for p in g["params"]))
    schedule = Schedule(warmup=10, total=100)
    assert schedule(0) == pytest.approx(0.1) and schedule(9) == pytest.approx(1.0)
    assert schedule(55) < schedule(20) and schedule(100) == pytest.approx(0.01)


def test_a_checkpoint_stored_in_bf16_is_fine_tuned_on_fp32_weights(tmp_path):
    """Hub checkpoints are often stored in bf16; loaded as stored, AdamW would step on bf16 weights."""
    transformers = pytest.importorskip("transformers")
    import torch

    from runner.engines.finetune.training import Classifier

    config = transformers.BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32)
    transformers.BertModel(config).to(torch.bfloat16).save_pretrained(tmp_path)
    model = Classifier(tmp_path, 2)
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_a_text_model_pulled_into_an_hf_cache_is_found_there(tmp_path, monkeypatch):
    from runner.common import weights

    snapshot = tmp_path / "models--microsoft--deberta-v3-small" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "pytorch_model.bin").write_bytes(b"0")
    (tmp_path / "models--microsoft--deberta-v3-small" / "refs").mkdir()
    (tmp_path / "models--microsoft--deberta-v3-small" / "refs" / "main").write_text("abc")
    monkeypatch.setenv(weights.CACHE_ENV, str(tmp_path))
    assert model_folder("microsoft/deberta-v3-small") == snapshot
    assert model_folder("microsoft/deberta-v3-base") is None
    assert get_engine("finetune").pretrained() >= {"microsoft/deberta-v3-small", SMALLEST.repo}
    assert "microsoft/deberta-v3-large" in get_engine("finetune").weights()


def test_pulling_a_text_model_without_a_hub_says_so(tmp_path, monkeypatch):
    from runner.common import weights
    from runner.common.errors import RunnerError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RunnerError, match="microsoft/deberta-v3-base.*cannot be reached"):
        weights.pull("microsoft/deberta-v3-base", tmp_path)


def sentiment_dataset():
    """Short reviews whose class is in their words: 96 training rows, 24 test rows, two classes."""
    from runner.data.dataset import Dataset

    good = ["a wonderful, delightful film", "I loved every minute of it", "brilliant acting and a great story",
            "truly excellent and moving", "a joy to watch, superb", "fantastic, I would see it again"]
    bad = ["a dull, boring mess", "I hated every minute of it", "terrible acting and an awful story",
           "truly dreadful and tedious", "a waste of time, horrible", "painful, I walked out early"]
    rng = np.random.default_rng(0)
    texts, labels = [], []
    for k in range(120):
        label = k % 2
        texts.append(f"{rng.choice(good if label else bad)} ({k})")
        labels.append(label)
    return Dataset(SPOOKY, ["text"], [0, 1], np.array(labels[:96]), {"text": (texts[:96], texts[96:])})


@pytest.mark.slow
def test_a_real_fine_tune_of_the_bundled_model_loads_offline_and_beats_the_prior(tmp_path, monkeypatch):
    from runner.engines.finetune.settings import TextSettings
    from runner.units.worker import as_predictions, fold_data
    from runner.units.tasks import assign_folds

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # no hub: the weights come from the installed package
    dataset = sentiment_dataset()
    engine = get_engine("finetune")
    settings = TextSettings(model=SMALLEST.repo, max_length=64, batch_size=8, lr=1e-4, epochs=3, max_epochs=3,
                            threads=CORES)
    prepared = engine.prepare(settings, dataset, tmp_path, threads=CORES)
    train_ids, test_ids = prepared.views["text"]
    assert len(train_ids) == 96 and train_ids[0][0] == 101  # [CLS] from MiniLM's own vocabulary
    data = fold_data(prepared, "text", assign_folds(prepared.y, True, 4, 0), 0)
    started = time.monotonic()
    result = engine.train_fold(settings, data, tmp_path, deadline=time.monotonic() + 300)
    ended = time.monotonic()
    loss = metrics.score("log_loss", data.y_val, as_predictions(result.val_pred, data.classes))
    assert loss < 0.5 * np.log(2), loss  # the prior's log loss: 0.69
    assert result.test_pred.shape == (24, 2) and result.epochs >= 1
    assert (tmp_path / "epochs.jsonl").read_text().count("rows_per_second") == result.epochs
    # it said it was ready (weights loaded, batch confirmed) before its first epoch, not when its data was read
    assert engine.says_ready
    ready = json.loads((tmp_path / READY_FILE).read_text())
    epochs = [json.loads(line) for line in (tmp_path / "epochs.jsonl").read_text().splitlines()]
    assert started < ready["at"] <= ended - sum(e["epoch_seconds"] for e in epochs)


def test_on_a_gpu_the_encoders_embeddings_take_the_card_before_the_fine_tune_holds_it():
    plan = make_plan(JIGSAW, profile("h100-80gb"), 5760, JIGSAW_SIZED, pretrained=EVERY_MODEL)
    names = [m.name for m in plan.members]
    assert names.index("encoder") < names.index("finetune")  # seconds on the card, then the window is the fine-tune's
    encoder = plan.member("encoder")
    assert encoder.prepare_slot == "gpu" and encoder.slot == "cpu"  # embeddings on the card, the heads on cores
    assert plan.member("finetune").slot == "gpu"
