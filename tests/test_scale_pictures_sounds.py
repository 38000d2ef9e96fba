"""The plant, ranzcr, leaf, denoising, whale and birds replicas at a scale: counts that follow the factor, one layout
at every scale, samples the grader accepts, the real competitions' counts, pixel sizes and clip lengths (asked of
each module's `sizes`, and drawn at real size only one picture or a few clips at a time, in memory), and bad scales
refused. (That chunks of pictures come out the same however many processes draw them is the shared `render`'s own
test, in test_scale_images.py.)"""
import io
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile
from PIL import Image

from runner.common.csvfiles import find_sample
from runner.demo import write_demo, replica
from runner.demo._layout import REAL, Real
from runner.common.errors import RunnerError
from runner.competition.grade import grade
from runner.competition.catalog import load_spec

birds = replica("mlsp-2013-birds")
denoising = replica("denoising-dirty-documents")
leaf = replica("leaf-classification")
plant = replica("plant-pathology-2020-fgvc7")
ranzcr = replica("ranzcr-clip-catheter-line-classification")
whale = replica("the-icml-2013-whale-challenge-right-whale-redux")

MODULES = {"plant-pathology-2020-fgvc7": plant, "ranzcr-clip-catheter-line-classification": ranzcr,
           "leaf-classification": leaf, "denoising-dirty-documents": denoising,
           "the-icml-2013-whale-challenge-right-whale-redux": whale, "mlsp-2013-birds": birds}
PICTURES = (".jpg", ".png", ".bmp")
SOUNDS = (".aif", ".wav")


def items(public: Path) -> dict[str, list[str]]:
    """Every picture and clip of a public folder, loose or in a zip, by the folder (or zip) holding it."""
    found: dict[str, list[str]] = {}
    for path in sorted(public.rglob("*")):
        if path.suffix in PICTURES + SOUNDS:
            found.setdefault(str(path.parent.relative_to(public)), []).append(path.name)
        elif path.suffix == ".zip":
            with zipfile.ZipFile(path) as archive:
                found[path.name] = [n for n in archive.namelist() if not n.endswith("/")]
    return found


def layout(root: Path) -> dict[str, list[str]]:
    """What does not change with the counts: every other file, each table's columns, and the folders (or zips)
    of pictures and clips with their file types and the folder inside a zip."""
    shape: dict[str, list[str]] = {}
    for path in sorted((root / "prepared").rglob("*")):
        relative = str(path.relative_to(root / "prepared"))
        if path.suffix == ".csv":
            shape[relative] = pd.read_csv(path, nrows=1).columns.tolist()
        elif path.is_file() and path.suffix not in PICTURES + SOUNDS:
            shape[relative] = []
    for folder, names in items(root / "prepared" / "public").items():
        shape[folder] = sorted({f"{Path(n).parent}/*{Path(n).suffix}" for n in names})
    return shape


def clip(public: Path, archive: str) -> tuple[int, int]:
    """(frames, sample rate) of the first clip in a zip."""
    with zipfile.ZipFile(public / archive) as zipped:
        first = next(n for n in zipped.namelist() if n.endswith(".aif"))
        info = soundfile.info(io.BytesIO(zipped.read(first)))
    return info.frames, info.samplerate


def counted(competition: str, public: Path) -> tuple[int, int]:
    """(train, test) pictures or clips on disk, told apart as each competition tells them apart."""
    if competition == "plant-pathology-2020-fgvc7":  # train and test photos share images/
        names = items(public)["images"]
        return sum(n.startswith("Train_") for n in names), sum(n.startswith("Test_") for n in names)
    found = items(public)
    return len(found["train2.zip"]), len(found["test2.zip"])


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[tuple[str, float], Path]:
    """Plant (photos) and whale (clips) at a quarter, their own size and twice it."""
    out = tmp_path_factory.mktemp("scaled")
    return {(c, s): write_demo(c, out / str(s), seed=1, scale=s)
            for c in ("plant-pathology-2020-fgvc7", "the-icml-2013-whale-challenge-right-whale-redux")
            for s in (0.25, 1.0, 2)}


@pytest.mark.parametrize("scale", [0.25, 2])
@pytest.mark.parametrize("competition", ["plant-pathology-2020-fgvc7",
                                         "the-icml-2013-whale-challenge-right-whale-redux"])
def test_counts_follow_the_factor_the_layout_stays_and_the_sample_grades_valid(written, competition, scale):
    root, own = written[competition, scale], written[competition, 1.0]
    public, size, base = root / "prepared" / "public", MODULES[competition].sizes(scale), MODULES[competition].sizes()
    assert (size.train, size.test) == pytest.approx((scale * base.train, scale * base.test), abs=1)
    assert counted(competition, public) == (size.train, size.test)
    spec = load_spec(competition)
    sample = find_sample(public, spec.sample_submission)
    assert len(pd.read_csv(sample)) == size.test
    if competition == "plant-pathology-2020-fgvc7":
        assert len(pd.read_csv(public / "train.csv")) == size.train
        assert {Image.open(p).size for p in (public / "images").iterdir()} == {(64, 48)}  # the factor's own pixels
    else:
        assert clip(public, "train2.zip") == clip(public, "test2.zip") == (2000, 2000)  # one second at 2 kHz
    graded = grade(sample, spec, root / "prepared" / "private")
    assert graded.valid_submission and graded.score == 0.5, graded.error  # a constant's ROC AUC
    assert layout(root) == layout(own)


