"""End-to-end tests of wsikit.run.pipeline.select / ``wsikit select`` / ``wsikit demo``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from wsikit.errors import MppError, SelectionError
from wsikit.evidence import load_schema
from wsikit.outputs.layout import OutputLayout
from wsikit.run.pipeline import select
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

DENSE = (1024, 1024, 3072, 3072)  # 12x12 cells of 256 px


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6144x4096 @ 0.5 µm/px, tissue almost everywhere, dense nuclei in DENSE."""
    path = tmp_path_factory.mktemp("planted") / "planted.svs"
    spec = SyntheticSpec(6144, 4096, mpp=0.5, tissue=[(3072, 2048, 3600, 2600)],
                         dense=[DENSE], seed=3)
    return write_synthetic_slide(path, spec, downsamples=(1, 4), app_mag=20)


def _inside(region: dict, box: tuple[int, int, int, int]) -> bool:
    b = region["box"]
    x, y, w, h = box
    return (b["x"] >= x and b["y"] >= y and b["x"] + b["width"] <= x + w
            and b["y"] + b["height"] <= y + h)


def test_heuristic_windows_find_the_planted_region(planted: Path, tmp_path: Path) -> None:
    res = select(planted, out=tmp_path, encoder="heuristic", patch_px=256, progress=False)
    d = res.to_dict()
    by_scale = {r["scale"]: r for r in d["regions"]}
    assert set(by_scale) == {8, 4, 2, 1}
    for scale in (1, 2):
        assert _inside(by_scale[scale], DENSE), (scale, by_scale[scale]["box"])
    # every output is labelled as weight-free
    assert all(m["heuristic"] for m in d["models"].values())
    assert d["selection"]["patch_size_l0"] == 256


def test_cmu_end_to_end_outputs(cmu_small: Path, tmp_path: Path) -> None:
    res = select(cmu_small, out=tmp_path, progress=False)
    d = res.to_dict()
    sdir = OutputLayout(tmp_path).select_dir("CMU-1-Small-Region")
    on_disk = json.loads((sdir / "evidence.json").read_text())
    jsonschema.validate(on_disk, load_schema())
    assert on_disk["regions"] == d["regions"]
    assert d["slide"]["mpp"] == pytest.approx(0.499) and d["slide"]["mpp_source"]
    # a 3x6-cell slide cannot hold an 8x window: reported, and the finer scales still come back
    assert "8" in d["empty_scales"] and "fits" in d["empty_scales"]["8"]
    assert any(r["scale"] in (1, 2) for r in d["regions"])
    for r in d["regions"]:
        png = sdir / r["crop"]["path"]
        sidecar = json.loads(png.with_suffix(".json").read_text())
        assert sidecar["x"] == r["box"]["x"] and sidecar["scale"] == r["scale"]
        assert max(r["crop"]["width"], r["crop"]["height"]) <= 1024
    html = (sdir / "report.html").read_text()
    assert "CMU-1-Small-Region" in html and "heuristic" in html.lower()
    assert (sdir / "overview.png").stat().st_size > 1000
    # attention stored beside the coordinates, aligned with them, with its source
    import h5py

    with h5py.File(tmp_path / "attention" / "CMU-1-Small-Region.h5") as f, \
            h5py.File(tmp_path / "patches" / "CMU-1-Small-Region_patches.h5") as g:
        assert np.array_equal(f["coords"][()], g["coords"][()])
        assert f["attention"].shape == (len(g["coords"]),)
        assert f["attention"].attrs["source"] == "heuristic"


def test_stages_are_cached_and_force_recomputes(cmu_small: Path, tmp_path: Path) -> None:
    select(cmu_small, out=tmp_path, report=False, progress=False)
    feats = tmp_path / "features_heuristic" / "CMU-1-Small-Region.h5"
    att = tmp_path / "attention" / "CMU-1-Small-Region.h5"
    before = (feats.stat().st_mtime_ns, att.stat().st_mtime_ns)
    again = select(cmu_small, out=tmp_path, report=False, progress=False, max_iou=0.0)
    assert (feats.stat().st_mtime_ns, att.stat().st_mtime_ns) == before
    assert again.selection["max_iou"] == 0.0
    select(cmu_small, out=tmp_path, report=False, progress=False, force=True)
    assert att.stat().st_mtime_ns != before[1]


def test_no_tissue_is_a_clear_error(tmp_path: Path) -> None:
    blank = write_synthetic_slide(tmp_path / "blank.svs",
                                  SyntheticSpec(2048, 2048, mpp=0.5, tissue=[]),
                                  downsamples=(1,))
    with pytest.warns(UserWarning, match="grid is empty"), \
            pytest.raises(SelectionError, match="no tissue"):
        select(blank, out=tmp_path / "o", progress=False)
    assert not (tmp_path / "o" / "select" / "blank" / "evidence.json").exists()


