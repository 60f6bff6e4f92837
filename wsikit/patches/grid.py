"""Patch grids at an exact target µm/px, and TRIDENT/CLAM-compatible coordinate files.

The grid is anchored at the level-0 origin. A patch of ``patch_px`` pixels at ``target_mpp``
covers ``patch_size_l0 = round(patch_px * target_mpp / mpp)`` level-0 pixels and neighbours
are ``stride_l0 = round((patch_px - overlap_px) * target_mpp / mpp)`` apart — never snapped to
magnification bins.

Edge policy: grid positions start at 0 and continue while they start inside the slide, as long
as the previous patch did not already reach the right/bottom edge. Patches may therefore extend
past the slide edge (those pixels read as white and count as background); a slide smaller than
one patch gives the single patch ``(0, 0)`` if it has enough tissue.

Tissue fraction per patch is the exact area fraction of the mask inside the patch (outside the
slide counts as background), computed for the whole grid at once from a summed-area table with
bilinear interpolation at the fractional patch edges.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._atomic import atomic_path
from .._hints import expect, keyword, option
from .._version import __version__
from ..errors import GridError, WsikitError
from ..slide.mpp import check_mpp
from .h5 import h5_create, h5_value

if TYPE_CHECKING:
    from ..slide import Slide
    from ..tissue.mask import TissueMask

__all__ = ["TileGrid", "make_grid", "tissue_fractions", "TRIDENT_ATTRS",
           "PATCH_READ"]

#: How patches are read for an encoder, recorded in every feature file (``patch_read``) and in
#: the batch features step's hash: files made another way (before 2026-12: the level-0 box read
#: straight at the encoder's input size) are recomputed, never reused. Change it whenever the
#: pixels a patch gives the encoder change.
PATCH_READ = "target-mpp-then-input/v2"

#: Default patch resolution in µm/px (exact; 0.5 is "20×"), the one default of
#: :attr:`wsikit.run.options.GridOptions.target_mpp`.
TARGET_MPP = 0.5
#: Default patch side in pixels at the target µm/px (:attr:`~wsikit.run.options.GridOptions.
#: patch_px`).
PATCH_PX = 512
#: Smallest and largest patch side in pixels: a smaller patch holds no cell (the weight-free
#: encoder needs a few pixels per nucleus), a larger one no batch fits in memory.
PATCH_PX_RANGE = (16, 8192)
#: Default overlap of neighbouring patches in pixels at the target µm/px
#: (:attr:`~wsikit.run.options.GridOptions.overlap_px`).
OVERLAP_PX = 0
#: Default smallest tissue fraction of a kept patch (:attr:`~wsikit.run.options.GridOptions.
#: min_tissue`).
MIN_TISSUE = 0.1

#: Attributes of ``coords`` shared with TRIDENT (wsikit adds ``mpp``, ``target_mpp``, …).
TRIDENT_ATTRS = ("patch_size", "patch_size_level0", "level0_magnification",
                 "target_magnification", "overlap", "name", "savetodir", "level0_width",
                 "level0_height")


@dataclass(frozen=True, eq=False)
class TileGrid:
    """Patches of one slide.

    Attributes
    ----------
    coords : ndarray, shape (N, 2), int64
        Level-0 ``(x, y)`` of each patch's top-left corner, row-major order.
    tissue : ndarray, shape (N,), float32
        Tissue area fraction of each patch (NaN when unknown, e.g. read from CLAM files).
    patch_px : int
        Patch edge in pixels at ``target_mpp``.
    patch_size_l0 : int
        Patch edge in level-0 pixels.
    stride_l0 : int
        Distance between neighbouring patches in level-0 pixels.
    target_mpp, slide_mpp : float
        µm/px of the patches and of level 0 (NaN when unknown).
    mpp_source : str
    overlap_px : int
        Overlap between neighbours in pixels at ``target_mpp``.
    slide_name : str
    level0_size : (int, int)
        Slide ``(width, height)``.
    attrs : dict
        Extra attributes read from a file (e.g. CLAM's ``patch_level``).
    """

    coords: np.ndarray
    tissue: np.ndarray
    patch_px: int
    patch_size_l0: int
    stride_l0: int
    target_mpp: float
    slide_mpp: float
    mpp_source: str
    overlap_px: int
    slide_name: str
    level0_size: tuple[int, int]
    attrs: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.coords.shape[0])

    def __repr__(self) -> str:
        return (f"TileGrid({self.slide_name!r}, n={len(self)}, patch_px={self.patch_px} "
                f"@ {self.target_mpp:.4g} µm/px, patch_size_l0={self.patch_size_l0}, "
                f"stride_l0={self.stride_l0})")

    @property
    def boxes(self) -> np.ndarray:
        """(N, 4) int64 level-0 boxes ``(x, y, w, h)``."""
        size = np.full((len(self), 2), self.patch_size_l0, np.int64)
        return np.concatenate([self.coords, size], axis=1)

    def h5_attrs(self, savetodir: str = "") -> dict[str, Any]:
        """Attributes written on ``coords`` (TRIDENT's plus wsikit's)."""
        l0_mag = 10.0 / self.slide_mpp if math.isfinite(self.slide_mpp) else float("nan")
        t_mag = 10.0 / self.target_mpp if math.isfinite(self.target_mpp) else float("nan")
        return {
            "patch_size": int(self.patch_px),
            "patch_size_level0": int(self.patch_size_l0),
            "level0_magnification": _mag(l0_mag),
            "target_magnification": _mag(t_mag),
            "overlap": int(self.overlap_px),
            "name": self.slide_name,
            "savetodir": savetodir,
            "level0_width": int(self.level0_size[0]),
            "level0_height": int(self.level0_size[1]),
            "mpp": float(self.slide_mpp),
            "target_mpp": float(self.target_mpp),
            "mpp_source": self.mpp_source,
            "stride_level0": int(self.stride_l0),
            "wsikit_version": __version__,
        }

    def to_h5(self, path: str | os.PathLike[str]) -> Path:
        """Write ``coords`` (N, 2) int64 with attributes and ``tissue`` (N,) atomically.

        Use :meth:`wsikit.outputs.layout.OutputLayout.coords` for
        TRIDENT's ``…/patches/<slide>_patches.h5`` layout.
        """

        path = Path(path)
        savetodir = str(path.parent.parent if path.parent.name == "patches" else path.parent)
        with (atomic_path(path) as tmp,
              h5_create(tmp, reserve=20 * len(self.coords), final=path) as f):
            ds = f.create_dataset("coords", data=self.coords.astype(np.int64),
                                  maxshape=(None, 2))
            for k, v in self.h5_attrs(savetodir).items():
                ds.attrs[k] = v
            f.create_dataset("tissue", data=self.tissue.astype(np.float32))
        return path

    def same_as_file(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` holds this grid (coordinates, sizes and resolutions); ``False``
        when it is missing or unreadable. A grid rewritten only when it changed keeps its file
        (and the records and caches that checksum it) untouched on a rerun."""
        if not Path(path).exists():
            return False
        try:
            old = TileGrid.from_h5(path)
        except GridError:
            return False
        return (np.array_equal(old.coords, self.coords) and old.patch_px == self.patch_px
                and old.patch_size_l0 == self.patch_size_l0 and old.stride_l0 == self.stride_l0
                and math.isclose(old.target_mpp, self.target_mpp, rel_tol=1e-9)
                and math.isclose(old.slide_mpp, self.slide_mpp, rel_tol=1e-9))

    @classmethod
    def from_h5(cls, path: str | os.PathLike[str]) -> TileGrid:
        """Read a wsikit, TRIDENT or CLAM coordinate file.

        TRIDENT files give mpp from magnification (``10 / magnification``); CLAM files give
        the level-0 patch size from ``patch_size × downsample`` and unknown mpp (NaN).
        """
        import h5py

        path = Path(path)
        try:
            with h5py.File(path, "r") as f:
                if "coords" not in f:
                    raise GridError(f"{path}: no 'coords' dataset; not a coordinate file (give "
                                    f"a *_patches.h5 from 'wsikit patch', TRIDENT or CLAM)")
                dset = f["coords"]
                coords = np.asarray(dset[()], dtype=np.int64).reshape(-1, 2)
                attrs = {k: h5_value(v) for k, v in f.attrs.items()}
                attrs.update({k: h5_value(v) for k, v in dset.attrs.items()})
                tissue = (np.asarray(f["tissue"][()], np.float32) if "tissue" in f
                          else np.full(len(coords), np.nan, np.float32))
        except GridError:
            raise
        except (OSError, KeyError, ValueError) as exc:
            raise GridError(f"{path}: cannot read coordinate file ({exc}); give an HDF5 "
                            f"*_patches.h5 from 'wsikit patch', TRIDENT or CLAM") from exc
        name = str(attrs.get("name", path.stem.removesuffix("_patches")))
        if "level0_width" in attrs:
            size = (int(attrs["level0_width"]), int(attrs.get("level0_height", 0)))
        elif "level_dim" in attrs:  # CLAM stores the size of the patching level
            dims = np.atleast_1d(np.asarray(attrs["level_dim"], np.float64))
            dsmp = np.atleast_1d(np.asarray(attrs.get("downsample", 1.0), np.float64))
            size = (int(round(dims[0] * dsmp[0])), int(round(dims[-1] * dsmp[-1])))
        else:
            size = (0, 0)
        try:
            if "target_mpp" in attrs:  # wsikit
                patch_px = int(attrs["patch_size"])
                p0 = int(attrs["patch_size_level0"])
                overlap = int(attrs.get("overlap", 0))
                stride = int(attrs.get("stride_level0", p0))
                return cls(coords, tissue, patch_px, p0, stride, float(attrs["target_mpp"]),
                           float(attrs["mpp"]), str(attrs.get("mpp_source", "file")),
                           overlap, name, size, attrs)
            if "patch_size_level0" in attrs:  # TRIDENT
                patch_px = int(attrs["patch_size"])
                p0 = int(attrs["patch_size_level0"])
                overlap = int(attrs.get("overlap", 0))
                stride = int(round(p0 * (patch_px - overlap) / patch_px)) if patch_px else p0
                l0_mag = float(attrs.get("level0_magnification", "nan"))
                t_mag = float(attrs.get("target_magnification", "nan"))
                return cls(coords, tissue, patch_px, p0, stride, 10.0 / t_mag, 10.0 / l0_mag,
                           "trident.magnification", overlap, name, size, attrs)
            if "patch_level" in attrs or "downsample" in attrs:  # CLAM
                patch_px = int(attrs["patch_size"])
                dsmp = np.atleast_1d(np.asarray(attrs.get("downsample", 1.0), np.float64))
                p0 = int(round(patch_px * float(dsmp[0])))
                return cls(coords, tissue, patch_px, p0, p0, float("nan"), float("nan"),
                           "unknown", 0, name, size, attrs)
        except (KeyError, TypeError, ValueError) as exc:
            raise GridError(f"{path}: coordinate attributes are incomplete ({exc}); "
                            f"recreate it with 'wsikit patch'") from exc
        raise GridError(f"{path}: 'coords' has neither wsikit/TRIDENT attributes "
                        f"(patch_size_level0) nor CLAM attributes (patch_level, downsample)")


def _mag(value: float) -> float | int:
    """Magnification as an int when it is one (TRIDENT writes ints), else a float."""
    if not math.isfinite(value):
        return value
    return int(round(value)) if abs(value - round(value)) < 1e-6 else float(value)



def _positions(length: int, stride: int, size: int) -> np.ndarray:
    """Grid starts 0, stride, … while inside ``length`` and the previous patch ends short."""
    n = 1 if length <= size else 1 + max(0, math.ceil((length - size) / stride))
    return np.arange(n, dtype=np.int64) * stride


def tissue_fractions(mask: np.ndarray, scale: tuple[float, float], xs: np.ndarray,
                     ys: np.ndarray, size: float) -> np.ndarray:
    """Exact tissue area fraction of every patch of a product grid.

    Parameters
    ----------
    mask : ndarray, shape (h, w), bool
    scale : (sx, sy)
        Level-0 px per mask px.
    xs, ys : ndarray of int
        Patch left and top edges in level-0 px.
    size : float
        Patch edge in level-0 px.

    Returns
    -------
    ndarray, shape (len(ys), len(xs)), float32
    """
    h, w = mask.shape

    def interp_weights(edges: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        u = np.clip(edges, 0.0, float(n))
        i0 = np.minimum(np.floor(u).astype(np.int64), n - 1 if n > 0 else 0)
        return i0, i0 + 1, u - i0

    ux = np.concatenate([xs, xs + size]) / scale[0]
    uy = np.concatenate([ys, ys + size]) / scale[1]
    cx0, cx1, fx = interp_weights(ux, w)
    cy0, cy1, fy = interp_weights(uy, h)
    # Summed-area table only at the needed columns: per-row sums of the column segments
    # between them (one contiguous pass, np.add.reduceat), then cumulative sums over the
    # few segments and over rows.
    cols = np.unique(np.concatenate([cx0, cx1]))
    starts = np.unique(np.concatenate([[0], cols[cols < w]]))
    seg = np.add.reduceat(mask, starts, axis=1, dtype=np.int64) if w else \
        np.zeros((h, 1), np.int64)
    at = np.zeros((h + 1, len(starts) + 1), np.float64)   # S[row, position]
    np.cumsum(np.cumsum(seg, axis=1), axis=0, out=at[1:, 1:])
    positions = np.append(starts, w)
    jx0, jx1 = np.searchsorted(positions, cx0), np.searchsorted(positions, cx1)
    sx = at[:, jx0] * (1 - fx) + at[:, jx1] * fx              # (h+1, 2nx)
    s = sx[cy0, :] * (1 - fy)[:, None] + sx[cy1, :] * fy[:, None]  # (2ny, 2nx)
    nx, ny = len(xs), len(ys)
    area = s[ny:, nx:] - s[:ny, nx:] - s[ny:, :nx] + s[:ny, :nx]
    frac = area * (scale[0] * scale[1]) / float(size * size)
    return np.clip(frac, 0.0, 1.0).astype(np.float32)


def upsampling_note(slide_name: str, slide_mpp: float, target_mpp: float) -> str | None:
    """The warning for a grid whose level 0 is more than 1.5x coarser than ``target_mpp``
    (every patch upsampled, invented detail), or None. :func:`make_grid` warns with it and
    ``select`` records it in evidence.json (``selection.warnings``)."""
    if not (math.isfinite(slide_mpp) and math.isfinite(target_mpp)) or slide_mpp <= 0:
        return None
    ratio = target_mpp / slide_mpp
    if ratio >= 1 / 1.5:
        return None
    return (f"{slide_name}: level 0 is {slide_mpp:g} µm/px, {1 / ratio:.3g}x coarser than the "
            f"target {target_mpp:g} µm/px, so every patch is upsampled; check the slide's mpp "
            f"or use {option('target_mpp', slide_mpp)}")


def make_grid(slide: Slide | str | os.PathLike[str], mask: TissueMask | None = None, *,
              target_mpp: float = TARGET_MPP, patch_px: int = PATCH_PX,
              overlap_px: int = OVERLAP_PX, min_tissue: float = MIN_TISSUE,
              whole_slide: bool = False) -> TileGrid:
    """Patches of ``patch_px`` at ``target_mpp`` µm/px whose tissue fraction ≥ ``min_tissue``.

    Parameters
    ----------
    slide : Slide or path-like
        Gives level-0 size, mpp and name (a path is opened and closed here).
    mask : TissueMask, optional
        Tissue mask (:func:`wsikit.tissue.mask.segment_tissue`). Without one, pass
        ``whole_slide=True`` to keep every grid position (tissue fraction 1, background
        included); a missing mask alone is refused, so a whole-slide grid is never an accident.
    whole_slide : bool
        Grid the whole slide without a mask (only with ``mask=None``).
    target_mpp : float
        Patch resolution in µm/px (default 0.5, "20×"), exact — never snapped to bins.
    patch_px : int
        Patch edge in pixels at ``target_mpp``.
    overlap_px : int
        Overlap of neighbours in pixels at ``target_mpp`` (``0 <= overlap_px < patch_px``).
    min_tissue : float
        Minimum tissue area fraction (0–1) of a kept patch.

    Returns
    -------
    TileGrid
        Empty (``coords.shape == (0, 2)``) with a warning when no patch has tissue.
    """
    from ..slide import Slide as _Slide

    if not isinstance(slide, _Slide):  # a path is opened here; anything else: one line
        from ..slide.slide import slide_of

        with slide_of(slide, name="make_grid(slide)", error=GridError) as opened:
            return make_grid(opened, mask, target_mpp=target_mpp, patch_px=patch_px,
                             overlap_px=overlap_px, min_tissue=min_tissue,
                             whole_slide=whole_slide)
    target_mpp = _check_grid_arguments(slide, mask, target_mpp=target_mpp, patch_px=patch_px,
                                       overlap_px=overlap_px, min_tissue=min_tissue,
                                       whole_slide=whole_slide)
    patch_px, overlap_px = int(patch_px), int(overlap_px)
    W, H = slide.dimensions
    ratio = target_mpp / slide.mpp
    note = upsampling_note(slide.name, slide.mpp, target_mpp)
    if note:  # level 0 much coarser than the target: every patch is invented detail
        warnings.warn(note, UserWarning, stacklevel=2)
    size = max(1, int(round(patch_px * ratio)))
    stride = max(1, int(round((patch_px - overlap_px) * ratio)))
    xs, ys = _positions(W, stride, size), _positions(H, stride, size)
    if mask is None:
        frac = np.ones((len(ys), len(xs)), np.float32)
    else:
        if tuple(mask.level0_size) != (W, H):
            raise GridError(f"mask is for a {mask.level0_size[0]}x{mask.level0_size[1]} slide "
                            f"but {slide.name} is {W}x{H}; segment this slide again")
        frac = tissue_fractions(mask.mask, mask.scale, xs, ys, size)
    keep = frac >= float(min_tissue)
    if float(min_tissue) > 0:
        keep &= frac > 0
    gy, gx = np.nonzero(keep)
    coords = np.stack([xs[gx], ys[gy]], axis=1).astype(np.int64).reshape(-1, 2)
    tissue = frac[gy, gx].astype(np.float32)
    if len(coords) == 0:
        warnings.warn(f"{slide.name}: no patch has at least {min_tissue:g} tissue; the grid is "
                      f"empty (check the tissue mask, or lower {keyword('min_tissue')})",
                      UserWarning, stacklevel=2)
    return TileGrid(coords=coords, tissue=tissue, patch_px=patch_px, patch_size_l0=size,
                    stride_l0=stride, target_mpp=target_mpp, slide_mpp=slide.mpp,
                    mpp_source=slide.mpp_source, overlap_px=overlap_px, slide_name=slide.name,
                    level0_size=(W, H))


def _check_grid_arguments(slide: Slide, mask: TissueMask | None, *, target_mpp: float,
                          patch_px: int, overlap_px: int, min_tissue: float,
                          whole_slide: bool) -> float:
    """Refuse what :func:`make_grid` cannot honour (one :class:`GridError` naming it);
    returns ``target_mpp`` checked."""
    from ..tissue.mask import TissueMask as _Mask

    if mask is None and not whole_slide:
        raise GridError(f"make_grid({slide.name}, mask=None) would grid the whole slide, "
                        "background included: pass a tissue mask (wsikit.segment_tissue"
                        "(slide)), or whole_slide=True to mean it")
    if mask is not None:
        expect(mask, _Mask, name="make_grid(mask)", error=GridError,
               want="a TissueMask (wsikit.segment_tissue) or None with whole_slide=True")
        if whole_slide:
            raise GridError("make_grid: whole_slide=True grids without a mask; drop the mask "
                            "or drop whole_slide")
    if not math.isfinite(slide.mpp):
        raise GridError(f"{slide.path}: slide mpp unknown; pass the slide's "
                        f"level-0 µm/px with {keyword('mpp')} (its scanner records it)")
    target_mpp = check_mpp(target_mpp, what="target_mpp")
    if isinstance(patch_px, bool) or int(patch_px) != patch_px \
            or not PATCH_PX_RANGE[0] <= patch_px <= PATCH_PX_RANGE[1]:
        raise GridError(f"{option('patch_px', patch_px)} must be a whole number of pixels from "
                        f"{PATCH_PX_RANGE[0]} to {PATCH_PX_RANGE[1]} (a smaller patch holds no "
                        "cell, a larger one does not fit a batch in memory)")
    if isinstance(overlap_px, bool) or int(overlap_px) != overlap_px or overlap_px < 0:
        raise GridError(f"overlap_px={overlap_px!r} must be a non-negative integer")
    if overlap_px >= patch_px:
        raise GridError(f"overlap_px={overlap_px} must be smaller than patch_px={patch_px} "
                        f"(the stride would be zero or negative)")
    if not 0.0 <= float(min_tissue) <= 1.0:
        raise GridError(f"min_tissue={min_tissue!r} must be a fraction between 0 and 1")
    return target_mpp


def grid_of(grid: Any, *, name: str = "grid",
            error: type[WsikitError] = WsikitError) -> Any:
    """``grid`` as a :class:`~wsikit.patches.grid.TileGrid`: a grid is kept, a path is read as a
    coordinate file (wsikit, TRIDENT or CLAM), anything else is refused in one line.

    The Python stages (``open_slide → segment_tissue → make_grid → extract_features →
    compute_attention → select_windows``) take the objects the previous one returns, a path
    where that is natural, and refuse anything else naming the value and what to pass instead.
    """
    if isinstance(grid, TileGrid):
        return grid
    expect(grid, (str, os.PathLike), name=name, error=error,
           want="a TileGrid (wsikit.make_grid) or the path of a coordinate file "
                "(<out>/patches/<slide>_patches.h5)")
    return TileGrid.from_h5(grid)
