"""Patch grids at exact µm/px and TRIDENT/CLAM coordinate files."""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np
import pytest

from wsikit.errors import GridError
from wsikit.outputs.layout import OutputLayout
from wsikit.patches.grid import TRIDENT_ATTRS, TileGrid, make_grid, tissue_fractions
from wsikit.slide import open_slide
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide
from wsikit.tissue.mask import TissueMask, segment_tissue


def _brute_fractions(mask, scale, xs, ys, size):
    """Independent reference: per-pixel overlap lengths of every patch with every mask cell."""
    h, w = mask.shape
    cx0 = np.arange(w) * scale[0]
    cy0 = np.arange(h) * scale[1]
    out = np.zeros((len(ys), len(xs)))
    for j, y in enumerate(ys):
        oy = np.clip(np.minimum(cy0 + scale[1], y + size) - np.maximum(cy0, y), 0, None)
        for i, x in enumerate(xs):
            ox = np.clip(np.minimum(cx0 + scale[0], x + size) - np.maximum(cx0, x), 0, None)
            out[j, i] = (oy[:, None] * ox[None, :] * mask).sum() / size ** 2
    return out


def test_tissue_fractions_exact_by_area():
    rng = np.random.default_rng(1)
    mask = rng.random((37, 53)) > 0.6
    scale = (13.7, 14.1)
    xs = np.arange(0, 760, 45)
    ys = np.arange(0, 540, 45)
    got = tissue_fractions(mask, scale, xs, ys, 61)
    np.testing.assert_allclose(got, _brute_fractions(mask, scale, xs, ys, 61), atol=1e-5)


def test_grid_on_synthetic_slide(synthetic_slide):
    with open_slide(synthetic_slide) as slide:
        tm = segment_tissue(slide)
        grid = make_grid(slide, tm, target_mpp=0.5, patch_px=512, min_tissue=0.5)
    assert grid.patch_size_l0 == 1024 and grid.stride_l0 == 1024
    assert grid.coords.dtype == np.int64 and grid.coords.shape[1] == 2
    assert (grid.coords % 1024 == 0).all()
    assert (grid.tissue >= 0.5).all()
    # every patch fully inside the tissue ellipse is kept, none fully outside
    cx, cy, rx, ry = 4096, 3072, 8192 * 0.38, 6144 * 0.36
    corners = [(dx, dy) for dx in (0, 1024) for dy in (0, 1024)]
    inside = np.array([all(((x + dx - cx) / rx) ** 2 + ((y + dy - cy) / ry) ** 2 < 0.9
                           for dx, dy in corners) for x, y in grid.coords])
    assert inside.sum() >= 8
    kept = {tuple(c) for c in grid.coords}
    for x in range(0, 8192, 1024):
        for y in range(0, 6144, 1024):
            if all(((x + dx - cx) / rx) ** 2 + ((y + dy - cy) / ry) ** 2 < 0.85
                   for dx, dy in corners):
                assert (x, y) in kept


def test_cmu_small_about_20_patches(cmu_small):
    with open_slide(cmu_small) as slide:
        grid = make_grid(slide, segment_tissue(slide))
    assert grid.slide_mpp == pytest.approx(0.499) and grid.mpp_source == "openslide.mpp"
    assert grid.patch_size_l0 == round(512 * 0.5 / 0.499) == 513
    assert 12 <= len(grid) <= 28


def test_overlap_and_errors(synthetic_small_slide):
    with open_slide(synthetic_small_slide) as slide:
        g = make_grid(slide, None, whole_slide=True, target_mpp=0.5, patch_px=256, overlap_px=64)
        assert g.patch_size_l0 == 256 and g.stride_l0 == 192
        xs = np.unique(g.coords[:, 0])
        assert xs[0] == 0 and np.all(np.diff(xs) == 192)
        assert xs[-1] < 2048 <= xs[-1] + 256 and xs[-2] + 256 < 2048  # covers, no spare
        with pytest.raises(GridError, match="overlap"):
            make_grid(slide, None, whole_slide=True, patch_px=256, overlap_px=256)
        with pytest.raises(GridError, match="patch_px"):
            make_grid(slide, None, whole_slide=True, patch_px=0)
        with pytest.raises(GridError, match="min_tissue"):
            make_grid(slide, None, whole_slide=True, min_tissue=1.5)


def test_exact_target_mpp_not_binned(tmp_path):
    path = write_synthetic_slide(tmp_path / "odd.svs", SyntheticSpec(2000, 1500, mpp=0.265),
                                 downsamples=(1,))
    with open_slide(path) as slide:
        g = make_grid(slide, None, whole_slide=True, target_mpp=0.5, patch_px=224)
    assert g.patch_size_l0 == round(224 * 0.5 / 0.265) == 423  # not 448 ("20x" of 0.25)


