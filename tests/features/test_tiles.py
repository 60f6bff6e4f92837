"""The direct TIFF tile reader equals a reference read through OpenSlide (within JPEG/resize
tolerance), handles shared JPEG tables, RGB-coded JPEG, slide edges and non-JPEG tiles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import openslide
import pytest
import tifffile
from PIL import Image

from wsikit.errors import SlideError
from wsikit.slide.region_resize import resize_uint8
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide
from wsikit.slide.tiles import TileReader, open_tile_reader


def _openslide_level(path: Path, level: int, box: tuple[int, int, int, int]) -> np.ndarray:
    """Reference: OpenSlide pixels of ``box`` (in level coordinates), composited on white."""
    with openslide.OpenSlide(str(path)) as s:
        ds = s.level_downsamples[level]
        rgba = s.read_region((int(box[0] * ds), int(box[1] * ds)), level, box[2:])
    white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return np.asarray(Image.alpha_composite(white, rgba).convert("RGB"))


def _box_mean(img: np.ndarray, k: int) -> np.ndarray:
    h, w = img.shape[0] // k, img.shape[1] // k
    return img[:h * k, :w * k].reshape(h, k, w, k, 3).astype(np.float64).mean(axis=(1, 3))


def test_full_resolution_tiles_equal_openslide(cmu_small: Path) -> None:
    # Aperio CMU-1: RGB-coded JPEG with shared JPEGTables; a full decode must be bit-exact
    with TileReader(cmu_small) as r:
        lv = r.levels[0]
        assert (lv.width, lv.height) == (2220, 2967)
        box = (100, 130, 700, 500)  # not tile aligned, spans several tiles
        out = r.read_region(box, (700, 500))
    ref = _openslide_level(cmu_small, 0, box)
    assert out.shape == (500, 700, 3)
    np.testing.assert_array_equal(out, ref)


def test_dct_scaled_read_matches_area_reference(cmu_small: Path) -> None:
    with TileReader(cmu_small) as r:
        # DCT-domain scaling only when asked for (it is not the specified resize)
        assert r.plan((960, 960), (480, 480)) == (0, 1)
        assert r.plan((960, 960), (480, 480), dct=True) == (0, 2)
        assert r.plan((960, 960), (240, 240), dct=True) == (0, 4)
        assert r.plan((960, 960), (600, 600), dct=True) == (0, 1)
        half = r.read_region((480, 720, 960, 960), (480, 480), dct=True)
    ref = _box_mean(_openslide_level(cmu_small, 0, (480, 720, 960, 960)), 2)
    diff = np.abs(half.astype(np.float64) - ref)
    assert diff.mean() < 1.0, diff.mean()
    assert np.percentile(diff, 99) < 8


def test_non_integer_resize_and_slide_edge(cmu_small: Path) -> None:
    # 1000 l0 px -> 448 px, box past the right and bottom edges: outside is white
    box = (1700, 2500, 1000, 1000)
    with TileReader(cmu_small) as r:
        out = r.read_region(box, (448, 448))
    ref_full = np.full((1000, 1000, 3), 255, np.uint8)
    ref_full[:467, :520] = _openslide_level(cmu_small, 0, (1700, 2500, 520, 467))
    ref = resize_uint8(ref_full, (448, 448))
    diff = np.abs(out.astype(np.int16) - ref)
    assert out.shape == (448, 448, 3)
    assert diff.mean() < 2.0
    # well outside the slide content: exactly white
    assert (out[-100:, -100:] == 255).all()


@pytest.fixture(scope="module")
def pyramid_slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """YCbCr JPEG, 4 levels (tifffile writer, no thumbnail page), odd level-0 size."""
    path = tmp_path_factory.mktemp("tiles") / "pyr.svs"
    spec = SyntheticSpec(4000, 3000, mpp=0.25, dense=[(1000, 1000, 800, 600)])
    return write_synthetic_slide(path, spec, downsamples=(1, 4, 16))


def test_levels_and_level_choice(pyramid_slide: Path) -> None:
    with TileReader(pyramid_slide) as r:
        assert [lv.width for lv in r.levels] == [4000, 1000, 250]
        assert r.levels[1].downsample == (4.0, 4.0)
        # 8 l0 px per output px -> level 1 (ds 4) at DCT reduction 2
        assert r.plan((4096, 4096), (512, 512), dct=True) == (1, 2)
        assert r.plan((4096, 4096), (512, 512)) == (1, 1)
        out = r.read_region((512, 512, 2048, 2048), (256, 256), dct=True)
    ref = _box_mean(_openslide_level(pyramid_slide, 1, (128, 128, 512, 512)), 2)
    diff = np.abs(out.astype(np.float64) - ref)
    assert diff.mean() < 1.5 and np.percentile(diff, 99) < 12


def test_tile_cache_decodes_each_tile_once(pyramid_slide: Path) -> None:
    with TileReader(pyramid_slide, cache_mb=64) as r:
        boxes = [(x, 300, 600, 600) for x in range(0, 3000, 300)]  # overlapping neighbours
        for b in boxes:
            r.read_region(b, (600, 600))
        needed = {t for b in boxes for t in r.tiles_for(b, 0)}
        assert r.tiles_decoded == len(needed)
        assert r.cache_hits > 0
    with TileReader(pyramid_slide, cache_mb=0) as r:
        for b in boxes:
            r.read_region(b, (600, 600))
        assert r.tiles_decoded == sum(len(r.tiles_for(b, 0)) for b in boxes)


@pytest.mark.parametrize("dct", [False, True])
def test_read_regions_decodes_one_use_tiles_into_one_buffer(pyramid_slide: Path,
                                                           dct: bool) -> None:
    # disjoint tile-aligned boxes: every tile is used once, decoded into the reader's reused
    # buffer (not cached); a box over an already cached tile reads it from the cache
    boxes = np.array([(x, y, 512, 512) for y in (0, 1024) for x in (0, 512, 1536)], float)
    size = (256, 256) if dct else (512, 512)
    with TileReader(pyramid_slide, cache_mb=64) as r:
        want = np.stack([r.read_region(tuple(b), size, dct=dct) for b in boxes])
    with TileReader(pyramid_slide, cache_mb=64) as r:
        cached = r.read_region(tuple(boxes[-1]), size, dct=dct)  # its tiles now cached
        decoded, hits = r.tiles_decoded, r.cache_hits
        got = r.read_regions(boxes, size, dct=dct)
        used = sum(len(r.tiles_for(tuple(b), 0)) for b in boxes)
        last = len(r.tiles_for(tuple(boxes[-1]), 0))
        assert r.tiles_decoded - decoded == used - last  # the cached ones were not decoded
        assert r.cache_hits - hits == last
        assert len(r._cache) == last  # one-use tiles did not enter the cache
        buf = r._tile_buf
        assert buf.shape == (256 // (2 if dct else 1),) * 2 + (3,)
        np.testing.assert_array_equal(r.read_regions(boxes, size, dct=dct), got)
        assert r._tile_buf is buf  # the same buffer for every batch
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got[-1], cached)


def test_non_jpeg_tiles_decoded_by_tifffile(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 255, (600, 700, 3), dtype=np.uint8)
    path = tmp_path / "lzw.tif"
    tifffile.imwrite(path, img, tile=(256, 256), compression="zlib", photometric="rgb")
    reader, why = open_tile_reader(path)
    assert reader is not None, why
    with reader:
        out = reader.read_region((50, 60, 500, 400), (500, 400))
    np.testing.assert_array_equal(out, img[60:460, 50:550])


def test_unsuitable_files_give_reasons(tmp_path: Path) -> None:
    flat = tmp_path / "flat.tif"
    tifffile.imwrite(flat, np.zeros((64, 64, 3), np.uint8))  # stripped, not tiled
    reader, why = open_tile_reader(flat)
    assert reader is None and "not tiled" in why
    png = tmp_path / "x.png"
    Image.new("RGB", (8, 8)).save(png)
    reader, why = open_tile_reader(png)
    assert reader is None and ".png" in why
    with pytest.raises(SlideError, match="not a readable TIFF"):
        TileReader(png)


def test_dimension_mismatch_rejected(cmu_small: Path) -> None:
    reader, why = open_tile_reader(cmu_small, expected_dimensions=(100, 100))
    assert reader is None and "2220" in why
