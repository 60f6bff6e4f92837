"""A layer's files: the pyramid opens in tifffile, tiffslide and OpenSlide with the slide's size
and µm/px, its pixels are layer_tile's; the QuPath tiles read back with the project's reader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tifffile
from PIL import Image

from wsikit.look.heatmap import HeatmapLayer, layer_tile
from wsikit.look.heatmap_files import (
    layer_geojson,
    layer_stem,
    write_layer_files,
    write_layer_pyramid,
)
from wsikit.tissue.geojson import read_features

SIZE = (2600, 1900)  # not a multiple of the tile: partial edge tiles at every level


@pytest.fixture(scope="module")
def layer() -> HeatmapLayer:
    rng = np.random.default_rng(4)
    xs, ys = np.meshgrid(np.arange(300, 2300, 200), np.arange(100, 1700, 200))
    coords = np.stack([xs.ravel(), ys.ravel()], 1)
    keep = rng.random(len(coords)) < 0.85
    values = rng.random(int(keep.sum()))
    values[3] = np.nan  # a patch without a value: transparent, no QuPath object
    return HeatmapLayer("prompt:dense nuclei", coords[keep], values, 200, source="test",
                        label="test values", value_range=(0.0, 1.0))


@pytest.fixture(scope="module")
def pyramid(layer: HeatmapLayer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pyr") / "layer.tiff"
    return write_layer_pyramid(layer, path, level0_size=SIZE, mpp=0.25, palette="magma",
                               threshold=0.2)


def test_tifffile_reads_every_level_as_layer_tile_draws_it(layer: HeatmapLayer,
                                                           pyramid: Path) -> None:
    with tifffile.TiffFile(pyramid) as tif:
        levels = tif.series[0].levels
        assert [lv.shape for lv in levels] == [(1900, 2600, 4), (950, 1300, 4), (475, 650, 4)]
        for k, lv in enumerate(levels):
            got = lv.asarray()
            ds = 2 ** k
            want = layer_tile(layer, (0, 0, got.shape[1] * ds, got.shape[0] * ds),
                              (got.shape[1], got.shape[0]), palette="magma", threshold=0.2)
            np.testing.assert_array_equal(got, want)
        page = tif.pages[0]
        assert page.tags["XResolution"].value[0] / page.tags["XResolution"].value[1] == \
            pytest.approx(1e4 / 0.25)
        assert "prompt:dense nuclei" in page.description
    # drawn where the patches are, transparent elsewhere
    full = tifffile.imread(pyramid)
    x, y = (int(v) for v in layer.coords[0])
    assert full[y + 5, x + 5, 3] in (0, 255) and full[0, 0, 3] == 0


def test_tiffslide_and_openslide_open_it_over_the_slide(layer: HeatmapLayer,
                                                        pyramid: Path) -> None:
    tiffslide = pytest.importorskip("tiffslide")
    openslide = pytest.importorskip("openslide")
    box = (250, 90, 700, 420)
    want = layer_tile(layer, box, box[2:], palette="magma", threshold=0.2)
    with tiffslide.TiffSlide(pyramid) as s:
        assert s.dimensions == SIZE and s.level_count == 3
        assert float(s.properties["tiffslide.mpp-x"]) == pytest.approx(0.25)
        np.testing.assert_array_equal(np.asarray(s.read_region(box[:2], 0, box[2:])), want)
    s2 = openslide.OpenSlide(str(pyramid))
    try:
        assert s2.dimensions == SIZE and s2.level_count == 3
        assert float(s2.properties["openslide.mpp-x"]) == pytest.approx(0.25)
        # OpenSlide gives premultiplied-then-unpremultiplied RGBA: equal where opaque or empty
        np.testing.assert_array_equal(np.asarray(s2.read_region(box[:2], 0, box[2:])), want)
    finally:
        s2.close()


def test_qupath_tiles_read_back_with_the_projects_reader(layer: HeatmapLayer,
                                                         tmp_path: Path) -> None:
    path = tmp_path / "layer.geojson"
    path.write_text(json.dumps(layer_geojson(layer)))
    doc = json.loads(path.read_text())
    feats = read_features(doc, where=str(path), error=ValueError, fix="")
    finite = np.isfinite(layer.values)
    assert len(feats) == int(finite.sum())
    for f, (x, y), v in zip(feats, layer.coords[finite], layer.values[finite], strict=True):
        assert f.properties["objectType"] == "tile"
        assert np.float32(f.properties["measurements"][layer.name]) == v  # exact
        ring = f.polygons[0][0]
        assert ring.min(axis=0).tolist() == [x, y]
        assert ring.max(axis=0).tolist() == [x + 200, y + 200]


def test_all_files_of_a_layer_and_no_temporaries(layer: HeatmapLayer, tmp_path: Path) -> None:
    thumb = np.full((190, 260, 3), 240, np.uint8)
    files = write_layer_files(layer, tmp_path, level0_size=SIZE, thumbnail=thumb, mpp=None)
    stem = layer_stem(layer)
    assert stem.startswith("prompt-dense-nuclei-") and len(stem) == len("prompt-dense-nuclei-") + 8
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{stem}.{k}" for k in ("tiff", "png", "svg", "geojson"))
    assert {k: p.name for k, p in files.items()} == {k: f"{stem}.{k}" for k in files}
    png = np.asarray(Image.open(files["png"]))
    assert png.shape[1] == 260 and png.shape[0] > 190  # the legend below the thumbnail
    # the thumbnail is changed only where the layer has values
    drawn = layer_tile(layer, (0, 0) + SIZE, (260, 190))[..., 3] > 0
    assert (png[:190][~drawn] == 240).all() and (png[:190][drawn] != 240).any()
    with tifffile.TiffFile(files["tiff"]) as tif:
        assert "XResolution" not in tif.pages[0].tags or tif.pages[0].tags[
            "ResolutionUnit"].value == 1  # no µm/px known: none written
