"""The content fingerprint covers every file a slide is read from: an MRXS slide's data folder,
a VMS slide's JPEGs; single-file slides keep the fingerprint earlier versions recorded."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
from pathlib import Path

import pytest

from wsikit.errors import SlideError
from wsikit.slide.filecheck import check_openable
from wsikit.slide.fingerprint import (
    FULL_HASH_BYTES,
    check_source,
    same_slide,
    slide_fingerprint,
    write_source,
)


def _single_file_fingerprint(path: Path) -> str:
    """The fingerprint of one file as wsikit recorded it before companion files counted,
    written out again from its description: SHA-256 over ``"fp1:<size>"`` and the whole file
    up to 32 MiB, else its first and last MiB and 16 blocks of 64 KiB at offsets
    ``MiB + (size - 2 MiB - 64 KiB) * k // 17``, k = 1 … 16."""
    data = path.read_bytes()
    size, mib, block = len(data), 1 << 20, 64 << 10
    h = hashlib.sha256(f"fp1:{size}".encode())
    if size <= 32 * mib:
        h.update(data)
    else:
        h.update(data[:mib])
        for k in range(1, 17):
            at = mib + (size - 2 * mib - block) * k // 17
            h.update(data[at:at + block])
        h.update(data[-mib:])
    return f"fp1-{size}-{h.hexdigest()[:24]}"


def _rewrite(path: Path, seed: int) -> None:
    """New bytes of the same size written over ``path`` in place (same inode)."""
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.write(random.Random(seed).randbytes(size))


@pytest.mark.parametrize("size", [5000, FULL_HASH_BYTES + (3 << 20) + 12345])
def test_a_single_file_keeps_the_fingerprint_it_had(tmp_path: Path, size: int) -> None:
    """Existing runs stay reusable: a single-file slide (small: hashed whole; large: sampled)
    has the fingerprint of the scheme earlier versions recorded."""
    path = tmp_path / "slide.svs"
    rng = random.Random(size)
    path.write_bytes(rng.randbytes(size))
    assert slide_fingerprint(path) == _single_file_fingerprint(path)
    assert "+" not in slide_fingerprint(path)


def test_a_rewritten_mrxs_data_file_is_another_slide(tmp_path: Path, mrxs_like) -> None:
    slide = mrxs_like(tmp_path)
    data = tmp_path / "case"
    before = slide_fingerprint(slide)
    # its own part is the .mrxs file's fingerprint; three companion files and Slidedat.ini
    assert before.startswith(_single_file_fingerprint(slide) + "+4-")
    os.utime(data / "Data0001.dat", None)  # touched, nothing rewritten: the same slide
    assert slide_fingerprint(slide) == before
    _rewrite(data / "Data0001.dat", seed=99)  # 3 MiB: sampled, every sample rewritten
    after = slide_fingerprint(slide)
    assert after != before
    _rewrite(data / "Data0000.dat", seed=98)  # 40 KiB: hashed whole
    assert slide_fingerprint(slide) not in (before, after)
    # the .mrxs file itself is unchanged: the old fingerprint could not tell these apart
    assert after.split("+")[0] == before.split("+")[0]


def test_a_rewritten_slidedat_or_index_is_another_slide(tmp_path: Path, mrxs_like) -> None:
    slide = mrxs_like(tmp_path)
    before = slide_fingerprint(slide)
    ini = tmp_path / "case" / "Slidedat.ini"
    ini.write_bytes(ini.read_bytes().replace(b"SLIDE_ID = 0", b"SLIDE_ID = 7"))
    assert slide_fingerprint(slide) != before
    other = mrxs_like(tmp_path / "b", seed=0)
    _rewrite(other.with_suffix("") / "Index.dat", seed=5)
    assert slide_fingerprint(other) != before


def test_an_mrxs_slide_copied_and_renamed_keeps_its_fingerprint(tmp_path: Path,
                                                                 mrxs_like) -> None:
    slide = mrxs_like(tmp_path / "a")
    copy = tmp_path / "b" / "renamed.mrxs"
    copy.parent.mkdir()
    shutil.copyfile(slide, copy)
    shutil.copytree(slide.with_suffix(""), copy.with_suffix(""))
    assert slide_fingerprint(copy) == slide_fingerprint(slide)
    # another scan (other data files) behind an identical .mrxs file is another slide
    assert slide_fingerprint(mrxs_like(tmp_path / "c", seed=1)) != slide_fingerprint(slide)


