"""GeoJSON edited in QuPath, read back: every geometry validated, repaired as shapely's
``make_valid(method="structure")`` would, QuPath's classes known, hostile files refused with
the file and feature named, and large outlines rasterised in linear time."""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from skimage.draw import polygon as sk_polygon

from wsikit.errors import EvidenceError, TissueError
from wsikit.evidence.regions_geojson import read_regions_geojson, regions_to_geojson
from wsikit.tissue.mask import TissueMask

W, H, MPP = 4096, 4096, 0.5           # a 4096² slide: a 256² mask at 8 µm/px (16 px per cell)
SQUARE = [[512, 512], [3584, 512], [3584, 3584], [512, 3584], [512, 512]]


def _feature(coords, kind="Polygon", name="tissue 0", cls="Tissue", **props):
    return {"type": "Feature", "geometry": {"type": kind, "coordinates": coords},
            "properties": {"objectType": "annotation", "name": name,
                           "classification": {"name": cls}, **props}}


def _mask(features, tmp_path: Path | None = None) -> TissueMask:
    doc = {"type": "FeatureCollection", "features": features}
    if tmp_path is None:
        return TissueMask.from_geojson(doc, level0_size=(W, H), slide_mpp=MPP)
    path = tmp_path / "t.geojson"
    path.write_text(json.dumps(doc))
    return TissueMask.from_geojson(path, level0_size=(W, H), slide_mpp=MPP)


def test_valid_polygon_reads_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tm = _mask([_feature([SQUARE])])
    assert tm.mask.shape == (256, 256)
    assert tm.mask[32:224, 32:224].all() and tm.mask.sum() == 192 * 192


def test_self_intersecting_ring_is_filled_even_odd_with_a_warning():
    bowtie = [[512, 512], [3584, 3584], [3584, 512], [512, 3584], [512, 512]]
    with pytest.warns(UserWarning, match=r"feature 0 \('bow'\).*cross themselves"):
        tm = _mask([_feature([bowtie], name="bow")])
    # both triangles (left and right), not their signed difference (zero)
    assert tm.mask[128, 40] and tm.mask[128, 215] and not tm.mask[40, 128]
    assert tm.mask.sum() == pytest.approx(0.5 * 192 * 192, rel=0.05)


