"""A synthetic nfl-player-contact-detection: plays' player tracking and contact labels, as MLE-bench's 90/10 split
of the real plays lays them out: train_labels.csv (a row per play, step and pair of players or player and ground:
`contact_id,game_play,datetime,step,nfl_player_id_1,nfl_player_id_2,contact`), {train,test}_player_tracking.csv
(every player at every step, 10 a second), {train,test}_baseline_helmets.csv (helmet boxes in the videos' frames),
{train,test}_video_metadata.csv, three videos a play in train/ and test/ (`<game_play>_{All29,Endzone,Sideline}.mp4`,
no track in them: nothing reads them), the sample a row per held-out label row with contact 0, the answers
private/test.csv (the held-out label rows).

Players move about the line of scrimmage; a few pairs of opponents lock together for a while (a block), and some
players go down for half a second. Two players are in contact when they are within a yard of each other, a player
and the ground while he is down (a few labels wrong either way). The contact ids name the play, the step and the
players, so each row's features are the two players' tracking at that step: their distance tells a pair's
contact, a player's speed his fall. The sample's all-zero scores an MCC of 0; a table model of the joined tracking,
about 0.8.

`sizes(scale)`: 8 players a play for 20 steps at a factor of the replica's own play counts; 22 players for 77
steps, at REAL.
"""
from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import folders

from .mp4 import write_movie

TRAIN, TEST = 24, 8  # the replica's own plays
REAL_TRAIN, REAL_TEST = 216, 24  # MLE-bench's 90/10 split of the 240 plays
PLAYERS, REAL_PLAYERS = 8, 22
STEPS, REAL_STEPS = 20, 77  # labelled steps a play (tracking runs a little before and after)
MARGIN = 5  # tracked steps before the first labelled one and after the last
STEP_SECONDS = 0.1
CONTACT_YARDS = 1.0
BLOCKS = 2  # opponent pairs locked together for a while, a play
FALL_SHARE = 0.25  # players who go down during a play
WRONG = 0.02  # labels wrong either way
POSITIONS = ("QB", "RB", "WR", "TE", "T", "G", "C", "DE", "DT", "OLB", "ILB", "CB", "FS", "SS")
VIEWS = ("All29", "Endzone", "Sideline")
FPS = 59.94
SNAP_SECONDS = 5.0  # the snap's time into each video
LEAST = 2
TRACKING = ["game_play", "game_key", "play_id", "nfl_player_id", "datetime", "step", "team", "position",
            "jersey_number", "x_position", "y_position", "speed", "distance", "direction", "orientation",
            "acceleration", "sa"]


def sizes(scale: float | str = 1.0) -> tuple[int, int, int, int]:
    """(train plays, test plays, players a play, labelled steps a play) at `scale`."""
    scale = parse_scale(scale)
    real = is_real(scale)
    return (scaled(TRAIN, REAL_TRAIN, scale, LEAST), scaled(TEST, REAL_TEST, scale, LEAST),
            REAL_PLAYERS if real else PLAYERS, REAL_STEPS if real else STEPS)


