"""Edits saved from the viewer: QuPath GeoJSON the project's readers take back, under the
slide's one lock, never over a file changed on disk since it was loaded, and an edited tissue
outline is what the next select uses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _serving import Serving

from wsikit.evidence.regions_geojson import read_regions_geojson

REPO = Path(__file__).resolve().parents[2]


class Served(Serving):
    def overlay(self, kind: str) -> dict:
        status, body = self.request(f"overlay/{'regions' if kind == 'regions' else 'tissue-edit'}"
                                    ".json")
        assert status == 200
        return json.loads(body)


@pytest.fixture
def served(result_copy: Path):
    s = Served(result_copy)
    yield s
    s.close()


def _regions(doc: dict) -> list[dict]:
    return [{k: r[k] for k in ("id", "rank", "scale", "score", "box")} for r in doc["regions"]]


def test_regions_saved_as_qupath_geojson_and_read_back(served: Served) -> None:
    loaded = served.overlay("regions")
    path = served.source.select_dir / "regions.geojson"
    assert loaded["editable"] and loaded["version"].startswith(f"{path.stat().st_size}-")
    regions = _regions(loaded)
    regions[0]["box"] = {"x": 100, "y": 150, "width": 300, "height": 200}   # moved
    del regions[1]                                                          # deleted
    regions.append({"id": "u1", "rank": 3, "scale": 1, "score": 0,           # drawn
                    "box": {"x": 1500, "y": 2000, "width": 400, "height": 350}})
    status, body = served.request("edit/regions", {"version": loaded["version"],
                                                   "regions": regions})
    assert status == 200, body
    saved = json.loads(body)
    back = read_regions_geojson(path, level0_size=(2220, 2967))
    assert [(r["id"], r["box"]) for r in back] == [(r["id"], r["box"]) for r in regions]
    doc = json.loads(path.read_text())
    assert all(f["properties"]["objectType"] == "annotation" for f in doc["features"])
    assert served.overlay("regions")["version"] == saved["version"] != loaded["version"]
    # the page's version is now stale: a second save with it is refused, nothing written
    before = path.read_bytes()
    status, body = served.request("edit/regions", {"version": loaded["version"],
                                                   "regions": regions[:1]})
    assert status == 409 and b"changed on disk since this page loaded it" in body
    assert path.read_bytes() == before


def test_a_file_changed_on_disk_is_never_overwritten(served: Served) -> None:
    loaded = served.overlay("regions")
    path = served.source.select_dir / "regions.geojson"
    edited = json.loads(path.read_text())            # QuPath re-exports it meanwhile
    edited["features"][0]["properties"]["name"] = "r1 checked"
    path.write_text(json.dumps(edited))
    status, body = served.request("edit/regions", {"version": loaded["version"],
                                                   "regions": _regions(loaded)[:1]})
    assert status == 409 and str(path).encode() in body and b"nothing was written" in body
    assert json.loads(path.read_text()) == edited


HOLD = r"""
import sys, time
from wsikit.outputs.slide_outputs import hold_slide_outputs
with hold_slide_outputs(sys.argv[1], sys.argv[2], command="wsikit batch cohort.csv (test)"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_save_while_a_batch_writes_the_slide_is_refused(served: Served) -> None:
    """A job holding the slide's one lock (a running batch): the save says which job and
    writes nothing; once it ends the same save goes through."""
    layout, name = served.source.layout, served.source.output_name
    loaded = served.overlay("tissue")
    path = layout.tissue_geojson(name)
    before = path.read_bytes()
    feats = [{"rings": f["geometry"]["coordinates"][0], "from": f["from"]}
             for f in loaded["features"]]
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(layout.root), name],
                              stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        assert holder.stdout.readline().strip() == "held"
        status, body = served.request("edit/tissue", {"version": loaded["version"],
                                                      "features": feats})
        assert status == 409, body
        text = body.decode()
        assert "not saved" in text and "wsikit batch cohort.csv (test)" in text
        assert "save again" in text and path.read_bytes() == before
    finally:
        holder.terminate()
        holder.wait(30)
    status, body = served.request("edit/tissue", {"version": loaded["version"],
                                                  "features": feats})
    assert status == 200, body


@pytest.mark.parametrize(("regions", "words"), [
    ([{"id": "r1", "box": {"x": -5e9, "y": -5e9, "width": 1e12, "height": 10}}],
     "region r1: x = -5e+09 lies outside the slide"),
    ([{"id": "r1", "box": {"x": 10, "y": 10, "width": 0, "height": 10}}], "at least 1 x 1"),
    ([{"id": "r1", "box": {"x": "a", "y": 10, "width": 5, "height": 10}}], "not a finite"),
    ([{"id": "../x", "box": {"x": 1, "y": 1, "width": 5, "height": 5}}], "not a plain name"),
    ("none", "not a list"),
])
def test_a_bad_region_is_refused_naming_it(served: Served, regions, words: str) -> None:
    loaded = served.overlay("regions")
    path = served.source.select_dir / "regions.geojson"
    before = path.read_bytes()
    status, body = served.request("edit/regions", {"version": loaded["version"],
                                                   "regions": regions})
    assert status == 400 and words in body.decode(), body
    assert path.read_bytes() == before


@pytest.mark.parametrize("case", ["no_token", "other_origin", "text_plain", "not_json"])
def test_a_save_only_from_the_page(served: Served, case: str) -> None:
    loaded = served.overlay("regions")
    body = {"version": loaded["version"], "regions": []}
    kwargs: dict = {}
    if case == "no_token":
        kwargs["token"] = False
    elif case == "other_origin":
        kwargs["headers"] = {"Origin": "http://evil.example"}
    elif case == "text_plain":
        kwargs["headers"] = {"Content-Type": "text/plain"}
    else:
        kwargs["raw"] = b"{not json"
    status, _ = served.request("edit/regions", body, **kwargs)
    assert status == {"no_token": 403, "other_origin": 403, "text_plain": 415,
                      "not_json": 400}[case]
    assert len(read_regions_geojson(served.source.select_dir / "regions.geojson")) == 2


