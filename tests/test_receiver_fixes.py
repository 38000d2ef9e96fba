"""The receiver-fixes prior: ECEF fixes to WGS84, each sample row at its track's position interpolated at its
time; a track without fixes at the others' mean; and the replica's prior far better than its sample."""
import numpy as np
import pandas as pd
import pytest

from runner.common.budget import Budget
from runner.common.errors import InputError
from runner.competition.catalog import load_spec
from runner.competition.grade import grade
from runner.demo import write_demo
from runner.machine.hardware import Hardware
from runner.results.baselines import make_baseline
from runner.results.receiver_fixes import FIX_ECEF, FIXES_FILE, geodetic
from runner.supervisor import run_competition

SEMI_MAJOR, E2 = 6_378_137.0, 6.69437999014e-3


def ecef(lat: float, lon: float, height: float = 0.0) -> np.ndarray:
    lat, lon = np.radians(lat), np.radians(lon)
    n = SEMI_MAJOR / np.sqrt(1 - E2 * np.sin(lat) ** 2)
    return np.array([(n + height) * np.cos(lat) * np.cos(lon), (n + height) * np.cos(lat) * np.sin(lon),
                     (n * (1 - E2) + height) * np.sin(lat)])


def test_ecef_fixes_become_latitude_and_longitude():
    for lat, lon, height in ((37.4, -122.08, -30.0), (-33.9, 151.2, 50.0), (0.0, 0.0, 0.0)):
        got = geodetic(*ecef(lat, lon, height))
        assert got[0] == pytest.approx(lat, abs=1e-8) and got[1] == pytest.approx(lon, abs=1e-8)


def _fixes(folder, times, lats, lon=-122.0):
    folder.mkdir(parents=True)
    points = np.array([ecef(lat, lon) for lat in lats])
    rows = pd.DataFrame({"MessageType": "Raw", "utcTimeMillis": np.repeat(times, 2),
                         **{c: np.repeat(points[:, k], 2) for k, c in enumerate(FIX_ECEF)}})
    rows.loc[0, FIX_ECEF[0]] = np.nan  # a signal row without a fix: its epoch's other row has it
    rows.to_csv(folder / FIXES_FILE, index=False)


def test_each_row_takes_its_tracks_fix_interpolated_at_its_time(tmp_path):
    spec = load_spec("smartphone-decimeter-2022")
    _fixes(tmp_path / "test" / "2020-01-01-US-MTV-1" / "Pixel4", [1000, 2000, 3000], [37.0, 37.001, 37.002])
    (tmp_path / "test" / "2020-01-01-US-MTV-1" / "Pixel5").mkdir()  # a phone without its fixes file
    sample = pd.DataFrame({"tripId": ["2020-01-01-US-MTV-1-Pixel4"] * 3 + ["2020-01-01-US-MTV-1-Pixel5"],
                           "UnixTimeMillis": [1500, 3000, 9000, 2000], "LatitudeDegrees": 1.0,
                           "LongitudeDegrees": 2.0})
    made = make_baseline(spec, tmp_path, sample, ["LatitudeDegrees", "LongitudeDegrees"], tmp_path)
    lat = made.values["LatitudeDegrees"].to_numpy()
    assert lat[:3] == pytest.approx([37.0005, 37.002, 37.002], abs=1e-9)  # held at the last fix past the end
    assert lat[3] == pytest.approx(np.mean(lat[:3])) and "without fixes" in made.note
    assert made.values["LongitudeDegrees"].to_numpy() == pytest.approx([-122.0] * 4)
    with pytest.raises(InputError, match="no track"):
        make_baseline(spec, tmp_path, sample.assign(tripId="elsewhere"), ["LatitudeDegrees", "LongitudeDegrees"],
                      tmp_path)


def test_the_replicas_prior_is_metres_where_the_sample_is_a_continent_off(tmp_path):
    root = write_demo("smartphone-decimeter-2022", tmp_path / "data")
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    one_core = Hardware(gpus=(), cpus=1, ram_bytes=4 * 2**30, shm_bytes=2**30, disk_free_bytes=10 * 2**30)
    report = run_competition("smartphone-decimeter-2022", public, Budget.start(60), tmp_path / "run",
                             hardware=one_core, engines=[])
    assert report.status == "baseline" and "receiver fixes" in report.submission_source
    spec = load_spec("smartphone-decimeter-2022")
    prior = grade(tmp_path / "run" / "submission.csv", spec, private)
    given = grade(public / "sample_submission.csv", spec, private)
    assert prior.valid_submission and prior.score < 20 and given.score > 1e6
