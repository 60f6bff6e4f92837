"""Attention maps on the patch grid, and summed-area tables over them.

The grid is anchored at the level-0 origin: patch ``i`` with level-0 top-left ``(x_i, y_i)``
falls in cell ``(x_i // p, y_i // p)`` where ``p`` is the grid stride in level-0 pixels. Only
the bounding box of the occupied cells is stored; :attr:`AttentionMap.origin` is the grid cell
of element ``[0, 0]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import SelectionError

__all__ = ["AttentionMap", "attention_map", "summed_area_table", "window_sums"]

#: Refuse bounding boxes larger than this many cells (an outlier coordinate or a wrong
#: ``patch_size_l0`` would otherwise allocate gigabytes).
MAX_CELLS = 64_000_000


@dataclass(frozen=True)
class AttentionMap:
    """Mean per-patch score of every occupied grid cell, over the cells' bounding box.

    Attributes
    ----------
    values : ndarray, shape (H, W), float64
        Mean score of the patches in each cell; 0.0 where no patch falls (see ``occupied``).
    occupied : ndarray, shape (H, W), bool
        Whether at least one patch falls in the cell.
    counts : ndarray, shape (H, W), int64
        Number of patches per cell.
    origin : tuple of int
        ``(gx0, gy0)``: grid cell (level-0 origin anchored) of ``values[0, 0]``.
    patch_size_l0 : int
        Grid stride ``p`` in level-0 pixels.
    """

    values: np.ndarray
    occupied: np.ndarray
    counts: np.ndarray
    origin: tuple[int, int]
    patch_size_l0: int

    @property
    def shape(self) -> tuple[int, int]:
        """``(H, W)`` of the bounding box, in cells."""
        return (int(self.values.shape[0]), int(self.values.shape[1]))

    @property
    def n_occupied(self) -> int:
        """Number of occupied cells."""
        return int(self.occupied.sum())

    def l0_box(self) -> tuple[int, int, int, int]:
        """Level-0 ``(x, y, width, height)`` covered by the bounding box of the map."""
        p = self.patch_size_l0
        h, w = self.shape
        return (self.origin[0] * p, self.origin[1] * p, w * p, h * p)


def _as_scores(scores: np.ndarray) -> np.ndarray:
    arr = np.asarray(scores)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise SelectionError(
            f"scores must be a 1-D array of per-patch values, got shape {arr.shape}; "
            "pass one score per row of coords")
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
            or arr.dtype == np.bool_):
        raise SelectionError(f"scores must be numeric, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise SelectionError(
            f"scores contain {int(bad.sum())} non-finite values (first at index {first}: "
            f"{arr[first]!r}); replace NaN/inf before selecting windows")
    return arr


def _as_coords(coords: np.ndarray, n: int) -> np.ndarray:
    arr = np.asarray(coords)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise SelectionError(f"coords must have shape (N, 2) (level-0 x, y), got {arr.shape}")
    if arr.shape[0] != n:
        raise SelectionError(
            f"scores and coords disagree: {n} scores for {arr.shape[0]} coordinates; "
            "pass one score per patch, aligned with coords")
    if np.issubdtype(arr.dtype, np.integer):
        return arr.astype(np.int64)
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise SelectionError(
                "coords must be integer level-0 pixels; got non-integer floats "
                "(round them, or pass the int64 coords of the patch grid)")
        return arr.astype(np.int64)
    raise SelectionError(f"coords must be integers, got dtype {arr.dtype}")


def _as_patch_size(patch_size_l0: int) -> int:
    if isinstance(patch_size_l0, (bool, np.bool_)):
        raise SelectionError(f"patch_size_l0 must be a positive integer, got {patch_size_l0!r}")
    try:
        p = int(patch_size_l0)
    except (TypeError, ValueError) as exc:
        raise SelectionError(
            f"patch_size_l0 must be a positive integer (grid stride in level-0 px), "
            f"got {patch_size_l0!r}") from exc
    if p != patch_size_l0 or p <= 0:
        raise SelectionError(
            f"patch_size_l0 must be a positive integer (grid stride in level-0 px), "
            f"got {patch_size_l0!r}")
    return p


def attention_map(scores: np.ndarray, coords: np.ndarray, patch_size_l0: int) -> AttentionMap:
    """Average per-patch scores into grid cells (grid anchored at the level-0 origin).

    Parameters
    ----------
    scores : array_like, shape (N,)
        Per-patch scores (any finite real values).
    coords : array_like, shape (N, 2), int
        Level-0 top-left ``(x, y)`` of each patch.
    patch_size_l0 : int
        Grid stride ``p`` in level-0 pixels; patch ``i`` is in cell ``(x_i // p, y_i // p)``.

    Returns
    -------
    AttentionMap
        Mean score per occupied cell over the bounding box of the occupied cells.

    Raises
    ------
    SelectionError
        On shape mismatch, non-finite scores, non-integer coordinates, an empty input, a
        non-positive stride, or a bounding box of more than :data:`MAX_CELLS` cells.
    """
    s = _as_scores(scores)
    xy = _as_coords(coords, s.shape[0])
    p = _as_patch_size(patch_size_l0)
    if s.shape[0] == 0:
        raise SelectionError("no patches: scores and coords are empty (was any tissue found?)")
    cells = xy // p
    lo = cells.min(axis=0)
    hi = cells.max(axis=0)
    w, h = (int(v) for v in (hi - lo + 1))
    if w * h > MAX_CELLS:
        raise SelectionError(
            f"the patch grid spans {w}x{h} cells with patch_size_l0={p}; that is more than "
            f"{MAX_CELLS} cells: check that patch_size_l0 is the grid stride in level-0 px and "
            "that coords are level-0 pixels")
    flat = (cells[:, 1] - lo[1]) * w + (cells[:, 0] - lo[0])
    counts = np.bincount(flat, minlength=w * h).reshape(h, w)
    sums = np.bincount(flat, weights=s, minlength=w * h).reshape(h, w)
    occupied = counts > 0
    values = np.zeros((h, w), dtype=np.float64)
    np.divide(sums, counts, out=values, where=occupied)
    return AttentionMap(values=values, occupied=occupied, counts=counts.astype(np.int64),
                        origin=(int(lo[0]), int(lo[1])), patch_size_l0=p)


def summed_area_table(a: np.ndarray) -> np.ndarray:
    """Summed-area table with a leading zero row and column.

    Parameters
    ----------
    a : ndarray, shape (H, W)

    Returns
    -------
    ndarray, shape (H + 1, W + 1)
        ``S[y, x] = a[:y, :x].sum()`` (int64 for integer/bool input, float64 otherwise).
    """
    dtype = np.int64 if (np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_) \
        else np.float64
    sat = np.zeros((a.shape[0] + 1, a.shape[1] + 1), dtype=dtype)
    np.cumsum(a, axis=0, dtype=dtype, out=sat[1:, 1:])
    np.cumsum(sat[1:, 1:], axis=1, out=sat[1:, 1:])
    return sat


def window_sums(sat: np.ndarray, w: int) -> np.ndarray:
    """Sum of every ``w×w`` window from a summed-area table, in O(cells).

    Parameters
    ----------
    sat : ndarray, shape (H + 1, W + 1)
        Output of :func:`summed_area_table`.
    w : int
        Window side in cells (``1 <= w <= min(H, W)``).

    Returns
    -------
    ndarray, shape (H - w + 1, W - w + 1)
        Element ``[gy, gx]`` is the sum over cells ``[gy, gy+w) × [gx, gx+w)``.
    """
    return sat[w:, w:] - sat[:-w, w:] - sat[w:, :-w] + sat[:-w, :-w]
