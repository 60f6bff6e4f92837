"""A job folder moved with its slides and index (``mv m1 m2``) keeps working: every path
wsikit wrote into the result resolves at the new place, the report's images are all there,
the viewer opens it, and a resumed run redoes nothing (issue 33)."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from PIL import Image

from wsikit.evidence import EvidenceResult
from wsikit.outputs.layout import OutputLayout
from wsikit.run.pipeline import select

NAME = "CMU-1-Small-Region"
#: Keys that hold an absolute path on purpose: the fallback of a file outside the result,
#: each beside a relative partner (slide.relpath, index.relpath, image_path, slide_relpath).
ABSOLUTE_FALLBACKS = {"slide.path": "slide.relpath", "index.path": "index.relpath",
                      "image_abspath": "image_path", "slide": "slide_relpath"}


def _run(base: Path) -> None:
    select(base / f"{NAME}.svs", out=base / "out", index=base / "lit" / "index",
           encoder="heuristic", scales=(2, 1), patch_px=256, k=2, min_similarity="none",
           progress=False)


def _stamps(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_mtime_ns
            for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def moved(cmu_small: Path, tmp_path_factory: pytest.TempPathFactory):
    from wsikit.run.demos import demo_index

    top = tmp_path_factory.mktemp("moved")
    m1 = top / "m1"
    m1.mkdir()
    shutil.copyfile(cmu_small, m1 / f"{NAME}.svs")
    demo_index(m1 / "lit", progress=False)
    _run(m1)
    before = _stamps(m1 / "out")
    m2 = top / "m2"
    os.rename(m1, m2)  # mv m1 m2: nothing is left at the old place
    return m1, m2, before


def _strings(value, key=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, key)
    elif isinstance(value, str):
        yield key, value


def test_every_path_in_the_result_resolves_at_the_new_place(moved) -> None:
    m1, m2, _ = moved
    sdir = OutputLayout(m2 / "out").select_dir(NAME)
    checked = 0
    for f in sorted(sdir.rglob("*.json")) + sorted(sdir.rglob("*.geojson")):
        doc = json.loads(f.read_text(encoding="utf-8"))
        for key, value in _strings(doc):
            if value.startswith(str(m1)):  # an absolute path of the old place
                assert key in {k.split(".")[-1] for k in ABSOLUTE_FALLBACKS}, (f, key, value)
    ev = json.loads((sdir / "evidence.json").read_text())
    for r in ev["regions"]:
        assert "abspath" not in r["crop"] and (sdir / r["crop"]["path"]).is_file()
        for m in r["matches"]:
            assert (sdir / m["image_path"]).is_file()
            checked += 1
    assert checked > 0
    assert (sdir / ev["slide"]["relpath"]).resolve() == (m2 / f"{NAME}.svs").resolve()
    assert (sdir / ev["index"]["relpath"]).resolve() == (m2 / "lit" / "index").resolve()
    assert ev["slide"]["output_name"] == NAME
    for sidecar in sorted((sdir / "crops").glob("*.json")):
        rec = json.loads(sidecar.read_text())
        assert (sidecar.parent / rec["path"]).is_file()
        assert (sidecar.parent / rec["slide_relpath"]).resolve() == (m2 / f"{NAME}.svs").resolve()


def test_the_tissue_records_its_slide_relative_to_itself(moved) -> None:
    from wsikit.slide.fingerprint import recorded_slide

    _, m2, _ = moved
    geojson = OutputLayout(m2 / "out").tissue_geojson(NAME)
    rec = json.loads(geojson.with_name(geojson.name + ".source.json").read_text())
    assert (geojson.parent / rec["slide_relpath"]).resolve() == (m2 / f"{NAME}.svs").resolve()
    assert Path(recorded_slide(geojson)).resolve() == (m2 / f"{NAME}.svs").resolve()


def test_the_state_record_names_the_slide_relative_to_itself(moved) -> None:
    _, m2, _ = moved
    state = OutputLayout(m2 / "out").state(NAME)
    rec = json.loads(state.read_text())
    assert (state.parent / rec["relpath"]).resolve() == (m2 / f"{NAME}.svs").resolve()


def test_readers_find_the_moved_files(moved) -> None:
    _, m2, _ = moved
    res = EvidenceResult.read(OutputLayout(m2 / "out").select_dir(NAME) / "evidence.json")
    assert res.slide_file() == (m2 / f"{NAME}.svs").resolve()
    assert res.index_dir() == (m2 / "lit" / "index").resolve()
    docs = res.to_langchain_documents()
    assert docs and all(Path(d["metadata"]["image_path"]).is_relative_to(m2.resolve())
                        and Path(d["metadata"]["crop_path"]).is_file()
                        and d["metadata"]["slide_path"] == str(res.slide_file())
                        for d in docs)


def test_the_reports_images_all_load(moved) -> None:
    _, m2, _ = moved
    page = (OutputLayout(m2 / "out").select_dir(NAME) / "report.html").read_text()
    srcs = re.findall(r'<img src="([^"]*)"', page)
    assert len(srcs) >= 2 + 2 * 2  # two crops, two figures each (and the overview)
    for src in srcs:  # self-contained: every image inlined, none a path that could break
        head, _, data = src.partition(",")
        assert head.startswith("data:image/") and head.endswith(";base64"), src[:80]
        with Image.open(io.BytesIO(base64.b64decode(data))) as im:
            assert im.size[0] > 0
    assert 'class="noimg' not in page


def test_the_viewer_opens_the_moved_result(moved) -> None:
    from wsikit.look.viewer import ViewerSource

    _, m2, _ = moved
    source = ViewerSource.open(OutputLayout(m2 / "out").select_dir(NAME))
    try:
        assert Path(source.slide.path).resolve() == (m2 / f"{NAME}.svs").resolve()
        info = source.info()
        assert info["has_tissue"] and info["layers"] and not info["problems"]
        assert source.crop("r1") is not None and source.figure("r1", 0) is not None
    finally:
        source.close()


def test_a_resumed_run_at_the_new_place_redoes_nothing(moved) -> None:
    _, m2, before = moved
    _run(m2)
    after = _stamps(m2 / "out")
    changed = sorted(k for k in after if before.get(k) != after[k])
    assert changed == [f"state/{NAME}.json"], changed  # only the run's own record
