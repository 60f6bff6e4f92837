"""``wsikit heatmap``: a planted region lights up where it is, at every level; a user's scores are
drawn where their coordinates say; a prompt's similarity follows the pixels; the files read back
with the project's readers; bad input is refused in one line naming the file and the fix."""

from __future__ import annotations

import json
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import tifffile

from wsikit.cli import main
from wsikit.look.heatmap import HeatmapLayer, layer_tile, layer_values
from wsikit.look.layer_files import read_layer_geojson, read_output_layers
from wsikit.outputs.layout import OutputLayout
from wsikit.outputs.slide_outputs import hold_slide_outputs
from wsikit.run.heatmaps import heatmap
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

DENSE = (1536, 768, 1280, 1280)  # level-0 box of the planted dense nuclei
PATCH = 256                      # level-0 side of a patch (256 px at 0.5 µm/px)
SIZE = (4096, 3072)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("heat") / "planted.svs"
    spec = SyntheticSpec(*SIZE, mpp=0.5, tissue=[(2048, 1536, 1900, 1400)], dense=[DENSE],
                         seed=3)
    return write_synthetic_slide(path, spec, downsamples=(1, 4), app_mag=20)


@pytest.fixture(scope="module")
def scores_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("csv") / "my scores.csv"
    path.write_text("x,y,score\n512,512,0.25\n3000,2048,1.0\n1024,2560,0.5\n")
    return path


