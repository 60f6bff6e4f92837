"""`wsikit info / segment / patch` end to end, including failures and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import h5py
import numpy as np
import pytest
from PIL import Image

from wsikit.cli import main
from wsikit.patches.grid import TileGrid
from wsikit.run.pipeline import patch, segment
from wsikit.run.slide_ops import info
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide


def test_info_json(cmu_small, capsys):
    assert main(["info", str(cmu_small), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["dimensions"] == [2220, 2967]
    assert data["mpp"] == pytest.approx(0.499) and data["mpp_source"] == "openslide.mpp"
    assert data == info(cmu_small)


def test_info_text_and_mpp_override(cmu_small, capsys):
    assert main(["info", str(cmu_small), "--mpp", "0.25"]) == 0
    out = capsys.readouterr().out
    assert "0.25 µm/px" in out and "user" in out


def test_info_without_mpp_still_describes(tmp_path, capsys):
    path = write_synthetic_slide(tmp_path / "nometa.tif", SyntheticSpec(512, 512, mpp=None),
                                 downsamples=(1,), app_mag=None, aperio=False)
    assert main(["info", str(path)]) == 0
    assert "pass --mpp" in capsys.readouterr().out


def test_segment_writes_outputs(cmu_small, tmp_path, capsys):
    assert main(["segment", str(cmu_small), "--out", str(tmp_path)]) == 0
    gj = json.loads((tmp_path / "contours_geojson" / "CMU-1-Small-Region.geojson").read_text())
    assert gj["type"] == "FeatureCollection" and gj["features"]
    mask = np.asarray(Image.open(tmp_path / "masks" / "CMU-1-Small-Region.png"))
    assert mask.max() == 255
    thumb = np.asarray(Image.open(tmp_path / "thumbnails" / "CMU-1-Small-Region_tissue.png"))
    assert thumb.shape[2] == 3 and max(thumb.shape[:2]) == 1024
    # outline colour is present
    assert ((thumb[..., 1] == 170) & (thumb[..., 0] == 0)).any()
    assert "tissue piece" in capsys.readouterr().out


def test_patch_writes_h5_and_reuses_geojson(cmu_small, tmp_path):
    grid = patch(cmu_small, out=tmp_path, progress=False)
    h5 = tmp_path / "patches" / "CMU-1-Small-Region_patches.h5"
    with h5py.File(h5, "r") as f:
        np.testing.assert_array_equal(f["coords"][()], grid.coords)
        assert f["coords"].attrs["patch_size_level0"] == 513
    assert (tmp_path / "thumbnails" / "CMU-1-Small-Region_grid.png").exists()
    # edit the GeoJSON (as in QuPath): keep only the first polygon's bounding box
    gj_path = tmp_path / "contours_geojson" / "CMU-1-Small-Region.geojson"
    box = [[0, 0], [1026, 0], [1026, 1026], [0, 1026], [0, 0]]
    gj_path.write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": {"type": "Polygon", "coordinates": [box]},
         "properties": {}}]}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        edited = patch(cmu_small, out=tmp_path, progress=False, min_tissue=0.9)
    said = [str(w.message) for w in caught if gj_path.name in str(w.message)]
    # one word on the edit, that it is kept (not also "changed ... step 'segment' runs again")
    assert len(said) == 1 and "kept as the slide's tissue" in said[0], said
    assert sorted(map(tuple, edited.coords.tolist())) == [(0, 0), (0, 513), (513, 0),
                                                          (513, 513)]
    assert TileGrid.from_h5(h5).coords.shape == (4, 2)


def test_patch_cli_options(synthetic_small_slide, tmp_path, capsys):
    rc = main(["patch", str(synthetic_small_slide), "--out", str(tmp_path), "--target-mpp",
               "1.0", "--patch-px", "128", "--overlap-px", "32", "--min-tissue", "0.5"])
    assert rc == 0
    g = TileGrid.from_h5(tmp_path / "patches" / "synthetic_small_patches.h5")
    assert (g.patch_px, g.patch_size_l0, g.stride_l0, g.overlap_px) == (128, 256, 192, 32)
    assert len(g) > 0 and (g.tissue >= 0.5).all()
    assert "patches of 128 px" in capsys.readouterr().out


def test_patch_needs_mpp(tmp_path, capsys):
    path = write_synthetic_slide(tmp_path / "nometa.tif", SyntheticSpec(1024, 768, mpp=None),
                                 downsamples=(1, 4), app_mag=None, aperio=False)
    assert main(["patch", str(path), "--out", str(tmp_path / "o")]) == 2
    assert "--mpp" in capsys.readouterr().err
    assert not (tmp_path / "o" / "patches").exists()
    assert main(["patch", str(path), "--out", str(tmp_path / "o"), "--mpp", "0.5"]) == 0
    assert (tmp_path / "o" / "patches" / "nometa_patches.h5").exists()


def test_bad_files_exit_nonzero(tmp_path, cmu_small, capsys):
    text = tmp_path / "fake.svs"
    text.write_text("hello")
    trunc = tmp_path / "trunc.svs"
    trunc.write_bytes(cmu_small.read_bytes()[:100_000])
    for bad in (text, trunc):
        assert main(["patch", str(bad), "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert str(bad) in err
    assert not (tmp_path / "o" / "patches").exists()


def test_bad_options_exit_nonzero(cmu_small, tmp_path, capsys):
    assert main(["patch", str(cmu_small), "--out", str(tmp_path), "--patch-px", "256",
                 "--overlap-px", "256"]) == 2
    assert "overlap" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["patch", str(cmu_small), "--out", str(tmp_path), "--mpp", "100"])
    assert exc.value.code != 0


def test_console_script_help():
    res = subprocess.run([sys.executable, "-m", "wsikit", "patch", "--help"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0
    for opt in ("--mpp", "--target-mpp", "--patch-px", "--overlap-px", "--min-tissue"):
        assert opt in res.stdout


def test_segment_function(synthetic_small_slide, tmp_path):
    tm = segment(synthetic_small_slide, out=tmp_path)
    assert tm.mask.any() and (tmp_path / "contours_geojson" / "synthetic_small.geojson").exists()


def test_patch_takes_physical_tissue_filters(cmu_small, tmp_path, capsys):
    """`wsikit patch` segments with --min-tissue-um2/--min-hole-um2 like `wsikit segment`."""
    assert main(["patch", str(cmu_small), "--out", str(tmp_path / "a")]) == 0
    assert main(["patch", str(cmu_small), "--out", str(tmp_path / "b"),
                 "--min-tissue-um2", "1e9"]) == 0  # 1000 mm²: larger than the slide
    capsys.readouterr()
    n_default = len(TileGrid.from_h5(tmp_path / "a" / "patches" / f"{cmu_small.stem}_patches.h5"))
    n_none = len(TileGrid.from_h5(tmp_path / "b" / "patches" / f"{cmu_small.stem}_patches.h5"))
    assert n_default > 0 and n_none == 0
