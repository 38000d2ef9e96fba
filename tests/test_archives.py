"""Archives as competitions ship them (runner.common.archives): a sample or a table inside a 7z or a tar is read
where it lies, images in any archive are extracted once within bounds, an archive is told by its bytes, not its
name, and a member that would land outside its folder is never written."""
import gzip
import io
import json
import tarfile
import zipfile

import pandas as pd
import py7zr
import pytest

from runner.common import archives
from runner.common.csvfiles import find_sample, read_csv_file
from runner.common.errors import InputError
from runner.data.reading import image_files, read_records

SAMPLE = "id,is_iceberg\na1,0.5\nb2,0.5\n"


def seven_zip(path, members: dict[str, bytes]):
    with py7zr.SevenZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writef(io.BytesIO(data), name)
    return path


def tar_of(path, members: dict[str, bytes], mode="w:gz"):
    with tarfile.open(path, mode) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_a_sample_only_inside_a_7z_is_found_and_read_where_it_lies(tmp_path):
    seven_zip(tmp_path / "sample_submission.csv.7z", {"sample_submission.csv": SAMPLE.encode()})
    path = find_sample(tmp_path)
    assert path.name == "sample_submission.csv.7z"
    frame = read_csv_file(path)
    assert list(frame.columns) == ["id", "is_iceberg"] and frame["id"].tolist() == ["a1", "b2"]
    assert not list(tmp_path.glob("*.csv"))  # nothing unpacked beside it


def test_a_table_in_a_tar_gz_is_read_and_json_records_in_a_7z_too(tmp_path):
    tar_of(tmp_path / "train.csv.tar.gz", {"train.csv": b"id,y\n1,2\n3,4\n"})
    assert read_csv_file(tmp_path / "train.csv.tar.gz")["y"].tolist() == [2, 4]
    records = [{"id": "a", "band_1": [1.0, 2.0], "is_iceberg": 1}, {"id": "b", "band_1": [3.0], "is_iceberg": 0}]
    seven_zip(tmp_path / "train.json.7z", {"train.json": json.dumps(records).encode()})
    table = read_records(tmp_path / "train.json.7z", "train file")
    assert table["id"].tolist() == ["a", "b"] and table["band_1"].tolist() == [2, 1]  # a list becomes its length


@pytest.mark.parametrize("make", ["zip", "7z", "tar", "tar.gz"])
def test_images_in_any_archive_are_extracted_once(tmp_path, make):
    public, work = tmp_path / "public", tmp_path / "work"
    public.mkdir()
    members = {"train/a.jpg": b"A" * 100, "train/sub/b.jpg": b"B" * 100, "notes.txt": b"not an image"}
    path = public / "train.archive"  # no telling suffix: the kind comes from the bytes
    if make == "zip":
        with zipfile.ZipFile(path, "w") as archive:
            for name, data in members.items():
                archive.writestr(name, data)
    elif make == "7z":
        seven_zip(path, members)
    else:
        tar_of(path, members, "w:gz" if make == "tar.gz" else "w")
    found = sorted(p.name for p in image_files(public, "train.archive", work))
    assert found == ["a.jpg", "b.jpg"]  # images only, sub-folders included
    (work / "extracted" / "train" / "train" / "a.jpg").write_bytes(b"changed")
    assert image_files(public, "train.archive", work)  # reused, not extracted again
    assert (work / "extracted" / "train" / "train" / "a.jpg").read_bytes() == b"changed"


def test_a_tar_named_tar_gz_that_is_not_gzipped_is_still_a_tar(tmp_path):
    path = tar_of(tmp_path / "train_val2019.tar.gz", {"0/1.jpg": b"x"}, "w")
    assert archives.kind(path) == "tar" and [m.name for m in archives.members(path)] == ["0/1.jpg"]
    gzipped = tmp_path / "one.csv.gz"
    gzipped.write_bytes(gzip.compress(b"a,b\n1,2\n"))
    assert archives.kind(gzipped) == "gzip" and archives.read_member(gzipped) == b"a,b\n1,2\n"


def test_a_member_outside_its_folder_is_never_listed_nor_written(tmp_path):
    path = tar_of(tmp_path / "evil.tar", {"../escape.jpg": b"x", "/abs.jpg": b"y", "ok.jpg": b"z"}, "w")
    assert [m.name for m in archives.members(path)] == ["ok.jpg"]
    archives.extract(path, tmp_path / "out")
    assert not (tmp_path / "escape.jpg").exists() and (tmp_path / "out" / "ok.jpg").read_bytes() == b"z"


def test_an_image_7z_bomb_is_refused_before_anything_is_written(tmp_path):
    public = tmp_path / "public"
    public.mkdir()
    seven_zip(public / "train.7z", {"a.png": b"\0" * (50 * 2**20)})  # 50 MiB of zeros: a few KiB packed
    with pytest.raises(InputError, match="refused: its files expand"):
        image_files(public, "train.7z", tmp_path / "work")
    assert not (tmp_path / "work" / "extracted" / "train" / "a.png").exists()


def test_what_is_no_archive_says_so_naming_the_file(tmp_path):
    path = tmp_path / "train.zip"
    path.write_bytes(b"PK\x03\x04 broken")
    with pytest.raises(InputError, match="train.zip"):
        archives.members(path)
    plain = tmp_path / "plain.bin"
    plain.write_text("just text")
    with pytest.raises(InputError, match="not an archive"):
        archives.members(plain)
    assert pd.isna(archives.kind(plain))
