"""The viewer's Deep Zoom tiles: the slide's own pixels at every level, stored JPEG tiles passed
through byte for byte, bounded reads, no torch, and never the pixels of a replaced file."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from defusedxml.ElementTree import fromstring as defused_fromstring
from PIL import Image

from wsikit.look._dzi import DziGeometry, matching_level, stored_tile
from wsikit.look._viewer_tiles import SlideWatch, TileCache, TileService, encode_jpeg
from wsikit.slide import open_slide
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

REPO = Path(__file__).resolve().parents[2]


def _service(path: Path) -> TileService:
    slide = open_slide(path, require_mpp=False)
    return TileService(slide, open_handle=lambda: open_slide(path, require_mpp=False))


def _decode(body: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(body)) as im:
        return np.asarray(im.convert("RGB"))


def _stored_scan(path: Path, page: int, col: int, row: int) -> bytes:
    """The bytes the TIFF stores for one tile, read with tifffile (not wsikit's reader)."""
    import tifffile

    with tifffile.TiffFile(path) as tif:
        p = tif.pages[page]
        idx = row * -(-p.imagewidth // p.tilewidth) + col
        with open(path, "rb") as fh:
            fh.seek(p.dataoffsets[idx])
            return fh.read(p.databytecounts[idx])


@pytest.fixture(scope="module")
def pyramid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3000×2000 Aperio-style JPEG pyramid (levels 1/4/16, 256-px tiles): Deep Zoom levels
    12, 10 and 8 are stored in the file, 11 and 9 are not, 7 and below fit one tile."""
    path = tmp_path_factory.mktemp("dzi") / "pyramid.svs"
    spec = SyntheticSpec(3000, 2000, mpp=0.25, dense=[(1000, 600, 800, 600)])
    return write_synthetic_slide(path, spec, downsamples=(1, 4, 16))


def test_geometry_levels_tiles_and_descriptor() -> None:
    g = DziGeometry(3000, 2000, 256)
    assert g.max_level == 12 and g.level_size(12) == (3000, 2000)
    assert g.level_size(10) == (750, 500) and g.level_size(0) == (1, 1)
    assert g.tiles_across(12) == (12, 8) and g.tiles_across(10) == (3, 2)
    assert g.tile_box(12, 11, 7) == ((2816, 1792, 184, 208), (184, 208))
    assert g.tile_box(10, 2, 1) == ((2048, 1024, 952, 976), (238, 244))
    assert g.tile_box(12, 12, 0) is None and g.tile_box(13, 0, 0) is None
    assert g.tile_box(-1, 0, 0) is None and g.tile_box(12, -1, 0) is None
    root = defused_fromstring(g.descriptor())
    ns = "{http://schemas.microsoft.com/deepzoom/2008}"
    assert root.tag == ns + "Image" and root.attrib == {"Format": "jpeg", "Overlap": "0",
                                                         "TileSize": "256"}
    assert root.find(ns + "Size").attrib == {"Width": "3000", "Height": "2000"}
    # Aperio rounds level sizes down: 8228 for 32914 / 4 is the same level
    big = DziGeometry(46000, 32914, 240)
    sizes = [(46000, 32914), (11500, 8228), (2875, 2057)]
    assert matching_level(big, big.max_level, sizes) == 0
    assert matching_level(big, big.max_level - 2, sizes) == 1
    assert matching_level(big, big.max_level - 1, sizes) is None
    assert stored_tile(big, big.max_level - 2, 3, 4, level_size=(11500, 8228),
                       stored_tile_size=(240, 240))
    assert not stored_tile(big, big.max_level - 2, 47, 0, level_size=(11500, 8228),
                           stored_tile_size=(240, 240))          # the file pads its edge tile
    assert not stored_tile(big, big.max_level - 2, 3, 4, level_size=(11500, 8228),
                           stored_tile_size=(256, 256))


def test_every_tile_of_the_real_slide_is_its_pixels(cmu_small: Path) -> None:
    """CMU-1-Small-Region (one level, 240-px JPEG tiles): every whole tile is the file's own
    JPEG stream (its scan bytes unchanged, the shared tables merged in), decoding to exactly
    the slide reader's pixels; the narrower edge tiles are those pixels encoded once."""
    svc = _service(cmu_small)
    slide = svc.slide
    try:
        g = svc.geometry
        assert g.tile == 240 and g.max_level == 12
        cols, rows = g.tiles_across(12)
        for row in range(rows):
            for col in range(cols):
                body = svc.tile(12, col, row)
                x, y, w, h = g.tile_rect(12, col, row)
                truth = slide.read_region((x, y), 0, (w, h))
                if (w, h) == (240, 240):
                    scan = _stored_scan(cmu_small, 0, col, row)
                    assert body.endswith(scan[2:]) and body[:2] == b"\xff\xd8"
                    assert np.array_equal(_decode(body), truth)
                else:
                    assert np.array_equal(_decode(body), _decode(encode_jpeg(truth)))
        assert svc.passed_through == 9 * 12 and svc.encoded == cols * rows - 9 * 12
    finally:
        svc.close()
        slide.close()


def test_pyramid_levels_stored_read_and_composed(pyramid: Path) -> None:
    """Levels the file stores: whole tiles passed through, edge tiles its pixels; levels it
    lacks: what the slide reader gives for the box (the very same pixels, encoded once); the
    levels that fit one tile, made from the next one: within one JPEG encode of the box's
    pixels."""
    svc = _service(pyramid)
    slide = svc.slide
    try:
        g = svc.geometry
        assert (g.tile, g.max_level) == (256, 12)
        for level in range(g.max_level + 1):
            cols, rows = g.tiles_across(level)
            for row in range(rows):
                for col in range(cols):
                    before = svc.passed_through
                    got = _decode(svc.tile(level, col, row))
                    box, out = g.tile_box(level, col, row)
                    i = {12: 0, 10: 1, 8: 2}.get(level)
                    if i is not None:
                        x, y, w, h = g.tile_rect(level, col, row)
                        lw, lh = slide.level_dimensions[i]
                        truth = slide.read_region((x * slide.level_downsamples[i],
                                                   y * slide.level_downsamples[i]), i, (w, h))
                        if svc.passed_through > before:
                            assert (w, h) == (256, 256)
                            assert np.array_equal(got, truth)
                            continue
                    else:
                        truth = slide.read_at_mpp(box, out_size=out)
                    if level >= 8:
                        assert np.array_equal(got, _decode(encode_jpeg(truth))), (level, col, row)
                    elif min(g.level_size(level)) >= 4:  # made from the next level: as
                        # close to the box's pixels as one JPEG encode of them is
                        err = np.abs(got.astype(int) - truth).mean()
                        once = np.abs(_decode(encode_jpeg(truth)).astype(int) - truth).mean()
                        assert err <= once + 1.5, (level, err, once)
                    else:  # a few pixels: their colour after a chain of halvings
                        assert got.shape == truth.shape
                        assert np.abs(got.astype(int) - truth).mean() < 16
        assert svc.passed_through == 11 * 7 + 2 * 1 + 0   # whole tiles of levels 12, 10 (8: one)
    finally:
        svc.close()
        slide.close()


@pytest.mark.parametrize("compression", ["zlib", "jpeg"])
def test_a_flat_slide_is_read_in_bounded_regions(tmp_path: Path, compression: str) -> None:
    """A single-level tiled TIFF seen whole: no tile read decodes more than ``max_read_px``
    pixels (coarse tiles are decoded DCT-scaled from JPEG tiles or made from finer ones),
    and the overview is right."""
    tifffile = pytest.importorskip("tifffile")
    side = 2048
    yy, xx = np.mgrid[0:side, 0:side]
    img = np.stack([(xx * 255 // side), (yy * 255 // side), np.full_like(xx, 128)], -1)
    path = tmp_path / "flat.tif"
    tifffile.imwrite(path, img.astype(np.uint8), tile=(256, 256), photometric="rgb",
                     compression=compression, resolution=(1e4 / 0.5, 1e4 / 0.5),
                     resolutionunit="CENTIMETER")
    svc = _service(path)
    svc.max_read_px = 300 * 300
    try:
        g = svc.geometry
        assert svc.slide.level_count == 1 and g.max_level == 11 and g.tile == 256
        whole = svc.pixels(8, 0, 0)                           # 2048 / 8 = 256 px
        assert whole.shape == (256, 256, 3) and 0 < svc.largest_read <= 300 * 300
        truth = img[4::8, 4::8].astype(np.int16)
        assert np.abs(whole.astype(np.int16) - truth).mean() < 3
        level0 = svc.pixels(11, 2, 1)                          # the slide's pixels
        assert np.array_equal(level0, svc.slide.read_region((512, 256), 0, (256, 256)))
    finally:
        svc.close()
        svc.slide.close()


def test_the_cache_bounds_bytes_and_computes_a_tile_once() -> None:
    cache = TileCache(1000)
    for i in range(30):
        cache.put(i, b"x" * 100)
    assert cache.get(0) is None and cache.get(29) == b"x" * 100      # least recent dropped
    assert cache._bytes <= 1000
    calls = []
    gate = threading.Event()

    def make() -> bytes:
        calls.append(1)
        gate.wait(5)
        return b"tile"

    got: list[bytes] = []
    threads = [threading.Thread(target=lambda: got.append(cache.get_or_make("k", make)))
               for _ in range(8)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert got == [b"tile"] * 8 and len(calls) == 1


def _overwrite_in_place(path: Path, other: Path) -> None:
    """``cat other > path``: the same file (inode), other content."""
    with open(path, "r+b") as fh:
        fh.truncate(0)
        fh.write(other.read_bytes())


def test_a_slide_overwritten_while_served_is_refused(cmu_small: Path, pyramid: Path,
                                                     tmp_path: Path) -> None:
    """Issue 40.3: ``cat other.svs > slide.svs`` while the viewer serves it: from then on no
    tile is served (a clear message naming the file), and nothing of the new file is drawn
    through the old one's layout; a touched but unchanged file is still served."""
    from wsikit.errors import SlideError

    path = tmp_path / "slide.svs"
    shutil.copy(cmu_small, path)
    svc = _service(path)
    try:
        assert svc.tile(12, 1, 1)[:2] == b"\xff\xd8" and svc.changed is None
        os.utime(path, None)                      # touched: same content, still the slide
        assert svc.tile(12, 2, 1)[:2] == b"\xff\xd8" and svc.changed is None
        _overwrite_in_place(path, pyramid)
        with pytest.raises(SlideError, match="has changed since wsikit view opened it"):
            svc.tile(12, 3, 1)
        with pytest.raises(SlideError, match=str(path)):
            svc.tile(12, 1, 1)                    # not even a tile read before the change
        assert "Restart wsikit view" in svc.changed
    finally:
        svc.close()
        svc.slide.close()


def test_a_dicom_level_rewritten_in_place_is_refused(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A DICOM series is a folder: a level file overwritten in place changes no time of the
    folder, and is still told (the folder's files are watched, their fingerprints compared);
    a level file touched with the same content is still served."""
    import importlib.util

    from wsikit.look import _viewer_tiles

    monkeypatch.setattr(_viewer_tiles, "FOLDER_RECHECK_S", 0.0)  # list it on every request
    monkeypatch.setattr(_viewer_tiles, "FOLDER_RECHECK_TIMES", 0.0)

    from wsikit.errors import SlideError
    from wsikit.slide.synthetic import synthetic_tissue_image

    pytest.importorskip("wsidicom")
    spec = importlib.util.spec_from_file_location(
        "_dicom_wsi", REPO / "tests" / "slide" / "_dicom_wsi.py")
    assert spec is not None and spec.loader is not None
    dicom = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dicom)
    one = synthetic_tissue_image(SyntheticSpec(768, 512, mpp=0.25, seed=1))
    two = synthetic_tissue_image(SyntheticSpec(768, 512, mpp=0.25, seed=2))
    series = dicom.write_dicom_wsi(tmp_path / "case", one, mpp=0.25, downsamples=(1, 2))
    other = dicom.write_dicom_wsi(tmp_path / "other", two, mpp=0.25, downsamples=(1, 2))
    folder_times = (tmp_path / "case").stat().st_mtime_ns
    svc = _service(tmp_path / "case")
    try:
        top = svc.geometry.max_level
        assert svc.tile(top, 0, 0)[:2] == b"\xff\xd8" and svc.changed is None
        os.utime(series[0], None)                  # touched: same content, still the slide
        assert svc.tile(top, 1, 0)[:2] == b"\xff\xd8" and svc.changed is None
        _overwrite_in_place(series[0], other[0])
        assert (tmp_path / "case").stat().st_mtime_ns == folder_times
        with pytest.raises(SlideError, match="has changed since wsikit view opened it"):
            svc.tile(top, 0, 0)
    finally:
        svc.close()
        svc.slide.close()


def test_an_mrxs_data_file_rewritten_in_place_is_said(tmp_path: Path, mrxs_like) -> None:
    """An MRXS slide's pixels are in its folder's Data*.dat: one rewritten in place (the
    .mrxs file and the folder untouched) is a replaced slide; a touched one is not, nor is
    a file the slide does not name; a data file deleted is said too."""
    slide = mrxs_like(tmp_path)
    data = tmp_path / "case"
    watch = SlideWatch(slide)
    assert watch.check() is None
    os.utime(data / "Data0000.dat", None)          # touched: same content, still the slide
    (data / "notes.txt").write_text("not a slide file")
    assert watch.check() is None
    mrxs_times = (slide.stat().st_mtime_ns, data.stat().st_mtime_ns)
    with open(data / "Data0000.dat", "r+b") as fh:  # same size, other bytes, same inode
        fh.seek(100)
        fh.write(b"rescanned")
    assert (slide.stat().st_mtime_ns, data.stat().st_mtime_ns) == mrxs_times
    why = watch.check()
    assert why is not None and "has changed since wsikit view opened it" in why
    assert str(slide) in why
    gone = SlideWatch(mrxs_like(tmp_path / "b"))
    (tmp_path / "b" / "case" / "Data0001.dat").unlink()
    why = gone.check()
    assert why is not None and "Data0001.dat (named in Slidedat.ini) is missing" in why


def test_a_zarr_slide_is_not_listed_on_every_request(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """An OME-Zarr store has thousands of chunk files: before, every tile request stat-ed
    each of them. Now the folder is listed at most every FOLDER_RECHECK_S seconds, and a
    chunk rewritten in place is still said at the next listing."""
    import zarr

    from wsikit.look import _viewer_tiles

    root = zarr.open_group(str(tmp_path / "case.zarr"), mode="w", zarr_format=2)
    arr = root.create_array("0", shape=(3, 128, 128), chunks=(3, 16, 16), dtype="uint8")
    arr[...] = np.random.default_rng(0).integers(0, 64, (3, 128, 128), dtype=np.uint8)
    clock = [1000.0]
    monkeypatch.setattr(_viewer_tiles.time, "monotonic", lambda: clock[0])
    watch = SlideWatch(tmp_path / "case.zarr")
    calls = [0]
    real_scandir, real_stat = os.scandir, os.stat

    def scandir(*args, **kwargs):
        calls[0] += 1
        return real_scandir(*args, **kwargs)

    def counted_stat(*args, **kwargs):
        calls[0] += 1
        return real_stat(*args, **kwargs)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "stat", counted_stat)
    chunk = tmp_path / "case.zarr" / "0" / "0.3.5"
    chunk.write_bytes(chunk.read_bytes() + b"\0")  # rewritten: another size
    for _ in range(100):  # 100 requests within the interval: no file stat-ed
        assert watch.check() is None
    assert calls[0] == 0
    clock[0] += _viewer_tiles.FOLDER_RECHECK_S
    why = watch.check()
    assert why is not None and "has changed since wsikit view opened it" in why
    # one listing (a scandir a folder), then the bounded fingerprint: fewer than its 67 files
    assert 0 < calls[0] < 40


def test_a_deleted_slide_is_said(cmu_small: Path, tmp_path: Path) -> None:
    path = tmp_path / "gone.svs"
    shutil.copy(cmu_small, path)
    watch = SlideWatch(path)
    assert watch.check() is None
    path.unlink()
    assert "is gone" in watch.check()


SERVE_TILES = r"""
import json, sys, urllib.request
from wsikit.look.viewer import open_target, make_server
import threading
source = open_target(sys.argv[1])
server = make_server(source, port=0)
threading.Thread(target=server.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{server.port}/"
prefix = base + ("slides/" + sys.argv[2] + "/" if sys.argv[2] else "")
def get(path):
    with urllib.request.urlopen(prefix + path + ("&" if "?" in path else "?") + "token=" +
                                server.token, timeout=60) as r:
        return r.status, r.read()
info = json.loads(get("info.json")[1])
served = 0
for level in range(info["max_level"] - 4, info["max_level"] + 1):
    for col in range(3):
        for row in range(3):
            try:
                served += get(f"slide_files/{level}/{col}_{row}.jpeg")[0] == 200
            except urllib.error.HTTPError:
                pass
for layer in info["layers"]:
    get(f"layer_files/{layer['id']}/{info['max_level'] - 2}/1_1.png?palette=magma")
print(json.dumps({"served": served, "torch": "torch" in sys.modules,
                  "layers": len(info["layers"])}))
server.shutdown()
"""


def test_serving_tiles_never_imports_torch(cmu_small: Path, pyramid: Path, cmu_result: Path
                                          ) -> None:
    """Issue 40.6: the viewer process reads, resizes and encodes tiles (and draws heatmap
    layer tiles) without torch: the address space of a torch process is gigabytes, and its
    threads multiply it."""
    for target, prefix, layers in ((cmu_small, "", 0), (pyramid, "", 0),
                                   (cmu_result, "", 1),
                                   (cmu_result.parent.parent, cmu_result.name, 1)):
        proc = subprocess.run([sys.executable, "-c", SERVE_TILES, str(target), prefix],
                              capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert proc.returncode == 0, proc.stderr[-2000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert out["served"] > 20 and out["torch"] is False and out["layers"] == layers
