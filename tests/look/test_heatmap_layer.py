"""Heatmap layers: a box drawn at any size shows each patch where its coordinates say, user
files are read as their coordinates say or refused naming the file, the row and the fix."""

from __future__ import annotations

import io

import h5py
import numpy as np
import pytest
from PIL import Image

from wsikit.look.heatmap import (
    HeatmapLayer,
    composite,
    layer_tile,
    layer_values,
    legend_image,
    legend_svg,
    palette_rgb,
    spread,
    tile_cells,
)
from wsikit.look.layer_files import LayerFileError, read_user_layer
from wsikit.look.overlay import OverlayError


def _grid_layer(cols: int = 7, rows: int = 5, size: int = 100, seed: int = 0,
                origin: tuple[int, int] = (30, 50)) -> HeatmapLayer:
    rng = np.random.default_rng(seed)
    xs, ys = np.meshgrid(np.arange(cols), np.arange(rows))
    coords = np.stack([xs.ravel() * size + origin[0], ys.ravel() * size + origin[1]], 1)
    keep = rng.random(len(coords)) < 0.8
    return HeatmapLayer("user:t", coords[keep], rng.random(int(keep.sum())), size,
                        source="test", label="test", value_range=(0.0, 1.0))


def _naive(layer: HeatmapLayer, box: tuple[float, float, float, float],
           out: tuple[int, int]) -> np.ndarray:
    """The module docstring's rule, pixel by pixel: mean of the patches overlapping the
    pixel's level-0 rectangle."""
    x, y, w, h = box
    ow, oh = out
    s = layer.patch_size_l0
    res = np.full((oh, ow), np.nan)
    for j in range(oh):
        for i in range(ow):
            ax0, ax1 = x + i * w / ow, x + (i + 1) * w / ow
            ay0, ay1 = y + j * h / oh, y + (j + 1) * h / oh
            hit = [float(v) for (px, py), v in zip(layer.coords, layer.values, strict=True)
                   if px < ax1 and px + s > ax0 and py < ay1 and py + s > ay0]
            if hit:
                res[j, i] = np.mean(hit)
    return res


def test_full_resolution_shows_each_patch_in_its_square() -> None:
    layer = _grid_layer()
    x0, y0, w, h = layer.bounds()
    v = layer_values(layer, (x0 - 10, y0 - 20, w + 30, h + 40), (w + 30, h + 40))
    for (px, py), value in zip(layer.coords, layer.values, strict=True):
        cell = v[py - (y0 - 20): py - (y0 - 20) + 100, px - (x0 - 10): px - (x0 - 10) + 100]
        assert np.all(cell == np.float32(value))
    # pixels of no patch are NaN: the count of drawn pixels is the patches' area
    assert np.isfinite(v).sum() == len(layer) * 100 * 100


@pytest.mark.parametrize(("box", "out"), [((0, 0, 800, 600), (8, 6)),
                                          ((55.5, 13.25, 333.3, 201.7), (17, 11)),
                                          ((100, 100, 50, 50), (64, 64)),
                                          ((-400, -400, 2000, 2000), (5, 3))])
def test_any_box_at_any_size_follows_the_rule(box: tuple[float, float, float, float],
                                              out: tuple[int, int]) -> None:
    layer = _grid_layer(seed=3)
    np.testing.assert_allclose(layer_values(layer, box, out), _naive(layer, box, out),
                               rtol=1e-6, equal_nan=True)


def test_a_patch_smaller_than_a_pixel_is_not_lost() -> None:
    layer = HeatmapLayer("user:one", np.array([[5000, 7000]]), np.array([0.7]), 16,
                         source="t", label="t", value_range=(0.0, 1.0))
    v = layer_values(layer, (0, 0, 20000, 20000), (10, 10))
    assert np.isfinite(v).sum() == 1 and v[3, 2] == np.float32(0.7)


@pytest.mark.parametrize(("box", "out"), [((0, 0, 800, 600), (512, 512)),
                                          ((55.5, 13.25, 333.3, 201.7), (97, 61)),
                                          ((5000, 5000, 10, 10), (8, 8))])
def test_tiles_are_the_cells_spread_to_the_pixels(box: tuple[float, float, float, float],
                                                  out: tuple[int, int]) -> None:
    """The tile is each cell's colour repeated over its rows and columns: the same pixels
    as gathering each pixel's cell, in a contiguous array."""
    layer = _grid_layer(seed=5)
    colours, row, col = tile_cells(layer, box, out, opacity=0.7)
    tile = spread(colours, row, col)
    assert tile.flags.c_contiguous and tile.shape == (out[1], out[0], 4)
    assert np.array_equal(tile, colours[row[:, None], col[None, :]])
    assert np.array_equal(tile, layer_tile(layer, box, out, opacity=0.7))


