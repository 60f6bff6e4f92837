"""``wsikit view`` in a real browser (headless Chromium over the DevTools protocol): pan and
zoom load tiles from this server only, layers switch, edits are saved as QuPath GeoJSON that
the project's readers take back, a concurrent edit and a replaced slide are said on the page.

Skipped with the reason where Chromium is missing, except under ``CI=1`` where that fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from _cdp import Browser, chromium_missing
from _serving import Serving
from PIL import Image

from wsikit.evidence.regions_geojson import read_regions_geojson

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def browser():
    reason = chromium_missing()
    if reason:
        if os.environ.get("CI") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    b = Browser()
    yield b
    b.close()


Viewer = Serving


@pytest.fixture
def viewer(result_copy: Path):
    v = Viewer(result_copy)
    yield v
    v.close()


def _open(b: Browser, v: Viewer) -> None:
    b.requests.clear()
    b.events.clear()
    b.goto(v.url)
    b.wait("document.body.dataset.ready && document.body.dataset.overlays", timeout=60)
    b.wait("window.wsikitView.state().tilesLoaded > 0", timeout=60)


def _state(b: Browser) -> dict:
    return b.js("window.wsikitView.state()")


def _screen(b: Browser, x: float, y: float) -> tuple[float, float]:
    sx, sy = b.js(f"window.wsikitView.toScreen({x}, {y})")
    return sx, sy


def test_pan_and_zoom_load_tiles_and_nothing_comes_from_elsewhere(browser: Browser,
                                                                  viewer: Viewer,
                                                                  tmp_path: Path) -> None:
    b = browser
    _open(b, viewer)
    first = dict(_state(b)["levels"])
    assert first and max(map(int, first)) < 12        # the whole slide: coarse levels first
    for _ in range(8):                                   # wheel zoom on the tissue
        b.mouse("mouseWheel", 480, 450, deltaX=0, deltaY=-240)
        time.sleep(0.25)
    b.wait("window.wsikitView.state().levels[12] > 0", timeout=60)
    time.sleep(1.5)                                      # the zoom's tiles are in
    before = len(viewer.source.requested)
    for _ in range(3):                                   # pan: new tiles come in
        b.drag((700, 600), (300, 250))
    deadline = time.monotonic() + 60
    while len(viewer.source.requested) <= before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(viewer.source.requested) > before
    assert _state(b)["tilesFailed"] == 0
    assert all(r.startswith("/slide_files/") for r in viewer.source.requested)
    foreign = [r for r in b.requests if not r.startswith(viewer.base)
               and not r.startswith(("data:", "blob:", "about:"))]
    assert b.requests and not foreign, foreign           # nothing from outside 127.0.0.1
    assert not b.console_errors()                         # no CSP violation, no script error
    png = b.screenshot(tmp_path / "zoomed.png")
    with Image.open(png) as im:
        colours = im.convert("RGB").resize((70, 45)).getcolors(70 * 45)
    assert colours is not None and len(colours) > 200   # tissue drawn, not a blank page


def test_layers_switch_on_off_palette_and_threshold(browser: Browser, viewer: Viewer,
                                                    tmp_path: Path) -> None:
    b = browser
    _open(b, viewer)
    assert [layer["name"] for layer in viewer.source.layer_list()] == ["importance"]
    time.sleep(1.0)
    off = np.asarray(Image.open(b.screenshot(tmp_path / "off.png")).convert("RGB"), float)
    b.click_element("input[data-layer='0']")
    b.wait("document.body.dataset.layers === '0'", timeout=30)
    b.wait("window.wsikitView.state().tilesLoaded > 0 && "
           "performance.getEntriesByType('resource').some(function (e) { "
           "return e.name.indexOf('layer_files/0/') > 0; })", timeout=30)
    time.sleep(1.5)
    on = np.asarray(Image.open(b.screenshot(tmp_path / "on.png")).convert("RGB"), float)
    stage = (slice(60, 860), slice(260, 990))             # the slide, not the side panel
    assert np.abs(on[stage] - off[stage]).mean() > 3     # the layer is drawn over the slide
    b.js("(function(){var s=document.querySelector(\"select[data-role='palette']\");"
         "s.value='magma';s.dispatchEvent(new Event('change'));})()")
    b.js("(function(){var s=document.querySelector(\"input[data-role='threshold']\");"
         "s.value='0.5';s.dispatchEvent(new Event('input'));})()")
    b.wait("performance.getEntriesByType('resource').some(function (e) { return "
           "e.name.indexOf('palette=magma&threshold=0.5') > 0 && "
           "e.name.indexOf('layer_files/0/') > 0; })", timeout=30)
    b.wait("document.body.dataset.layers === '0'", timeout=30)
    legend = b.js("document.querySelector('img.legend').src")
    assert "palette=magma" in legend and "threshold=0.5" in legend
    b.click_element("input[data-layer='0']")
    b.wait("document.body.dataset.layers === ''", timeout=30)
    # on, another palette at once, then off: no copy of the layer is left in the overview
    b.click_element("input[data-layer='0']")
    b.js("(function(){var s=document.querySelector(\"select[data-role='palette']\");"
         "s.value='greys';s.dispatchEvent(new Event('change'));})()")
    b.wait("document.body.dataset.layers === '0'", timeout=30)
    b.click_element("input[data-layer='0']")
    b.wait("document.body.dataset.layers === ''", timeout=30)
    time.sleep(2.0)
    assert b.js("window.wsikitView.viewer().world.getItemCount()") == 1
    assert b.js("window.wsikitView.viewer().navigator.world.getItemCount()") == 1
    assert not b.console_errors()


def test_a_drawn_and_a_moved_region_are_saved_and_read_back(browser: Browser, viewer: Viewer
                                                            ) -> None:
    b = browser
    _open(b, viewer)
    b.click_element("#mode-regions")
    assert _state(b)["mode"] == "regions"
    b.drag(_screen(b, 300, 2000), _screen(b, 700, 2400))            # draw u1
    r1 = next(r for r in _state(b)["regions"] if r["id"] == "r1")["box"]
    grab = _screen(b, r1["x"] + 30, r1["y"] + r1["height"] - 30)    # inside r1, outside r2
    drop = _screen(b, r1["x"] + 30 + 400, r1["y"] + r1["height"] - 30 + 600)
    b.drag(grab, drop)                                               # move r1
    st = _state(b)
    assert st["dirty"]["regions"] and [r["id"] for r in st["regions"]] == ["r1", "r2", "u1"]
    b.click_element("#save")
    b.wait("document.body.dataset.saved === 'regions '", timeout=30)
    back = {r["id"]: r for r in read_regions_geojson(
        viewer.source.select_dir / "regions.geojson", level0_size=(2220, 2967))}
    assert set(back) == {"r1", "r2", "u1"}
    u1 = back["u1"]["box"]
    assert abs(u1["x"] - 300) < 6 and abs(u1["y"] - 2000) < 6
    assert abs(u1["width"] - 400) < 12 and abs(u1["height"] - 400) < 12
    moved = back["r1"]["box"]
    assert abs(moved["x"] - (r1["x"] + 400)) < 6 and abs(moved["y"] - (r1["y"] + 600)) < 6
    assert moved["width"] == r1["width"] and "usable_tissue" not in back["r1"]
    assert back["r2"]["box"] == next(r for r in st["regions"] if r["id"] == "r2")["box"]
    assert not _state(b)["dirty"]["regions"]
    # delete r2 with the key, undo it, delete it again: saved without it
    b.click(*_screen(b, back["r2"]["box"]["x"] + 10, back["r2"]["box"]["y"] + 10))
    b.call("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Delete", "code": "Delete",
                                      "windowsVirtualKeyCode": 46}, session=True)
    assert [r["id"] for r in _state(b)["regions"]] == ["r1", "u1"]
    b.click_element("#undo")
    assert [r["id"] for r in _state(b)["regions"]] == ["r1", "r2", "u1"]


def test_a_tissue_vertex_moved_is_saved_for_the_next_select(browser: Browser, viewer: Viewer
                                                            ) -> None:
    from wsikit.tissue.geojson import read_features, read_json

    b = browser
    _open(b, viewer)
    layout, name = viewer.source.layout, viewer.source.output_name
    path = layout.tissue_geojson(name)
    before = read_features(read_json(path, error=ValueError, fix=""), where="t",
                           error=ValueError, fix="")[0].polygons[0][0]
    b.click_element("#mode-tissue")
    inside = b.js("(function(){for (var y = 200; y < 800; y += 20) for (var x = 300; "
                  "x < 950; x += 20) { var e = document.elementFromPoint(x, y); "
                  "if (e && e.dataset && e.dataset.tissue === '0') return [x, y]; } })()")
    b.click(*inside)                                    # select the outline
    assert _state(b)["selected"] == {"kind": "tissue", "index": 0}
    handles = b.js("Array.prototype.map.call(document.querySelectorAll('circle.handle:not(.mid)'),"
                   "function(e){var r=e.getBoundingClientRect();return [r.x+r.width/2,"
                   "r.y+r.height/2,+e.dataset.ring,+e.dataset.vertex];})")
    grab = next(h for h in handles if 300 < h[0] < 950 and 120 < h[1] < 820 and h[2] == 0)
    b.drag((grab[0], grab[1]), (grab[0] + 30, grab[1] + 20))
    assert _state(b)["dirty"]["tissue"]
    b.click_element("#save")
    b.wait("(document.body.dataset.saved || '').indexOf('tissue') >= 0", timeout=30)
    after = read_features(read_json(path, error=ValueError, fix=""), where="t",
                          error=ValueError, fix="")[0].polygons[0][0]
    assert after.shape == before.shape
    moved = np.flatnonzero(np.abs(after - before).max(axis=1) > 0.5)
    assert list(moved) in ([grab[3]], [grab[3], len(before) - 1], [0, len(before) - 1])
    scale = _screen(b, 1000, 0)[0] - _screen(b, 0, 0)[0]        # screen px per 1000 px
    dx, dy = after[grab[3]] - before[grab[3]]
    assert abs(dx - 30 * 1000 / scale) < 3 and abs(dy - 20 * 1000 / scale) < 3
    from wsikit.run.slide_ops import geojson_edited
    from wsikit.slide import open_slide
    from wsikit.slide.fingerprint import slide_fingerprint

    with open_slide(viewer.source.slide.path) as slide:
        # the next select rasterises it
        assert geojson_edited(layout.root, name, fingerprint=slide_fingerprint(slide.path))


HOLD = r"""
import sys, time
from wsikit.outputs.slide_outputs import hold_slide_outputs
with hold_slide_outputs(sys.argv[1], sys.argv[2], command="wsikit batch (running)"):
    print("held", flush=True)
    time.sleep(120)