def test_missing_mpp_says_pass_mpp(tmp_path: Path) -> None:
    # no resolution, and no nuclei to estimate one from (the tissue is too small)
    path = write_synthetic_slide(tmp_path / "nompp.svs",
                                 SyntheticSpec(2048, 2048, mpp=None,
                                               tissue=[(1024, 1024, 40, 40)]),
                                 downsamples=(1,), app_mag=None)
    with pytest.raises(MppError, match=r"explicitly with mpp="):
        select(path, out=tmp_path / "o", progress=False)
    # a slide that records none but has nuclei: estimated from them (painted at 0.25 µm/px)
    nuclei = write_synthetic_slide(tmp_path / "nuclei.svs", SyntheticSpec(2048, 2048, mpp=None),
                                   downsamples=(1,), app_mag=None)
    with pytest.warns(UserWarning, match="estimated from the size of its nuclei"):
        res = select(nuclei, out=tmp_path / "o", progress=False, report=False)
    assert res.slide["mpp_source"] == "estimated from nuclei"
    assert 0.17 <= res.slide["mpp"] <= 0.3
    res = select(nuclei, out=tmp_path / "o2", mpp=0.25, progress=False, report=False)
    assert res.slide["mpp_source"] == "user"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wsikit", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "WSIKIT_NO_PROGRESS": "1"})


def test_cli_select_json_and_errors(cmu_small: Path, tmp_path: Path) -> None:
    r = _cli("select", str(cmu_small), "--out", str(tmp_path), "--format", "json",
             "--no-report", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "wsikit.evidence/v1"
    bad = tmp_path / "not_a_slide.svs"
    bad.write_text("hello")
    r = _cli("select", str(bad), "--out", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 2 and "not_a_slide.svs" in r.stderr
    r = _cli("select", str(cmu_small), "--scales", "8,x", cwd=tmp_path)
    assert r.returncode == 2 and "comma-separated" in r.stderr
    r = _cli("select", str(cmu_small), "--min-score", "mean", cwd=tmp_path)
    assert r.returncode == 2 and "--min-score" in r.stderr and "median" in r.stderr
    r = _cli("select", str(cmu_small), "--selector", "topk", "--scales", "4,2", cwd=tmp_path)
    assert r.returncode != 0 and "topk" in r.stderr and "--scales" in r.stderr


def test_cli_summary_lists_regions_by_rank_with_zoom_chain(cmu_small: Path,
                                                           tmp_path: Path) -> None:
    r = _cli("select", str(cmu_small), "--out", str(tmp_path), "--no-report",
             "--patch-px", "256", "--min-score", "median", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [ln.split() for ln in r.stdout.splitlines() if ln.strip().startswith("r")]
    ids = [ln[0] for ln in lines if ln[0][1:].isdigit()]
    assert ids == [f"r{i}" for i in range(1, len(ids) + 1)] and ids
    assert "floor" in r.stdout
    zoom = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("zoom: "))
    chain = [w for w in zoom.split()[1:] if w[:1] == "r"]
    assert len(chain) >= 2 and set(chain) <= set(ids)   # a finer region in a coarser one
    r = _cli("select", str(cmu_small), "--out", str(tmp_path / "k"), "--no-report",
             "--selector", "topk", "--per-scale", "3", "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["regions"]) == 3 and {x["scale"] for x in doc["regions"]} == {1}
    assert doc["selection"]["k"] == 3


def test_demo_runs_and_matches_figures(tmp_path: Path) -> None:
    r = _cli("demo", "--out", str(tmp_path / "demo"), "--format", "summary", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "SYNTHETIC" in r.stdout and "report.html" in r.stdout
    ev = next((tmp_path / "demo" / "select").glob("*/evidence.json"))
    doc = json.loads(ev.read_text())
    jsonschema.validate(doc, load_schema())
    assert doc["synthetic"] is True and doc["index"]["count"] >= 4
    assert all(r["matches"] for r in doc["regions"])
    for r in doc["regions"]:
        sims = [m["similarity"] for m in r["matches"]]
        assert sims == sorted(sims, reverse=True)
        assert all("SYNTHETIC" in m["caption"] or m["caption"] == "" for m in r["matches"])


def test_changed_grid_options_are_not_served_from_cache(cmu_small: Path, tmp_path: Path) -> None:
    a = select(cmu_small, out=tmp_path, report=False, progress=False, min_tissue=0.05)
    b = select(cmu_small, out=tmp_path, report=False, progress=False, min_tissue=0.6)
    assert b.selection["patches"] < a.selection["patches"]
    import h5py

    with h5py.File(tmp_path / "patches" / "CMU-1-Small-Region_patches.h5") as f:
        assert len(f["coords"]) == b.selection["patches"]
