"""Issue 40.5: regions read back from QuPath GeoJSON lie on the slide: a box at x = y = -5e9
with width 1e12 is an error naming the feature, not a region."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wsikit.errors import EvidenceError
from wsikit.evidence.regions_geojson import (
    EDGE_MARGIN,
    read_regions_geojson,
    regions_to_geojson,
)


def _write(tmp_path: Path, boxes: list[tuple[float, float, float, float]]) -> Path:
    regions = [{"id": f"r{i + 1}", "rank": i + 1, "scale": 1, "score": 0.5,
                "box": {"x": 0, "y": 0, "width": 1, "height": 1}} for i in range(len(boxes))]
    doc = regions_to_geojson(regions)
    for feature, (x, y, w, h) in zip(doc["features"], boxes, strict=True):
        feature["geometry"]["coordinates"] = [[[x, y], [x + w, y], [x + w, y + h], [x, y + h],
                                               [x, y]]]
    path = tmp_path / "regions.geojson"
    path.write_text(json.dumps(doc))
    return path


def test_a_huge_box_far_off_the_slide_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, [(100, 100, 50, 50), (-5e9, -5e9, 1e12, 1e12)])
    for size in ((2220, 2967), None):      # with the slide's size, and without (any slide)
        with pytest.raises(EvidenceError) as err:
            read_regions_geojson(path, level0_size=size)
        text = str(err.value)
        assert str(path) in text and "feature 1 ('r2 1x')" in text
        assert "-5e+09" in text and "beyond" in text


@pytest.mark.parametrize(("box", "ok"), [
    ((0, 0, 2220, 2967), True),                                    # the whole slide
    ((-10, -10, 100, 100), True),                                  # a hand-drawn overshoot
    ((2000, 2900, 220 + 2967 * EDGE_MARGIN * 0.9, 67), True),
    ((2000, 2900, 220 + 2967 * EDGE_MARGIN * 1.1, 67), False),     # past the margin
    ((3000, 100, 100, 100), False),                                # wholly off the slide
    ((100, -200, 100, 100), False),
])
def test_regions_must_lie_on_the_slide_give_or_take_a_margin(tmp_path: Path, box, ok: bool
                                                             ) -> None:
    path = _write(tmp_path, [box])
    if ok:
        assert read_regions_geojson(path, level0_size=(2220, 2967))[0]["id"] == "r1"
    else:
        with pytest.raises(EvidenceError, match="beyond the slide"):
            read_regions_geojson(path, level0_size=(2220, 2967))
