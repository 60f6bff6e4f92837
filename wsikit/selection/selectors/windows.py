"""Result types of window selection: :class:`Window` and :class:`Windows`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...errors import SelectionError

__all__ = ["Window", "Windows"]


@dataclass(frozen=True)
class Window:
    """One selected square window.

    Attributes
    ----------
    x, y : int
        Level-0 top-left corner in pixels (``gx * p``, ``gy * p``).
    size : int
        Side in level-0 pixels (``scale * p``).
    scale : int
        Side in grid cells (``w``).
    score : float
        Mean attention over the window's occupied cells.
    gx, gy : int
        Grid cell of the top-left corner (grid anchored at the level-0 origin).
    coverage : float
        Fraction of the ``w×w`` cells that hold a patch.
    rank : int
        1 = highest score among the selected windows (0: not ranked).
    inside : int or None
        Rank of the smallest selected window that wholly contains this one (the window it
        zooms into), or ``None``.
    """

    x: int
    y: int
    size: int
    scale: int
    score: float
    gx: int
    gy: int
    coverage: float = 1.0
    rank: int = 0
    inside: int | None = None

    @property
    def id(self) -> str:
        """Region id ``r<rank>``."""
        return f"r{self.rank}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict in the shape of an evidence region (without ``id``/crop/matches)."""
        return {
            "rank": self.rank,
            "inside": None if self.inside is None else f"r{self.inside}",
            "scale": self.scale,
            "score": self.score,
            "coverage": self.coverage,
            "box": {"x": self.x, "y": self.y, "width": self.size, "height": self.size},
            "grid_box": {"gx": self.gx, "gy": self.gy, "size": self.scale},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Window:
        """Inverse of :meth:`to_dict`."""
        try:
            box, grid = d["box"], d["grid_box"]
            inside = d.get("inside")
            if isinstance(inside, str):
                inside = int(inside.lstrip("r"))
            return cls(x=int(box["x"]), y=int(box["y"]), size=int(box["width"]),
                       scale=int(d["scale"]), score=float(d["score"]), gx=int(grid["gx"]),
                       gy=int(grid["gy"]), coverage=float(d.get("coverage", 1.0)),
                       rank=int(d.get("rank", 0)),
                       inside=None if inside is None else int(inside))
        except (KeyError, TypeError, ValueError) as exc:
            raise SelectionError(
                f"not a window dict (needs scale, score, box{{x,y,width}}, grid_box{{gx,gy}}): "
                f"{dict(d)!r}") from exc


@dataclass(frozen=True)
class Windows:
    """Selected windows in rank order (1 = most salient), plus why any scale came out empty.

    Attributes
    ----------
    windows : tuple of Window
        Accepted windows by rank (``Window.rank`` 1, 2, ...).
    empty : dict of int to str
        Scale -> human-readable reason, for every requested scale without a window.
    params : dict
        Selector name and options used (JSON-ready).
    grid : dict
        ``origin`` (gx0, gy0), ``shape`` (H, W) of the occupied-cell bounding box,
        ``occupied`` cell count and ``patch_size_l0``.
    """

    windows: tuple[Window, ...]
    empty: dict[int, str] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.windows)

    def __iter__(self) -> Iterator[Window]:
        return iter(self.windows)

    def __getitem__(self, i: int) -> Window:
        return self.windows[i]

    def by_scale(self, scale: int) -> tuple[Window, ...]:
        """Windows of one scale (side in cells), best first."""
        return tuple(w for w in self.windows if w.scale == scale)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``windows``, ``empty`` (keys as strings), ``params``, ``grid``."""
        return {
            "windows": [w.to_dict() for w in self.windows],
            "empty": {str(k): v for k, v in self.empty.items()},
            "params": dict(self.params),
            "grid": dict(self.grid),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Windows:
        """Inverse of :meth:`to_dict`."""
        try:
            windows = tuple(Window.from_dict(w) for w in d["windows"])
            empty = {int(k): str(v) for k, v in d.get("empty", {}).items()}
        except (KeyError, TypeError, ValueError) as exc:
            raise SelectionError(f"not a Windows dict (needs 'windows'): {exc}") from exc
        return cls(windows=windows, empty=empty, params=dict(d.get("params", {})),
                   grid=dict(d.get("grid", {})))