def test_colours_threshold_opacity_and_nan() -> None:
    coords = np.array([[0, 0], [10, 0], [20, 0], [30, 0]])
    layer = HeatmapLayer("user:c", coords, np.array([0.0, 0.5, 1.0, np.nan]), 10,
                         source="t", label="t", value_range=(0.0, 1.0))
    tile = layer_tile(layer, (0, 0, 40, 10), (4, 1), palette="greys", opacity=0.5)
    assert tile[0, :, :3].tolist() == [[0, 0, 0], [128, 128, 128], [255, 255, 255], [0, 0, 0]]
    assert tile[0, :, 3].tolist() == [128, 128, 128, 0]
    cut = layer_tile(layer, (0, 0, 40, 10), (4, 1), threshold=0.5)
    assert cut[0, :, 3].tolist() == [0, 255, 255, 0]
    # values outside value_range are clipped to the palette's ends
    wide = HeatmapLayer("user:c", coords[:2], np.array([-5.0, 5.0]), 10, source="t",
                        label="t", value_range=(0.0, 1.0))
    ends = layer_tile(wide, (0, 0, 20, 10), (2, 1))[0, :, :3]
    assert ends.tolist() == palette_rgb(np.array([0.0, 1.0])).tolist()


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"palette": "jet"}, "unknown palette 'jet'"),
    ({"opacity": 2}, "opacity"),
    ({"threshold": float("nan")}, "threshold")])
def test_bad_drawing_options_are_refused(kwargs: dict, needle: str) -> None:
    with pytest.raises(OverlayError, match=needle):
        layer_tile(_grid_layer(), (0, 0, 10, 10), (4, 4), **kwargs)


def test_bad_layers_and_boxes_are_refused() -> None:
    with pytest.raises(OverlayError, match="coords must be an"):
        HeatmapLayer("x", np.zeros((3, 3)), np.zeros(3), 4, source="", label="",
                     value_range=(0, 1))
    with pytest.raises(OverlayError, match="one value per row"):
        HeatmapLayer("x", np.zeros((3, 2), int), np.zeros(2), 4, source="", label="",
                     value_range=(0, 1))
    with pytest.raises(OverlayError, match="patch_size_l0"):
        HeatmapLayer("x", np.zeros((3, 2), int), np.zeros(3), 0, source="", label="",
                     value_range=(0, 1))
    with pytest.raises(OverlayError, match="lo < hi"):
        HeatmapLayer("x", np.zeros((3, 2), int), np.zeros(3), 4, source="", label="",
                     value_range=(1, 1))
    with pytest.raises(OverlayError, match="at most"):
        layer_tile(_grid_layer(), (0, 0, 10, 10), (100_000, 100_000))
    with pytest.raises(OverlayError, match="positive width"):
        layer_tile(_grid_layer(), (0, 0, 0, 10), (4, 4))


def test_composite_and_legends() -> None:
    layer = _grid_layer()
    base = np.full((60, 80, 3), 200, np.uint8)
    over = layer_tile(layer, layer.bounds(), (80, 60), opacity=0.5)
    out = composite(base, [over])
    drawn = over[..., 3] > 0
    assert out.shape == (60, 80, 3)
    assert np.array_equal(out[~drawn], base[~drawn]) and not np.array_equal(out[drawn],
                                                                            base[drawn])
    leg = legend_image(layer, threshold=0.3)
    assert leg.shape[1] == 320 and leg.shape[2] == 4 and leg.shape[0] > 40
    svg = legend_svg(layer, palette="magma")
    assert svg.startswith("<svg") and svg.endswith("</svg>") and "source: test" in svg


# --- user files --------------------------------------------------------------------------------