@pytest.fixture(scope="module")
def made(planted: Path, scores_csv: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("out")
    result = heatmap(planted, layers=["importance", str(scores_csv)], out=out,
                     patch_px=256, progress=False, palette="viridis")
    return out, result


def _layer_from_geojson(path: Path) -> HeatmapLayer:
    """The layer as QuPath would get it: its tiles read back by the project's reader."""
    return read_layer_geojson(path)


def _best_shift(lit: np.ndarray, box: tuple[int, int, int, int], reach: int) -> tuple[int, int]:
    """The shift (dx, dy) in pixels, within ``reach``, at which ``box`` covers the most of the
    lit pixels (centred: the shift of the region from where it was planted)."""
    x, y, w, h = box
    best, where = -1.0, (0, 0)
    ii = np.cumsum(np.cumsum(np.pad(lit.astype(np.int64), ((1, 0), (1, 0))), 0), 1)
    for dy in range(-reach, reach + 1):
        for dx in range(-reach, reach + 1):
            x0, y0 = max(0, x + dx), max(0, y + dy)
            x1, y1 = min(lit.shape[1], x + dx + w), min(lit.shape[0], y + dy + h)
            if x1 <= x0 or y1 <= y0:
                continue
            got = ii[y1, x1] - ii[y0, x1] - ii[y1, x0] + ii[y0, x0]
            if got > best or (got == best and abs(dx) + abs(dy) < sum(map(abs, where))):
                best, where = got, (dx, dy)
    return where


@pytest.mark.parametrize("ds", [1, 4, 16])
def test_the_planted_region_lights_up_where_it_is(made, ds: int) -> None:
    out, result = made
    layer = _layer_from_geojson(result.folder / "importance.geojson")
    size = (SIZE[0] // ds, SIZE[1] // ds)
    v = layer_values(layer, (0, 0) + SIZE, size)
    x, y, w, h = (c // ds for c in DENSE)
    inside = np.zeros(v.shape, bool)
    inside[y:y + h, x:x + w] = True
    assert np.nanmean(v[inside]) > 0.75 > 0.5 > np.nanmean(v[~inside])
    # aligned: the planted box, moved over the brightest pixels, moves by less than a patch
    lit = np.nan_to_num(v) >= 0.75
    dx, dy = _best_shift(lit, (x, y, w, h), reach=3 * PATCH // ds)
    assert abs(dx) < PATCH // ds and abs(dy) < PATCH // ds, (dx, dy)
    # a viewer tile of that level shows the same values as the whole-slide drawing
    tile = layer_values(layer, (1024, 512, 256 * ds, 256 * ds), (256, 256))
    np.testing.assert_array_equal(tile[:size[1] - 512 // ds, :size[0] - 1024 // ds],
                                  v[512 // ds:512 // ds + 256, 1024 // ds:1024 // ds + 256])


def test_the_pyramid_is_layer_tile_of_the_layer_qupath_reads(made) -> None:
    out, result = made
    entry = next(e for e in result.layers if e["name"] == "importance")
    layer = _layer_from_geojson(result.folder / entry["files"]["geojson"])
    with tifffile.TiffFile(result.folder / entry["files"]["tiff"]) as tif:
        level0 = tif.series[0].levels[0].asarray()
        assert level0.shape == (SIZE[1], SIZE[0], 4) and len(tif.series[0].levels) == 3
    np.testing.assert_array_equal(level0, layer_tile(layer, (0, 0) + SIZE, SIZE))
    record = json.loads((result.folder / "heatmaps.json").read_text())
    assert [e["name"] for e in record["layers"]] == ["importance", "user:my scores"]
    assert record["width"] == SIZE[0] and record["mpp"] == pytest.approx(0.5)
    assert entry["source"].startswith("weight-free importance")
    assert result.folder == OutputLayout(out).heatmap_dir("planted")


def test_a_users_csv_is_drawn_where_its_coords_say(made) -> None:
    out, result = made
    entry = next(e for e in result.layers if e["name"] == "user:my scores")
    assert entry["patch_size_l0"] == 512  # the smallest step between its coordinates
    level0 = tifffile.imread(result.folder / entry["files"]["tiff"])
    alpha = level0[..., 3] > 0
    want = np.zeros_like(alpha)
    for x, y in ((512, 512), (3000, 2048), (1024, 2560)):
        want[y:y + 512, x:x + 512] = True
    assert np.array_equal(alpha, want)
    # the highest score takes the palette's top colour, the lowest its bottom
    assert level0[2100, 3100, :3].tolist() == [253, 231, 37]
    assert level0[600, 600, :3].tolist() == [68, 1, 84]


def test_the_heatmap_waits_for_a_job_holding_the_slide(planted: Path, scores_csv: Path,
                                                       tmp_path: Path) -> None:
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with hold_slide_outputs(tmp_path, "planted", command="another job"):
            held.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(10)
    threading.Timer(1.0, release.set).start()
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        heatmap(planted, layers=[str(scores_csv)], out=tmp_path)
    t.join()
    assert time.perf_counter() - t0 >= 0.9
    assert any("another job" in str(w.message) for w in caught)


def test_the_cli_writes_and_prints_the_files(planted: Path, scores_csv: Path, tmp_path: Path,
                                             capsys) -> None:
    code = main(["heatmap", str(planted), "--layer", str(scores_csv), "--out", str(tmp_path),
                 "--palette", "magma", "--threshold", "0.3"])
    printed = capsys.readouterr().out
    assert code == 0
    folder = OutputLayout(tmp_path).heatmap_dir("planted")
    for kind in ("tiff", "png", "geojson"):
        (path,) = folder.glob(f"*.{kind}")
        assert str(path) in printed
    level0 = tifffile.imread(next(folder.glob("*.tiff")))
    assert level0[600, 600, 3] == 0 and level0[2100, 3100, 3] == 255  # 0.25 < threshold


@pytest.mark.parametrize(("text", "needle"), [
    ("x,y,value\n0,0,1\n0,0,2\n", "line 3 repeats the coordinates (0, 0) of line 2"),
    ("x,y,value\n0,0,1\n512,0,1\n99999,0,2\n", "line 4 has the coordinates (99999, 0), "
                                                "outside the slide (4096 x 3072"),
    ("x,y,value\n0,0,nan\n512,0,2\n", "line 2 has the value nan"),
    ("a,b\n1,2\n", "with no x and y")])
def test_bad_user_files_fail_in_one_line_and_write_nothing(planted: Path, tmp_path: Path,
                                                           capsys, text: str,
                                                           needle: str) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(text)
    code = main(["heatmap", str(planted), "--layer", str(bad), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert str(bad) in err[0] and needle in err[0]
    assert not (tmp_path / "o" / "heatmaps").exists()


@pytest.mark.parametrize(("args", "needle"), [
    (["--layer", "prompt:dense nuclei"], "needs an image-text tower"),
    (["--layer", "nonsense"], "not a layer name"),
    (["--palette", "jet"], "--palette jet: unknown palette; use one of viridis"),
    (["--layer", "prompt:x", "--tower", "uni"], "has no text tower")])
def test_bad_options_are_refused_before_any_work(planted: Path, tmp_path: Path, capsys,
                                                 args: list[str], needle: str) -> None:
    code = main(["heatmap", str(planted), "--out", str(tmp_path / "o"), *args])
    err = capsys.readouterr().err
    assert code == 2 and needle in err
    assert not (tmp_path / "o").exists()


def test_a_prompts_similarity_follows_the_pixels(planted: Path, made, tmp_path: Path) -> None:
    """With a tower whose similarity is a known function of the colours (nuclear fraction for
    a prompt naming nuclei), the prompt layer is highest over the planted dense nuclei."""
    import _stain_tower

    _stain_tower.register()
    out, _ = made  # reuses the grid the importance was drawn on
    result = heatmap(planted, layers=["prompt:dense nuclei", "prompt:pink stroma"], out=out,
                     towers=[_stain_tower.NAME], patch_px=256, progress=False)
    nuclei, stroma = (_layer_from_geojson(result.folder / e["files"]["geojson"])
                      for e in result.layers)
    assert nuclei.name == "prompt:dense nuclei" and _stain_tower.NAME in nuclei.label
    x, y, w, h = DENSE
    c = nuclei.coords
    inside = ((c[:, 0] >= x) & (c[:, 0] + PATCH <= x + w) & (c[:, 1] >= y)
              & (c[:, 1] + PATCH <= y + h))
    assert nuclei.values[inside].mean() > 3 * nuclei.values[~inside].mean()
    top = np.argsort(-nuclei.values)[:int(inside.sum())]  # as many as lie inside
    assert inside[top].all()  # the brightest patches are the planted ones
    # the second prompt reuses the patch vectors: another text, other values
    assert np.array_equal(stroma.coords, nuclei.coords)
    assert not np.allclose(stroma.values, nuclei.values)
    record = json.loads((result.folder / "heatmaps.json").read_text())
    assert [e["name"] for e in record["layers"]] == [
        "importance", "user:my scores", "prompt:dense nuclei", "prompt:pink stroma"]
    # what a viewer lists for the slide: every layer written, as written
    listed = read_output_layers(out, "planted")
    assert [layer.name for layer in listed] == [e["name"] for e in record["layers"]]
    np.testing.assert_array_equal(listed[2].values, nuclei.values)


def test_titan_attention_is_drawn_with_its_provenance(planted: Path, made,
                                                      tmp_path: Path) -> None:
    """TITAN with random weights over random features: the numbers mean nothing (mechanics
    only); the layer reuses the attention a select run stored and says what made it."""
    import shutil

    from wsikit.models.titan import create_titan, titan
    from wsikit.patches.grid import TileGrid
    from wsikit.selection.attention import Attention

    out = shutil.copytree(made[0], tmp_path / "out")  # the grid made there, the rest apart
    layout = OutputLayout(out)
    grid = TileGrid.from_h5(layout.coords("planted"))
    model = create_titan(weights="random")
    feats = np.random.default_rng(0).standard_normal((len(grid), 768)).astype(np.float32)
    found = titan(feats, grid.coords, grid.patch_size_l0, model=model)
    Attention(found.attention, grid.coords, "titan", model.label).to_h5(
        layout.attention("planted"))
    result = heatmap(planted, layers=["attention"], out=out, patch_px=256)
    (entry,) = result.layers
    assert entry["name"] == "attention" and entry["source"].startswith("TITAN attention")
    assert "RANDOM" in entry["source"]  # a random-weight model is never shown as TITAN's
    layer = read_layer_geojson(result.folder / entry["files"]["geojson"])
    np.testing.assert_allclose(layer.values, found.attention, rtol=1e-6)
    assert entry["value_range"][0] < entry["value_range"][1] <= float(found.attention.max())


def test_a_misspelt_keyword_names_the_options(planted: Path, tmp_path: Path) -> None:
    from wsikit.errors import SelectionError

    with pytest.raises(SelectionError, match="unknown keyword.*'layer'.*it takes layers, "):
        heatmap(planted, out=tmp_path / "o", layer=["importance"])
    assert not (tmp_path / "o").exists()
