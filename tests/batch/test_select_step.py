"""The batch ``attention`` and ``select`` steps give what ``wsikit select`` gives per slide."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from wsikit.attention import Attention
from wsikit.batch import run_batch
from wsikit.pipeline import select


def _relative(regions: list) -> list:
    return [{**r, "crop": {k: v for k, v in r["crop"].items() if k != "abspath"}}
            for r in regions]


def test_batch_select_equals_per_slide_select(cmu_small: Path, synthetic_small_slide: Path,
                                              tmp_path: Path) -> None:
    cohort = tmp_path / "cohort"
    cohort.mkdir()
    for src in (cmu_small, synthetic_small_slide):
        (cohort / src.name).symlink_to(src)
    summary = run_batch(cohort, tmp_path / "job", steps="select", encoder="heuristic",
                        workers=1, max_iou=0.25, progress=False, echo=lambda line: None)
    assert summary.exit_code == 0
    for src in (cmu_small, synthetic_small_slide):
        ref = select(src, out=tmp_path / "ref", models="heuristic", max_iou=0.25,
                     report=False, progress=False).to_dict()
        got = json.loads((tmp_path / "job" / "select" / src.stem / "evidence.json").read_text())
        assert _relative(got["regions"]) == _relative(ref["regions"])  # abspaths differ
        assert got["empty_scales"] == ref["empty_scales"]
        assert got["selection"]["max_iou"] == 0.25
        a = Attention.from_h5(tmp_path / "job" / "attention" / f"{src.stem}.h5")
        b = Attention.from_h5(tmp_path / "ref" / "attention" / f"{src.stem}.h5")
        np.testing.assert_allclose(a.scores, b.scores, rtol=1e-6, atol=1e-7)
        assert a.source == b.source == "heuristic"
        assert (tmp_path / "job" / "select" / src.stem / "report.html").exists()