def test_hole_outside_its_outline_removes_nothing_with_a_warning():
    hole = [[3700, 3700], [4000, 3700], [4000, 4000], [3700, 4000], [3700, 3700]]
    inner = [[1024, 1024], [1024, 2048], [2048, 2048], [2048, 1024], [1024, 1024]]
    with pytest.warns(UserWarning, match=r"hole\(s\) \[1\] lie outside the outline"):
        tm = _mask([_feature([SQUARE, hole, inner], name="edited")])
    assert not tm.mask[3750 // 16:3950 // 16, 3750 // 16:3950 // 16].any()  # not tissue
    assert not tm.mask[64:128, 64:128].any()          # the real hole is cut out
    assert tm.mask[32:60, 32:224].all()


def test_geometry_collection_is_taken_not_dropped():
    gc = {"type": "GeometryCollection", "geometries": [
        {"type": "Polygon", "coordinates": [SQUARE]},
        {"type": "LineString", "coordinates": [[0, 0], [10, 10]]}]}
    tm = _mask([{"type": "Feature", "geometry": gc, "properties": {"name": "gc"}}])
    assert tm.mask.sum() == 192 * 192


@pytest.mark.parametrize("cls", ["Ignore*", "Region*"])
def test_qupath_ignored_classes_are_not_tissue(cls):
    far = [[0, 0], [400, 0], [400, 400], [0, 400], [0, 0]]
    with pytest.warns(UserWarning, match=rf"feature 1 \('x'\).*{cls[:-1]}\*"):
        tm = _mask([_feature([SQUARE]), _feature([far], name="x", cls=cls)])
    assert not tm.mask[:20, :20].any() and tm.mask.sum() == 192 * 192
    with pytest.raises(TissueError, match=r"left out: .*QuPath class.*outlines no tissue"), \
            pytest.warns(UserWarning):
        _mask([_feature([far], name="x", cls=cls)])


def test_wsikit_artefact_and_region_annotations_saved_back_are_left_out(tmp_path):
    truth = np.zeros((256, 256), bool)
    truth[40:200, 40:200] = True
    ink = np.zeros_like(truth)
    ink[0:30, 0:100] = True
    tm = TissueMask(mask=truth, mpp=8.0, downsample=16.0, level0_size=(W, H), slide_mpp=MPP,
                    artefacts={"ink": ink})
    regions = regions_to_geojson([{"id": "r1", "rank": 1, "scale": 8, "score": 0.9,
                                   "box": {"x": 0, "y": 3800, "width": 200, "height": 200}}])
    # all annotations of the image exported from QuPath into the tissue file
    features = (tm.to_geojson()["features"] + tm.artefacts_geojson()["features"]
                + regions["features"])
    with pytest.warns(UserWarning, match=r"2 feature\(s\) left out.*artefact.*region"):
        back = _mask(features, tmp_path)
    assert np.array_equal(back.mask, truth)


def test_deeply_nested_coordinates_are_refused_in_one_line(tmp_path):
    path = tmp_path / "deep.geojson"
    deep = "[" * 100_000 + "]" * 100_000
    path.write_text('{"type": "FeatureCollection", "features": [{"type": "Feature", '
                    '"geometry": {"type": "Polygon", "coordinates": ' + deep + '}}]}')
    with pytest.raises(TissueError, match=r"deep.geojson: .*nested more deeply"):
        TissueMask.from_geojson(path, level0_size=(W, H), slide_mpp=MPP)
    with pytest.raises(EvidenceError, match=r"deep.geojson: .*nested more deeply"):
        read_regions_geojson(path)


@pytest.mark.parametrize("coords, words", [
    ([[[0, 0], [float("nan"), 0], [10, 10], [0, 0]]], "vertex 1 of ring 0.*'nan'"),
    ([[[0, 0], ["10", 0], [10, 10], [0, 0]]], "vertex 1 of ring 0.*'10'"),
    ([[0, 0, 10, 10]], "ring 0 .*not an \\[x, y\\] point"),
    ("rings", "not a list of rings"),
])
def test_bad_coordinates_name_the_file_and_feature(coords, words, tmp_path):
    path = tmp_path / "bad.geojson"
    path.write_text(json.dumps({"type": "FeatureCollection",
                                "features": [_feature([SQUARE]), _feature(coords, name="b")]}))
    with pytest.raises(TissueError, match=rf"bad.geojson: feature 1 \('b'\): .*{words}"):
        TissueMask.from_geojson(path, level0_size=(W, H), slide_mpp=MPP)


def test_read_regions_names_the_file_and_feature(tmp_path):
    doc = regions_to_geojson([{"id": "r1", "rank": 1, "scale": 2, "score": 0.4,
                               "box": {"x": 10, "y": 20, "width": 30, "height": 30}}])
    nan = json.loads(json.dumps(doc))
    nan["features"][0]["geometry"]["coordinates"][0][1][0] = float("nan")
    (tmp_path / "n.geojson").write_text(json.dumps(nan))
    with pytest.raises(EvidenceError, match=r"n.geojson: feature 0 \('r1 2x'\): vertex 1 .*nan"):
        read_regions_geojson(tmp_path / "n.geojson")
    doc["features"].append("r2")
    (tmp_path / "s.geojson").write_text(json.dumps(doc))
    with pytest.raises(EvidenceError, match=r"s.geojson: feature 1 is a str \('r2'\)"):
        read_regions_geojson(tmp_path / "s.geojson")


def test_rasterising_equals_skimage_on_random_polygons():
    rng = np.random.default_rng(7)
    for _ in range(40):
        n = int(rng.integers(3, 30))
        ang = np.sort(rng.uniform(0, 2 * np.pi, n))
        rad = rng.uniform(3, 45, n)
        x, y = 50 + rad * np.cos(ang) + rng.uniform(-1, 1), 48 + rad * np.sin(ang)
        ref = np.zeros((256, 256), bool)   # pixel centres at integers, 16 level-0 px each
        rr, cc = sk_polygon(y, x, ref.shape)
        ref[rr, cc] = True
        ring = np.column_stack([(x + 0.5) * 16, (y + 0.5) * 16])
        ring = np.vstack([ring, ring[:1]]).tolist()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # a random star may cross itself
            tm = _mask([_feature([ring])])
        assert np.array_equal(tm.mask, ref)


def test_200k_vertex_outline_on_a_49k_slide_rasterises_in_seconds(tmp_path):
    # the campaign's case: an edited outline of 200,000 vertices on a 49k x 33k slide
    Wb, Hb, n = 49152, 32768, 200_000
    t = np.linspace(0, 2 * np.pi, n, endpoint=False)
    r = 1 + 0.05 * np.sin(60 * t)
    ring = np.column_stack([Wb / 2 + 0.45 * Wb * r * np.cos(t), Hb / 2 + 0.45 * Hb * r * np.sin(t)])
    ring = np.vstack([ring, ring[:1]]).round(2).tolist()
    path = tmp_path / "big.geojson"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": [_feature([ring])]}))
    start = time.perf_counter()
    tm = TissueMask.from_geojson(path, level0_size=(Wb, Hb), slide_mpp=0.25)
    took = time.perf_counter() - start
    assert tm.mask.shape == (1024, 1536)
    ellipse = np.pi * 0.45 * 1536 * 0.45 * 1024
    assert tm.mask.sum() == pytest.approx(ellipse, rel=0.02)
    assert took < 10.0, took
