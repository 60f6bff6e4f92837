"""What the Python stages accept: the previous stage's result, a path where that is natural,
and for anything else one line that names the value and what to pass instead.

The chain ``open_slide → segment_tissue → make_grid → extract_features → compute_attention →
select_windows`` composes because each stage takes the objects the previous one returns
(a :class:`~wsikit.io.Slide` or its path, a :class:`~wsikit.tissue.TissueMask`, a
:class:`~wsikit.patching.TileGrid` or its coordinate file, an
:class:`~wsikit.attention.Attention`), and checks them with :func:`wsikit._hints.expect`.
"""

from __future__ import annotations

import os
from typing import Any

from ._hints import expect
from .errors import WsikitError

__all__ = ["grid_of"]


def grid_of(grid: Any, *, name: str = "grid",
            error: type[WsikitError] = WsikitError) -> Any:
    """``grid`` as a :class:`~wsikit.patching.TileGrid`: a grid is kept, a path is read as a
    coordinate file (wsikit, TRIDENT or CLAM), anything else is refused in one line."""
    from .patching import TileGrid

    if isinstance(grid, TileGrid):
        return grid
    expect(grid, (str, os.PathLike), name=name, error=error,
           want="a TileGrid (wsikit.make_grid) or the path of a coordinate file "
                "(<out>/patches/<slide>_patches.h5)")
    return TileGrid.from_h5(grid)
