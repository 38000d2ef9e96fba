"""CSV files as competitions ship them (runner.common.csvfiles): encodings, delimiters, compression, blank lines and bad
rows read with a warning each, and the sample submission found under its other names."""
import bz2
import gzip
import zipfile

import pandas as pd
import pytest

from runner.common.csvfiles import SNIFF_BYTES, STREAM_RATIO, content_bytes, estimated_rows, find_sample, read_csv_file

TABLE = "id,name,value\n1,alpha,0.5\n2,beta,1.5\n3,gamma,2.5\n"


def read(path):
    warnings = []
    return read_csv_file(path, warnings=warnings), warnings


def test_plain_utf8_is_read_without_a_warning(tmp_path):
    (tmp_path / "t.csv").write_text(TABLE)
    frame, warnings = read(tmp_path / "t.csv")
    assert list(frame.columns) == ["id", "name", "value"] and len(frame) == 3 and warnings == []


def test_a_byte_order_mark_stays_out_of_the_first_column_name(tmp_path):
    (tmp_path / "t.csv").write_bytes(b"\xef\xbb\xbf" + TABLE.encode())
    frame, warnings = read(tmp_path / "t.csv")
    assert frame.columns[0] == "id" and warnings == []


def test_latin1_is_read_with_a_warning(tmp_path):
    (tmp_path / "t.csv").write_bytes(TABLE.replace("beta", "bêta").encode("latin-1"))
    frame, warnings = read(tmp_path / "t.csv")
    assert frame.loc[1, "name"] == "bêta" and "not UTF-8" in warnings[0]


def test_latin1_past_the_sniffed_head_is_still_read(tmp_path):
    rows = "".join(f"{i},name{i},{i}\n" for i in range(4, SNIFF_BYTES // 10))
    (tmp_path / "t.csv").write_bytes((TABLE + rows).encode() + "9999999,Zoë,1\n".encode("latin-1"))
    frame, warnings = read(tmp_path / "t.csv")
    assert frame["name"].iloc[-1] == "Zoë" and "past its first" in warnings[-1]


@pytest.mark.parametrize("delimiter", [";", "\t", "|"])
def test_another_delimiter_is_found_from_the_header(tmp_path, delimiter):
    (tmp_path / "t.csv").write_text(TABLE.replace(",", delimiter))
    frame, warnings = read(tmp_path / "t.csv")
    assert list(frame.columns) == ["id", "name", "value"] and frame["value"].sum() == 4.5
    assert repr(delimiter) in warnings[0]


def test_compressed_files_are_read_whatever_their_name(tmp_path):
    (tmp_path / "gz.csv").write_bytes(gzip.compress(TABLE.encode()))  # gzip behind a .csv name
    with zipfile.ZipFile(tmp_path / "t.csv.zip", "w") as archive:
        archive.writestr("t.csv", TABLE)
    for name in ("gz.csv", "t.csv.zip"):
        frame, warnings = read(tmp_path / name)
        assert len(frame) == 3 and warnings == []


def test_a_compressed_files_rows_are_counted_from_its_content_not_its_archive(tmp_path):
    """What parsing needs is the CSV inside: a zip's and a gzip's recorded sizes (exact), a bz2's guessed."""
    text = "id,name,value\n" + "".join(f"{i},name{i % 7},{i % 13}\n" for i in range(50_000))
    (tmp_path / "t.csv").write_text(text)
    with zipfile.ZipFile(tmp_path / "t.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("t.csv", text)
    (tmp_path / "t.gz").write_bytes(gzip.compress(text.encode()))
    (tmp_path / "t.bz2").write_bytes(bz2.compress(text.encode()))
    for name in ("t.csv", "t.zip", "t.gz"):
        assert content_bytes(tmp_path / name) == len(text), name
        assert 45_000 < estimated_rows(tmp_path / name) < 55_000, name
    assert (tmp_path / "t.zip").stat().st_size * 3 < len(text)  # the archive's size would say a third of the rows
    assert content_bytes(tmp_path / "t.bz2") == (tmp_path / "t.bz2").stat().st_size * STREAM_RATIO


def test_blank_lines_are_skipped_and_a_bad_row_is_named_by_its_line(tmp_path):
    (tmp_path / "t.csv").write_text("id,name,value\n1,alpha,0.5\n\n2,beta,1.5,extra\n3,gamma,2.5\n")
    frame, warnings = read(tmp_path / "t.csv")
    assert frame["id"].tolist() == [1, 3]
    assert warnings == [f"{tmp_path / 't.csv'}: skipped line 4: expected 3 fields, saw 4"]


def test_what_cannot_be_read_at_all_raises(tmp_path):
    (tmp_path / "t.csv").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(zipfile.BadZipFile):
        read(tmp_path / "t.csv")
    (tmp_path / "e.csv").write_text("")
    with pytest.raises(pd.errors.EmptyDataError):
        read(tmp_path / "e.csv")


@pytest.mark.parametrize("name", ["sample_submission.csv", "sampleSubmission.csv", "sample_submission_null.csv",
                                  "SampleSubmission.csv", "sample_submission_v2.csv", "sampleSubmission.csv.zip"])
def test_the_sample_submission_is_found_under_the_names_competitions_give_it(tmp_path, name):
    (tmp_path / "train.csv").write_text(TABLE)
    (tmp_path / name).write_text("id,value\n1,0\n")
    assert find_sample(tmp_path) == tmp_path / name


def test_the_specs_own_name_comes_first_and_none_is_none(tmp_path):
    assert find_sample(tmp_path) is None
    (tmp_path / "sample_submission.csv").write_text("id,value\n1,0\n")
    (tmp_path / "submission_format.csv").write_text("id,value\n1,0\n")
    assert find_sample(tmp_path, "submission_format.csv") == tmp_path / "submission_format.csv"