def test_no_tissue_gives_empty_grid_and_warning(tmp_path):
    path = write_synthetic_slide(tmp_path / "blank.svs",
                                 SyntheticSpec(2048, 1536, mpp=0.5, tissue=[]),
                                 downsamples=(1, 4))
    with open_slide(path) as slide:
        tm = segment_tissue(slide)
        assert not tm.mask.any()
        with pytest.warns(UserWarning, match="empty") as rec:
            grid = make_grid(slide, tm)
    assert rec[0].filename == __file__
    assert grid.coords.shape == (0, 2) and grid.coords.dtype == np.int64
    out = grid.to_h5(tmp_path / "patches" / "blank_patches.h5")
    with h5py.File(out) as f:
        assert f["coords"].shape == (0, 2)


def test_slide_smaller_than_one_patch(tmp_path):
    spec = SyntheticSpec(200, 150, mpp=1.0, tissue=[(100, 75, 95, 70)])
    path = write_synthetic_slide(tmp_path / "tiny.svs", spec, downsamples=(1,), tile=64)
    with open_slide(path) as slide:
        tm = segment_tissue(slide, min_tissue_um2=1000)
        with pytest.warns(UserWarning, match="2x coarser than the target 0.5"):  # upsampled
            grid = make_grid(slide, tm, target_mpp=0.5, patch_px=512)
        assert grid.patch_size_l0 == 256 > max(slide.dimensions)
        assert grid.coords.tolist() == [[0, 0]]
        assert 0.2 < grid.tissue[0] < 0.5  # ~ellipse / patch area, outside counts as background
        px = slide.read_at_mpp((0, 0, 256, 256), target_mpp=0.5)
        assert px.shape == (512, 512, 3) and (px[-50:, -50:] == 255).all()


def _grid() -> TileGrid:
    coords = np.array([[0, 0], [1024, 0], [0, 1024]], np.int64)
    return TileGrid(coords=coords, tissue=np.array([0.5, 1.0, 0.25], np.float32), patch_px=512,
                    patch_size_l0=1024, stride_l0=1024, target_mpp=0.5, slide_mpp=0.25,
                    mpp_source="openslide.mpp", overlap_px=0, slide_name="s1",
                    level0_size=(3000, 2000))


def test_h5_written_with_every_attribute(tmp_path):
    path = _grid().to_h5(OutputLayout(tmp_path).coords("s1"))
    assert path == tmp_path / "patches" / "s1_patches.h5"
    assert [p for p in os.listdir(path.parent) if p != path.name] == []  # no temp left
    with h5py.File(path, "r") as f:
        coords = f["coords"]
        assert coords.dtype == np.int64 and coords.shape == (3, 2)
        for key in (*TRIDENT_ATTRS, "mpp", "target_mpp", "mpp_source", "wsikit_version"):
            assert key in coords.attrs, key
        a = coords.attrs
        assert (a["patch_size"], a["patch_size_level0"], a["overlap"]) == (512, 1024, 0)
        assert (a["level0_magnification"], a["target_magnification"]) == (40, 20)
        assert (a["level0_width"], a["level0_height"]) == (3000, 2000)
        assert a["name"] == "s1" and a["savetodir"] == str(tmp_path)
        assert a["mpp_source"] == "openslide.mpp"
        np.testing.assert_allclose(f["tissue"][()], [0.5, 1.0, 0.25])
    back = TileGrid.from_h5(path)
    np.testing.assert_array_equal(back.coords, _grid().coords)
    assert (back.patch_size_l0, back.stride_l0, back.target_mpp, back.slide_mpp) == \
        (1024, 1024, 0.5, 0.25)


def test_read_trident_style_file(tmp_path):
    path = tmp_path / "patches" / "t_patches.h5"
    path.parent.mkdir()
    with h5py.File(path, "w") as f:
        d = f.create_dataset("coords", data=np.array([[0, 0], [448, 0]], np.int64))
        d.attrs.update({"patch_size": 224, "patch_size_level0": 448,
                        "level0_magnification": 40, "target_magnification": 20, "overlap": 0,
                        "name": "t", "savetodir": str(tmp_path), "level0_width": 5000,
                        "level0_height": 4000})
    g = TileGrid.from_h5(path)
    assert (g.patch_px, g.patch_size_l0, g.stride_l0) == (224, 448, 448)
    assert g.slide_mpp == pytest.approx(0.25) and g.target_mpp == pytest.approx(0.5)
    assert g.level0_size == (5000, 4000) and np.isnan(g.tissue).all()


def test_read_clam_style_file(tmp_path):
    path = tmp_path / "c.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("coords", data=np.array([[0, 0], [1024, 2048]], np.int64))
        d.attrs["patch_size"] = 256
        d.attrs["patch_level"] = 1
        d.attrs["downsample"] = np.array([4.0, 4.0])
        d.attrs["level_dim"] = np.array([1250, 1000])
        d.attrs["name"] = "c"
    g = TileGrid.from_h5(path)
    assert (g.patch_px, g.patch_size_l0) == (256, 1024)
    assert g.level0_size == (5000, 4000) and np.isnan(g.slide_mpp)
    assert g.attrs["patch_level"] == 1


def test_bad_coordinate_files(tmp_path):
    empty = tmp_path / "x.h5"
    with h5py.File(empty, "w") as f:
        f.create_dataset("features", data=np.zeros((2, 2)))
    with pytest.raises(GridError, match="coords"):
        TileGrid.from_h5(empty)
    junk = tmp_path / "junk.h5"
    junk.write_text("nope")
    with pytest.raises(GridError, match="junk.h5"):
        TileGrid.from_h5(junk)


