"""Readers and decoders of signals and arrays: a recording per item summarised per channel, arrays as square
pictures with each panel's statistics, the training files drawn to what a budget decodes, JSON records whose lists
are arrays (in a 7z, an unknown angle "na"), events' hits in batch files, a folder shipped as its archive, parquet
tables, label sets in one column spread over the sample's label columns, a group column's folds."""
import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from runner.competition.spec import CompetitionSpec
from runner.data import decoders, pulse_events
from runner.data.array_records import array_records
from runner.data.decoders import array_picture, decodable_train, panel_statistics
from runner.data.loading import fold_groups
from runner.data.reading import image_files, read_table
from runner.data.signal_statistics import OCTAVES, band_shares, signal_statistics
from runner.data.targets import read_labels, value_columns
from runner.units.tasks import assign_folds

RATE = 100  # Hz: the recordings here


def _recording(path: Path, rows: int, frequency: float, dead: bool = False) -> None:
    t = np.arange(rows) / RATE
    frame = pd.DataFrame({"a": np.round(50 * np.sin(2 * np.pi * frequency * t)), "b": np.arange(rows) % 7,
                          "c": np.nan if dead else 1.0})
    frame.to_parquet(path) if path.suffix == ".parquet" else frame.to_csv(path, index=False)


def test_a_recording_per_item_becomes_a_row_of_statistics_per_channel(tmp_path):
    """A sine at a quarter of the rate (half the Nyquist frequency) puts its power in the second octave from the
    top; a dead channel is all missing; rows sharing a file share its row; a file that is no table gives NaN."""
    _recording(tmp_path / "one.csv", 4000, RATE / 4, dead=True)
    _recording(tmp_path / "two.parquet", 4000, RATE / 16)
    (tmp_path / "broken.csv").write_bytes(b"\x00\x01not a table")
    train = [tmp_path / "one.csv", tmp_path / "two.parquet", tmp_path / "one.csv", None]
    table_train, table_test = signal_statistics(None, train, [tmp_path / "broken.csv"], tmp_path, workers=2)["table"]
    assert len(table_train) == 4 and len(table_test) == 1 and table_test.isna().all().all()
    assert table_train.loc[0, "a_std"] == pytest.approx(50 / np.sqrt(2), rel=0.02)
    assert table_train.loc[0, "c_missing"] == 1.0 and np.isnan(table_train.loc[0, "c_mean"])
    assert table_train.loc[1, "c_missing"] == 0.0
    bands = [table_train.loc[0, f"a_band{k}"] for k in range(OCTAVES)]
    assert int(np.argmax(bands)) == 1  # Nyquist/4 .. Nyquist/2
    assert int(np.argmax([table_train.loc[1, f"a_band{k}"] for k in range(OCTAVES)])) == 3  # Nyquist/8: the 4th
    assert table_train.loc[0].equals(table_train.loc[2]) and table_train.loc[3].isna().all()
    assert np.isnan(band_shares(np.ones(100))).all()  # no power: no shares


def test_an_array_of_panels_is_a_square_picture_and_each_panel_s_statistics(tmp_path):
    rng = np.random.default_rng(0)
    cadence = rng.standard_normal((6, 16, 64)).astype(np.float16)
    cadence[0, :, 40] += 4  # a line down one column of the first panel
    picture = array_picture(cadence)
    assert picture.size == (64, 64) and picture.mode == "L"  # 96 x 64 stacked, squeezed square
    assert array_picture(rng.standard_normal((2, 25, 25))).mode == "RGB"  # two bands: a colour picture
    stats = panel_statistics(cadence).reshape(6, len(decoders.PANEL_STATISTICS))
    column = decoders.PANEL_STATISTICS.index("column")
    assert stats[0, column] > 8 > stats[1:, column].max()  # the line stands out of its panel alone
    np.save(tmp_path / "x.npy", cadence)
    spec = CompetitionSpec(id="arrays", task="image", metric="roc_auc", submission="probability", id_column="id",
                           targets=("target",), decode="array_image")
    views = decoders.decode(spec, [tmp_path / "x.npy", None], [tmp_path / "x.npy"], tmp_path / "work")
    train_pictures, test_pictures = views["image"]
    assert train_pictures[0].is_file() and train_pictures[1] is None and test_pictures[0].is_file()
    assert views["table"][0].shape == (2, 6 * len(decoders.PANEL_STATISTICS))


