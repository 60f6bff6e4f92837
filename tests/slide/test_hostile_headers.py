"""Slide headers that lie about their size are refused at open, with the numbers, before any
reader allocates from them (issue 33: an NDPI-like file of 150 kB claiming 9,999,872² px
aborted the interpreter in OpenSlide's allocation; zero-sized tiles, levels lying about their
size, a 0 × 0 JPEG frame and a level 0 without data opened without a word)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

tifffile = pytest.importorskip("tifffile")

from wsikit.errors import SlideError  # noqa: E402
from wsikit.slide import open_slide  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _patch_tag(src: Path, dst: Path, code: int, value: int, *, page: int = 0) -> Path:
    """A copy of ``src`` with TIFF tag ``code`` of ``page`` set to ``value`` (every entry)."""
    data = bytearray(src.read_bytes())
    with tifffile.TiffFile(src) as tif:
        tag = tif.pages[page].tags[code]
        fmt = {3: "<H", 4: "<I", 16: "<Q"}[int(tag.dtype)]
        step = struct.calcsize(fmt)
        for k in range(tag.count):
            struct.pack_into(fmt, data, tag.valueoffset + k * step, value)
    dst.write_bytes(bytes(data))
    return dst


@pytest.fixture(scope="module")
def ndpi(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_ndpi

    out = tmp_path_factory.mktemp("ndpi") / "ok.ndpi"
    return write_synthetic_ndpi(out, SyntheticSpec(width=2048, height=1024, mpp=0.25),
                                downsamples=(1, 4))


@pytest.fixture(scope="module")
def tiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tif") / "tiled.tif"
    img = np.random.default_rng(0).integers(90, 200, (1024, 1024, 3), dtype=np.uint8)
    tifffile.imwrite(out, img, tile=(256, 256), photometric="rgb", compression="zlib",
                     resolution=(2e4, 2e4), resolutionunit="CENTIMETER")
    return out


def _wsikit(*args: str) -> subprocess.CompletedProcess:
    """The command line in a child process: an abort (exit 134) cannot take pytest down."""
    return subprocess.run([sys.executable, "-m", "wsikit", *args], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)))


def test_a_150kb_ndpi_claiming_9999872_squared_is_refused_not_aborted(ndpi: Path,
                                                                       tmp_path: Path) -> None:
    huge = _patch_tag(ndpi, tmp_path / "huge.ndpi", 256, 9_999_872)
    huge = _patch_tag(huge, huge, 257, 9_999_872)
    assert huge.stat().st_size < 400_000
    for args in (["info", str(huge)], ["segment", str(huge), "--out", str(tmp_path / "o")],
                 ["view", str(huge), "--no-browser", "--port", "0"]):
        proc = _wsikit(*args)
        assert proc.returncode == 2, (args, proc.returncode, proc.stderr[-1500:])
        assert "9999872 x 9999872" in proc.stderr and "damaged" in proc.stderr
        assert "Traceback" not in proc.stderr and "bug in wsikit" not in proc.stderr


def test_the_ndpi_reader_bounds_its_intervals_by_the_file(ndpi: Path, tmp_path: Path) -> None:
    """wsikit's own NDPI parser refuses the lying header itself (it is also reached by name,
    without open_slide's file checks)."""
    from wsikit.slide.ndpi import NdpiBackend

    huge = _patch_tag(ndpi, tmp_path / "huge.ndpi", 256, 9_999_872)
    huge = _patch_tag(huge, huge, 257, 9_999_872)
    with pytest.raises(SlideError, match="restart intervals"):
        NdpiBackend(huge)


def test_an_ndpi_level_with_a_zero_by_zero_jpeg_frame_is_refused(ndpi: Path,
                                                                 tmp_path: Path) -> None:
    data = bytearray(ndpi.read_bytes())
    with tifffile.TiffFile(ndpi) as tif:
        start = int(tif.pages[0].tags[273].value[0])
    sof = data.index(b"\xff\xc0", start)
    struct.pack_into(">HH", data, sof + 5, 0, 0)
    bad = tmp_path / "zero_frame.ndpi"
    bad.write_bytes(bytes(data))
    with pytest.raises(SlideError, match=r"2048 x 1024 px but its JPEG frame says 0 x 0"):
        open_slide(bad)
    proc = _wsikit("view", str(bad), "--no-browser", "--port", "0")
    assert proc.returncode == 2 and "JPEG frame" in proc.stderr