def _write(tmp_path, text: str, name: str = "scores.csv"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_a_csv_layer_is_drawn_where_its_coords_say(tmp_path) -> None:
    p = _write(tmp_path, "x,y,score\n512,256,0.9\n0,0,0.1\n256,0,0.5\n")
    layer = read_user_layer(p, level0_size=(2000, 1000))
    assert layer.name == "user:scores" and layer.patch_size_l0 == 256
    assert layer.label == f"score from {p.name}" and layer.value_range == (0.1, 0.9)
    v = layer_values(layer, (0, 0, 1024, 1024), (16, 16))  # 64 level-0 px per pixel
    np.testing.assert_allclose(v[4:8, 8:12], 0.9)          # (512, 256) .. (768, 512)
    np.testing.assert_allclose(v[0:4, 0:4], 0.1)
    np.testing.assert_allclose(v[0:4, 4:8], 0.5)
    assert np.isfinite(v).sum() == 3 * 16


def test_csv_with_tabs_aliases_and_a_named_value(tmp_path) -> None:
    p = _write(tmp_path, "coord_x\tcoord_y\tp\tq\n0\t0\t1\t5\n0\t64\t2\t6\n", "t.tsv")
    with pytest.raises(LayerFileError, match="no value column"):
        read_user_layer(p)
    layer = read_user_layer(p, value="q", patch_size_l0=64)
    assert layer.values.tolist() == [5.0, 6.0] and layer.patch_size_l0 == 64


@pytest.mark.parametrize(("text", "needle"), [
    ("a,b,value\n0,0,1\n", "line 1 (the header) has the columns ['a', 'b', 'value'], with "
                           "no x and y; name the coordinate columns x and y"),
    ("x,y,value\n0,0,1\n256,0,nan\n", "line 3 has the value nan"),
    ("x,y,value\n0,0,1\n256,0,\n", "line 3 has the value nan"),
    ("x,y,value\n0,0,1\n\n256,0,2\n0,0,3\n", "line 5 repeats the coordinates (0, 0) of line 2"),
    ("x,y,value\n0,0,1\n256,0,2\n99999,0,3\n", "line 4 has the coordinates (99999, 0), "
                                               "outside the slide (2000 x 1000"),
    ("x,y,value\n0,0,1\n2.5,0,1\n", "line 3: coordinate '2.5' is not an integer"),
    ("x,y,value\n0,0,1\n256,0\n", "line 3 has 2 fields"),
    ("x,y,value\n0,0,1\n", "cannot be told from one patch"),
    ("x,y,value\n", "no patches"),
])
def test_bad_csv_names_the_file_the_row_and_the_fix(tmp_path, text: str, needle: str) -> None:
    p = _write(tmp_path, text)
    with pytest.raises(LayerFileError) as info:
        read_user_layer(p, level0_size=(2000, 1000))
    msg = str(info.value)
    assert msg.startswith(f"{p}: ") and needle in msg and ";" in msg


def test_the_margin_of_one_patch(tmp_path) -> None:
    p = _write(tmp_path, "x,y,value\n-256,0,1\n0,0,2\n2000,1000,3\n")
    assert len(read_user_layer(p, level0_size=(2000, 1000))) == 3
    p = _write(tmp_path, "x,y,value\n-257,0,1\n0,0,2\n")
    with pytest.raises(LayerFileError, match="outside the slide"):
        read_user_layer(p, level0_size=(2000, 1000), patch_size_l0=256)


def test_h5_layers_in_trident_and_clam_layouts(tmp_path) -> None:
    coords = np.array([[0, 0], [1024, 0], [0, 1024]], np.int64)
    trident = tmp_path / "trident.h5"
    with h5py.File(trident, "w") as f:
        d = f.create_dataset("coords", data=coords)
        d.attrs.update({"patch_size": 512, "patch_size_level0": 1024, "overlap": 0,
                        "level0_magnification": 40, "target_magnification": 20})
        f.create_dataset("attention", data=np.array([0.2, 0.4, 0.6], np.float32))
    layer = read_user_layer(trident, level0_size=(4096, 4096))
    assert layer.patch_size_l0 == 1024 and layer.values.tolist() == pytest.approx([.2, .4, .6])
    clam = tmp_path / "clam.h5"
    with h5py.File(clam, "w") as f:
        d = f.create_dataset("coords", data=coords)
        d.attrs.update({"patch_size": 256, "patch_level": 1, "downsample": [4.0, 4.0]})
        f.create_dataset("attention_scores", data=np.array([[1.0], [2.0], [3.0]]))
        f.create_dataset("other", data=np.zeros(7))
    layer = read_user_layer(clam)
    assert layer.patch_size_l0 == 1024 and layer.values.tolist() == [1.0, 2.0, 3.0]
    assert layer.label == "attention_scores from clam.h5"


def test_bad_h5_is_refused_naming_the_row(tmp_path) -> None:
    bad = tmp_path / "bad.h5"
    with h5py.File(bad, "w") as f:
        f.create_dataset("coords", data=np.array([[0, 0], [64, 0]]))
        f.create_dataset("values", data=np.array([1.0, np.inf]))
    with pytest.raises(LayerFileError, match=r"bad\.h5: row 1 has the value inf"):
        read_user_layer(bad)
    two = tmp_path / "two.h5"
    with h5py.File(two, "w") as f:
        f.create_dataset("coords", data=np.array([[0, 0], [64, 0]]))
        f.create_dataset("p", data=np.zeros(2))
        f.create_dataset("q", data=np.zeros(2))
    with pytest.raises(LayerFileError, match=r"no value dataset of 2 rows .*\['p', 'q'\]"):
        read_user_layer(two)
    assert read_user_layer(two, value="q").values.tolist() == [0.0, 0.0]
    junk = _write(tmp_path, "not hdf5", "junk.h5")
    with pytest.raises(LayerFileError, match="not a readable HDF5"):
        read_user_layer(junk)
    with pytest.raises(LayerFileError, match="unknown layer file type"):
        read_user_layer(_write(tmp_path, "x", "a.json"))


def test_legend_png_is_readable() -> None:
    buf = io.BytesIO()
    Image.fromarray(legend_image(_grid_layer())).save(buf, "PNG")
    assert Image.open(io.BytesIO(buf.getvalue())).mode == "RGBA"
