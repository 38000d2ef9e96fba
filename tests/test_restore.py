"""The U-Net member for image-to-image tasks: the page view it reads, the tiled pass over a whole page, a real fold
on the denoising replica, and its plans on a CPU and on GPUs (driven through hardware profiles)."""
import contextlib
import json
import time

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import CORES
from pace import paced
from runner.common import metrics
from runner.data.loading import load_dataset
from runner.demo import write_demo
from runner.planning.registry import get_engine
from runner.engines.base import READY_FILE
from runner.engines.unet.network import TILE, UNet, restore_page
from runner.engines.unet.planning import CPU_SHARE, MIN_EPOCHS, RestoreSettings, restore_member
from runner.units.worker import fold_data
from runner.units.tasks import assign_folds
from runner.planning.planner import make_plan
from runner.planning.portfolio import DataShape, PlanContext
from runner.machine.profiles import profile
from runner.competition.catalog import load_spec

DENOISING = "denoising-dirty-documents"
SPEC = load_spec(DENOISING)
# the real competition's size: 144 training pages of 540 x 420 or 540 x 258, 72 test pages
REAL = DataShape(2_000_000, 72 * 540 * 340, 30, inputs=frozenset({"table", "page"}), image_side=340,
                 train_pixels=144 * 540 * 340)


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    root = write_demo(DENOISING, tmp_path_factory.mktemp("pages"), seed=2) / "prepared" / "public"
    return load_dataset(SPEC, root, tmp_path_factory.mktemp("work"))