def _paths(players: int, steps: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Every player's (x, y) at every tracked step, and who is down when: (steps, players, 2), (steps, players)."""
    home = players // 2
    start = np.column_stack([np.where(np.arange(players) < home, 50.0, 52.0) + rng.normal(0, 1.5, players),
                             rng.uniform(15, 38, players)])
    velocity = rng.normal(0, 1.5, (players, 2))
    positions, down = np.zeros((steps, players, 2)), np.zeros((steps, players), dtype=bool)
    for player in np.flatnonzero(rng.random(players) < FALL_SHARE):
        first = int(rng.integers(0, steps - 4))
        down[first:first + int(rng.integers(4, 9)), player] = True
    place = start
    for t in range(steps):
        velocity = np.clip(velocity + rng.normal(0, 0.6, velocity.shape), -4, 4)
        moving = np.where(down[t][:, None], 0.05 * velocity, velocity)
        place = place + moving * STEP_SECONDS
        positions[t] = place
    for _ in range(BLOCKS):
        blocker, rusher = int(rng.integers(0, home)), int(rng.integers(home, players))
        first = int(rng.integers(0, steps - 6))
        held = slice(first, first + int(rng.integers(6, 14)))
        angle = rng.uniform(0, 2 * np.pi)
        offset = rng.uniform(0.3, 0.9) * np.array([np.cos(angle), np.sin(angle)])
        positions[held, rusher] = positions[held, blocker] + offset + rng.normal(0, 0.1, (len(range(steps)[held]), 2))
    return positions, down


def _motion(positions: np.ndarray) -> dict[str, np.ndarray]:
    """Speed, distance, direction, acceleration and its signed part along the way, step by step."""
    velocity = np.diff(positions, axis=0, prepend=positions[:1]) / STEP_SECONDS
    speed = np.linalg.norm(velocity, axis=-1)
    change = np.diff(velocity, axis=0, prepend=velocity[:1]) / STEP_SECONDS
    heading = velocity / np.maximum(speed, 1e-6)[..., None]
    return {"speed": speed, "distance": speed * STEP_SECONDS,
            "direction": np.degrees(np.arctan2(velocity[..., 0], velocity[..., 1])) % 360,
            "acceleration": np.linalg.norm(change, axis=-1), "sa": (change * heading).sum(axis=-1)}


def _stamp(when: pd.Timestamp) -> str:
    """A time as the real tables write it: ISO, milliseconds, Z."""
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _play(game: int, play: int, players: np.ndarray, steps: int, rng: np.random.Generator):
    """One play's tracking, label rows, helmet boxes and video metadata."""
    game_play = f"{game}_{play:06d}"
    count = len(players)
    positions, down = _paths(count, steps + 2 * MARGIN, rng)
    motion = _motion(positions)
    snap = pd.Timestamp("2021-09-12 17:00:00", tz="UTC") + pd.Timedelta(minutes=int(rng.integers(0, 180)))
    stamps = [_stamp(snap + pd.Timedelta(seconds=(t - MARGIN) * STEP_SECONDS)) for t in range(steps + 2 * MARGIN)]
    teams = np.where(np.arange(count) < count // 2, "home", "away")
    jerseys = rng.choice(np.arange(1, 100), count, replace=False)
    roles = rng.choice(POSITIONS, count)
    tracking = [dict(game_play=game_play, game_key=game, play_id=play, nfl_player_id=int(players[p]),
                     datetime=stamps[t], step=t - MARGIN, team=teams[p], position=roles[p],
                     jersey_number=int(jerseys[p]), x_position=round(positions[t, p, 0], 2),
                     y_position=round(positions[t, p, 1], 2), speed=round(motion["speed"][t, p], 2),
                     distance=round(motion["distance"][t, p], 2), direction=round(motion["direction"][t, p], 2),
                     orientation=round((motion["direction"][t, p] + rng.normal(0, 30)) % 360, 2),
                     acceleration=round(motion["acceleration"][t, p], 2), sa=round(motion["sa"][t, p], 2))
                for t in range(steps + 2 * MARGIN) for p in range(count)]
    order = np.argsort(players)
    labels = []
    for t in range(MARGIN, MARGIN + steps):
        for a, b in combinations(order, 2):
            near = np.linalg.norm(positions[t, a] - positions[t, b]) < CONTACT_YARDS
            labels.append((game_play, stamps[t], t - MARGIN, int(players[a]), str(players[b]), near))
        labels += [(game_play, stamps[t], t - MARGIN, int(players[p]), "G", bool(down[t, p])) for p in order]
    labels = pd.DataFrame(labels, columns=["game_play", "datetime", "step", "nfl_player_id_1", "nfl_player_id_2",
                                           "contact"])
    labels["contact"] = np.where(rng.random(len(labels)) < WRONG, ~labels["contact"], labels["contact"]).astype(int)
    labels.insert(0, "contact_id", labels["game_play"] + "_" + labels["step"].astype(str) + "_"
                  + labels["nfl_player_id_1"].astype(str) + "_" + labels["nfl_player_id_2"])
    helmets = [dict(game_play=game_play, game_key=game, play_id=play, view=view, video=f"{game_play}_{view}.mp4",
                    frame=round((SNAP_SECONDS + (t - MARGIN) * STEP_SECONDS) * FPS), nfl_player_id=int(players[p]),
                    player_label=f"{'H' if teams[p] == 'home' else 'V'}{jerseys[p]}",
                    left=int(10 * positions[t, p, 0 if view == "Endzone" else 1]) % 1200, width=int(rng.integers(18, 30)),
                    top=int(10 * positions[t, p, 1 if view == "Endzone" else 0]) % 680, height=int(rng.integers(18, 30)))
               for view in ("Endzone", "Sideline") for t in range(MARGIN, MARGIN + steps, 2) for p in range(count)]
    start = snap - pd.Timedelta(seconds=SNAP_SECONDS)
    end = start + pd.Timedelta(seconds=SNAP_SECONDS + (steps + MARGIN) * STEP_SECONDS)
    videos = [dict(game_play=game_play, game_key=game, play_id=play, view=view, start_time=_stamp(start),
                   end_time=_stamp(end), snap_time=_stamp(snap)) for view in ("Endzone", "Sideline")]
    return pd.DataFrame(tracking)[TRACKING], labels, pd.DataFrame(helmets), pd.DataFrame(videos)


def _split(plays: list[tuple[int, int, np.ndarray]], public: Path, folder: str, steps: int, rng):
    tables = [_play(game, play, players, steps, rng) for game, play, players in plays]
    for game, play, _ in plays:
        for view in VIEWS:
            write_movie(public / folder / f"{game}_{play:06d}_{view}.mp4", SNAP_SECONDS + steps * STEP_SECONDS + 2)
    return [pd.concat(parts, ignore_index=True) for parts in zip(*tables)]


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train_labels.csv, the tracking, helmet and video tables of train and test, train/,
    test/, sample_submission.csv) and prepared/private/test.csv."""
    train_count, test_count, players, steps = sizes(scale)
    public, private = folders(root, "train", "test")
    games = rng.choice(np.arange(57_000, 59_000), (train_count + test_count + 1) // 2, replace=False)
    rosters = {int(g): rng.choice(np.arange(25_000, 55_000), players, replace=False) for g in games}
    plays = [(int(games[k // 2]), int(rng.integers(50, 4_000)), rosters[int(games[k // 2])])
             for k in range(train_count + test_count)]
    order = rng.permutation(len(plays))
    train = _split([plays[k] for k in order[:train_count]], public, "train", steps, rng)
    test = _split([plays[k] for k in order[train_count:]], public, "test", steps, rng)
    train[1].to_csv(public / "train_labels.csv", index=False)
    test[1].to_csv(private / "test.csv", index=False)
    test[1][["contact_id"]].assign(contact=0).to_csv(public / "sample_submission.csv", index=False)
    for name, k in (("player_tracking", 0), ("baseline_helmets", 2), ("video_metadata", 3)):
        train[k].to_csv(public / f"train_{name}.csv", index=False)
        test[k].to_csv(public / f"test_{name}.csv", index=False)
    describe(public, "1st and Future - Player Contact Detection",
             "Predict, for each row of the sample (contact_id = `<game_key>_<play_id>_<step>_<player 1>_<player 2 "
             "or G>`), whether the two players (or the player and the ground) are in contact at that step, from "
             "the players' tracking, the helmet boxes and the videos.",
             "Submissions are evaluated on the Matthews correlation coefficient of the 0/1 predictions.",
             "Submit `contact_id,contact` for every row of the sample.")
