"""Shared fixtures: generated Aperio-style slides and the real public slides in tests/data.

Area-specific fixtures belong in ``tests/<area>/conftest.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wsikit.slide.synthetic import SyntheticSpec, write_synthetic_slide

os.environ.setdefault("WSIKIT_NO_PROGRESS", "1")

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "data"


def _fixture(name: str) -> Path:
    path = FIXTURES / name
    if not path.exists():  # the files are committed: a missing one is a broken checkout
        raise FileNotFoundError(
            f"test data {path} is missing: restore it with 'git checkout -- tests/data'")
    return path


@pytest.fixture(scope="session")
def cmu_small() -> Path:
    """The real Aperio slide CMU-1-Small-Region.svs (2220×2967, 0.499 µm/px)."""
    return _fixture("CMU-1-Small-Region.svs")


@pytest.fixture(scope="session")
def tiny_svs() -> Path:
    """The real 16×16 Aperio slide small.svs."""
    return _fixture("small.svs")


@pytest.fixture(scope="session")
def synthetic_slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An 8192×6144 Aperio-style slide at 0.25 µm/px (40×), levels 1/4/16, with one tissue
    ellipse and a planted dense-nuclei region at level-0 box (3000, 2000, 1500, 1500)."""
    path = tmp_path_factory.mktemp("slides") / "synthetic.svs"
    spec = SyntheticSpec(8192, 6144, mpp=0.25, dense=[(3000, 2000, 1500, 1500)])
    return write_synthetic_slide(path, spec)


@pytest.fixture(scope="session")
def synthetic_small_slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2048×1536 slide at 0.5 µm/px (20×), levels 1/4, dense region at (800, 400, 600, 600)."""
    path = tmp_path_factory.mktemp("slides") / "synthetic_small.svs"
    spec = SyntheticSpec(2048, 1536, mpp=0.5, dense=[(800, 400, 600, 600)])
    return write_synthetic_slide(path, spec, downsamples=(1, 4), app_mag=20)


@pytest.fixture
def no_weights(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No model weights to find: an empty Hugging Face cache, offline, no weights config file
    and no ``WSIKIT_WEIGHTS_*`` variables."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("WSIKIT_CONFIG", str(tmp_path / "weights.toml"))
    for var in [v for v in os.environ if v.startswith("WSIKIT_WEIGHTS_")]:
        monkeypatch.delenv(var)


@pytest.fixture
def mrxs_like():
    """Write the file layout of a MIRAX slide (no pixels OpenSlide could read):
    ``make(folder, name="case")`` → ``folder/<name>.mrxs`` and ``folder/<name>/`` holding
    ``Slidedat.ini`` (naming ``Index.dat`` and two data files), ``Index.dat``,
    ``Data0000.dat`` (40 KiB) and ``Data0001.dat`` (3 MiB, larger than the companion files
    hashed whole), each of seeded random bytes."""
    import random

    def make(folder: Path, name: str = "case", *, seed: int = 0) -> Path:
        rng = random.Random(seed)
        data = folder / name
        data.mkdir(parents=True)
        (data / "Slidedat.ini").write_bytes(
            b"\xef\xbb\xbf[GENERAL]\r\nSLIDE_VERSION = 01.02\r\n"
            b"SLIDE_ID = " + str(seed).encode() + b"\r\n"
            b"[HIERARCHICAL]\r\nHIER_COUNT = 1\r\nINDEXFILE = Index.dat\r\n"
            b"[DATAFILE]\r\nFILE_COUNT = 2\r\nFILE_1 = Data0001.dat\r\nFILE_0 = Data0000.dat\r\n")
        for part, size in (("Index.dat", 4096), ("Data0000.dat", 40 << 10),
                           ("Data0001.dat", 3 << 20)):
            (data / part).write_bytes(rng.randbytes(size))
        slide = folder / f"{name}.mrxs"
        slide.write_bytes(b"[GENERAL]\r\nVERSION = 1\r\n")  # the same in every slide
        return slide

    return make