def test_the_page_view_names_each_table_rows_pixel(replica):
    (train, test), (table, test_table) = replica.views["page"], replica.views["table"]
    assert len(train) == len(table) == len(replica.y) and len(test) == len(test_table)
    assert replica.source_pixels == len(train) and replica.image_side in (40, 48)  # every pixel kept at this size
    for k in (0, len(train) // 3, len(train) - 1):
        row = train.iloc[k]
        noisy = np.asarray(Image.open(row["noisy"]).convert("L")) / 255
        clean = np.asarray(Image.open(row["clean"]).convert("L")) / 255
        assert table["w22"][k] == pytest.approx(noisy[row["row"], row["col"]], abs=1e-6)  # the window's centre
        assert replica.y[k, 0] == pytest.approx(clean[row["row"], row["col"]], abs=1e-6)
    for k in (0, len(test) - 1):
        row = test.iloc[k]
        noisy = np.asarray(Image.open(row["noisy"]).convert("L")) / 255
        assert test_table["w22"][k] == pytest.approx(noisy[row["row"], row["col"]], abs=1e-6)


def test_a_page_restored_in_tiles_is_the_page_restored_whole():
    torch.manual_seed(0)
    model = UNet(4).eval()
    page = np.random.default_rng(0).random((TILE + 70, 2 * TILE + 30)).astype(np.float32)  # 6 tiles, ragged edges
    tiled = restore_page(model, page, torch.device("cpu"), contextlib.nullcontext())
    with torch.inference_mode():
        padded = torch.nn.functional.pad(torch.from_numpy(page)[None, None], (0, 2, 0, 2), mode="reflect")
        whole = model(padded)[0, 0, :page.shape[0], :page.shape[1]].clamp(0, 1).numpy()
    assert tiled.shape == page.shape
    assert np.abs(tiled - whole).max() < 1e-4  # no seams: each tile saw its whole receptive field


@pytest.mark.slow  # a real fold of 8 s
def test_a_fold_learns_to_clean_pages_it_never_saw(replica, tmp_path):
    folds = assign_folds(replica.y, False, 4, 0, groups=replica.groups)
    data = fold_data(replica, "page", folds, 0)
    settings = RestoreSettings(width=8, patch=40, batch_size=8, threads=CORES, epochs=30)
    started = time.monotonic()
    # 8 s stretched by the machine's pace (tests/pace.py): at pace 2.3, on the core the waiting worker shares, 8 s
    # held one epoch
    result = get_engine("unet").train_fold(settings, data, tmp_path, time.monotonic() + paced(8))
    ended = time.monotonic()
    # ready (pages in place, batch confirmed, net built) before its first epoch: its stall clock starts there
    ready = json.loads((tmp_path / READY_FILE).read_text())
    epochs = [json.loads(line) for line in (tmp_path / "epochs.jsonl").read_text().splitlines()]
    assert started < ready["at"] <= ended - sum(e["epoch_seconds"] for e in epochs)
    val_pages = set(data.x_val["noisy"].astype(str))
    assert not val_pages & set(data.x_train["noisy"].astype(str))  # a page is in one fold
    assert result.val_pred.shape == (len(data.x_val), 1) and result.test_pred.shape == (len(data.x_test), 1)
    assert result.epochs >= 2 and (tmp_path / "epochs.jsonl").is_file()
    assert "score_name" not in epochs[0]  # its epochs are scored on the competition's metric (rmse), named so
    noisy = replica.views["table"][0]["w22"].to_numpy()[folds == 0][:, None]
    copied = metrics.score("rmse", data.y_val, noisy)  # the rule the per-pixel members also start from
    learned = metrics.score("rmse", data.y_val, result.val_pred)
    assert learned < 0.5 * copied, (learned, copied)
    assert 0 <= result.test_pred.min() and result.test_pred.max() <= 1


def test_on_a_gpu_it_leads_with_bf16_folds_sharing_the_card_and_fills_the_window():
    for card, budget in (("h100-80gb", 2 * 3600), ("a10-24gb", 1800)):
        plan = make_plan(SPEC, profile(card), budget * 0.8, REAL)
        member = next(m for m in plan.members if m.engine == "unet")
        s = member.settings
        assert member.slot == "gpu" and s.device == "cuda" and s.precision == "bf16" and s.width == 32
        assert s.epochs >= MIN_EPOCHS and 2 <= member.per_gpu <= 4
        assert s.fold_memory_bytes * member.per_gpu <= 0.8 * profile(card).gpus[0].memory_bytes
        waves = -(-member.folds // member.per_gpu)
        assert waves * member.fold_seconds <= budget * 0.8 + 1e-6
        assert s.patch == 128 and 16 <= s.batch_size <= 256
        assert any("probes its batch" in r for r in member.reasons)
        assert 0 < member.startup_seconds < member.min_fold_seconds - member.step_seconds  # each wave pays it


def test_on_a_cpu_it_takes_half_the_lane_or_is_left_out_with_the_reason():
    cpu = profile("cpu")
    small = DataShape(90_000, 22_000, 30, inputs=frozenset({"table", "page"}), image_side=44, train_pixels=90_000)
    context = PlanContext(SPEC, cpu, 60.0, small, None, 5, cpu.cpus)
    member = restore_member(context)
    assert not member.left_out and member.slot == "cpu" and member.threads == cpu.cpus
    assert member.settings.patch == 44 and member.settings.epochs >= MIN_EPOCHS  # the pages' own side
    assert member.folds * member.fold_seconds <= CPU_SHARE * 60.0 + 1e-6
    real = restore_member(PlanContext(SPEC, cpu, 60.0, REAL, None, 5, cpu.cpus))
    assert real.left_out.startswith("2 folds x 3 epochs") and "boosters" in real.left_out
    slower = restore_member(context, slowdown=4.0)  # re-planned after a real epoch four times slower
    assert slower.step_seconds == pytest.approx(4 * member.step_seconds, rel=0.01)
    assert slower.settings.slowdown == 4.0 and slower.folds <= member.folds


def test_only_an_image_to_image_task_gets_the_net():
    shapes = {"table": DataShape(1000, 100, 10), "page": REAL}
    assert [n for n, d in shapes.items() if get_engine("unet").applies(SPEC, d.inputs)] == ["page"]


def test_the_memory_estimate_counts_the_nets_own_weights():
    from runner.engines.unet.shape import parameters

    for width in (8, 16, 32):
        counted = sum(p.numel() for p in UNet(width).parameters())
        assert abs(parameters(width) - counted) < 0.02 * counted