"""


def test_a_concurrent_edit_is_refused_with_a_clear_message(browser: Browser, viewer: Viewer
                                                           ) -> None:
    b = browser
    _open(b, viewer)
    path = viewer.source.select_dir / "regions.geojson"
    layout, name = viewer.source.layout, viewer.source.output_name
    b.click_element("#mode-regions")
    b.drag(_screen(b, 300, 2000), _screen(b, 600, 2300))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(layout.root), name],
                              stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:   # a batch run writes the slide: refused, naming it
        assert holder.stdout.readline().strip() == "held"
        before = path.read_bytes()
        b.click_element("#save")
        b.wait("document.body.dataset.refused === '1'", timeout=30)
        banner = _state(b)["banner"]
        assert "Not saved" in banner and "wsikit batch (running)" in banner, banner
        assert path.read_bytes() == before and _state(b)["dirty"]["regions"]
    finally:
        holder.terminate()
        holder.wait(30)
    # QuPath re-exported the file meanwhile: refused, the file left as it is
    edited = json.loads(path.read_text())
    edited["features"][0]["properties"]["name"] = "r1 reviewed"
    path.write_text(json.dumps(edited))
    b.js("delete document.body.dataset.refused")
    b.click_element("#save")
    b.wait("document.body.dataset.refused === '1'", timeout=30)
    assert "has changed on disk since this page loaded it" in _state(b)["banner"]
    assert json.loads(path.read_text()) == edited


def test_a_slide_replaced_while_viewed_is_said_on_the_page(browser: Browser, cmu_small: Path,
                                                           synthetic_small_slide: Path,
                                                           tmp_path: Path) -> None:
    slide = tmp_path / "slide.svs"
    shutil.copy(cmu_small, slide)
    v = Viewer(slide)
    try:
        _open(browser, v)
        with open(slide, "r+b") as fh:                 # cat other.svs > slide.svs
            fh.truncate(0)
            fh.write(synthetic_small_slide.read_bytes())
        browser.wait("document.body.dataset.changed === '1'", timeout=30)
        banner = _state(browser)["banner"]
        assert "has changed since wsikit view opened it" in banner and str(slide) in banner
        assert browser.js("window.wsikitView.viewer().world.getItemCount()") == 0
    finally:
        v.close()
