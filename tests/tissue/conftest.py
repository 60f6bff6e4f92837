"""The hand-drawn truth of the real red-pen tile (tests/data/real_tiles): where its artefacts are.

``high-nuclei-score-red-pen-level1.truth.json`` holds one polygon per artefact, drawn by eye on
the tile at 4-6x: three pieces of a red marker smear over tumour and stroma (``ink``) and the
dark band of a narrow fold across the tumour (``fold``). Each polygon is the artefact's solid
core; a few pixels of blurred rim around it are neither artefact nor clean tissue in a test.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

TILES = Path(__file__).parents[1] / "data" / "real_tiles"
RED_PEN = "high-nuclei-score-red-pen-level1"


def truth_masks(name: str = RED_PEN) -> dict[str, np.ndarray]:
    """Kind -> (h, w) bool mask of the tile's hand-drawn artefacts."""
    data = json.loads((TILES / f"{name}.truth.json").read_text())
    with Image.open(TILES / data["tile"]) as im:
        w, h = im.size
    out: dict[str, np.ndarray] = {}
    for art in data["artefacts"]:
        canvas = Image.new("L", (w, h), 0)
        ImageDraw.Draw(canvas).polygon([tuple(p) for p in art["polygon"]], fill=1)
        m = np.asarray(canvas, bool)
        out[art["kind"]] = out.get(art["kind"], np.zeros((h, w), bool)) | m
    return out


@pytest.fixture(scope="session")
def red_pen_truth() -> dict[str, np.ndarray]:
    """The red-pen tile's truth at its pixels: ``ink``, ``fold`` and ``clean`` (more than
    16 px, about 16 µm, from either)."""
    from scipy import ndimage as ndi

    masks = truth_masks()
    masks["clean"] = ~ndi.binary_dilation(masks["ink"] | masks["fold"], iterations=16)
    return masks


@pytest.fixture(scope="session")
def truth_on(red_pen_truth: dict[str, np.ndarray]):
    """``truth_on(kind, (h, w))``: the red-pen tile's ``kind`` truth on a coarser grid (a cell
    is in it when at least half covered)."""

    def on(kind: str, shape: tuple[int, int]) -> np.ndarray:
        m = red_pen_truth[kind].astype(np.uint8) * 255
        return np.asarray(Image.fromarray(m).resize(shape[::-1], Image.BOX)) >= 128

    return on
