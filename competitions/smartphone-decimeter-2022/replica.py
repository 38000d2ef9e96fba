"""A synthetic smartphone-decimeter-2022: drives around Mountain View, each logged by one or two phones, laid out as
MLE-bench splits the real drives by date (a tenth of the dates, at least one, are the test): a folder per trace,
`train/<drive>/<phone>/` with ground_truth.csv, device_gnss.csv, device_imu.csv and supplemental/ (the logger's
text log, a RINEX file and the SPAN reference's NMEA log), the test traces the same without ground_truth.csv;
metadata/ as Kaggle gives it; the sample every ground-truth epoch of the test traces at a point in Kentucky, the
answers in private/test.csv.

Each trace drives a smooth path at 1 Hz. device_gnss.csv has a row per satellite signal per epoch, each carrying
the epoch's weighted-least-squares fix in ECEF metres: the true position plus a slowly wandering bias and noise of
a few metres, now and then a multipath jump of tens. The fixes alone, converted and interpolated at the ground
truth's epochs, score a few metres; the sample's constant point is thousands of kilometres off.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, is_real, parse_scale, scaled

DATES = 7  # the replica's own drive dates, a tenth of them (one) the test
REAL_DATES = 40  # roughly: 62 drives over the real dates, 8 drives (19 traces) of them the test
EPOCHS, REAL_EPOCHS = 120, 1_950  # seconds a trace lasts (37,087 test epochs over 19 real traces)
SATELLITES, REAL_SATELLITES = 3, 30  # signal rows an epoch (real epochs have 20 to 60)
PHONES = ("GooglePixel4", "GooglePixel4XL", "GooglePixel5", "SamsungGalaxyS20Ultra", "XiaomiMi8")
PLACES = ("US-MTV", "US-SVL", "US-SJC")
ORIGIN = (37.3950, -122.0800, -30.0)  # latitude, longitude (degrees), height (m) of the drives
SAMPLE_POINT = (37.904611315634504, -86.48107806249548)  # the sample's constant answer
FIX_NOISE, BIAS_WANDER, JUMP, JUMP_RATE = 2.0, 0.15, 25.0, 0.03  # metres; metres a second; metres; of epochs
START_MILLIS = 1_589_500_000_000  # mid-May 2020
SEMI_MAJOR, ECCENTRICITY2 = 6_378_137.0, 6.69437999014e-3  # WGS84
GROUND_TRUTH = ("MessageType", "Provider", "LatitudeDegrees", "LongitudeDegrees", "AltitudeMeters", "SpeedMps",
                "AccuracyMeters", "BearingDegrees", "UnixTimeMillis")
GNSS = ("MessageType", "utcTimeMillis", "TimeNanos", "LeapSecond", "FullBiasNanos", "BiasNanos",
        "BiasUncertaintyNanos", "DriftNanosPerSecond", "DriftUncertaintyNanosPerSecond",
        "HardwareClockDiscontinuityCount", "Svid", "TimeOffsetNanos", "State", "ReceivedSvTimeNanos",
        "ReceivedSvTimeUncertaintyNanos", "Cn0DbHz", "PseudorangeRateMetersPerSecond",
        "PseudorangeRateUncertaintyMetersPerSecond", "AccumulatedDeltaRangeState", "AccumulatedDeltaRangeMeters",
        "AccumulatedDeltaRangeUncertaintyMeters", "CarrierFrequencyHz", "MultipathIndicator", "ConstellationType",
        "CodeType", "ChipsetElapsedRealtimeNanos", "ArrivalTimeNanosSinceGpsEpoch", "RawPseudorangeMeters",
        "RawPseudorangeUncertaintyMeters", "SignalType", "ReceivedSvTimeNanosSinceGpsEpoch",
        "SvPositionXEcefMeters", "SvPositionYEcefMeters", "SvPositionZEcefMeters", "SvElevationDegrees",
        "SvAzimuthDegrees", "SvVelocityXEcefMetersPerSecond", "SvVelocityYEcefMetersPerSecond",
        "SvVelocityZEcefMetersPerSecond", "SvClockBiasMeters", "SvClockDriftMetersPerSecond", "IsrbMeters",
        "IonosphericDelayMeters", "TroposphericDelayMeters", "WlsPositionXEcefMeters", "WlsPositionYEcefMeters",
        "WlsPositionZEcefMeters")
IMU = ("MessageType", "utcTimeMillis", "MeasurementX", "MeasurementY", "MeasurementZ", "BiasX", "BiasY", "BiasZ")
CONSTELLATIONS = ((0, "UNKNOWN"), (1, "GPS"), (2, "SBAS"), (3, "GLONASS"), (4, "QZSS"), (5, "BEIDOU"),
                  (6, "GALILEO"), (7, "IRNSS"))
RAW_STATES = {"0": "STATE_UNKNOWN", "1": "STATE_CODE_LOCK", "2": "STATE_BIT_SYNC", "4": "STATE_SUBFRAME_SYNC",
              "8": "STATE_TOW_DECODED", "16": "STATE_MSEC_AMBIGUOUS", "32": "STATE_SYMBOL_SYNC"}
ADR_STATES = {"0": "ADR_STATE_UNKNOWN", "1": "ADR_STATE_VALID", "2": "ADR_STATE_RESET", "4": "ADR_STATE_CYCLE_SLIP"}


def sizes(scale: float | str = 1.0) -> tuple[int, int, int, int]:
    """(drive dates, test dates, epochs a trace, signals an epoch) at `scale` (a factor of the replica's own
    dates, or 'real', 'real/N': real traces' lengths)."""
    scale = parse_scale(scale)
    dates = scaled(DATES, REAL_DATES, scale, 2)
    epochs, satellites = (REAL_EPOCHS, REAL_SATELLITES) if is_real(scale) else (EPOCHS, SATELLITES)
    return dates, max(1, int(np.ceil(dates * 0.1))), epochs, satellites


def ecef(latitude, longitude, height) -> np.ndarray:
    """WGS84 latitude and longitude (degrees) and height (m) as ECEF metres, (n, 3)."""
    lat, lon = np.radians(latitude), np.radians(longitude)
    n = SEMI_MAJOR / np.sqrt(1 - ECCENTRICITY2 * np.sin(lat) ** 2)
    return np.column_stack([(n + height) * np.cos(lat) * np.cos(lon), (n + height) * np.cos(lat) * np.sin(lon),
                            (n * (1 - ECCENTRICITY2) + height) * np.sin(lat)])


def _path(rng: np.random.Generator, start: int, epochs: int) -> pd.DataFrame:
    """A drive's ground truth: a smooth path at 1 Hz, its speed and bearing."""
    heading = rng.uniform(0, 2 * np.pi) + np.cumsum(rng.normal(0, 0.04, epochs))
    speed = np.clip(12 + np.cumsum(rng.normal(0, 0.4, epochs)), 2, 30)
    north, east = np.cumsum(speed * np.cos(heading)), np.cumsum(speed * np.sin(heading))
    lat0, lon0 = ORIGIN[0] + rng.normal(0, 0.02), ORIGIN[1] + rng.normal(0, 0.03)
    latitude = lat0 + north / 111_320
    longitude = lon0 + east / (111_320 * np.cos(np.radians(lat0)))
    return pd.DataFrame({"MessageType": "Fix", "Provider": "GT", "LatitudeDegrees": latitude,
                         "LongitudeDegrees": longitude, "AltitudeMeters": ORIGIN[2] + rng.normal(0, 0.3, epochs),
                         "SpeedMps": speed, "AccuracyMeters": 0.1, "BearingDegrees": np.degrees(heading) % 360,
                         "UnixTimeMillis": start + 1000 * np.arange(epochs)})[list(GROUND_TRUTH)]


def _gnss(truth: pd.DataFrame, rng: np.random.Generator, satellites: int) -> pd.DataFrame:
    """A row per satellite signal per epoch, each with the epoch's WLS fix: the truth plus a wandering bias,
    noise and now and then a multipath jump."""
    epochs = len(truth)
    true = ecef(truth["LatitudeDegrees"], truth["LongitudeDegrees"], truth["AltitudeMeters"])
    bias = np.cumsum(rng.normal(0, BIAS_WANDER, (epochs, 3)), axis=0)
    jumps = (rng.random(epochs) < JUMP_RATE)[:, None] * rng.normal(0, JUMP, (epochs, 3))
    fixes = true + bias + rng.normal(0, FIX_NOISE, (epochs, 3)) + jumps
    rows = epochs * satellites
    epoch = np.repeat(np.arange(epochs), satellites)
    time = truth["UnixTimeMillis"].to_numpy()[epoch]
    columns = {name: np.zeros(rows) for name in GNSS}
    columns.update({
        "MessageType": "Raw", "utcTimeMillis": time, "TimeNanos": time * 1_000_000 - 3_000_000_000,
        "LeapSecond": np.nan, "FullBiasNanos": -1_273_000_000_000_000_000, "BiasNanos": rng.random(rows),
        "Svid": rng.integers(1, 33, rows), "State": 16431, "Cn0DbHz": rng.uniform(18, 45, rows),
        "CarrierFrequencyHz": 1_575_420_000.0, "ConstellationType": rng.choice([1, 3, 5, 6], rows),
        "CodeType": "C", "SignalType": "GPS_L1", "RawPseudorangeMeters": rng.uniform(2.0e7, 2.6e7, rows),
        "SvElevationDegrees": rng.uniform(10, 85, rows), "SvAzimuthDegrees": rng.uniform(0, 360, rows),
        "WlsPositionXEcefMeters": fixes[epoch, 0], "WlsPositionYEcefMeters": fixes[epoch, 1],
        "WlsPositionZEcefMeters": fixes[epoch, 2]})
    for axis in "XYZ":
        columns[f"SvPosition{axis}EcefMeters"] = rng.normal(0, 1.5e7, rows)
    return pd.DataFrame(columns)[list(GNSS)]


def _imu(truth: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    kinds = ("UncalAccel", "UncalGyro", "UncalMag")
    rows = [(kind, t, *rng.normal(0, 1, 3), np.nan, np.nan, np.nan)
            for t in truth["UnixTimeMillis"] for kind in kinds]
    return pd.DataFrame(rows, columns=list(IMU))


def _supplemental(folder: Path, phone: str, truth: pd.DataFrame) -> None:
    """The logger's text log, a RINEX observation file's header and the SPAN reference's NMEA log (the truth as
    GGA sentences, kept in the public folder as MLE-bench keeps it)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gnss_log.txt").write_text(f"# Version: v3.0.0.1 Platform: 11 Manufacturer: {phone}\n# Raw,...\n")
    (folder / f"{phone}.20o").write_text("     3.03           OBSERVATION DATA    M                   RINEX VERSION / "
                                         "TYPE\n                                                            END OF "
                                         "HEADER\n")
    lines = []
    for lat, lon, millis in truth[["LatitudeDegrees", "LongitudeDegrees", "UnixTimeMillis"]].itertuples(index=False):
        clock = pd.Timestamp(int(millis), unit="ms").strftime("%H%M%S.%f")[:9]
        lines.append(f"$GPGGA,{clock},{int(lat):02d}{(lat % 1) * 60:08.5f},N,{int(-lon):03d}{(-lon % 1) * 60:08.5f},"
                     "W,4,30,0.6,-30.0,M,0,M,,*00")
    (folder / "span_log.nmea").write_text("\n".join(lines) + "\n")


def _metadata(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "raw_state_bit_map.json").write_text(json.dumps(RAW_STATES))
    (folder / "accumulated_delta_range_state_bit_map.json").write_text(json.dumps(ADR_STATES))
    pd.DataFrame(CONSTELLATIONS, columns=["ConstellationType", "ConstellationName"]).to_csv(
        folder / "constellation_type_mapping.csv", index=False)


def _trace(folder: Path, phone: str, truth: pd.DataFrame, rng: np.random.Generator, with_truth: bool,
           satellites: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if with_truth:
        truth.to_csv(folder / "ground_truth.csv", index=False)
    _gnss(truth, rng, satellites).to_csv(folder / "device_gnss.csv", index=False)
    _imu(truth, rng).to_csv(folder / "device_imu.csv", index=False)
    _supplemental(folder / "supplemental", phone, truth)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train/, test/, metadata/, sample_submission.csv, description.md) and
    prepared/private/test.csv, as many drive dates as `sizes(scale)` says."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    count, test_count, epochs, satellites = sizes(scale)
    days = np.sort(rng.choice(np.arange(900), count, replace=False))
    dates = [(pd.Timestamp("2020-05-14") + pd.Timedelta(days=int(d))).strftime("%Y-%m-%d") for d in days]
    test_dates = set(rng.choice(dates, test_count, replace=False))
    answers = []
    for k, date in enumerate(dates):
        drives = [f"{date}-{rng.choice(PLACES)}-{n + 1}" for n in range(int(rng.integers(1, 3)))]
        for drive in drives:
            start = START_MILLIS + int(days[k]) * 86_400_000 + int(rng.integers(0, 36_000_000))
            truth = _path(rng, start, epochs)
            for phone in rng.choice(PHONES, int(rng.integers(1, 3)), replace=False):
                split = "test" if date in test_dates else "train"
                _trace(public / split / drive / str(phone), str(phone), truth, rng, split == "train", satellites)
                if split == "test":
                    answers.append((f"{drive}-{phone}", truth))
    answers.sort(key=lambda item: item[0])  # the test's ground truths in their paths' order
    test = pd.concat([t.assign(tripId=trip)[["tripId", "UnixTimeMillis", "LatitudeDegrees", "LongitudeDegrees"]]
                      for trip, t in answers], ignore_index=True)
    test.to_csv(private / "test.csv", index=False)
    test.assign(LatitudeDegrees=SAMPLE_POINT[0], LongitudeDegrees=SAMPLE_POINT[1]).to_csv(
        public / "sample_submission.csv", index=False)
    _metadata(public / "metadata")
    describe(public, "Google Smartphone Decimeter Challenge 2022",
             "Predict the latitude and longitude of each test trace (test/<drive>/<phone>/) at each epoch the "
             "sample submission lists, from the phone's raw GNSS log.",
             "Submissions are scored on the mean over traces of the mean of the 50th and 95th percentiles of the "
             "horizontal distance error in metres.",
             "Submit `tripId,UnixTimeMillis,LatitudeDegrees,LongitudeDegrees` for every row of the sample.")
