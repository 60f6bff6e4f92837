"""What the Python stages accept: the previous stage's result, a path where that is natural,
and for anything else one line that names the value and what to pass instead.

The chain ``open_slide → segment_tissue → make_grid → extract_features → compute_attention →
select_windows`` composes because each stage takes the objects the previous one returns
(a :class:`~wsikit.io.Slide` or its path, a :class:`~wsikit.tissue.TissueMask`, a
:class:`~wsikit.patching.TileGrid` or its coordinate file, an
:class:`~wsikit.attention.Attention`), and checks them with :func:`expect`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from .errors import WsikitError

__all__ = ["expect", "grid_of", "slide_of"]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{type(value).__name__} {text[:30]}…"


def expect(value: Any, types: type | tuple[type, ...], *, name: str, want: str,
           error: type[WsikitError] = WsikitError) -> None:
    """Raise ``error`` (one line) unless ``value`` is an instance of ``types``.

    ``want`` says what to pass, e.g. ``"a TileGrid (wsikit.make_grid)"``.
    """
    allowed = types if isinstance(types, tuple) else (types,)
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        raise error(f"{name} must be {want}, not {type(value).__name__} {_shown(value)}")


@contextlib.contextmanager
def slide_of(slide: Any, *, name: str = "slide", mpp: float | None = None,
             error: type[WsikitError] = WsikitError) -> Iterator[Any]:
    """Yield ``slide`` when it is a :class:`~wsikit.io.Slide`; open (and afterwards close) it
    when it is a path; refuse anything else in one line."""
    from .io import Slide, open_slide

    if isinstance(slide, Slide):
        yield slide
        return
    expect(slide, (str, os.PathLike), name=name, error=error,
           want="a Slide (wsikit.open_slide) or the path of a slide file")
    with open_slide(slide, mpp=mpp) as opened:
        yield opened


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
