"""``wsikit view``: deep-zoom tiles read on demand, the regions of a select result beside them,
only on 127.0.0.1, and nothing served that the result does not name."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from wsikit.viewer import TILE_PX, ViewerSource, make_server, tile_box, zoom_levels


@pytest.fixture(scope="module")
def served(cmu_small: Path, tmp_path_factory: pytest.TempPathFactory):
    from wsikit.layout import OutputLayout
    from wsikit.pipeline import select

    out = tmp_path_factory.mktemp("view")
    select(cmu_small, out=out, scales=(2, 1), patch_px=256, report=False, progress=False)
    source = ViewerSource.open(OutputLayout(out).select_dir("CMU-1-Small-Region"))
    server = make_server(source, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield source, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    source.slide.close()


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=60) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def test_zoom_levels_and_tile_boxes() -> None:
    assert zoom_levels((256, 100)) == 0 and zoom_levels((2220, 2967)) == 4
    assert tile_box((2220, 2967), 4, 0, 0) == ((0, 0, 256, 256), (256, 256))
    assert tile_box((2220, 2967), 0, 0, 0) == ((0, 0, 2220, 2967), (139, 186))
    assert tile_box((2220, 2967), 4, 8, 0) == ((2048, 0, 172, 256), (172, 256))
    assert tile_box((2220, 2967), 4, 9, 0) is None and tile_box((2220, 2967), 5, 0, 0) is None


def test_info_lists_the_regions(served) -> None:
    source, url = served
    status, body = _get(url + "/info.json")
    info = json.loads(body)
    assert status == 200 and info["width"] == 2220 and info["max_level"] == 4
    evidence = source.evidence["regions"]
    assert [r["id"] for r in info["regions"]] == [r["id"] for r in evidence] != []
    assert info["regions"][0]["box"] == evidence[0]["box"]
    assert info["has_tissue"] and info["has_heatmap"] and info["has_artefacts"]


def test_level0_tiles_are_the_slides_pixels(served) -> None:
    source, url = served
    status, body = _get(url + "/tiles/4/2_3.jpg")
    assert status == 200
    tile = np.asarray(Image.open(io.BytesIO(body)).convert("RGB"), np.int16)
    truth = source.slide.read_at_mpp((512, 768, TILE_PX, TILE_PX), out_size=(TILE_PX, TILE_PX))
    assert tile.shape == truth.shape and np.abs(tile - truth).mean() < 3   # JPEG q90
    status, body = _get(url + "/tiles/0/0_0.jpg")
    assert status == 200 and Image.open(io.BytesIO(body)).size == (139, 186)
    assert _get(url + "/tiles/4/99_0.jpg")[0] == 404


def test_page_overlays_and_crops(served) -> None:
    source, url = served
    status, page = _get(url + "/")
    assert status == 200 and b"<canvas" in page
    assert not re.search(rb"(src|href)=[\"']?(https?:)?//", page)     # offline: no remote asset
    assert b"innerHTML" not in page                                      # text is never HTML
    assert json.loads(_get(url + "/overlay/tissue.json")[1])["type"] == "FeatureCollection"
    arts = json.loads(_get(url + "/overlay/artefacts.json")[1])   # CMU-1: dye and a fold
    assert {f["properties"]["artefact"] for f in arts["features"]} >= {"ink", "fold"}
    assert _get(url + "/overlay/heatmap.png")[1].startswith(b"\x89PNG")
    status, crop = _get(url + "/crop/r1.png")
    assert status == 200 and crop.startswith(b"\x89PNG")


@pytest.mark.parametrize("path", ["/crop/r99.png", "/crop/../evidence.json",
                                  "/figure/r1/0", "/%2e%2e/%2e%2e/etc/passwd", "/tiles/x"])
def test_nothing_else_is_served(served, path: str) -> None:
    _, url = served
    assert _get(url + path)[0] == 404


def test_a_slide_alone_has_no_regions(cmu_small: Path) -> None:
    source = ViewerSource.open(cmu_small)
    try:
        info = source.info()
        assert info["regions"] == [] and not info["has_heatmap"]
        assert source.tile(info["max_level"], 0, 0)[:2] == b"\xff\xd8"
    finally:
        source.slide.close()


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def test_chromium_renders_and_flies_to_a_region_at_level_0(served, tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not found at {CHROMIUM} (apt-get install chromium)")
    source, url = served
    source.requested.clear()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--window-size=1400,900", "--virtual-time-budget=15000"]
    proc = subprocess.run([CHROMIUM, *flags, "--dump-dom", url + "/#r1"], capture_output=True,
                          text=True, timeout=180)
    assert 'data-ready="1"' in proc.stdout and "data-view=\"r1 level" in proc.stdout, \
        proc.stderr[-2000:]
    top = zoom_levels(tuple(source.slide.dimensions))
    assert any(p.startswith(f"/tiles/{top}/") for p in source.requested)  # level-0 tiles
    png = tmp_path / "view.png"
    subprocess.run([CHROMIUM, *flags, f"--screenshot={png}", url + "/#r1"],
                   capture_output=True, timeout=180)
    with Image.open(png) as im:
        assert im.size == (1400, 900)
        assert len(im.convert("RGB").resize((70, 45)).getcolors(70 * 45) or []) > 50


NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node not found (the page script runs in it)")
def test_page_script_flies_to_a_region_and_loads_level0_tiles(served) -> None:
    """The page's own script, run in Node with a minimal DOM against the live server: it
    builds a card per region, and ``#r1`` flies to r1 and loads full-resolution tiles."""
    from wsikit import viewer

    source, url = served
    page = Path(viewer.__file__).with_name("data") / "viewer.html"
    harness = Path(__file__).with_name("viewer_harness.js")
    source.requested.clear()
    proc = subprocess.run([NODE, str(harness), str(page), url, "#r1", "4000"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["cards"] == [r["id"] for r in source.evidence["regions"]]
    assert out["data"]["ready"] == "1" and out["data"]["view"] == "r1 level 4"
    top = [t for t in out["tiles"] if t.startswith("/tiles/4/")]
    assert top and all(p in source.requested for p in top)
    r1 = source.evidence["regions"][0]["box"]   # the level-0 tiles cover r1
    cols = {int(t.split("/")[3].split("_")[0]) for t in top}
    assert r1["x"] // 256 in cols and (r1["x"] + r1["width"] - 1) // 256 in cols


def test_command_line_serves_on_localhost(served) -> None:
    import os
    import sys

    source, _ = served
    repo = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen([sys.executable, "-m", "wsikit", "view", str(source.select_dir),
                             "--port", "0", "--no-browser"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(repo)))
    try:
        line = proc.stdout.readline()
        found = re.search(r"at (http://127\.0\.0\.1:\d+/)", line)
        assert found, line + proc.stderr.read() if proc.poll() is not None else line
        status, body = _get(found.group(1) + "info.json")
        assert status == 200 and json.loads(body)["name"] == "CMU-1-Small-Region"
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_matched_figures_are_served_from_the_index(cmu_small: Path, tmp_path: Path) -> None:
    from wsikit.demo import demo_index
    from wsikit.layout import OutputLayout
    from wsikit.pipeline import select

    index = demo_index(tmp_path / "lit", progress=False)
    select(cmu_small, out=tmp_path / "o", index=index, scales=(2, 1), patch_px=256, k=2,
           min_similarity="none", report=False, progress=False)
    source = ViewerSource.open(OutputLayout(tmp_path / "o").select_dir("CMU-1-Small-Region"))
    try:
        info = source.info()
        match = info["regions"][0]["matches"][0]
        assert match["caption"] is not None and match["image"] == "/figure/r1/0"
        path = source.figure("r1", 0)
        assert path is not None and path.is_relative_to(index.resolve())
        assert source.figure("r1", 99) is None
    finally:
        source.slide.close()
