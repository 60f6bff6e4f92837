from __future__ import annotations

from pathlib import Path

import pytest

from wsikit.batch import read_cohort
from wsikit.errors import BatchError


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return path


def test_folder_recursive_known_extensions(tmp_path):
    touch(tmp_path / "a.svs")
    touch(tmp_path / "sub" / "b.NDPI")
    touch(tmp_path / "sub" / "deeper" / "c.tiff")
    touch(tmp_path / "notes.txt")
    touch(tmp_path / ".hidden.svs")
    touch(tmp_path / "dicom" / "case7" / "level0.dcm")
    touch(tmp_path / "dicom" / "case7" / "level1.dcm")
    slides = read_cohort(tmp_path)
    assert [s.slide_id for s in slides] == ["a", "b", "c", "case7"]
    assert all(s.path.is_absolute() and s.mpp is None for s in slides)


def test_folder_duplicate_stems_are_disambiguated(tmp_path):
    touch(tmp_path / "siteA" / "s1.svs")
    touch(tmp_path / "siteB" / "s1.svs")
    touch(tmp_path / "siteB" / "s1.tif")  # same folder, same stem, other extension
    with pytest.raises(BatchError, match="slide_id"):
        read_cohort(tmp_path)
    (tmp_path / "siteB" / "s1.tif").unlink()
    ids = [s.slide_id for s in read_cohort(tmp_path, mpp=0.5)]
    assert ids == ["siteA__s1", "siteB__s1"]


def test_csv_with_mpp_and_ids(tmp_path):
    touch(tmp_path / "x" / "one.svs")
    touch(tmp_path / "two.tif")
    csv = tmp_path / "cohort.csv"
    csv.write_text("path,mpp,slide_id,site\n"
                   "x/one.svs,,first,A\n"
                   f"{tmp_path / 'two.tif'},0.25,,B\n\n")
    slides = read_cohort(csv, mpp=0.5)
    # a row's mpp overrides that slide's metadata; --mpp only fills in where none is known
    assert [(s.slide_id, s.mpp, s.fallback_mpp) for s in slides] == [
        ("first", None, 0.5), ("two", 0.25, 0.5)]
    assert slides[0].path == tmp_path / "x" / "one.svs"
    assert slides[0].extra == {"site": "A"}


@pytest.mark.parametrize("text, match", [
    ("file,mpp\na.svs,1\n", r"line 1: no 'path' column"),
    ("path,mpp\na.svs,abc\n", r"line 2: mpp 'abc' is not a number"),
    ("path,mpp\na.svs,0.5\nb.svs,0.5,9\n", r"line 3: 3 fields but the header has 2"),
    ("path,mpp\na.svs,0.5\na.svs,0.25\n", r"line 3: slide .* already listed on line 2"),
    ("path,slide_id\na.svs,s\nb.svs,s\n", r"line 3: slide_id 's' is already used on line 2"),
    ("path,slide_id\na.svs,../evil\n", r"line 2: slide_id '../evil' may only contain"),
    ("path,mpp\na.svs,500\n", r"line 2: mpp 500.0 µm/px is implausible"),
    ("", r"is empty"),
])
def test_malformed_csv_names_file_and_line(tmp_path, text, match):
    csv = tmp_path / "bad.csv"
    csv.write_text(text)
    with pytest.raises(BatchError, match=match) as info:
        read_cohort(csv)
    assert "bad.csv" in str(info.value)


def test_missing_or_empty_cohort(tmp_path):
    with pytest.raises(BatchError, match="does not exist"):
        read_cohort(tmp_path / "nope")
    with pytest.raises(BatchError, match="lists no slides"):
        read_cohort(tmp_path)
    (tmp_path / "list.txt").write_text("a.svs\n")
    with pytest.raises(BatchError, match="neither a folder nor a .csv"):
        read_cohort(tmp_path / "list.txt")
