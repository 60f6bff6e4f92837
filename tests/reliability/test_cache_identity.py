"""Caches belong to a slide's content, not its name: the fingerprint, and what select/patch do
with a different slide of the same name in the same --out."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from _cases import record_case

from wsikit.cli import main
from wsikit.errors import SlideError
from wsikit.slide.fingerprint import FULL_HASH_BYTES, slide_fingerprint


def test_fingerprint_follows_content_not_name(tmp_path: Path, cmu_small: Path):
    a = tmp_path / "a.svs"
    shutil.copyfile(cmu_small, a)
    b = tmp_path / "elsewhere" / "renamed.svs"
    b.parent.mkdir()
    shutil.copyfile(cmu_small, b)
    assert slide_fingerprint(a) == slide_fingerprint(b) == slide_fingerprint(cmu_small)
    data = bytearray(a.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte in the middle: small files are hashed whole
    a.write_bytes(bytes(data))
    assert slide_fingerprint(a) != slide_fingerprint(b)


def test_fingerprint_of_a_large_file_samples_blocks(tmp_path: Path):
    big = tmp_path / "big.bin"
    size = FULL_HASH_BYTES + (5 << 20)
    with open(big, "wb") as fh:
        fh.truncate(size)
    fp = slide_fingerprint(big)
    assert fp.startswith(f"fp1-{size}-")
    with open(big, "r+b") as fh:  # change the last byte: the tail is hashed
        fh.seek(size - 1)
        fh.write(b"\x01")
    assert slide_fingerprint(big) != fp
    # an independent oracle for small files: the digest is sha256 over a prefix and the bytes
    small = tmp_path / "s.bin"
    small.write_bytes(b"abc")
    expect = hashlib.sha256(b"fp1:3abc").hexdigest()[:24]
    assert slide_fingerprint(small) == f"fp1-3-{expect}"


def test_fingerprint_refuses_a_fifo(tmp_path: Path):
    import os

    fifo = tmp_path / "pipe.svs"
    os.mkfifo(fifo)
    with pytest.raises(SlideError, match="not a regular file"):
        slide_fingerprint(fifo)


@pytest.fixture(scope="module")
def two_slides(tmp_path_factory) -> tuple[Path, Path]:
    """Two different slides, both called ``case.svs`` (two cohorts)."""
    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

    root = tmp_path_factory.mktemp("cohorts")
    (root / "A").mkdir()
    (root / "B").mkdir()
    a = write_synthetic_slide(root / "A" / "case.svs",
                              SyntheticSpec(2048, 1536, mpp=0.5, dense=[(800, 400, 600, 600)]),
                              downsamples=(1, 4), app_mag=20)
    b = write_synthetic_slide(root / "B" / "case.svs",
                              SyntheticSpec(1536, 1024, mpp=0.5, seed=7),
                              downsamples=(1, 4), app_mag=20)
    return a, b


def test_select_refuses_caches_of_another_slide_with_that_name(two_slides, tmp_path: Path,
                                                              capsys):
    a, b = two_slides
    out = tmp_path / "out"
    assert main(["select", str(a), "--out", str(out), "--encoder", "heuristic"]) == 0
    capsys.readouterr()
    assert main(["select", str(b), "--out", str(out), "--encoder", "heuristic"]) == 2
    err = capsys.readouterr().err
    assert "another slide named 'case'" in err and str(a) in err and "--force" in err
    record_case("cache", "clear-error")
    # with --force the outputs are the second slide's
    assert main(["select", str(b), "--out", str(out), "--encoder", "heuristic", "--force"]) == 0
    fresh = tmp_path / "fresh"
    assert main(["select", str(b), "--out", str(fresh), "--encoder", "heuristic"]) == 0
    assert ((out / "contours_geojson" / "case.geojson").read_text()
            == (fresh / "contours_geojson" / "case.geojson").read_text())


def test_patch_refuses_caches_of_another_slide_with_that_name(two_slides, tmp_path: Path,
                                                             capsys):
    a, b = two_slides
    out = tmp_path / "out"
    assert main(["patch", str(a), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["patch", str(b), "--out", str(out)]) == 2
    assert "another slide named 'case'" in capsys.readouterr().err
    assert main(["patch", str(b), "--out", str(out), "--force"]) == 0
    record_case("cache", "clear-error")


def test_a_hand_made_geojson_is_used_and_recorded(two_slides, tmp_path: Path):
    a, _ = two_slides
    out = tmp_path / "out"
    assert main(["patch", str(a), "--out", str(out)]) == 0
    gj = out / "contours_geojson" / "case.geojson"
    (gj.parent / "case.geojson.source.json").unlink()  # as if drawn in QuPath
    assert main(["patch", str(a), "--out", str(out)]) == 0
    assert (gj.parent / "case.geojson.source.json").exists()
