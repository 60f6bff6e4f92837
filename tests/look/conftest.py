"""Fixtures of the viewer tests: one select result on the real CMU-1 small region, and copies
of its output folder that a test may change."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def cmu_result(cmu_small: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``OUT/select/CMU-1-Small-Region`` of ``wsikit select`` (heuristic, scales 2 and 1)."""
    from wsikit.outputs.layout import OutputLayout
    from wsikit.run.pipeline import select

    out = tmp_path_factory.mktemp("viewer_result")
    select(cmu_small, out=out, scales=(2, 1), patch_px=256, encoder="heuristic",
           report=False, progress=False)
    return OutputLayout(out).select_dir("CMU-1-Small-Region")


@pytest.fixture
def result_copy(cmu_result: Path, tmp_path: Path) -> Path:
    """A copy of the whole output folder of :func:`cmu_result` (features left out); its
    result folder."""
    shutil.copytree(cmu_result.parent.parent, tmp_path / "out",
                    ignore=shutil.ignore_patterns("features_*"))
    return tmp_path / "out" / "select" / cmu_result.name
