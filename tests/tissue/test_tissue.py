"""Tissue segmentation on synthetic thumbnails with pen ink, grey backgrounds, dark borders."""

from __future__ import annotations

import json

import numpy as np
import pytest

from wsikit.errors import TissueError
from wsikit.slide import open_slide
from wsikit.slide.synthetic import SyntheticSpec, synthetic_tissue_image
from wsikit.tissue.mask import TissueMask, segment_tissue, tissue_mask
from wsikit.tissue.stain import ink_mask

MPP = 8.0  # thumbnails below are 8192x6144 @0.25 µm/px seen at downsample 32


def _truth(shape: tuple[int, int], spec: SyntheticSpec) -> np.ndarray:
    h, w = shape
    yy, xx = np.mgrid[0:h, 0:w]
    cx, cy, rx, ry = spec.width / 2, spec.height / 2, spec.width * 0.38, spec.height * 0.36
    return (((xx + 0.5) * 32 - cx) / rx) ** 2 + (((yy + 0.5) * 32 - cy) / ry) ** 2 <= 1


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max(1, (a | b).sum()))


@pytest.fixture(params=[243, 205], ids=["white", "grey"])
def thumb_and_truth(request):
    spec = SyntheticSpec(8192, 6144, mpp=0.25, background=request.param, seed=3)
    img = synthetic_tissue_image(spec, downsample=32)
    return img, _truth(img.shape[:2], spec)


def _draw_line(img: np.ndarray, y: int, x0: int, x1: int, colour, width: int = 3) -> None:
    img[y:y + width, x0:x1] = colour


def test_plain_tissue_found(thumb_and_truth):
    img, truth = thumb_and_truth
    mask = tissue_mask(img, mpp=MPP)
    assert mask.dtype == bool and mask.shape == truth.shape
    assert _iou(mask, truth) > 0.93


@pytest.mark.parametrize("colour", [(40, 70, 190), (30, 140, 70), (25, 25, 30)],
                         ids=["blue", "green", "black"])
def test_pen_marks_excluded(thumb_and_truth, colour):
    img, truth = thumb_and_truth
    img = img.copy()
    _draw_line(img, 8, 10, 240, colour)          # on the background, above the tissue
    for y in range(150, 185):                      # a scribble on the background, lower right
        img[y, 225:250] = colour
    mask = tissue_mask(img, mpp=MPP)
    assert not mask[8:11, :].any()
    assert not mask[150:185, 225:250].any()
    assert _iou(mask, truth) > 0.9


def test_ink_mask_does_not_take_haematoxylin_or_eosin():
    # haematoxylin, pale purple, eosin pink, muscle pink, keratin near-black purple, the dark
    # eosinophilic rim of a TCGA slide (issue 33) and the same rim twice and three times as
    # dark, haemorrhage, a dark red of the same chromaticity as haemorrhage (once taken for
    # "dark red marker": no colour rule can tell the two apart)
    stain = np.array([[[70, 40, 125], [150, 90, 170], [232, 160, 200], [205, 111, 148],
                       [33, 11, 43], [182, 88, 132], [130, 30, 68], [93, 10, 35],
                       [103, 30, 58], [82, 31, 49]]], np.uint8)
    assert not ink_mask(stain).any()
    # blue, green, black, teal dye, red marker, grey
    ink = np.array([[[40, 70, 190], [30, 140, 70], [20, 20, 20], [82, 182, 165],
                     [219, 43, 63], [92, 91, 93]]], np.uint8)
    assert ink_mask(ink).all()


def test_dark_scanner_border_excluded(thumb_and_truth):
    img, truth = thumb_and_truth
    img = img.copy()
    img[:, :12] = 15   # black slide-holder edge on the left
    img[-10:, :] = 40  # and the bottom
    mask = tissue_mask(img, mpp=MPP)
    assert not mask[:, :12].any() and not mask[-10:, :].any()
    assert _iou(mask, truth) > 0.9


def test_blank_thumbnail_gives_empty_mask():
    rng = np.random.default_rng(0)
    for bg in (243, 200):
        img = np.clip(bg + rng.normal(0, 3, (120, 160, 3)), 0, 255).astype(np.uint8)
        assert not tissue_mask(img, mpp=MPP).any()


def test_areas_are_in_square_microns():
    img = np.full((200, 200, 3), 240, np.uint8)
    img[20:30, 20:30] = (200, 100, 160)     # 10x10 px speck
    img[60:160, 60:160] = (200, 100, 160)   # 100x100 px piece
    img[100:104, 100:104] = 240             # 4x4 px hole
    img[80:110, 120:150] = 240              # 30x30 px hole
    kw = dict(smooth_um=0.0)
    # at 8 µm/px: speck 6400 µm² (< 5e4 dropped), small hole 1024 µm² filled, big hole kept
    m8 = tissue_mask(img, mpp=8.0, **kw)
    assert not m8[20:30, 20:30].any()
    assert m8[100:104, 100:104].all()
    assert not m8[85:105, 125:145].any()
    # at 32 µm/px the same pixels are 16x larger: the speck is now big enough to keep,
    # and the 30x30 px hole (921 600 µm²) is still kept
    m32 = tissue_mask(img, mpp=32.0, **kw)
    assert m32[20:30, 20:30].all()
    # at 2 µm/px the big piece is 40 000 µm² < 5e4 and disappears
    assert not tissue_mask(img, mpp=2.0, **kw).any()


