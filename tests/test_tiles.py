"""Items too large for a batch (hubmap's slides, vesuvius' fragments): tiles that cover every pixel once when
stitched, crops drawn on objects, the canvas measured on the masks and the masks written back at each item's own
size, the fragments' reader and picture, and the plans that tile (on a CPU for a dozen items, on an H100 for a
real slide's canvas) and those that do not (tgs, contrails)."""
import dataclasses

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from runner.common import rle
from runner.competition.catalog import load_spec
from runner.data import canvas
from runner.data.fragments import band_slices, fragments
from runner.data.loading import load_dataset
from runner.engines.masks import tiles
from runner.engines.masks.planning import (LEAST_TILE, MIN_EPOCHS, MOST_EPOCHS, MOST_TILE, TILED_EPOCHS,
                                          masks_member, tile_side)
from runner.machine.profiles import profile
from runner.planning.portfolio import DataShape, PlanContext
from test_shape_priors import replicas  # noqa: F401 - the fixture: each replica once for the module

HUBMAP = load_spec("hubmap-kidney-segmentation")
VESUVIUS = load_spec("vesuvius-challenge-ink-detection")


@pytest.mark.parametrize("height,width,tile", [(224, 224, 64), (101, 203, 64), (96, 96, 64), (4301, 3999, 512),
                                               (64, 64, 64), (50, 700, 96), (513, 512, 512)])
def test_tiles_cover_every_pixel_once_and_each_owns_only_pixels_inside_it(height, width, tile):
    places = tiles.grid(height, width, tile)
    counts = np.zeros((height, width), dtype=int)
    for rows, columns in places:
        for span, length in ((rows, height), (columns, width)):
            assert 0 <= span.start <= span.own_start < span.own_end <= min(span.start + tile, length)
            assert span.start + min(tile, length) <= length  # a whole tile inside the image
        counts[rows.own_start:rows.own_end, columns.own_start:columns.own_end] += 1
    assert (counts == 1).all()
    starts = sorted({r.start for r, _ in places})
    overlap = int(tile * tiles.OVERLAP_SHARE)
    assert all(b - a <= tile - overlap for a, b in zip(starts, starts[1:]))  # neighbours overlap by that at least


def test_stitching_the_tiles_of_an_image_gives_the_image_back():
    rng = np.random.default_rng(0)
    image = rng.random((150, 230, 2)).astype(np.float32)
    places = tiles.grid(150, 230, 64)
    cut = tiles.cut_tiles(image, places, 64)
    assert cut.shape == (len(places), 64, 64, 2)
    stitched = tiles.stitch(np.moveaxis(cut, -1, 1), places, 150, 230)  # as the network's (n, classes, h, w)
    assert np.array_equal(np.moveaxis(stitched, 0, -1), image)


def test_crops_on_objects_hold_an_object_pixel_and_every_crop_lies_inside_its_image():
    rng = np.random.default_rng(1)
    masks = np.zeros((3, 1, 200, 180), dtype=np.float32)
    masks[0, 0, 150:160, 20:30] = 1  # one small object in the first image, none in the others
    masks[2, 0, 5:9, 170:175] = 1
    objects = tiles.object_pixels(masks)
    images, tops, lefts = tiles.crop_places(rng, objects, 200, 180, 400, 64, on_objects=1.0)
    assert ((tops >= 0) & (tops <= 200 - 64) & (lefts >= 0) & (lefts <= 180 - 64)).all()
    holding = [masks[i, 0, y:y + 64, x:x + 64].any() for i, y, x in zip(images, tops, lefts)]
    assert all(h for h, i in zip(holding, images) if i != 1) and set(images) == {0, 1, 2}
    _, tops, _ = tiles.crop_places(rng, objects, 200, 180, 400, 64, on_objects=0.0)
    assert len(set(tops)) > 50  # drawn anywhere


def test_the_canvas_shrinks_items_until_their_objects_median_run_is_the_object_run():
    replica = canvas.canvas_side([(200, 180), (240, 230), (160, 170)], ["1 10 50 12", "7 9"])
    assert replica == (224, 1.0)  # runs of 10: never enlarged; the median longer side 200 rounded up to 32
    chords = " ".join(f"{k * 1000 + 1} 256" for k in range(50))  # a real slide's glomeruli: chords of 256 pixels
    side, factor = canvas.canvas_side([(30_000, 28_000), (25_000, 40_000)], [chords])
    assert factor == pytest.approx(256 / canvas.OBJECT_RUN) and side == int(np.ceil(35_000 / 8 / 32) * 32)
    assert canvas.canvas_side([(100_000, 100_000)], [""])[0] == canvas.MOST_SIDE


