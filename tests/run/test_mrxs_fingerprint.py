"""What a run does with an MRXS slide's outputs once its fingerprint covers the data folder:
the results of an earlier version (the .mrxs file alone fingerprinted) are computed once more,
not refused as another slide's; a rescan under the same name is another slide."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from wsikit.errors import CacheError
from wsikit.outputs.layout import OutputLayout
from wsikit.run.cohort_slide import CohortSlide
from wsikit.run.slide_ops import check_tissue_owner, geojson_edited
from wsikit.run.state import reusable_records
from wsikit.slide.fingerprint import slide_fingerprint, write_source


def _bare_file_fingerprint(path: Path) -> str:
    """What an earlier version recorded for a small slide file: SHA-256 of ``fp1:<size>`` and
    its bytes (the data folder not looked at)."""
    data = path.read_bytes()
    digest = hashlib.sha256(f"fp1:{len(data)}".encode() + data).hexdigest()
    return f"fp1-{len(data)}-{digest[:24]}"


def _tissue(out: Path, slide: Path, fingerprint: str) -> Path:
    gj = OutputLayout(out).tissue_geojson("case")
    gj.parent.mkdir(parents=True, exist_ok=True)
    gj.write_text('{"type": "FeatureCollection", "features": []}')
    written = hashlib.sha256(gj.read_bytes()).hexdigest()
    write_source(gj, slide, fingerprint, written_sha256=written)
    return gj


def test_outputs_of_an_earlier_version_are_this_slides_but_not_reused(tmp_path: Path,
                                                                      mrxs_like) -> None:
    slide = mrxs_like(tmp_path / "cohort")
    now = slide_fingerprint(slide)
    old = _bare_file_fingerprint(slide)
    out = tmp_path / "out"
    _tissue(out, slide, old)
    check_tissue_owner(slide, out, "case", fingerprint=now)  # not another slide's: no error
    assert geojson_edited(out, "case", fingerprint=now) is False  # wsikit's: segmented anew
    state = {"fingerprint": old, "path": str(slide), "status": "done",
             "steps": {"segment": {"status": "done"}}}
    assert reusable_records(state, CohortSlide("case", slide), now) == {}
    assert reusable_records({**state, "fingerprint": now}, CohortSlide("case", slide), now)


def test_a_rescan_with_the_same_name_is_another_slide(tmp_path: Path, mrxs_like) -> None:
    first = mrxs_like(tmp_path / "A")
    rescan = mrxs_like(tmp_path / "B", seed=1)  # same .mrxs bytes, other data files
    out = tmp_path / "out"
    _tissue(out, first, slide_fingerprint(first))
    with pytest.raises(CacheError, match="another slide named 'case'"):
        check_tissue_owner(rescan, out, "case", fingerprint=slide_fingerprint(rescan))
