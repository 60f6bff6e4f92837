"""A flat TIFF's background is mostly "scanner fill" (exactly constant pixels): the overview
and the report outline tissue and the artefacts removed from it, not the glass (issue 33)."""

from __future__ import annotations

import numpy as np

from wsikit.look.overlay import artefact_rings, overview_image
from wsikit.look.report import render_report
from wsikit.tissue.constants import ARTEFACT_CLASSES
from wsikit.tissue.mask import TissueMask


def _mask_with_fill() -> TissueMask:
    tissue = np.zeros((128, 128), bool)
    tissue[40:90, 40:90] = True
    fill = np.zeros_like(tissue)
    for i in range(0, 128, 16):           # fill patches all over the background
        fill[i:i + 8, 0:30] = True
        fill[i:i + 8, 100:128] = True
    ink = np.zeros_like(tissue)
    ink[95:110, 40:60] = True
    return TissueMask(mask=tissue, mpp=8.0, downsample=16.0, level0_size=(2048, 2048),
                      slide_mpp=0.5, artefacts={"fill": fill, "ink": ink})


def test_scanner_fill_is_not_outlined_on_the_overview():
    tm = _mask_with_fill()
    arts = tm.artefacts_geojson()
    assert any(f["properties"]["artefact"] == "fill" for f in arts["features"])
    assert set(artefact_rings(arts)) == {"ink"}
    assert set(artefact_rings(arts, hidden=())) == {"fill", "ink"}
    thumb = np.full((128, 128, 3), 240, np.uint8)
    img = overview_image(thumb, 16.0, regions=[], tissue_geojson=tm.to_geojson(),
                         artefacts_geojson=arts)
    grey = np.all(img == ARTEFACT_CLASSES["fill"][1], axis=-1)
    teal = np.all(img == ARTEFACT_CLASSES["ink"][1], axis=-1)
    assert not grey.any() and teal.any()
    page = render_report({"regions": []}, thumbnail=thumb, thumbnail_downsample=16.0,
                         tissue_geojson=tm.to_geojson(), artefacts_geojson=arts)
    assert "Scanner fill (fill)" not in page and "Ink or dye (ink)" in page


def test_tissue_rings_refuse_deeply_nested_collections():
    import pytest

    from wsikit.look.overlay import OverlayError, tissue_rings

    geom: dict = {"type": "Polygon", "coordinates": [[[0, 0], [9, 0], [9, 9], [0, 0]]]}
    for _ in range(5000):
        geom = {"type": "GeometryCollection", "geometries": [geom]}
    with pytest.raises(OverlayError, match="nested"):
        tissue_rings(geom)