def test_bad_input():
    with pytest.raises(TissueError, match="RGB"):
        tissue_mask(np.zeros((10, 10), np.uint8), mpp=8.0)
    with pytest.raises(TissueError, match="mpp"):
        tissue_mask(np.zeros((10, 10, 3), np.uint8), mpp=0)


def _mask_with_hole() -> TissueMask:
    mask = np.zeros((100, 150), bool)
    mask[10:90, 10:110] = True
    mask[30:60, 40:70] = False   # hole
    mask[20:40, 120:140] = True  # second piece
    return TissueMask(mask=mask, mpp=8.0, downsample=32.0, level0_size=(4800, 3200),
                      slide_mpp=0.25, slide_name="s")


def test_geojson_polygons_with_holes_in_level0():
    tm = _mask_with_hole()
    gj = tm.to_geojson()
    json.dumps(gj)  # serialisable
    assert gj["type"] == "FeatureCollection" and len(gj["features"]) == 2
    rings = sorted((f["geometry"]["coordinates"] for f in gj["features"]), key=len)
    assert len(rings[0]) == 1 and len(rings[1]) == 2  # second piece; piece with one hole
    ext = np.asarray(rings[1][0])
    assert ext[:, 0].min() == pytest.approx(10 * 32, abs=32) and \
        ext[:, 0].max() == pytest.approx(110 * 32, abs=32)
    hole = np.asarray(rings[1][1])
    assert hole[:, 1].min() == pytest.approx(30 * 32, abs=32)
    assert all(np.array_equal(r[0], r[-1]) for f in gj["features"]
               for r in f["geometry"]["coordinates"])


def test_geojson_round_trip(tmp_path):
    tm = _mask_with_hole()
    path = tm.write_geojson(tmp_path / "contours_geojson" / "s.geojson")
    # this mask was made at 8 µm/px by hand: no small-slide rule (min_side_px=0)
    back = TissueMask.from_geojson(path, level0_size=(4800, 3200), slide_mpp=0.25, mpp=8.0,
                                   min_side_px=0)
    assert back.mask.shape == tm.mask.shape
    assert _iou(back.mask, tm.mask) > 0.97
    assert not back.mask[40:50, 50:60].any()  # hole stays a hole
    with pytest.raises(TissueError, match="GeoJSON"):
        TissueMask.from_geojson({"type": "Point"}, level0_size=(10, 10), slide_mpp=1.0)


def test_write_png(tmp_path):
    from PIL import Image

    tm = _mask_with_hole()
    arr = np.asarray(Image.open(tm.write_png(tmp_path / "m.png")))
    assert arr.dtype == np.uint8 and set(np.unique(arr)) == {0, 255}
    np.testing.assert_array_equal(arr > 0, tm.mask)


def test_segment_tissue_on_slide(synthetic_slide):
    with open_slide(synthetic_slide) as slide:
        tm = segment_tissue(slide)
    assert tm.mask.shape == (192, 256) and tm.mpp == pytest.approx(8.0)
    assert tm.level0_size == (8192, 6144) and tm.slide_mpp == 0.25
    spec = SyntheticSpec(8192, 6144)
    assert _iou(tm.mask, _truth(tm.mask.shape, spec)) > 0.93


def test_segment_tissue_on_real_slide(cmu_small):
    with open_slide(cmu_small) as slide:
        tm = segment_tissue(slide)
    # small slide: finer than 8 µm/px so the long side has >= 256 px
    assert max(tm.mask.shape) >= 255
    assert 0.15 < tm.tissue_fraction < 0.7


def test_geojson_mask_has_the_pixel_grid_of_the_segmentation(cmu_small, tmp_path):
    """A small slide is segmented finer than 8 µm/px (min_side_px); its GeoJSON, read back,
    is rasterised on that same grid, not at the nominal 8 µm/px."""
    with open_slide(cmu_small) as slide:
        tm = segment_tissue(slide)
        size, mpp = slide.dimensions, slide.mpp
    assert tm.mpp < MPP  # the small-slide rule is in play
    path = tm.write_geojson(tmp_path / "s.geojson")
    back = TissueMask.from_geojson(path, level0_size=size, slide_mpp=mpp, mpp=MPP)
    assert back.mask.shape == tm.mask.shape
    assert back.mpp == pytest.approx(tm.mpp) and back.downsample == pytest.approx(tm.downsample)
    assert _iou(back.mask, tm.mask) > 0.95


def test_mask_shape_pixel_budget_bounds_huge_slides_only():
    from wsikit.tissue.constants import MASK_MAX_PIXELS
    from wsikit.tissue.mask import mask_shape

    # a test-sized slide is untouched by the bound: exactly the 8 µm/px shape
    assert mask_shape((49152, 32768), 0.25, mpp=8.0) == (1536, 1024)
    assert mask_shape((49152, 32768), 0.25, mpp=8.0, max_pixels=0) == (1536, 1024)
    # 200k x 100k px at 0.25 µm/px would be 6250 x 3125 at 8 µm/px: coarsened into the budget,
    # aspect ratio kept
    w, h = mask_shape((200_000, 100_000), 0.25, mpp=8.0)
    assert w * h <= MASK_MAX_PIXELS and w * h > 0.99 * MASK_MAX_PIXELS
    assert abs(w / h - 2.0) < 1e-3
    assert mask_shape((200_000, 100_000), 0.25, mpp=8.0, max_pixels=0) == (6250, 3125)
    # the mask's own effective mpp (what a GeoJSON records) maps back to the same grid
    eff = 0.25 * 0.5 * (200_000 / w + 100_000 / h)
    assert mask_shape((200_000, 100_000), 0.25, mpp=eff) == (w, h)