def test_an_edited_tissue_outline_is_what_the_next_select_uses(served: Served) -> None:
    """The outline saved in the viewer: QuPath GeoJSON the tissue reader takes, marked as the
    user's (a new segmentation keeps it), and the mask the next select/batch makes its grid
    from is that outline."""
    from wsikit.run.slide_ops import geojson_edited, rasterise_edit
    from wsikit.slide import open_slide
    from wsikit.slide.fingerprint import slide_fingerprint

    layout, name = served.source.layout, served.source.output_name
    loaded = served.overlay("tissue")
    assert loaded["features"] and loaded["features"][0]["from"] == 0
    box = [[600, 500], [1400, 500], [1400, 1700], [600, 1700]]   # one rectangle of tissue
    status, body = served.request("edit/tissue", {"version": loaded["version"],
                                                  "features": [{"rings": [box], "from": 0}]})
    assert status == 200, body
    doc = json.loads(layout.tissue_geojson(name).read_text())
    assert doc["features"][0]["properties"]["classification"]["name"] == "Tissue"
    assert doc["features"][0]["geometry"]["coordinates"] == [box + [box[0]]]
    with open_slide(served.source.slide.path) as slide:
        fp = slide_fingerprint(slide.path)
        assert geojson_edited(layout.root, name, fingerprint=fp)
        mask = rasterise_edit(slide, layout.root, name, tissue_mpp=8.0, fingerprint=fp)
    W, H = 2220, 2967
    frac = float(np.asarray(mask.mask).mean())
    assert abs(frac - 800 * 1200 / (W * H)) < 0.01
    # the overlay the page draws is the saved outline
    assert json.loads(served.request("overlay/tissue.json")[1])["features"][0]["geometry"][
        "coordinates"] == [[[[float(x), float(y)] for x, y in box + [box[0]]]]]


@pytest.mark.slow
def test_select_after_a_tissue_edit_takes_patches_inside_it(served: Served) -> None:
    from wsikit.patches.grid import TileGrid
    from wsikit.run.pipeline import select

    layout, name = served.source.layout, served.source.output_name
    loaded = served.overlay("tissue")
    box = [[600, 500], [1400, 500], [1400, 1700], [600, 1700]]
    assert served.request("edit/tissue", {"version": loaded["version"],
                                          "features": [{"rings": [box]}]})[0] == 200
    select(served.source.slide.path, out=layout.root, scales=(2, 1), patch_px=256,
           encoder="heuristic", report=False, progress=False)
    coords = np.asarray(TileGrid.from_h5(layout.coords(name)).coords)
    assert len(coords) and coords[:, 0].min() >= 600 - 257 and coords[:, 0].max() <= 1400
    assert coords[:, 1].min() >= 500 - 257 and coords[:, 1].max() <= 1700


def test_a_tissue_vertex_beyond_the_slide_is_refused(served: Served) -> None:
    loaded = served.overlay("tissue")
    status, body = served.request("edit/tissue", {"version": loaded["version"], "features": [
        {"rings": [[[0, 0], [1e9, 0], [0, 100]]]}]})
    assert status == 400 and b"tissue outline 1, ring 1: x = 1e+09 lies outside" in body


def test_the_page_loads_an_edited_regions_file(served: Served) -> None:
    """Regions saved earlier (or edited in QuPath) are what the page edits next time."""
    loaded = served.overlay("regions")
    regions = _regions(loaded)[:1]
    assert served.request("edit/regions", {"version": loaded["version"],
                                           "regions": regions})[0] == 200
    again = Served(served.source.select_dir)
    try:
        assert [r["id"] for r in again.overlay("regions")["regions"]] == ["r1"]
    finally:
        again.close()


def test_regions_edited_in_the_viewer_survive_the_next_select(served: Served) -> None:
    """A later select replaces regions.geojson with its own regions and keeps the viewer's
    edit beside it as regions.geojson.bak (QuPath GeoJSON still), with a warning naming it."""
    from wsikit.run.pipeline import select

    sdir = served.source.select_dir
    loaded = served.overlay("regions")
    mine = [{"id": "u1", "rank": 1, "scale": 1, "score": 0,
             "box": {"x": 1500, "y": 2000, "width": 400, "height": 350}}]
    status, body = served.request("edit/regions", {"version": loaded["version"],
                                                   "regions": mine})
    assert status == 200, body
    with pytest.warns(UserWarning, match=r"regions\.geojson was changed since wsikit wrote it"
                                         r".*kept as .*regions\.geojson\.bak"):
        select(served.source.slide.path, out=served.source.layout.root, scales=(1,),
               patch_px=256, encoder="heuristic", report=False, progress=False)
    new = read_regions_geojson(sdir / "regions.geojson")
    assert [r["id"] for r in new] == [r["id"] for r in json.loads(
        (sdir / "evidence.json").read_text())["regions"]] != ["u1"]
    kept = read_regions_geojson(sdir / "regions.geojson.bak", level0_size=(2220, 2967))
    assert [(r["id"], r["box"]) for r in kept] == [("u1", mine[0]["box"])]
    # the page's version is stale now: its next save is refused, the new file left as it is
    status, body = served.request("edit/regions", {"version": json.loads(body)["version"],
                                                   "regions": mine})
    assert status == 409 and b"changed on disk" in body
