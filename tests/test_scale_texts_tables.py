"""The text and table replicas at any size: a factor of their own counts or the real competition's ('real').
Rows and tokens follow the factor, the files and columns are the same at every size, the sample submission
grades valid against the private answers, 'real' asks for the real counts (checked without writing gigabytes),
counts given outright (spaceship's, taxi's) win over the scale, and a bad scale is refused."""
import json
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from runner.common.csvfiles import find_sample
from runner.demo import write_demo, replica
from runner.demo._layout import REAL, Real, is_real, parse_scale
from runner.common.errors import RunnerError
from runner.competition.grade import grade
from runner.competition.catalog import load_spec

insults = replica("detecting-insults-in-social-commentary")
jigsaw = replica("jigsaw-toxic-comment-classification-challenge")
nomad = replica("nomad2018-predict-transparent-conductors")
pizza = replica("random-acts-of-pizza")
spaceship = replica("spaceship-titanic")
spooky = replica("spooky-author-identification")
taxi = replica("new-york-city-taxi-fare-prediction")
text_norm_en = replica("text-normalization-challenge-english-language")
text_norm_ru = replica("text-normalization-challenge-russian-language")
tps_dec = replica("tabular-playground-series-dec-2021")
tps_may = replica("tabular-playground-series-may-2022")

# competition -> (its module, the public files whose rows or tokens are the train and test counts)
REPLICAS = {
    "detecting-insults-in-social-commentary": (insults, "train.csv", "test.csv"),
    "jigsaw-toxic-comment-classification-challenge": (jigsaw, "train.csv", "test.csv"),
    "random-acts-of-pizza": (pizza, "train.json", "test.json"),
    "spooky-author-identification": (spooky, "train.csv", "test.csv"),
    "text-normalization-challenge-english-language": (text_norm_en, "en_train.csv.zip", "en_test_2.csv.zip"),
    "text-normalization-challenge-russian-language": (text_norm_ru, "ru_train.csv.zip", "ru_test_2.csv.zip"),
    "nomad2018-predict-transparent-conductors": (nomad, "train.csv", "test.csv"),
    "spaceship-titanic": (spaceship, "train.csv", "test.csv"),
    "new-york-city-taxi-fare-prediction": (taxi, "labels.csv", "test.csv"),
    "tabular-playground-series-dec-2021": (tps_dec, "train.csv", "test.csv"),
    "tabular-playground-series-may-2022": (tps_may, "train.csv", "test.csv"),
}
# the real competitions' train and test rows (tokens for text normalization), as MLE-bench prepares them
REAL_COUNTS = {
    insults: (3947, 2647), jigsaw: (159_571, 153_164), pizza: (2878, 1162), spooky: (17_621, 1958),
    text_norm_en: (8_924_976, 993_465), text_norm_ru: (9_515_325, 1_059_191), nomad: (2160, 240),
    spaceship: (7823, 870), taxi: (55_413_942, 9914), tps_dec: (3_600_000, 400_000), tps_may: (800_000, 100_000),
}
FACTORS = (0.05, 2)  # below every replica's floor of rows, and twice its own size: both written in about a second


def rows(path: Path) -> int:
    if path.suffix == ".json":
        return len(json.loads(path.read_text()))
    return len(pd.read_csv(path, keep_default_na=False))


def layout(root: Path) -> dict[str, list[str]]:
    """Each file of public and private (one per-id folder stands for all) and the columns of each table."""
    found = {}
    for path in sorted(root.glob("prepared/*/*")):
        name = str(path.relative_to(root))
        if path.is_dir():
            found[name] = sorted({str(p.relative_to(path).parts[1:]) for p in path.rglob("*") if p.is_file()})
        elif path.suffix == ".csv" or path.name.endswith(".csv.zip"):
            found[name] = pd.read_csv(path, nrows=1).columns.tolist()
        elif path.suffix == ".zip":
            found[name] = zipfile.ZipFile(path).namelist()
        else:
            found[name] = []
    return found


def sample_grade(competition: str, root: Path, tmp_path: Path):
    spec = load_spec(competition)
    submission = tmp_path / f"{competition}.csv"
    pd.read_csv(find_sample(root / "prepared" / "public", spec.sample_submission)).to_csv(submission, index=False)
    return grade(submission, spec, root / "prepared" / "private")


