"""Deep Zoom (DZI) geometry: levels, tile boxes, the descriptor, and which tiles are stored.

A Deep Zoom image of a ``W × H`` slide has levels ``0 … max_level`` with
``max_level = ceil(log2(max(W, H)))``; level ``L`` is the slide at scale
``2 ** (L - max_level)`` (``ceil(W / s) × ceil(H / s)`` pixels for ``s = 2 ** (max_level - L)``),
cut into square tiles of ``tile`` pixels from the top-left, without overlap, the last row and
column narrower. Level ``max_level`` is the slide's level 0.

A DZI tile is *stored* when one pyramid level of the slide file is the Deep Zoom level
(:func:`matching_level`: the level's size is ``W / s`` and ``H / s`` to within one pixel, as
scanners round) and the file's tile of that level covers exactly the DZI tile: same tile size,
the tile wholly inside both grids (:func:`stored_tile`). Such a tile is sent as the file
holds it, what the scanner wrote (:meth:`wsikit.slide.tiles.TileReader.stored_jpeg` merges the
shared JPEG tables into the abbreviated stream): no decode, no second JPEG loss.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

__all__: list[str] = []

_DZI_NS = "http://schemas.microsoft.com/deepzoom/2008"


@dataclass(frozen=True)
class DziGeometry:
    """The Deep Zoom pyramid of a ``width × height`` image cut in ``tile``-pixel tiles.

    Examples
    --------
    >>> g = DziGeometry(2220, 2967, 240)
    >>> g.max_level, g.level_size(12), g.level_size(11)
    (12, (2220, 2967), (1110, 1484))
    >>> g.tile_box(12, 9, 0)
    ((2160, 0, 60, 240), (60, 240))
    """

    width: int
    height: int
    tile: int = 256

    def __post_init__(self) -> None:
        if self.width < 1 or self.height < 1 or self.tile < 1:
            raise ValueError(f"a Deep Zoom image needs a positive size and tile, got "
                             f"{self.width}x{self.height}, tile {self.tile}")

    @property
    def max_level(self) -> int:
        """The full-resolution level: ``ceil(log2(max(width, height)))``."""
        return max(0, math.ceil(math.log2(max(self.width, self.height))))

    def scale(self, level: int) -> int:
        """Level-0 pixels per pixel of ``level`` (a power of two)."""
        return 2 ** (self.max_level - level)

    def level_size(self, level: int) -> tuple[int, int]:
        """``(width, height)`` of ``level`` in its own pixels."""
        s = self.scale(level)
        return -(-self.width // s), -(-self.height // s)

    def tiles_across(self, level: int) -> tuple[int, int]:
        """``(columns, rows)`` of tiles of ``level``."""
        w, h = self.level_size(level)
        return -(-w // self.tile), -(-h // self.tile)

    def tile_rect(self, level: int, col: int, row: int) -> tuple[int, int, int, int] | None:
        """``(x, y, w, h)`` of tile ``(col, row)`` in pixels of ``level``; None outside."""
        if not 0 <= level <= self.max_level or col < 0 or row < 0:
            return None
        w, h = self.level_size(level)
        x, y = col * self.tile, row * self.tile
        if x >= w or y >= h:
            return None
        return x, y, min(self.tile, w - x), min(self.tile, h - y)

    def tile_box(self, level: int, col: int, row: int
                 ) -> tuple[tuple[int, int, int, int], tuple[int, int]] | None:
        """``((x, y, w, h) level-0 box, (out_w, out_h))`` of tile ``(level, col, row)``, or
        None when it lies outside the image. The box is clipped to the image."""
        rect = self.tile_rect(level, col, row)
        if rect is None:
            return None
        x, y, w, h = rect
        s = self.scale(level)
        x0, y0 = x * s, y * s
        return (x0, y0, min((x + w) * s, self.width) - x0,
                min((y + h) * s, self.height) - y0), (w, h)

    def descriptor(self, *, fmt: str = "jpeg") -> str:
        """The ``.dzi`` XML descriptor (Deep Zoom 2008 schema, overlap 0)."""
        return (f'<?xml version="1.0" encoding="UTF-8"?>\n'
                f'<Image xmlns={quoteattr(_DZI_NS)} Format={quoteattr(fmt)} Overlap="0" '
                f'TileSize="{int(self.tile)}"><Size Width="{int(self.width)}" '
                f'Height="{int(self.height)}"/></Image>\n')


def matching_level(geometry: DziGeometry, level: int,
                   level_sizes: Sequence[tuple[int, int]]) -> int | None:
    """Index of the slide level that *is* Deep Zoom ``level`` (its size ``W / s × H / s`` to
    within one pixel, the scanner's rounding), or None.

    Examples
    --------
    >>> g = DziGeometry(46000, 32914)
    >>> matching_level(g, g.max_level - 2, [(46000, 32914), (11500, 8228), (2875, 2057)])
    1
    >>> matching_level(g, g.max_level - 1, [(46000, 32914), (11500, 8228)]) is None
    True
    """
    s = geometry.scale(level)
    for i, (lw, lh) in enumerate(level_sizes):
        if abs(geometry.width / s - lw) < 1 and abs(geometry.height / s - lh) < 1:
            return i
    return None


def stored_tile(geometry: DziGeometry, level: int, col: int, row: int, *,
                level_size: tuple[int, int], stored_tile_size: tuple[int, int]) -> bool:
    """Whether the file tile ``(col, row)`` of the matching slide level (``level_size``,
    tiles of ``stored_tile_size``) is exactly DZI tile ``(level, col, row)``: same tile size,
    and a whole tile inside both the DZI level and the slide level (edge tiles are padded in
    the file and narrower in the DZI)."""
    if tuple(stored_tile_size) != (geometry.tile, geometry.tile):
        return False
    rect = geometry.tile_rect(level, col, row)
    if rect is None or rect[2] != geometry.tile or rect[3] != geometry.tile:
        return False
    return ((col + 1) * geometry.tile <= level_size[0]
            and (row + 1) * geometry.tile <= level_size[1])
