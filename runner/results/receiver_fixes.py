"""Positions of a track's rows from the receiver's own fixes, where no model learns a correction: the GNSS logs a
phone writes, as the Google Smartphone Decimeter Challenge publishes them (a folder per track below the test
folder, `<drive>/<phone>/`, whose `device_gnss.csv` holds a row per satellite signal per epoch and, on each, the
receiver's weighted-least-squares fix of that epoch in Earth-centred Earth-fixed metres). Each epoch's fix is
converted to WGS84 latitude and longitude, and each row of the sample takes its track's position interpolated at
its time. The fixes are not smoothed: a car moves some ten metres between fixes, and a running median or mean of
positions along the way puts a jump on its neighbours or a neighbour's place on it (over five epochs, the replica's
score rose from 4.1 metres to 5.4 with a median, 6.0 with a mean). A track's id is its folder's path below the
test folder, its parts joined by '-' (`2020-06-04-US-MTV-1-GooglePixel4`).

Only these fixes are read: the reference logs a track folder may also hold (NMEA, a SPAN log) are the answers'
source, never a prior's.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.common.errors import InputError
from runner.common.untrusted import inside, walk
from runner.competition.spec import CompetitionSpec

FIXES_FILE = "device_gnss.csv"  # the logger's export of one track
FIX_TIME = "utcTimeMillis"  # an epoch's time, milliseconds since 1970 (UTC)
FIX_ECEF = ("WlsPositionXEcefMeters", "WlsPositionYEcefMeters", "WlsPositionZEcefMeters")
ROW_TIME = "UnixTimeMillis"  # the sample's time of each row, in the same milliseconds
# WGS84's ellipsoid
SEMI_MAJOR, SEMI_MINOR = 6_378_137.0, 6_356_752.314245
ECCENTRICITY2 = 1 - (SEMI_MINOR / SEMI_MAJOR) ** 2
SECOND_ECCENTRICITY2 = (SEMI_MAJOR / SEMI_MINOR) ** 2 - 1


def geodetic(x, y, z) -> tuple[np.ndarray, np.ndarray]:
    """(latitude, longitude) in degrees of ECEF points in metres (Bowring's closed form: millimetres at the
    surface)."""
    x, y, z = (np.asarray(v, dtype=np.float64) for v in (x, y, z))
    r = np.hypot(x, y)
    t = np.arctan2(z * SEMI_MAJOR, r * SEMI_MINOR)
    latitude = np.arctan2(z + SECOND_ECCENTRICITY2 * SEMI_MINOR * np.sin(t) ** 3,
                          r - ECCENTRICITY2 * SEMI_MAJOR * np.cos(t) ** 3)
    return np.degrees(latitude), np.degrees(np.arctan2(y, x))


def track_fixes(path: Path) -> pd.DataFrame:
    """One track's fixes: time, latitude and longitude, one row per epoch that has a fix, in time order."""
    try:
        rows = pd.read_csv(path, usecols=[FIX_TIME, *FIX_ECEF])
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise InputError(f"{path}: cannot read the receiver's fixes ({FIX_TIME}, {', '.join(FIX_ECEF)}): {exc}") \
            from exc
    epochs = rows.apply(pd.to_numeric, errors="coerce").dropna().groupby(FIX_TIME, sort=True).first()
    latitude, longitude = geodetic(*(epochs[c].to_numpy() for c in FIX_ECEF))
    return pd.DataFrame({"time": epochs.index.to_numpy(dtype=np.float64), "latitude": latitude,
                         "longitude": longitude})


def _tracks(root: Path) -> dict[str, Path]:
    """Each track's fixes file below `root`, by the track's id."""
    return {"-".join(path.parent.relative_to(root).parts): path
            for path in sorted(walk(root)) if path.name == FIXES_FILE and path.parent != root}


def track_positions(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame,
                    columns: list[str]) -> tuple[pd.DataFrame, str]:
    """(the sample's value columns, what they are): the spec's two targets, latitude then longitude, of each row
    from its track's fixes (the spec's `score_groups` names the track column) interpolated at the row's time, held
    at a track's first and last fix; a track without fixes takes the mean of all the others'."""
    root = data_dir / (spec.test_image_dir or "test")
    if not root.is_dir():
        raise InputError(f"{root}: no folder of test tracks")
    root = inside(data_dir, root, "folder")
    track_column = spec.score_groups or spec.id_column
    for name in (track_column, ROW_TIME):
        if name not in sample.columns:
            raise InputError(f"{spec.sample_submission}: no column {name!r}")
    files = _tracks(root)
    tracks = sample[track_column].astype(str).to_numpy()
    times = pd.to_numeric(sample[ROW_TIME], errors="coerce").to_numpy(dtype=np.float64)
    latitude, longitude = np.full(len(sample), np.nan), np.full(len(sample), np.nan)
    unfixed = []
    for track in pd.unique(tracks):
        rows = tracks == track
        fixes = track_fixes(files[track]) if track in files else None
        if fixes is None or fixes.empty:
            unfixed.append(track)
            continue
        latitude[rows] = np.interp(times[rows], fixes["time"], fixes["latitude"])
        longitude[rows] = np.interp(times[rows], fixes["time"], fixes["longitude"])
    if np.isnan(latitude).all():
        raise InputError(f"{root}: no track of the sample has a {FIXES_FILE} with fixes")
    latitude[np.isnan(latitude)], longitude[np.isnan(longitude)] = np.nanmean(latitude), np.nanmean(longitude)
    note = f"each track's own receiver fixes ({', '.join(FIX_ECEF)} of {FIXES_FILE}) as latitude and longitude, " \
           f"interpolated at each row's {ROW_TIME}"
    if unfixed:
        note += f"; {len(unfixed)} track(s) without fixes (e.g. {unfixed[0]!r}) at the others' mean position"
    return pd.DataFrame({columns[0]: latitude, columns[1]: longitude}), note
