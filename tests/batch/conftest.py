"""A six-slide generated cohort: four normal slides, one without mpp in its metadata (given in
the CSV) and one corrupt file."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from _batch_options import OPTIONS  # noqa: F401  (shared with the test modules)

from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide


@pytest.fixture(scope="session")
def cohort_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cohort")
    rows = ["path,mpp"]
    for i in range(4):
        spec = SyntheticSpec(2048, 1536, mpp=0.5, seed=i,
                             dense=[(200 + 250 * i, 300 + 100 * i, 500, 500)])
        write_synthetic_slide(root / f"slide{i}.svs", spec, downsamples=(1, 4), app_mag=20)
        rows.append(f"slide{i}.svs,")
    nompp = SyntheticSpec(2048, 1536, mpp=None, seed=7, dense=[(900, 500, 400, 400)])
    write_synthetic_slide(root / "nompp.svs", nompp, downsamples=(1, 4), app_mag=None,
                          aperio=False)
    rows.append("nompp.svs,0.5")
    good = (root / "slide0.svs").read_bytes()
    (root / "corrupt.svs").write_bytes(good[:4096] + b"\0" * 1024)  # truncated TIFF
    rows.append("corrupt.svs,")
    csv = root / "cohort.csv"
    csv.write_text("\n".join(rows) + "\n")
    return csv


@pytest.fixture
def tiny_encoder():
    """The test-only encoder with a real weight file (tests/batch/_tiny_encoder.py), registered
    for one test only: the registry is global."""
    from wsikit.models import registry

    module = importlib.import_module("_tiny_encoder")
    yield module
    if "tiny_test" in registry.list_encoders():
        registry.unregister_encoder("tiny_test")
    sys.modules.pop("_tiny_encoder", None)
