"""Fixtures for the evidence engine: synthetic PDFs, figure images, manifests, encoders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from wsikit.evidence import write_synthetic_pdf


@pytest.fixture(scope="session")
def encoder():
    """The real weight-free heuristic encoder."""
    from wsikit.models import create_encoder

    return create_encoder("heuristic")


@pytest.fixture(scope="session")
def demo_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3-page synthetic paper: captions below (Fig 1, Fig. 3) and above (2B multi-line,
    FIGURE 4), an uncaptioned figure on page 3, no figure on page 2; title in metadata,
    DOI in first-page text."""
    return write_synthetic_pdf(tmp_path_factory.mktemp("pdf") / "paper.pdf")


def write_images(folder: Path, n: int, *, seed: int = 0, size: int = 48) -> list[Path]:
    """``n`` random-colour PNGs (distinct content)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        base = rng.integers(0, 256, 3)
        img = np.clip(base + rng.normal(0, 40, (size, size, 3)), 0, 255).astype(np.uint8)
        path = folder / f"img{i:03d}.png"
        Image.fromarray(img).save(path)
        paths.append(path)
    return paths


@pytest.fixture
def manifest_dir(tmp_path: Path) -> Path:
    """A folder with 12 images and manifest.jsonl listing them (mixed evidence levels)."""
    paths = write_images(tmp_path / "imgs", 12)
    rows = [{"image": f"imgs/{p.name}", "caption": f"Figure {i + 1}. test figure {i}",
             "figure_label": f"Figure {i + 1}", "source_title": f"Paper {i % 3}",
             "doi": f"10.1234/paper.{i % 3}", "page": i + 1, "year": 2020,
             "license": "CC-BY-4.0", "evidence_level": [7, 1, None][i % 3]}
            for i, p in enumerate(paths)]
    (tmp_path / "manifest.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return tmp_path


@pytest.fixture(scope="session")
def make_images():
    """The :func:`write_images` helper as a fixture."""
    return write_images

