"""The image replicas at a scale: counts that follow the factor, one layout at every scale, samples the grader
accepts, the real competitions' counts and pixel sizes (asked of each module's `sizes`, drawn at real size only
one picture at a time), the same pictures however many processes draw them, and bad scales refused."""
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from runner.common.csvfiles import find_sample
from runner.demo import _pictures, write_demo, replica
from runner.demo._layout import REAL, Real
from runner.common.errors import RunnerError
from runner.competition.grade import grade
from runner.competition.catalog import load_spec

aptos = replica("aptos2019-blindness-detection")
cactus = replica("aerial-cactus-identification")
dog_breed = replica("dog-breed-identification")
dogs_cats = replica("dogs-vs-cats-redux-kernels-edition")
histopathology = replica("histopathologic-cancer-detection")
melanoma = replica("siim-isic-melanoma-classification")

MODULES = {"aerial-cactus-identification": cactus, "aptos2019-blindness-detection": aptos,
           "dogs-vs-cats-redux-kernels-edition": dogs_cats, "histopathologic-cancer-detection": histopathology,
           "siim-isic-melanoma-classification": melanoma, "dog-breed-identification": dog_breed}
# the real competitions' train and test counts (MLE-bench's splits) and their images' smallest and largest sizes
REAL_SIZES = {
    "aerial-cactus-identification": (14_175, 3_325, (32, 32), (32, 32)),
    "aptos2019-blindness-detection": (3_295, 367, (819, 614), (4288, 2848)),
    "dogs-vs-cats-redux-kernels-edition": (22_500, 2_500, (250, 200), (500, 500)),
    "histopathologic-cancer-detection": (174_464, 45_561, (96, 96), (96, 96)),
    "siim-isic-melanoma-classification": (28_984, 4_142, (640, 480), (6000, 4000)),
    "dog-breed-identification": (9_199, 1_023, (180, 160), (519, 459)),
}
IMAGES = (".jpg", ".png", ".tif")
# the cheap replicas written at two factors, and what their constant sample scores: a ROC AUC of 0.5, or ln 2
SCALED = {"aerial-cactus-identification": 0.5, "histopathologic-cancer-detection": 0.5,
          "siim-isic-melanoma-classification": 0.5, "dogs-vs-cats-redux-kernels-edition": 0.69315}


def images(public: Path) -> dict[str, list[tuple[str, tuple[int, int]]]]:
    """Every image of a public folder, loose or in a zip, by the folder (or zip) holding it: (name, size)."""
    found: dict[str, list] = {}
    for path in sorted(public.rglob("*")):
        if path.suffix in IMAGES:
            found.setdefault(str(path.parent.relative_to(public)), []).append((path.name, Image.open(path).size))
        elif path.suffix == ".zip":
            with zipfile.ZipFile(path) as archive:
                found[path.name] = [(name, Image.open(archive.open(name)).size) for name in archive.namelist()]
    return found


def layout(public: Path) -> dict[str, list[str]]:
    """What does not change with the counts: each table's columns, the other files' names (tfrecord shard names
    carry their counts: only their prefix), the image folders and their file types."""
    shape: dict[str, list[str]] = {}
    for path in sorted(public.rglob("*")):
        relative = str(path.relative_to(public))
        if path.suffix == ".csv":
            shape[relative] = pd.read_csv(path, nrows=1).columns.tolist()
        elif path.suffix == ".tfrec":
            shape[relative.split("-")[0]] = []
        elif path.is_file() and path.suffix not in IMAGES + (".dcm",):
            shape[relative] = []
    shape["image folders"] = sorted(f"{folder}: {sorted({Path(n).suffix for n, _ in files})}"
                                    for folder, files in images(public).items())
    return shape


def sample_grade(competition: str, root: Path, tmp_path: Path):
    spec = load_spec(competition)
    return grade(find_sample(root / "prepared" / "public", spec.sample_submission), spec, root / "prepared" / "private")


@pytest.mark.parametrize("competition", SCALED)
def test_counts_follow_the_factor_the_layout_stays_and_the_sample_grades_valid(competition, tmp_path):
    written = {}
    for scale in (0.25, 2):
        root = write_demo(competition, tmp_path / str(scale), seed=1, scale=scale)
        public, size = root / "prepared" / "public", MODULES[competition].sizes(scale)
        found = images(public)
        assert {folder: len(names) for folder, names in found.items()} == {  # dogs-vs-cats: folders and zips
            folder: size.test if "test" in folder else size.train for folder in found}, (competition, scale)
        assert len(found) >= 2
        assert all(low <= side <= high for names in found.values() for _, shape in names
                   for low, side, high in zip(size.smallest, shape, size.largest))
        sample = pd.read_csv(find_sample(public, load_spec(competition).sample_submission))
        assert len(sample) == size.test
        graded = sample_grade(competition, root, tmp_path)
        assert graded.valid_submission and graded.score == SCALED[competition], graded.error
        written[scale] = (layout(public), size)
    (small_layout, small), (large_layout, large) = written[0.25], written[2]
    assert small_layout == large_layout
    assert (large.train / small.train, large.test / small.test) == pytest.approx((8, 8), rel=0.3)


