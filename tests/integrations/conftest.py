"""Two real slides run through ``wsikit select`` against the demo figure index."""

from __future__ import annotations

from pathlib import Path

import pytest

from wsikit.run.demos import demo_index
from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

#: Small, quick selection: 2 scales of 256 px patches at 1 µm/px, no report.
FAST = {"encoder": "heuristic", "scales": (2, 1), "patch_px": 256, "target_mpp": 1.0,
        "report": False, "progress": False}


@pytest.fixture(scope="session")
def fast_options() -> dict:
    """:data:`FAST` as a fixture (test modules cannot import conftest)."""
    return dict(FAST)


@pytest.fixture(scope="session")
def figure_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo index: synthetic atlas figures + unrelated synthetic figures (17 nodes)."""
    return demo_index(tmp_path_factory.mktemp("demo_index"), progress=False)


@pytest.fixture(scope="session")
def two_results(tmp_path_factory: pytest.TempPathFactory, figure_index: Path, cmu_small: Path):
    """EvidenceResults of two different slides (the real CMU-1 small region and a synthetic
    slide) with the same options: both have regions r1, r2, each matching 10 of the 17
    figures, so (region, figure) pairs repeat across the slides."""
    from wsikit.run.pipeline import select

    root = tmp_path_factory.mktemp("two_slides")
    synth = write_synthetic_slide(
        root / "synthetic_b.svs",
        SyntheticSpec(3072, 3072, mpp=0.5, tissue=[(1536, 1536, 1400, 1300)],
                      dense=[(1024, 1024, 1024, 1024)], seed=3),
        downsamples=(1, 4), app_mag=20)
    out = root / "out"
    return [select(s, out=out, index=figure_index, k=10, min_similarity="none", **FAST)
            for s in (cmu_small, synth)]