def test_mask_for_other_slide_rejected(synthetic_small_slide):
    tm = TissueMask(np.ones((10, 10), bool), 8.0, 16.0, (160, 160), 0.5)
    with open_slide(synthetic_small_slide) as slide, pytest.raises(GridError, match="mask"):
        make_grid(slide, tm)


def _grid_tuple(g):
    return (g.coords.tolist(), g.patch_size_l0, g.stride_l0, np.round(g.tissue, 12).tolist())


@pytest.mark.parametrize("slide_fixture", ["cmu_small", "synthetic_small_slide"])
def test_patch_and_select_build_the_same_grid(slide_fixture, request, tmp_path):
    """One path from the mask: fresh, cached (patch then select, select then patch) and an
    edited GeoJSON all give the grid of the mask they describe."""
    import json

    from wsikit.outputs.layout import OutputLayout
    from wsikit.run.pipeline import patch, select

    def select_grid(out: Path) -> TileGrid:
        select(path, out=out, encoder="heuristic", patch_px=256, scales=(1,), report=False,
               progress=False)
        return TileGrid.from_h5(OutputLayout(out).coords(path.stem))

    path = request.getfixturevalue(slide_fixture)
    opts = dict(target_mpp=0.5, patch_px=256, min_tissue=0.1)
    fresh = patch(path, out=tmp_path / "a", progress=False, **opts)
    cached = patch(path, out=tmp_path / "a", progress=False, **opts)
    sel_cached = select_grid(tmp_path / "a")
    sel_fresh = select_grid(tmp_path / "b")
    with open_slide(path) as s:
        direct = make_grid(s, segment_tissue(s), **opts)
    after = patch(path, out=tmp_path / "b", progress=False, **opts)
    assert len(fresh) > 0
    for g in (cached, sel_cached, sel_fresh, direct, after):
        assert _grid_tuple(g) == _grid_tuple(fresh)
    # an edited GeoJSON (QuPath) is respected by both commands: drop every polygon but one
    gj = OutputLayout(tmp_path / "a").tissue_geojson(fresh.slide_name)
    doc = json.loads(gj.read_text())
    doc["features"] = doc["features"][:1]
    doc["features"][0]["geometry"]["coordinates"] = doc["features"][0]["geometry"][
        "coordinates"][:1]
    ring = np.asarray(doc["features"][0]["geometry"]["coordinates"][0])
    x0, y0 = ring.min(0)
    x1, y1 = ring.max(0)
    half = [[x0, y0], [(x0 + x1) / 2, y0], [(x0 + x1) / 2, y1], [x0, y1], [x0, y0]]
    doc["features"][0]["geometry"]["coordinates"] = [half]
    gj.write_text(json.dumps(doc))
    edited = patch(path, out=tmp_path / "a", progress=False, **opts)
    sel_edited = select_grid(tmp_path / "a")
    with open_slide(path) as s:
        m = TissueMask.from_png(OutputLayout(tmp_path / "a").mask(fresh.slide_name),
                                level0_size=s.dimensions, slide_mpp=s.mpp)
    assert 0 < len(edited) < len(fresh)
    assert (edited.coords[:, 0] < (x0 + x1) / 2).all()
    assert _grid_tuple(sel_edited) == _grid_tuple(edited)
    seg = TissueMask.from_png(OutputLayout(tmp_path / "b").mask(fresh.slide_name),
                              level0_size=m.level0_size, slide_mpp=m.slide_mpp)
    # the edit is rasterised on the segmentation's own pixel grid, and only inside the box
    assert m.mask.shape == seg.mask.shape and m.mpp == pytest.approx(seg.mpp)
    cols = np.flatnonzero(m.mask.any(0))
    assert cols.size and ((cols + 0.5) * m.downsample <= (x0 + x1) / 2 + m.downsample).all()


def test_draw_grid_outlines_patches_smaller_than_a_thumbnail_pixel():
    """A 100k-px-wide slide on a 64-px thumbnail: each 512-px patch is a fraction of a pixel;
    it is drawn as the pixel it covers instead of failing."""
    from wsikit.patches.grid import TileGrid
    from wsikit.run.slide_ops import draw_grid

    coords = np.array([[0, 0], [512, 0], [50_000, 30_000]], np.int64)
    grid = TileGrid(coords=coords, tissue=np.ones(3, np.float32), patch_px=512,
                    patch_size_l0=512, stride_l0=512, target_mpp=0.5, slide_mpp=0.5,
                    mpp_source="test", overlap_px=0, slide_name="big",
                    level0_size=(100_000, 60_000))
    thumb = np.full((38, 64, 3), 255, np.uint8)
    out = draw_grid(thumb, grid)
    assert out.shape == thumb.shape
    drawn = np.argwhere((out != 255).any(-1))
    assert {tuple(p) for p in drawn} >= {(0, 0), (19, 32)}  # (row, col) of both patch spots
