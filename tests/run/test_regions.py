"""Regions that matter, end to end on real and generated slides: the rank-1 region and the
finest window lie inside the planted region, no window scores below the floor, none runs
past the slide, no crop is padded, and regions are listed by rank with their zoom chain."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_select import _inside

from wsikit.outputs.layout import OutputLayout
from wsikit.run.pipeline import select
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

PLANTED = (1280, 768, 768, 768)     # 3x3 patches of 256 l0 px at 0.5 µm/px


def _slide(tmp: Path, name: str, **kw) -> Path:
    spec = SyntheticSpec(4096, 3072, mpp=0.5, tissue=[(2048, 1536, 1900, 1450)], seed=5,
                         nuclei_per_mm2=(2000, 8000), period=1520, **kw)
    return write_synthetic_slide(tmp / f"{name}.svs", spec, downsamples=(1, 4), app_mag=20)


def _check_regions(d: dict, sdir: Path) -> None:
    regions = d["regions"]
    assert regions, d["empty_scales"]
    floor = d["selection"]["min_score_value"]
    assert floor is not None
    W, H = d["slide"]["width"], d["slide"]["height"]
    assert [r["rank"] for r in regions] == list(range(1, len(regions) + 1))
    assert [r["id"] for r in regions] == [f"r{r['rank']}" for r in regions]
    scores = [r["score"] for r in regions]
    assert scores == sorted(scores, reverse=True)
    ids = {r["id"]: r for r in regions}
    for r in regions:
        b = r["box"]
        assert r["score"] >= floor                                   # the saliency floor
        assert b["x"] >= 0 and b["y"] >= 0
        assert b["x"] + b["width"] <= W and b["y"] + b["height"] <= H   # inside the slide
        if r["inside"] is not None:                                  # the zoom chain
            host = ids[r["inside"]]
            assert host["scale"] > r["scale"] and _inside(r, (
                host["box"]["x"], host["box"]["y"], host["box"]["width"],
                host["box"]["height"]))
        crop = np.asarray(Image.open(sdir / r["crop"]["path"]).convert("RGB"))
        edges = [crop[-1], crop[:, -1], crop[0], crop[:, 0]]
        assert not any((e >= 254).all() for e in edges), r["id"]     # no padded crop


@pytest.mark.parametrize("kind, stain, h_fade", [("dense", 1.0, 1.0), ("enlarged", 0.55, 1.0),
                                                 ("dense", 1.0, 0.5)],
                         ids=["dense-normal", "enlarged-pale", "dense-faded"])
def test_rank1_and_finest_window_lie_in_the_planted_region(tmp_path: Path, kind: str,
                                                           stain: float, h_fade: float) -> None:
    path = _slide(tmp_path, f"planted_{kind}", stain=stain, h_fade=h_fade, **{kind: [PLANTED]})
    res = select(path, out=tmp_path / "out", encoder="heuristic", patch_px=256,
                 report=False, progress=False)
    d = res.to_dict()
    sdir = OutputLayout(tmp_path / "out").select_dir(path.stem)
    _check_regions(d, sdir)
    rank1 = d["regions"][0]
    finest = min(d["regions"], key=lambda r: r["scale"])
    assert _inside(rank1, PLANTED), rank1["box"]
    assert _inside(finest, PLANTED), finest["box"]
    assert finest["scale"] == 1
    assert {r["scale"] for r in d["regions"]} >= {1, 2}
    on_disk = json.loads((sdir / "evidence.json").read_text())
    assert on_disk["regions"][0]["rank"] == 1


def test_real_slide_regions_obey_floor_slide_and_crops(cmu_small: Path, tmp_path: Path) -> None:
    res = select(cmu_small, out=tmp_path, encoder="heuristic", patch_px=256, report=False,
                 progress=False)
    d = res.to_dict()
    _check_regions(d, OutputLayout(tmp_path).select_dir("CMU-1-Small-Region"))
    assert d["selection"]["min_score"] == "median"
    att = json.loads((OutputLayout(tmp_path).select_dir("CMU-1-Small-Region") / "windows.json"
                      ).read_text())
    assert att["params"]["min_score_value"] == d["selection"]["min_score_value"]
    # a nested zoom chain: the finest region lies inside a coarser one
    assert any(r["inside"] for r in d["regions"])
    text = res.to_prompt_context()
    assert "Regions of the slide by rank" in text and "r1: " in text