def test_training_files_are_drawn_to_what_the_budget_decodes_and_every_test_file_kept(tmp_path, monkeypatch):
    spec = CompetitionSpec(id="arrays", task="image", metric="roc_auc", submission="probability", id_column="id",
                           targets=("target",), decode="array_image")
    for k in range(30):
        np.save(tmp_path / f"{k}.npy", np.zeros((4, 4)))
    train = [tmp_path / f"{k}.npy" for k in range(25)]
    test = [tmp_path / f"{k}.npy" for k in range(25, 30)]
    monkeypatch.setattr(decoders, "LEAST_TRAIN", 3)
    kept, cut = decodable_train(spec, train, test, tmp_path, budget_seconds=1e-4, cores=1)
    assert cut is not None and cut.kept == 3 and cut.of == 25 and sum(p is not None for p in kept) == 3
    assert decodable_train(spec, train, test, tmp_path, budget_seconds=1e6, cores=1) == (train, None)


def _seven_zip(path: Path, name: str, content: bytes) -> None:
    import py7zr

    member = path.parent / name
    member.write_bytes(content)
    with py7zr.SevenZipFile(path, "w") as archive:
        archive.write(member, arcname=name)
    member.unlink()


def test_json_records_give_an_array_file_each_and_their_other_fields_a_table(tmp_path):
    """Two bands of 9 numbers: a 2 x 3 x 3 array; "na" read as a missing angle; the test records in the sample's
    order, a sample id with no record an empty row."""
    def record(name, angle, label=None):
        out = {"id": name, "band_1": list(range(9)), "band_2": [float(v) / 2 for v in range(9)], "inc_angle": angle}
        return out if label is None else {**out, "is_iceberg": label}

    _seven_zip(tmp_path / "train.json.7z", "train.json", json.dumps([record("a1", 35.5, 1), record("b2", "na", 0)])
               .encode())
    _seven_zip(tmp_path / "test.json.7z", "test.json", json.dumps([record("c3", 40.0), record("d4", "na")]).encode())
    spec = CompetitionSpec(id="records", task="image", metric="log_loss", submission="probability", id_column="id",
                           targets=("is_iceberg",), train_file=None, test_file=None, items="array_records",
                           items_file="train.json.7z", test_items_file="test.json.7z", decode="array_image")
    sample = pd.DataFrame({"id": ["d4", "zz", "c3"], "is_iceberg": 0.5})
    train, train_files, test_files, _, test = array_records(spec, tmp_path, tmp_path / "work", sample)
    assert list(train.columns) == ["id", "inc_angle", "is_iceberg"] and np.isnan(train.loc[1, "inc_angle"])
    assert np.load(train_files[0]).shape == (2, 3, 3) and np.load(train_files[1])[1, 2, 2] == 4.0
    assert test["id"].tolist() == ["d4", "zz", "c3"] and test["inc_angle"].isna().tolist() == [True, True, False]
    assert test_files[1] is None and np.load(test_files[2]).shape == (2, 3, 3)


