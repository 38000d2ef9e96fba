"""DICOM as pictures (runner.data.dicom): an id's file, folder or list of files made one square gray picture of
its series' panels; a volume's slices ordered by their position and seen as three maximum-intensity projections;
pixels in the modality's units through the window into 8 bits, MONOCHROME1 turned over; compressed pixel data
decoded as the uncompressed."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydicom.uid import RLELossless

from runner.data.decoders import dicom_image
from runner.data.dicom import dicom_picture, series_of
from runner.data.targets import id_folders
from runner.demo._dicom import CT, MAMMOGRAPHY, Series, write_image

SIDE = 16


def _volume(folder: Path, spot_slice: int, slices: int = 6, names=None) -> None:
    """A CT volume of soft tissue with one dense spot on one slice; files named in a shuffled order."""
    folder.mkdir(parents=True, exist_ok=True)
    series = Series(CT, "p", "1.2.3", "1.2.3.1", window=(40.0, 400.0), rescale=(1.0, -1024.0))
    for k in range(slices):
        image = np.full((SIDE, SIDE), 40.0)
        if k == spot_slice:
            image[4:6, 10:12] = 1000.0
        name = names[k] if names else f"{k + 1}.dcm"
        write_image(folder / name, image, series, k + 1, position=float(k))


def test_a_volume_is_its_three_projections_with_its_slices_in_the_order_of_their_positions(tmp_path):
    _volume(tmp_path / "study", spot_slice=1, names=["9.dcm", "3.dcm", "7.dcm", "1.dcm", "5.dcm", "2.dcm"])
    picture = np.asarray(dicom_picture(tmp_path / "study"))
    assert picture.shape == (2 * SIDE, 2 * SIDE)  # axial, coronal and sagittal projections in a square grid
    axial, coronal = picture[:SIDE, :SIDE], picture[:SIDE, SIDE:]
    assert axial[4:6, 10:12].min() == 255 and axial[0, 0] == 128  # the window's centre is mid-gray
    brightest = int(coronal.max(axis=1).argmax())  # the spot's slice, the 2nd of 6 by position (not by name)
    assert SIDE * 1 / 6 - 1 <= brightest <= SIDE * 2 / 6


def test_monochrome1_is_turned_over_and_compressed_pixels_read_as_the_plain_ones(tmp_path):
    rng = np.random.default_rng(0)
    image = rng.uniform(100, 2000, (48, 32))  # JPEG 2000 needs a few resolution levels of room
    image[5:9, 5:9] = 2600.0
    pictures = {}
    for name, options in {"plain": {}, "inverted": {"monochrome1": True}, "jpeg2000": {"jpeg2000": True}}.items():
        series = Series(MAMMOGRAPHY, "p", "1.2", f"1.2.{len(pictures)}", window=(1300.0, 2600.0), **options)
        write_image(tmp_path / f"{name}.dcm", image, series, 1)
        pictures[name] = np.asarray(dicom_picture(tmp_path / f"{name}.dcm"), dtype=int)
    import pydicom

    rle = pydicom.dcmread(tmp_path / "plain.dcm")
    rle.compress(RLELossless)
    rle.save_as(tmp_path / "rle.dcm")
    pictures["rle"] = np.asarray(dicom_picture(tmp_path / "rle.dcm"), dtype=int)
    assert pictures["plain"][7, 10] == 255  # dense is bright (the panel is square: columns stretched by 1.5)
    for name in ("inverted", "jpeg2000", "rle"):
        assert np.abs(pictures[name] - pictures["plain"]).max() <= 1, name


def test_series_are_told_apart_by_their_uid_and_a_list_of_files_is_one_id(tmp_path):
    for k, uid in enumerate(["1.9.1", "1.9.2"]):  # two single images in one folder, each a series of its own
        write_image(tmp_path / f"{k}.dcm", np.full((SIDE, SIDE), 500.0 * (k + 1)), Series(MAMMOGRAPHY, "p", "1.9",
                                                                                          uid), 1)
    assert [len(s) for s in series_of(sorted(tmp_path.glob("*.dcm")))] == [1, 1]
    picture = dicom_picture((tmp_path / "0.dcm", tmp_path / "1.dcm"))
    assert picture.size == (2 * SIDE, 2 * SIDE)  # a panel each, side by side, stretched to a square


def test_what_is_no_dicom_gives_its_row_no_picture(tmp_path):
    (tmp_path / "broken.dcm").write_bytes(b"not a dicom file at all")
    with pytest.raises(ValueError):
        dicom_picture(tmp_path / "broken.dcm")
    _volume(tmp_path / "good", spot_slice=0, slices=2)
    train, test = dicom_image(None, [tmp_path / "good", tmp_path / "broken.dcm"], [None], tmp_path / "work")["image"]
    assert train[0].is_file() and train[1] is None and test == [None]


def test_an_id_read_as_a_number_finds_its_zero_padded_folder(tmp_path):
    for name in ("00013", "00421", "stray"):
        (tmp_path / "train" / name).mkdir(parents=True)
    found = id_folders(tmp_path, "train", tmp_path / "work", pd.Series([13, "00421", 7, "..", "stray"]))
    assert found == [tmp_path / "train" / "00013", tmp_path / "train" / "00421", None, None,
                     tmp_path / "train" / "stray"]


def test_a_voi_lut_sequence_maps_the_values_as_the_modality_means_them_seen(tmp_path):
    import pydicom
    from pydicom.dataset import Dataset

    image = np.tile(np.arange(0, 64, 4, dtype=float), (SIDE, 1))  # columns 0, 4, ..., 60
    write_image(tmp_path / "plain.dcm", image, Series(MAMMOGRAPHY, "p", "1.4", "1.4.1"), 1)
    ds = pydicom.dcmread(tmp_path / "plain.dcm")
    lut = Dataset()  # 64 entries from stored value 0: dark up to 31, then bright (a step the picture must show)
    lut.add_new(0x00283002, "US", [64, 0, 16])  # LUT Descriptor: entries, first stored value, bits
    lut.add_new(0x00283006, "US", [0] * 32 + [1000] * 32)  # LUT Data
    ds.VOILUTSequence = [lut]
    ds.save_as(tmp_path / "lut.dcm")
    row = np.asarray(dicom_picture(tmp_path / "lut.dcm"))[0]
    assert row[:7].max() == 0 and row[9:].min() == 255  # below 32: the LUT's dark end; from it: its bright end
