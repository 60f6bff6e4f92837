"""Compound micrograph figures made of real H&E tiles (TCGA, tests/data/real_tiles) for the
panel and kind tests (a module of helpers: test modules cannot import conftest)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: real H&E tiles (TCGA, tests/data/real_tiles) and where a 240 px window of each is all tissue
HE_TILES = (("medium-nuclei-score-level1-2.png", 224, 272),
            ("medium-nuclei-score-level1.png", 240, 128),
            ("medium-nuclei-score-level2.png", 0, 128),
            ("tissue-level2-4640-4649-8736-8746.png", 0, 128))
REAL_TILES = Path(__file__).resolve().parents[1] / "data" / "real_tiles"


def he_tile(i: int, size: int = 240) -> np.ndarray:
    """A ``size`` px all-tissue window of real H&E tile ``i`` of :data:`HE_TILES`."""
    from wsikit.evidence.nodes import load_image

    name, y, x = HE_TILES[i]
    return load_image(REAL_TILES / name)[y:y + size, x:x + size]


def he_grid(gutter: int = 12, size: int = 240, border: int = 12
            ) -> tuple[np.ndarray, list[tuple[int, int, int, int]]]:
    """A compound micrograph figure: the four real H&E tiles in a 2 x 2 grid with white
    gutters, and their boxes ``(x0, y0, x1, y1)`` in reading order."""
    side = 2 * border + 2 * size + gutter
    fig = np.full((side, side, 3), 255, np.uint8)
    boxes = []
    for i, (r, c) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
        y, x = border + r * (size + gutter), border + c * (size + gutter)
        fig[y:y + size, x:x + size] = he_tile(i, size)
        boxes.append((x, y, x + size, y + size))
    return fig, boxes