def test_the_replicas_own_size_is_the_default_and_factors_multiply_it():
    own = {"plant-pathology-2020-fgvc7": (220, 60), "ranzcr-clip-catheter-line-classification": (220, 60),
           "leaf-classification": (396, 99), "denoising-dirty-documents": (32, 8),
           "the-icml-2013-whale-challenge-right-whale-redux": (300, 120), "mlsp-2013-birds": (128, 32)}
    for competition, module in MODULES.items():
        size = module.sizes()
        assert module.sizes(1.0) == size and module.sizes("1") == size
        assert (size.train, size.test) == own[competition]
        assert (module.sizes(4).train, module.sizes(4).test) == pytest.approx((4 * size.train, 4 * size.test), abs=1)
        # a factor changes the counts only: pictures keep the replica's pixels, clips its length
        assert module.sizes(4) == type(size)(**{**vars(size), "train": module.sizes(4).train,
                                                "test": module.sizes(4).test})
    # the smallest factors keep what the metric needs: a member of every plant class, a whale among the test clips
    assert (plant.sizes(0.01).test, whale.sizes(0.01).test, leaf.sizes(0.01).train) == (10, 20, 2 * 99)


def test_real_gives_the_real_counts_and_pixel_sizes_and_clip_lengths():
    assert vars(plant.sizes(REAL)) == dict(train=1_638, test=183, smallest=(2048, 1365), largest=(2048, 1365),
                                           cameras=())
    assert vars(ranzcr.sizes(REAL)) == dict(train=27_074, test=3_009, smallest=(2532, 3056),
                                            largest=(2532, 3056), cameras=())
    size = leaf.sizes(REAL)
    assert (size.train, size.test, size.smallest, size.largest) == (891, 99, (300, 300), (1100, 1100))
    pages = denoising.sizes(REAL)
    assert (pages.train, pages.test) == (115, 29)
    assert {shape for shape, _ in pages.cameras} == {(540, 258), (540, 420)}
    assert {tuple(s) for s in pages.shapes(200, np.random.default_rng(0))} == {(540, 258), (540, 420)}
    clips = whale.sizes(REAL)
    assert clips.train + clips.test == 47_841 and clips.samples / clips.rate == 2.0 and clips.rate == 2000
    recordings = birds.sizes(REAL)
    assert (recordings.train, recordings.test, recordings.rate, recordings.samples) == (258, 64, 16000, 160_000)
    assert len(birds._filenames(recordings.train + recordings.test, np.random.default_rng(0))) == 322


# train and test at real/8: the real counts over 8, rounded, or the replica's floor (leaf's two leaves a species);
# birds divides its 322 recordings and splits the 40 as it splits the real ones
SHARE_8 = {"plant-pathology-2020-fgvc7": (205, 23), "ranzcr-clip-catheter-line-classification": (3384, 376),
           "leaf-classification": (198, 12), "denoising-dirty-documents": (14, 4),
           "the-icml-2013-whale-challenge-right-whale-redux": (2990, 2990), "mlsp-2013-birds": (32, 8)}


@pytest.mark.parametrize("competition", sorted(SHARE_8))
def test_a_share_of_real_divides_the_real_counts_and_keeps_the_real_sizes_and_lengths(competition):
    module = MODULES[competition]
    share, real = module.sizes("real/8"), module.sizes(REAL)
    assert (share.train, share.test) == SHARE_8[competition]
    assert vars(share) == {**vars(real), "train": share.train, "test": share.test}  # pixels, pages, clips, rates
    assert module.sizes(Real(1 / 8)) == share and module.sizes("real/1") == real
    tiny, floor = module.sizes(Real(1e-9)), module.sizes(1e-9)  # the replica's floors hold at a tiny share
    assert (tiny.train, tiny.test) == (floor.train, floor.test)


def test_real_size_pictures_and_clips_are_drawn_at_their_real_sizes():
    """One picture, page or a few clips at a real size, in memory: not a whole real-size replica."""
    rng = np.random.default_rng(0)
    assert plant.photo("rust", rng, plant.sizes(REAL).smallest).size == (2048, 1365)
    lines = [("ETT - Normal", ranzcr._course("ETT - Normal", 1, rng, ranzcr.sizes(REAL).smallest))]
    image = ranzcr.xray(lines, rng, ranzcr.sizes(REAL).smallest)
    (x, y), top = lines[0][1][-1], lines[0][1][0]
    assert image.size == (2532, 3056) and top[1] == 0 and 0.25 * 3056 < y < 0.35 * 3056  # above the carina
    assert np.asarray(image)[y, x] == 255  # the tip, in the full-size pixels the annotation gives
    assert leaf._silhouette(3, 700, 900, rng).size == (700, 900)
    clean = denoising.clean_page(420, denoising._alphabet(rng), rng, 540)
    assert clean.shape == (420, 540) and denoising.noisy_page(clean, rng).shape == (420, 540)
    signals = whale.clips(np.array([True, False, False]), whale.sizes(REAL).samples, rng)
    assert signals.shape == (3, 4000) and np.isfinite(signals).all()
    signal, calls = birds._recording(np.eye(birds.N_SPECIES, dtype=bool)[4], birds.sizes(REAL).samples, rng)
    assert signal.shape == (160_000,) and 10 <= len(calls) <= 20  # 1-2 calls of the species a second


@pytest.mark.parametrize("bad", [0, -1, "0", "huge", "-2"])
def test_a_bad_scale_is_refused(bad, tmp_path):
    for competition, module in MODULES.items():
        with pytest.raises(RunnerError, match="neither"):
            module.sizes(bad)
        with pytest.raises(RunnerError):
            write_demo(competition, tmp_path, scale=bad)
        assert not (tmp_path / competition / "prepared").exists()  # refused before anything is written