def test_files_the_mrxs_folder_does_not_name_do_not_count(tmp_path: Path, mrxs_like) -> None:
    slide = mrxs_like(tmp_path)
    before = slide_fingerprint(slide)
    (tmp_path / "case" / "Thumbs.db").write_bytes(b"x")
    assert slide_fingerprint(slide) == before


@pytest.mark.parametrize("remove, named", [
    ("", "case.mrxs: its data folder .*case is missing"),
    ("Slidedat.ini", r"Slidedat\.ini is missing"),
    ("Data0001.dat", r"Data0001\.dat \(named in Slidedat\.ini\) is missing"),
])
def test_a_missing_mrxs_folder_or_file_is_named_with_the_fix(tmp_path: Path, mrxs_like,
                                                             remove: str, named: str) -> None:
    slide = mrxs_like(tmp_path)
    target = tmp_path / "case" / remove
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    for check in (slide_fingerprint, check_openable):
        with pytest.raises(SlideError, match=named) as err:
            check(slide)
        assert str(slide) in str(err.value) and "copy that folder" in str(err.value)


def test_opening_an_mrxs_without_its_folder_says_so(tmp_path: Path, mrxs_like) -> None:
    """Before, OpenSlide's 'Unsupported or missing image file' among every backend's reason."""
    from wsikit.slide import open_slide

    slide = mrxs_like(tmp_path)
    shutil.rmtree(tmp_path / "case")
    with pytest.raises(SlideError, match=r"its data folder .*case is missing; an MRXS slide"):
        open_slide(slide)


def test_a_fingerprint_from_before_companion_files_names_the_same_slide(
        tmp_path: Path, mrxs_like) -> None:
    """A sidecar recorded by an earlier version (the .mrxs file alone) still belongs to the
    slide (its outputs are not refused as another slide's), yet differs from the new
    fingerprint, so the run computes the slide once more."""
    slide = mrxs_like(tmp_path)
    now = slide_fingerprint(slide)
    old = _single_file_fingerprint(slide)
    assert old != now and same_slide(old, now) and same_slide(now, now)
    assert not same_slide(now, old)  # a new record never matches a bare file
    output = tmp_path / "case.geojson"
    output.write_text("{}")
    write_source(output, slide, old)
    assert check_source(output, now) == "same"
    write_source(output, slide, slide_fingerprint(mrxs_like(tmp_path / "b", seed=3)))
    assert check_source(output, now) == "other"
    write_source(output, slide, "fp1-26-0123456789abcdef01234567")
    assert check_source(output, now) == "other"