@pytest.mark.parametrize("code,value,match", [
    (322, 0, r"declares tiles of 0 x 256 px"),                # TileWidth 0
    (323, 0, r"declares tiles of 256 x 0 px"),                # TileLength 0
    (256, 60_000, r"claims 60000 x 1024 px, which is 940 256 x 256 px tiles.*only 16"),
    (257, 4_000_000, r"claims 1024 x 4000000 px"),
    (256, 0, r"is 0 x 1024 px"),
])
def test_tiffs_whose_tiles_or_levels_lie_about_their_size_are_refused(tiled: Path,
                                                                      tmp_path: Path, code,
                                                                      value, match) -> None:
    bad = _patch_tag(tiled, tmp_path / "bad.tif", code, value)
    with pytest.raises(SlideError, match=match) as info:
        open_slide(bad)
    assert str(bad) in str(info.value) and "copy the slide again" in str(info.value)


def test_a_tiff_whose_level0_tiles_are_all_empty_is_refused(tiled: Path, tmp_path: Path,
                                                            ) -> None:
    """Not opened and processed as an all-white slide with 'salient' white crops."""
    bad = _patch_tag(tiled, tmp_path / "empty.tif", 325, 0)        # TileByteCounts
    with pytest.raises(SlideError, match=r"level 0 \(1024 x 1024 px\) holds no image data"):
        open_slide(bad)
    proc = _wsikit("select", str(bad), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "no image data" in proc.stderr
    assert not list((tmp_path / "o").glob("select/*/crops/*.png"))


def test_honest_files_still_open(ndpi: Path, tiled: Path, cmu_small: Path) -> None:
    for path in (ndpi, tiled, cmu_small):
        with open_slide(path) as slide:
            assert slide.dimensions[0] > 0


def test_an_omezarr_with_giant_chunks_is_refused_before_a_read(tmp_path: Path) -> None:
    """One read decodes a whole chunk: 100000² px chunks (28 GiB each) are refused at open
    with the numbers, not an allocation that fails (or succeeds) on the first pixel."""
    zarr = pytest.importorskip("zarr")
    path = tmp_path / "giant.ome.zarr"
    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    root.create_array("0", shape=(3, 200_000, 200_000), chunks=(3, 100_000, 100_000),
                      dtype="uint8")                                # no chunk on disk: 1 kB
    root.attrs["multiscales"] = [{"version": "0.4", "axes": [
        {"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "micrometer"},
        {"name": "x", "type": "space", "unit": "micrometer"}], "datasets": [
        {"path": "0", "coordinateTransformations": [{"type": "scale",
                                                     "scale": [1.0, 0.5, 0.5]}]}]}]
    with pytest.raises(SlideError, match=r"chunks of \(3, 100000, 100000\).*rechunk"):
        open_slide(path)


def test_an_omezarr_scale_of_zero_gives_downsamples_from_the_sizes(tmp_path: Path) -> None:
    zarr = pytest.importorskip("zarr")
    path = tmp_path / "scales.ome.zarr"
    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    datasets = []
    for i, (side, scale) in enumerate([(512, 0.5), (256, 0.0), (128, float("inf"))]):
        arr = root.create_array(str(i), shape=(3, side, side), chunks=(3, 64, 64), dtype="uint8")
        arr[...] = 200
        datasets.append({"path": str(i), "coordinateTransformations": [
            {"type": "scale", "scale": [1.0, scale, scale]}]})
    root.attrs["multiscales"] = [{"version": "0.4", "axes": [
        {"name": "c", "type": "channel"}, {"name": "y", "type": "space", "unit": "micrometer"},
        {"name": "x", "type": "space", "unit": "micrometer"}], "datasets": datasets}]
    with open_slide(path) as slide:
        assert slide.level_downsamples == (1.0, 2.0, 4.0)


def test_a_dicom_level_whose_frames_lie_about_their_size_is_refused(tmp_path: Path) -> None:
    """A 256² JPEG frame declared as one 60000² frame (a 14 GiB decode): refused at open,
    not opened as a 60000² slide whose pixels are made up."""
    pydicom = pytest.importorskip("pydicom")
    pytest.importorskip("wsidicom")
    from _dicom_wsi import write_dicom_wsi

    img = np.full((256, 256, 3), 200, np.uint8)
    path = write_dicom_wsi(tmp_path / "dcm", img, mpp=0.5, tile=256, downsamples=(1,),
                           codec="jpeg")[0]
    ds = pydicom.dcmread(path)
    ds.Rows = ds.Columns = ds.TotalPixelMatrixColumns = ds.TotalPixelMatrixRows = 60000
    ds.save_as(path)
    with pytest.raises(SlideError, match=r"frames of 60000 x 60000 px"):
        open_slide(tmp_path / "dcm")
