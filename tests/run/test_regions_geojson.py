"""``regions.geojson``: the selected windows as QuPath annotations, beside evidence.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wsikit.errors import EvidenceError
from wsikit.evidence.regions_geojson import (
    read_regions_geojson,
    regions_to_geojson,
    write_regions_geojson,
)
from wsikit.outputs.layout import OutputLayout
from wsikit.outputs.publish import COMPLETE_MARKER
from wsikit.run.pipeline import select


def _check_qupath_feature(feature: dict) -> None:
    """QuPath's GeoJSON conventions for an imported annotation."""
    assert feature["type"] == "Feature" and isinstance(feature["id"], str)
    geom = feature["geometry"]
    assert geom["type"] == "Polygon" and len(geom["coordinates"]) == 1
    ring = geom["coordinates"][0]
    assert ring[0] == ring[-1] and len(ring) == 5          # closed rectangle
    assert all(isinstance(v, int) and v >= 0 for p in ring for v in p)   # level-0 pixels
    props = feature["properties"]
    assert props["objectType"] == "annotation"
    cls = props["classification"]
    assert isinstance(cls["name"], str) and cls["name"].startswith("wsikit ")
    assert len(cls["color"]) == 3 and all(0 <= c <= 255 for c in cls["color"])
    assert all(isinstance(v, int | float) for v in props["measurements"].values())


def test_select_writes_qupath_regions_that_read_back(cmu_small: Path, tmp_path: Path) -> None:
    select(cmu_small, out=tmp_path, report=False, progress=False)
    sdir = OutputLayout(tmp_path).select_dir("CMU-1-Small-Region")
    evidence = json.loads((sdir / "evidence.json").read_text())
    doc = json.loads((sdir / "regions.geojson").read_text())
    assert doc["type"] == "FeatureCollection"
    assert len(doc["features"]) == len(evidence["regions"]) > 0
    for feature, region in zip(doc["features"], evidence["regions"], strict=True):
        _check_qupath_feature(feature)
        props = feature["properties"]
        assert props["name"] == f"{region['id']} {region['scale']}x"
        assert props["classification"]["name"] == f"wsikit {region['scale']}x"
        assert props["measurements"]["score"] == pytest.approx(region["score"])
        assert props["measurements"]["rank"] == region["rank"]
    back = read_regions_geojson(sdir / "regions.geojson")
    assert [(r["id"], r["rank"], r["scale"], r["box"]) for r in back] == [
        (r["id"], r["rank"], r["scale"], r["box"]) for r in evidence["regions"]]
    # the run lists it among the files it wrote (so a rerun replaces it, never a stray one)
    marker = json.loads((sdir / COMPLETE_MARKER).read_text())
    assert "regions.geojson" in marker["files"]


def test_scales_get_distinct_classes_and_usable_tissue_is_optional(tmp_path: Path) -> None:
    regions = [{"id": "r1", "rank": 1, "scale": 4, "score": 0.9, "usable_tissue": 0.75,
                "box": {"x": 512, "y": 256, "width": 1024, "height": 1024}},
               {"id": "r2", "rank": 2, "scale": 1, "score": 0.5,
                "box": {"x": 0, "y": 0, "width": 256, "height": 256}}]
    doc = regions_to_geojson(regions)
    a, b = doc["features"]
    assert a["properties"]["classification"] != b["properties"]["classification"]
    assert a["properties"]["measurements"]["usable_tissue"] == 0.75
    assert "usable_tissue" not in b["properties"]["measurements"]
    assert a["geometry"]["coordinates"][0][2] == [1536, 1280]
    write_regions_geojson(tmp_path / "r.geojson", regions)
    back = read_regions_geojson(tmp_path / "r.geojson")
    assert back[0]["usable_tissue"] == 0.75 and "usable_tissue" not in back[1]
    assert [r["box"] for r in back] == [r["box"] for r in regions]


def test_reader_takes_a_qupath_reexport_and_skips_foreign_annotations(tmp_path: Path) -> None:
    """QuPath before 0.4 wrote measurements as a name/value list; a person's own annotation
    (no wsikit measurements) is not a region."""
    doc = regions_to_geojson([{"id": "r1", "rank": 1, "scale": 2, "score": 0.4,
                               "box": {"x": 10, "y": 20, "width": 30, "height": 30}}])
    feature = doc["features"][0]
    feature["properties"]["measurements"] = [
        {"name": k, "value": v} for k, v in feature["properties"]["measurements"].items()]
    doc["features"].append({"type": "Feature", "geometry": {
        "type": "Polygon", "coordinates": [[[0, 0], [5, 0], [5, 5], [0, 0]]]},
        "properties": {"objectType": "annotation", "name": "tumour"}})
    (tmp_path / "q.geojson").write_text(json.dumps(doc))
    assert read_regions_geojson(tmp_path / "q.geojson") == [
        {"id": "r1", "rank": 1, "scale": 2, "score": 0.4,
         "box": {"x": 10, "y": 20, "width": 30, "height": 30}}]


def test_bad_inputs_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(EvidenceError, match="lacks id, rank, scale, score or box"):
        regions_to_geojson([{"id": "r1"}])
    (tmp_path / "x.geojson").write_text('{"type": "Feature"}')
    with pytest.raises(EvidenceError, match="not a GeoJSON FeatureCollection"):
        read_regions_geojson(tmp_path / "x.geojson")