def test_a_mask_shrunk_to_the_canvas_and_written_back_at_its_own_size_keeps_its_pixels():
    height, width, side = 150, 210, 96
    rows, cols = np.mgrid[:height, :width]
    mask = ((rows - 60) ** 2 + (cols - 90) ** 2 < 30 ** 2) | ((rows > 120) & (cols > 170))
    text = rle.encode(mask, "column")
    small = canvas.shrunk_mask(text, (height, width), side, "column", "here")
    assert small.shape == (side, side) and 0.1 < small.mean() < 0.3
    written = canvas.written_at_own_size(small.reshape(1, -1).astype(np.float32), (side, side), [(height, width)],
                                         0.5, 0, "column", "")
    back = rle.decode(written[0], height, width, "column")
    assert (back & mask).sum() / (back | mask).sum() > 0.9
    empty = np.zeros((2, side * side), np.float32)
    assert canvas.written_at_own_size(empty, (side, side), [(height, width), None], 0.5, 0, "row", None) == \
        ["1 1", "1 1"]  # vesuvius: an empty cell is invalid, one pixel stands for the empty mask
    assert canvas.written_at_own_size(empty, (side, side), [(height, width), None], 0.5, 0, "row", "") == ["", ""]
    large = canvas.written_at_own_size(np.full((1, side * side), 0.9, np.float32), (side, side), [(3000, 2000)],
                                       0.5, 0, "column", "")  # resized as 8-bit levels
    assert large == [rle.whole(3000, 2000)]


def test_hubmap_is_read_on_a_measured_canvas_and_its_test_slides_sizes_are_found(replicas):
    public, _ = replicas("hubmap-kidney-segmentation")
    dataset = load_dataset(HUBMAP, public, public.parent / "work")
    side = dataset.spec.mask.shape[0]
    assert dataset.spec.mask.shape == (side, side) and side % canvas.CANVAS_MULTIPLE == 0 and 160 <= side <= 256
    assert dataset.y.shape == (12, side * side) and 0.005 < dataset.y.mean() < 0.2
    sample = pd.read_csv(public / "sample_submission.csv")
    canvas.with_item_sizes(HUBMAP, sample, canvas.test_paths(HUBMAP, sample, public))
    info = pd.read_csv(public / "HuBMAP-20-dataset_information.csv").set_index("image_file")
    assert sample.attrs[canvas.ITEM_SIZES] == [(info.loc[f"{i}.tiff", "height_pixels"],
                                                info.loc[f"{i}.tiff", "width_pixels"]) for i in sample["id"]]


def test_fragments_are_read_from_their_folders_and_drawn_as_bands_of_their_middle_slices(replicas):
    public, _ = replicas("vesuvius-challenge-ink-detection")
    sample = pd.read_csv(public / "sample_submission.csv")
    train, paths, tests, _ = fragments(VESUVIUS, public, public.parent / "work", sample)
    assert list(train["Id"]) == ["1", "2"] and [p.name for p in paths] == ["1", "2"]
    assert tests == [public / "test" / "a"]
    assert [(b.start, b.stop) for b in band_slices(65)] == [(16, 27), (27, 38), (38, 49)]
    dataset = load_dataset(VESUVIUS, public, public.parent / "work2")
    side = dataset.spec.mask.shape[0]
    train_pictures, test_pictures = dataset.views["image"]
    with Image.open(test_pictures[0]) as picture:
        assert picture.size == (side, side) and picture.mode == "RGB"
    ink = np.asarray(Image.open(public / "train" / "1" / "inklabels.png")) > 0
    assert dataset.y.shape == (2, side * side) and dataset.y[0].mean() == pytest.approx(ink.mean(), abs=0.03)
    broken = dataclasses.replace(VESUVIUS, mask=dataclasses.replace(VESUVIUS.mask, item_labels=None))
    with pytest.raises(Exception, match="item_labels"):
        fragments(broken, public, public.parent / "work", sample)