@pytest.mark.parametrize("module", list(REAL_COUNTS), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_counts_follow_the_factor_and_real_asks_for_the_real_competitions(module):
    own = module.counts()
    assert module.counts(1.0) == own and min(own) > 0
    assert module.counts(2) == tuple(2 * n for n in own)
    assert module.counts("3") == tuple(3 * n for n in own)  # as the command line gives it
    assert module.counts(0.5) == tuple(round(n / 2) for n in own)
    assert module.counts(REAL) == REAL_COUNTS[module]
    assert all(real > replica for real, replica in zip(module.counts(REAL), own))
    assert module.counts(1e-9) == module.counts(1e-6) and min(module.counts(1e-9)) > 0  # a floor, never empty


def test_a_share_of_real_is_parsed_once_and_kept():
    share = parse_scale("real/8")
    assert share == 0.125 and is_real(share) and str(share) == "real/8"
    assert parse_scale(share) is share and isinstance(parse_scale(Real(0.5)), Real)  # modules parse again
    assert parse_scale(REAL) == 1.0 and is_real(REAL) and str(parse_scale("real/1")) == REAL
    assert parse_scale("real/2.5") == 0.4 and not is_real(parse_scale("0.125")) and not is_real(1.0)


@pytest.mark.parametrize("bad", ["real/0", "real/-2", "real/x", "real/nan", "real/inf", "real8", "real/"])
def test_a_bad_share_of_real_is_refused(bad):
    with pytest.raises(RunnerError, match="real/N"):
        parse_scale(bad)


@pytest.mark.parametrize("module", list(REAL_COUNTS), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_a_share_of_real_divides_the_real_counts_down_to_the_floor(module):
    floors = module.counts(1e-9)
    assert module.counts("real/8") == tuple(max(f, round(n / 8)) for n, f in zip(REAL_COUNTS[module], floors))
    assert module.counts(Real(1.0)) == module.counts("real/1") == REAL_COUNTS[module]
    assert module.counts(Real(1e-9)) == floors


def test_a_share_of_real_is_written_with_its_counts_and_real_is_never_the_default(tmp_path, monkeypatch):
    public = write_demo("spaceship", tmp_path, seed=1, scale="real/8") / "prepared" / "public"
    assert (rows(public / "train.csv"), rows(public / "test.csv")) == (978, 109)  # 7823 / 8 and 870 / 8
    given = {}
    monkeypatch.setattr(spaceship, "generate", lambda root, rng, **sized: given.update(sized))
    write_demo("spaceship", tmp_path, scale="real")  # real equals the factor 1.0 as a float, yet is passed on
    assert is_real(given["scale"]) and given["scale"] == 1.0


@pytest.mark.parametrize("competition", list(REPLICAS))
def test_every_size_has_the_counts_asked_the_same_files_and_a_sample_that_grades(competition, tmp_path):
    module, train, test = REPLICAS[competition]
    layouts = []
    for factor in FACTORS:
        root = write_demo(competition, tmp_path / str(factor), seed=5, scale=factor)
        public = root / "prepared" / "public"
        assert (rows(public / train), rows(public / test)) == module.counts(factor), factor
        layouts.append(layout(root))
        graded = sample_grade(competition, root, tmp_path)
        assert graded.valid_submission and graded.score is not None, (factor, graded.error)
    assert layouts[0] == layouts[1]


def test_nomad_writes_one_geometry_per_row_at_every_size(tmp_path):
    public = write_demo("nomad2018", tmp_path, seed=1, scale=2) / "prepared" / "public"
    for split, count in zip(("train", "test"), nomad.counts(2)):
        assert sorted(int(p.name) for p in (public / split).iterdir()) == list(range(1, count + 1))


@pytest.mark.parametrize("scale", [0, -1, "0", "-2", "huge", ""])
def test_a_bad_scale_is_refused(scale, tmp_path):
    for module in REAL_COUNTS:
        with pytest.raises(RunnerError, match="scale"):
            module.counts(scale)
    with pytest.raises(RunnerError, match="scale"):
        write_demo("spooky", tmp_path, scale=scale)
    assert not (tmp_path / "spooky-author-identification" / "prepared" / "public" / "train.csv").exists()


def test_counts_given_outright_win_over_the_scale(tmp_path):
    assert spaceship.counts(REAL, train_rows=100) == (100, 870)
    assert spaceship.counts(2, test_rows=30) == (2 * spaceship.TRAIN_ROWS, 30)
    assert taxi.counts(REAL, train_rows=500) == (500, 9914)
    public = write_demo("spaceship", tmp_path, seed=1, scale=0.5, train_rows=120) / "prepared" / "public"
    assert (rows(public / "train.csv"), rows(public / "test.csv")) == (120, spaceship.counts(0.5)[1])


def test_a_table_written_by_chunks_reads_as_one(tmp_path, monkeypatch):
    """Past CHUNK_ROWS a table is made and written a chunk at a time (taxi's chunks in worker processes, each from
    its own seed): one header, every row whole, and ids and keys unique across the chunks and the test."""
    monkeypatch.setattr(taxi, "CHUNK_ROWS", 700)
    monkeypatch.setattr(tps_dec, "CHUNK_ROWS", 700)
    public = write_demo("nyc-taxi", tmp_path, seed=2, train_rows=2000) / "prepared" / "public"
    train, test = pd.read_csv(public / "labels.csv"), pd.read_csv(public / "test.csv")
    assert len(train) == 2000 and train.notna().all().all() and list(train.columns) == list(taxi.COLUMNS)
    assert pd.concat([train["key"], test["key"]]).is_unique
    for start in range(0, len(train), taxi.CHUNK_ROWS):  # every chunk is made as training rows, dirt and all
        assert (train["pickup_longitude"].iloc[start:start + taxi.CHUNK_ROWS] == 0).any()
    public = write_demo("tabular-playground-series-dec-2021", tmp_path, seed=2, scale=2) / "prepared" / "public"
    train, test = pd.read_csv(public / "train.csv"), pd.read_csv(public / "test.csv")
    assert len(train) == tps_dec.counts(2)[0] and train.notna().all().all()
    assert sorted(pd.concat([train["Id"], test["Id"]])) == list(range(sum(tps_dec.counts(2))))
    assert set(train["Cover_Type"]) == set(tps_dec.CLASSES)  # the rare classes reach train across chunks
