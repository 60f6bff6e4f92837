"""The evidence result stays an object from the selector to its readers (issue 31): the
report, the overview, the QuPath regions and the RAG adapters take the
:class:`~wsikit.evidence.EvidenceResult` itself and give what they give for its evidence.json
document; the dict is only the file boundary."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from wsikit.evidence import EvidenceRegion, EvidenceResult


@pytest.fixture(scope="module")
def result(cmu_small: Path, tmp_path_factory: pytest.TempPathFactory) -> EvidenceResult:
    from wsikit.run.pipeline import select

    out = tmp_path_factory.mktemp("typed")
    res = select(cmu_small, out=out, encoder="heuristic", scales=(2, 1), patch_px=256,
                 report=False, progress=False)
    assert isinstance(res, EvidenceResult) and res.regions
    assert all(isinstance(r, EvidenceRegion) for r in res.regions)
    return res


def test_the_qupath_regions_of_the_object_are_those_of_its_document(result) -> None:
    from wsikit.evidence.regions_geojson import read_regions_geojson, regions_to_geojson

    doc = result.to_dict()
    geo = regions_to_geojson(result)
    assert geo == regions_to_geojson(doc["regions"]) == regions_to_geojson(result.regions)
    assert len(geo["features"]) == len(result.regions)
    written = read_regions_geojson(result.base_dir / "regions.geojson")  # what select wrote
    assert [r["box"] for r in written] == [dict(r.box) for r in result.regions]
    assert written[0]["usable_tissue"] == result.regions[0].extra["usable_tissue"]


def test_the_report_reads_the_object_and_its_folder(result, tmp_path: Path, monkeypatch
                                                    ) -> None:
    from wsikit.look.report import render_report

    thumb = np.full((64, 48, 3), 230, np.uint8)
    monkeypatch.chdir(tmp_path)  # relative crop paths resolve against the result, not here
    from_object = render_report(result, thumbnail=thumb, thumbnail_downsample=64.0)
    assert 'class="noimg' not in from_object and from_object.count("crop of region") == len(
        result.regions)
    from_doc = render_report(result.to_dict(), thumbnail=thumb, thumbnail_downsample=64.0,
                             base_dir=result.base_dir)
    assert from_object == from_doc
    lost = render_report(result.to_dict(), thumbnail=thumb, thumbnail_downsample=64.0)
    assert "image not found" in lost  # a dict alone does not know its folder


def test_the_overview_draws_the_regions_objects(result) -> None:
    from wsikit.look.overlay import overview_image

    thumb = np.full((186, 139, 3), 230, np.uint8)
    by_object = overview_image(thumb, 16.0, regions=result.regions)
    by_dict = overview_image(thumb, 16.0, regions=result.to_dict()["regions"])
    assert np.array_equal(by_object, by_dict) and not np.array_equal(by_object, thumb)