def _context(spec, hardware, rows: int, side: int, window: float = 7200.0) -> PlanContext:
    spec = dataclasses.replace(spec, mask=dataclasses.replace(spec.mask, shape=(side, side)))
    data = DataShape(rows, max(1, rows // 4), inputs=frozenset({"image"}), image_side=side)
    return PlanContext(spec, hardware, window, data, None, min(5, rows), hardware.cpus)


def test_plans_tile_a_dozen_slides_on_a_cpu_and_a_real_slides_canvas_on_an_h100_but_not_tgs_or_contrails():
    cpu, h100 = profile("cpu"), profile("h100-80gb")
    assert tile_side((101, 101), 3200, "cpu") == 0 and tile_side((256, 256), 600, "cpu") == 0
    replica = masks_member(_context(HUBMAP, cpu, 12, 224, 100.0))
    assert LEAST_TILE <= replica.settings.tile < 224 and any("crops" in r for r in replica.reasons)
    real = masks_member(_context(HUBMAP, h100, 12, 4384))
    s = real.settings
    assert s.tile == MOST_TILE["cuda"] and s.device == "cuda" and not real.left_out
    share = real.per_gpu * s.fold_memory_bytes / h100.gpus[0].memory_bytes
    assert 0.7 <= share <= 0.9, share  # the batch fills the card
    assert any(f"{s.tile}x{s.tile} crops" in r for r in real.reasons)
    covering = int(12 * 0.8) * (-(-4384 // s.tile)) ** 2  # crops that cover a fold's slides once
    assert s.crops > covering and MIN_EPOCHS <= s.epochs <= TILED_EPOCHS + 1  # more crops an epoch: window filled
    waves = -(-real.folds // real.per_gpu)
    assert waves * real.fold_seconds > 0.8 * 7200 * 0.85
    tgs = masks_member(_context(load_spec("tgs-salt-identification-challenge"), h100, 4000, 101))
    assert tgs.settings.tile == 0
    # its small slices reach the epochs' cap long before the window's end: the plan says so, and who has the rest
    assert tgs.settings.epochs == MOST_EPOCHS and any("capped at" in r and "repeats" in r for r in tgs.reasons)


def test_a_run_holds_the_canvas_its_data_was_read_on_so_replans_and_the_writer_use_it(replicas, tmp_path):
    """The spec a run plans, re-plans and writes with is the one its data was read on (the canvas measured)."""
    from runner.common.budget import Budget
    from runner.supervisor import Supervisor

    public, _ = replicas("hubmap-kidney-segmentation")
    supervisor = Supervisor(HUBMAP, public, tmp_path, Budget.start(60))
    supervisor.load_data()
    side = supervisor.dataset.spec.mask.shape
    assert side is not None and supervisor.spec.mask.shape == supervisor.outputs.spec.mask.shape == side
    written = pd.read_csv(tmp_path / "submission.csv", keep_default_na=False)
    info = pd.read_csv(public / "HuBMAP-20-dataset_information.csv").set_index("image_file")
    for item, text in zip(written["id"], written["predicted"]):  # the prior, at each slide's own size
        height, width = info.loc[f"{item}.tiff", ["height_pixels", "width_pixels"]]
        assert rle.decode(text, int(height), int(width), "column").any()


def test_nothing_is_written_outside_a_fragment_s_papyrus_and_the_prior_gains_by_it(replicas, tmp_path):
    """vesuvius' ink is labelled only inside each fragment's mask.png: a written mask keeps to it, so a constant
    mask (the prior) marks exactly the papyrus, and a prediction already inside it is written unchanged."""
    from runner.results.submission import Predictions, build_submission

    public, _ = replicas("vesuvius-challenge-ink-detection")
    sample = pd.read_csv(public / "sample_submission.csv")
    canvas.with_item_sizes(VESUVIUS, sample, canvas.test_paths(VESUVIUS, sample, public))
    region = np.asarray(Image.open(public / "test" / "a" / "mask.png").convert("L")) > 0
    assert sample.attrs[canvas.ITEM_REGIONS] == [public / "test" / "a" / "mask.png"] and not region.all()
    side = 64
    spec = dataclasses.replace(VESUVIUS, mask=dataclasses.replace(VESUVIUS.mask, shape=(side, side)))
    everywhere = Predictions(np.full((1, side * side), 0.9, np.float32), None, "test", thresholds=(0.5, 0))
    written = build_submission(sample, spec, ["Predicted"], everywhere)["Predicted"].iloc[0]
    assert np.array_equal(rle.decode(written, *region.shape, "row"), region)
    del sample.attrs[canvas.ITEM_REGIONS]  # without the region the whole fragment is marked
    whole = build_submission(sample, spec, ["Predicted"], everywhere)["Predicted"].iloc[0]
    assert rle.decode(whole, *region.shape, "row").all()