def test_the_replicas_own_size_is_the_default_and_factors_multiply_it():
    for module in MODULES.values():
        own = module.sizes()
        assert module.sizes(1.0) == own and module.sizes("1") == own
        assert (module.sizes(4).train, module.sizes(0.5).test) == (4 * own.train, own.test / 2)
    assert (cactus.sizes().train, histopathology.sizes().train, dog_breed.sizes().train) == (200, 180, 960)


@pytest.mark.parametrize("competition", sorted(REAL_SIZES))
def test_real_gives_the_real_counts_and_pixel_sizes(competition):
    size = MODULES[competition].sizes(REAL)
    assert (size.train, size.test, size.smallest, size.largest) == REAL_SIZES[competition]
    shapes = size.shapes(2000, np.random.default_rng(0))
    assert (shapes >= size.smallest).all() and (shapes <= size.largest).all()
    if size.cameras:  # a few camera frames, each image one of them
        assert {tuple(s) for s in shapes} == {shape for shape, _ in size.cameras}


@pytest.mark.parametrize("competition", sorted(REAL_SIZES))
def test_a_share_of_real_divides_the_real_counts_and_keeps_the_real_pixel_sizes(competition):
    module, (train, test, _, _) = MODULES[competition], REAL_SIZES[competition]
    share, real = module.sizes(Real(1 / 8)), module.sizes(REAL)
    expected = (round(train / 8), round(test / 8))
    if module is melanoma:  # each of the 16 real shards over 8, rounded: 14 train shards and 2 test of 259
        expected = (14 * 259, 2 * 259)
    assert (share.train, share.test) == expected
    assert vars(share) == {**vars(real), "train": share.train, "test": share.test}  # pixel sizes and cameras
    assert module.sizes("real/1") == real and module.sizes(Real(1.0)) == real
    tiny, floor = module.sizes(Real(1e-9)), module.sizes(1e-9)  # the replica's floors hold at a tiny share
    assert (tiny.train, tiny.test) == ((28, 4) if module is melanoma else (floor.train, floor.test))


def test_melanoma_at_a_share_keeps_the_real_shards_and_photos_a_patient():
    assert melanoma.shards("real/8") == (259,) * 16 and melanoma.shards(Real(1e-9)) == (2,) * 16
    assert (melanoma.patients(REAL, 33_126), melanoma.patients("real/8", 4144)) == (2056, 257)
    assert melanoma.patients(1.0, 270) == 90  # the replica's own: a third as many as its photos


def test_real_size_pictures_are_drawn_at_their_real_pixel_sizes(tmp_path):
    """One picture each at a real size, not a whole real-size replica."""
    rng = np.random.default_rng(0)
    assert aptos.photo(4, (2416, 1736), rng).size == (2416, 1736)
    assert melanoma.photo(True, (1872, 1053), rng).size == (1872, 1053)
    assert dogs_cats.photo(True, (500, 375), rng).size == (500, 375)
    histopathology.patches([(tmp_path / "a.tif", 96, 1), (tmp_path / "b.tif", 96, 0)], seed=0)
    assert [Image.open(tmp_path / n).size for n in ("a.tif", "b.tif")] == [(96, 96)] * 2
    ((name, data),) = cactus.thumbnails([("x.jpg", 1)], seed=0)
    (tmp_path / name).write_bytes(data)
    assert Image.open(tmp_path / name).size == (32, 32)


def test_melanoma_keeps_its_shards_and_takes_the_real_share_of_melanomas_at_real_size():
    assert sum(melanoma.shards(REAL)) == 33_126 and len(melanoma.shards(REAL)) == 16
    assert {melanoma.shards(REAL)[s] for s in melanoma.TEST_SHARDS} == {2071}  # test00-2071, test01-2071
    assert melanoma.shards(0.25) == (8,) * 9
    assert round(melanoma.REAL_MALIGNANT * 33_126) == 584


def test_dog_breed_scales_its_per_breed_counts_and_real_takes_none():
    assert (dog_breed.sizes(0.5, 4, 2).train, dog_breed.sizes(0.5, 4, 2).test) == (240, 120)
    assert dog_breed.sizes(0.1).train == 120  # every breed keeps a photo
    assert dog_breed.sizes(REAL).train == 9_199
    for real in (REAL, "real/8"):
        with pytest.raises(RunnerError, match="per-breed"):
            dog_breed.sizes(real, train_per_breed=4)


@pytest.mark.parametrize("bad", [0, -1, "0", "huge", "-2"])
def test_a_bad_scale_is_refused(bad, tmp_path):
    for module in MODULES.values():
        with pytest.raises(RunnerError, match="neither"):
            module.sizes(bad)
    with pytest.raises(RunnerError):
        write_demo("aerial-cactus-identification", tmp_path, scale=bad)
    assert not (tmp_path / "aerial-cactus-identification" / "prepared" / "public" / "train.zip").exists()


def test_the_pictures_are_the_same_however_many_processes_draw_them(monkeypatch):
    items = [(f"{i}.jpg", i % 2) for i in range(40)]
    alone = _pictures.render(cactus.thumbnails, items, np.random.default_rng(5), 8, pixels=0)
    monkeypatch.setattr(_pictures, "PARALLEL_PIXELS", 0)  # the workers' path, however few pixels
    spread = _pictures.render(cactus.thumbnails, items, np.random.default_rng(5), 8, pixels=1)
    assert spread == alone and [name for name, _ in alone] == [name for name, _ in items]