def _vms(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, seed in (("case.jpg", 1), ("case(1,0).jpg", 2), ("case_map.jpg", 3)):
        (folder / name).write_bytes(random.Random(seed).randbytes(20000))
    vms = folder / "case.vms"
    vms.write_text("[Virtual Microscope Specimen]\nNoLayers=1\nImageFile=case.jpg\n"
                   "ImageFile(1,0)=case(1,0).jpg\nMapFile=case_map.jpg\n"
                   "OptimisationFile=case.opt\n")  # optional, absent
    return vms


def test_a_rewritten_vms_jpeg_is_another_slide(tmp_path: Path) -> None:
    vms = _vms(tmp_path)
    before = slide_fingerprint(vms)
    assert before.startswith(_single_file_fingerprint(vms) + "+3-")
    _rewrite(tmp_path / "case(1,0).jpg", seed=11)
    assert slide_fingerprint(vms) != before
    (tmp_path / "case_map.jpg").unlink()
    with pytest.raises(SlideError, match=r"case_map\.jpg \(named in case\.vms\) is missing"):
        slide_fingerprint(vms)


def _zarr_store(path: Path, *, seed: int = 0, fmt: int = 2) -> Path:
    """A small OME-Zarr-like store written by zarr: 256 compressed chunks (16 x 16 px) of
    noise in ``0/`` (so chunk sizes differ, as in a real slide) and the group metadata."""
    import numpy as np
    import zarr

    root = zarr.open_group(str(path), mode="w", zarr_format=fmt)
    arr = root.create_array("0", shape=(3, 256, 256), chunks=(3, 16, 16), dtype="uint8")
    rng = np.random.default_rng(seed)
    arr[...] = rng.integers(0, 64, (3, 256, 256), dtype=np.uint8)  # compresses unevenly
    root.attrs["multiscales"] = [{"version": "0.4", "datasets": [{"path": "0"}]}]
    return path


def _opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files the fingerprint opens (its only reads go through ``open``)."""
    from wsikit.slide import fingerprint

    opened: list[str] = []

    def counting_open(file, *args, **kwargs):
        opened.append(os.fspath(file))
        return open(file, *args, **kwargs)

    monkeypatch.setattr(fingerprint, "open", counting_open, raising=False)
    return opened


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_zarr_store_is_fingerprinted_by_a_bounded_read(tmp_path: Path, fmt: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, every chunk file was hashed whole on every run: a 20 000-chunk OME-Zarr read
    gigabytes. Now its metadata and 16 chunks are read, whatever the number of chunks."""
    from wsikit.slide.fingerprint import ZARR_CHUNK_SAMPLES

    store = _zarr_store(tmp_path / "case.zarr", fmt=fmt)
    files = [f for f in store.rglob("*") if f.is_file()]
    meta = [f for f in files if f.name in (".zattrs", ".zarray", ".zgroup", "zarr.json")]
    opened = _opened(monkeypatch)
    fp = slide_fingerprint(store)
    assert fp.startswith(f"fp1-zarr{len(files)}-") and len(files) > 256
    assert len(opened) == len(meta) + ZARR_CHUNK_SAMPLES  # not the 256 chunks
    assert {str(f) for f in meta} <= set(opened)          # every metadata file read
    # copied or moved: the same slide
    copy = tmp_path / "elsewhere" / "renamed.zarr"
    shutil.copytree(store, copy)
    assert slide_fingerprint(copy) == fp


def test_what_a_zarr_fingerprint_detects_and_what_not(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    store = _zarr_store(tmp_path / "case.zarr")
    opened = _opened(monkeypatch)
    fp = slide_fingerprint(store)
    chunks = sorted(f for f in (store / "0").iterdir() if not f.name.startswith("."))
    sampled = [f for f in chunks if str(f) in opened]
    unsampled = [f for f in chunks if str(f) not in opened]
    assert len(sampled) == 16 and len(unsampled) == 240
    # a chunk rewritten with other pixels (another compressed size), outside the sample
    victim = unsampled[7]
    data = victim.read_bytes()
    victim.write_bytes(data + b"\0")
    assert slide_fingerprint(store) != fp
    victim.write_bytes(data)
    assert slide_fingerprint(store) == fp  # back as it was; touched times do not count
    # any byte of a sampled chunk (here hashed whole: under 1 MiB)
    kept = sampled[3].read_bytes()
    _rewrite(sampled[3], seed=4)  # same size, other bytes
    assert slide_fingerprint(store) != fp
    sampled[3].write_bytes(kept)
    assert slide_fingerprint(store) == fp
    # metadata: any byte (here a scale); a file added or removed; a chunk renamed
    for change in ("attrs", "added", "removed", "renamed"):
        other = _zarr_store(tmp_path / change / "case.zarr")
        before = slide_fingerprint(other)
        if change == "attrs":
            text = (other / ".zattrs").read_text()
            (other / ".zattrs").write_text(text.replace('"0.4"', '"0.5"'))
        elif change == "added":
            (other / "0" / "99.0.0").write_bytes(b"x")
        elif change == "removed":
            (other / "0" / "0.15.15").unlink()
        else:
            (other / "0" / "0.15.15").rename(other / "0" / "0.15.16")
        assert slide_fingerprint(other) != before, change
    # what it does not see: an unsampled chunk rewritten in place with exactly its size
    same = _zarr_store(tmp_path / "same" / "case.zarr")
    before = slide_fingerprint(same)
    _rewrite(same / "0" / unsampled[7].name, seed=9)
    assert slide_fingerprint(same) == before


def test_a_zarr_fingerprint_from_before_names_the_same_slide(tmp_path: Path) -> None:
    """Recorded by an earlier version (every file hashed, ``fp1-dir<n>-``): its outputs are
    still this slide's (not refused), yet a run computes them once more; another count of
    files is another slide. A folder that is not a zarr store keeps that fingerprint."""
    from wsikit.slide import fingerprint

    store = _zarr_store(tmp_path / "case.zarr")
    now = slide_fingerprint(store)
    old = fingerprint._folder_fingerprint(store)
    assert old.startswith("fp1-dir260-") and now.startswith("fp1-zarr260-")
    assert same_slide(old, now) and not same_slide(now, old)
    assert not same_slide(old.replace("dir260", "dir261"), now)
    (store / ".zgroup").unlink()
    (store / ".zattrs").unlink()  # no zarr metadata at its top: a plain folder
    assert slide_fingerprint(store) == fingerprint._folder_fingerprint(store)