def test_events_hits_in_batch_files_become_a_row_of_features_each(tmp_path, monkeypatch):
    """A track along +x (so it came from -x): its line fit points back along -x; a batch with no file gives its
    events no features; past the cap on training events whole batches are left out, and said."""
    sensors = pd.DataFrame({"sensor_id": range(5), "x": [0.0, 30.0, 60.0, 90.0, 0.0], "y": 0.0, "z": 0.0})
    sensors.to_csv(tmp_path / "sensor_geometry.csv", index=False)
    for split in ("train", "test"):
        (tmp_path / split).mkdir()
    hits = pd.DataFrame({"sensor_id": np.array([0, 1, 2, 3, 4, 3, 2], dtype=np.int16),
                         "time": np.array([100, 200, 300, 400, 100, 130, 160], dtype=np.int64),
                         "charge": [1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5], "auxiliary": [False] * 6 + [True]},
                        index=pd.Index([1, 1, 1, 1, 2, 2, 2], name="event_id"))
    hits.to_parquet(tmp_path / "train" / "batch_1.parquet")
    hits.to_parquet(tmp_path / "test" / "batch_3.parquet")
    meta = pd.DataFrame({"batch_id": [1, 1, 2], "event_id": [1, 2, 9], "first_pulse_index": [0, 4, 0],
                         "last_pulse_index": [3, 6, 0], "azimuth": [np.pi, 0.5, 0.5], "zenith": [np.pi / 2] * 3})
    meta.to_parquet(tmp_path / "train_meta.parquet")
    meta.iloc[:2, :4].assign(batch_id=3).to_parquet(tmp_path / "test_meta.parquet")
    spec = CompetitionSpec(id="events", task="tabular", metric="mean_angular_error", submission="direction",
                           id_column="event_id", targets=("azimuth", "zenith"), train_file=None, test_file=None,
                           items="pulse_events", items_file="train_meta.parquet", test_items_file="test_meta.parquet",
                           image_dir="train", test_image_dir="test", positions_file="sensor_geometry.csv")
    sample = pd.DataFrame({"event_id": [2, 1], "azimuth": 1, "zenith": 1})
    train, _, _, _, test = pulse_events.pulse_events(spec, tmp_path, tmp_path / "work", sample)
    first = train.iloc[0]
    assert first["hits"] == 4 and first["speed"] == pytest.approx(0.3)  # 30 m in 100 ns
    assert [first["from_x"], first["from_y"], first["from_z"]] == pytest.approx([-1.0, 0.0, 0.0])
    assert train.iloc[1]["auxiliary_share"] == pytest.approx(1 / 3)
    assert train.iloc[2][list(pulse_events.FEATURES)].isna().all()  # batch 2 has no file
    assert test["event_id"].tolist() == [2, 1] and test.iloc[1]["from_x"] == pytest.approx(-1.0)
    monkeypatch.setattr(pulse_events, "MAX_TRAIN_EVENTS", 1)
    capped, *_ = pulse_events.pulse_events(spec, tmp_path, tmp_path / "work", sample)
    assert capped["batch_id"].tolist() == [1, 1] and capped.attrs["sampled"].kept == 2


def test_a_folder_shipped_as_its_archive_is_found_by_either_name(tmp_path):
    with zipfile.ZipFile(tmp_path / "clips.zip", "w") as archive:
        archive.writestr("one.wav", b"RIFF")
    (tmp_path / "pictures").mkdir()
    (tmp_path / "pictures" / "two.png").write_bytes(b"\x89PNG")
    assert [p.name for p in image_files(tmp_path, "clips", tmp_path / "work")] == ["one.wav"]
    assert [p.name for p in image_files(tmp_path, "pictures.zip", tmp_path / "work")] == ["two.png"]


def test_a_parquet_table_is_read_by_its_name(tmp_path):
    pd.DataFrame({"event_id": [1, 2], "value": [0.5, 1.5]}).to_parquet(tmp_path / "meta.parquet")
    assert read_table(tmp_path / "meta.parquet", "meta", tmp_path)["value"].tolist() == [0.5, 1.5]


def test_label_sets_in_one_column_are_spread_over_the_sample_s_label_columns(tmp_path):
    spec = CompetitionSpec(id="tags", task="audio", metric="lwlrap", submission="multilabel", id_column="fname",
                           targets=("labels",), label_separator=",")
    sample = pd.DataFrame({"fname": ["t.wav"], "Bark": 0, "Slam": 0, "Walk_and_footsteps": 0})
    columns = value_columns(spec, sample)
    assert columns == ["Bark", "Slam", "Walk_and_footsteps"]
    train = pd.DataFrame({"fname": ["a.wav", "b.wav"], "labels": ["Walk_and_footsteps,Slam", "Bark,Meow"]})
    warnings: list[str] = []
    _, classes, y = read_labels(spec, train, columns, tmp_path / "train.csv", warnings)
    assert classes is None and y.tolist() == [[0, 1, 1], [1, 0, 0]] and "Meow" in warnings[0]


def test_a_group_column_keeps_each_group_s_rows_in_one_fold(tmp_path):
    spec = CompetitionSpec(id="windows", task="tabular", metric="kl_divergence", submission="distribution",
                           id_column="eeg_id", targets=("a", "b"), group_column="eeg_id")
    train = pd.DataFrame({"eeg_id": [7, 7, 8, 9, 8], "a": 1, "b": 0})
    assert fold_groups(spec, train, tmp_path).tolist() == [0, 0, 1, 2, 1]
    folds = assign_folds(np.zeros(len(train)), False, 3, 0, groups=fold_groups(spec, train, tmp_path))
    assert folds[0] == folds[1] and folds[2] == folds[4]
