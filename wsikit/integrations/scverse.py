"""Patch features as an AnnData object (``.h5ad``) for scverse tools (scanpy, squidpy, ...).

One observation per patch, one variable per feature dimension:

- ``X``: the ``(N, D)`` float32 features;
- ``obsm["spatial"]``: the ``(N, 2)`` level-0 pixel ``(x, y)`` of each patch's top-left corner
  (the coordinates of the feature file, unchanged); ``obs`` holds them too, as ``x``/``y``;
- ``uns["wsikit"]``: provenance: ``encoder``, ``label`` (e.g. "weight-free heuristic"),
  ``patch_size`` (px at ``target_mpp``), ``patch_size_level0``, ``target_mpp``, ``mpp`` (level
  0), ``mpp_source``, ``precision``, ``grid_hash``, ``wsikit_version``, the source file;
- ``uns["spatial"][<slide>]["scalefactors"]``: ``spot_diameter_fullres`` = the patch's level-0
  size (what ``scanpy.pl.spatial`` sizes the spots with; no image is stored).

anndata is an optional dependency: ``pip install "wsikit[scverse]"``.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .._atomic import atomic_path
from .._hints import option
from .._version import __version__
from ..errors import FeatureError
from ..outputs.overwrite import check_output_file

__all__ = ["export_anndata"]

#: Feature and coordinate attributes copied into ``uns["wsikit"]`` when present.
_PROVENANCE = ("dim", "precision", "grid_hash", "patch_read", "wsikit_version")
_COORD_PROVENANCE = ("patch_size", "patch_size_level0", "target_mpp", "mpp", "mpp_source",
                     "level0_width", "level0_height", "name")


def _anndata() -> Any:
    try:
        import anndata
    except ImportError as exc:
        raise FeatureError("exporting to AnnData needs the 'anndata' package: install the "
                           "scverse extra (pip install \"wsikit[scverse]\", or pip install "
                           "anndata)") from exc
    return anndata


def _plain(value: Any) -> Any:
    """A value h5ad can store (no None; numpy scalars as Python)."""
    if isinstance(value, np.generic):
        return value.item()
    return value


def _check_shapes(features: np.ndarray, coords: np.ndarray, where: str) -> None:
    """Features ``(N, D)`` and coordinates ``(N, 2)`` of the same N, or a clear error."""
    if features.ndim != 2 or features.shape[1] < 1:
        raise FeatureError(f"{where}: features have shape {features.shape}, not (patches, "
                           "dimensions); the file is damaged or not a feature file: extract "
                           "the features again (wsikit features)")
    if coords.shape != (features.shape[0], 2):
        raise FeatureError(f"{where}: {features.shape[0]} feature rows but coordinates of "
                           f"shape {coords.shape} (expected ({features.shape[0]}, 2)); the file "
                           "is damaged: extract the features again (wsikit features)")


def _h5ad_owner(name: str) -> Any:
    """``owner`` for :func:`check_output_file`: None when an existing .h5ad was exported by
    wsikit from slide ``name``, else why it must not be replaced silently."""
    def owner(path: Path) -> str | None:
        import h5py

        try:
            with h5py.File(path, "r") as f:
                exported = "uns/wsikit/exported_by" in f
                slides = sorted(f["uns/spatial"].keys()) if "uns/spatial" in f else []
        except (OSError, KeyError, ValueError):
            return "exists and is not an AnnData file wsikit can read"
        if not exported:
            return "exists and was not exported by wsikit"
        if slides != [name]:
            return (f"holds the export of slide {', '.join(slides) or '(unnamed)'}, not of "
                    f"{name}")
        return None
    return owner


def export_anndata(features: Any, out: str | os.PathLike[str] | None = None, *,
                   slide: str | None = None, force: bool = False,
                   drop_nonfinite: bool = False) -> Any:
    """Patch features as an :class:`anndata.AnnData` (and, with ``out``, an ``.h5ad`` file).

    Parameters
    ----------
    features : path-like or Embeddings
        A feature file (``features_<encoder>/<slide>.h5``, wsikit or TRIDENT) or the
        :class:`~wsikit.features.extract.Embeddings` that :func:`wsikit.extract_features` returned.
    out : path-like, optional
        Where to write the ``.h5ad`` (atomically: a crash never leaves a partial file).
    slide : str, optional
        Slide name for ``obs_names`` and ``uns["spatial"]``; default: the coordinate file's
        ``name`` attribute, else the feature file's stem.
    force : bool
        Replace an existing ``out`` that is not a wsikit export of the same slide (never the
        feature file itself).
    drop_nonfinite : bool
        Leave out patches whose features hold NaN or Inf (with a warning that counts them);
        by default such a file is refused.

    Returns
    -------
    anndata.AnnData

    Raises
    ------
    FeatureError
        anndata is not installed (names the extra); the feature file cannot be read, is
        damaged (features not (N, D), coordinates not (N, 2)) or holds NaN/Inf features (the
        count); ``out`` is the feature file, another kind of file, or another slide's export
        (without ``force``).
    """
    from ..features.extract import Embeddings

    ad = _anndata()
    source = None
    if isinstance(features, Embeddings):
        emb = features
    elif isinstance(features, str | os.PathLike):
        source = Path(features)
        emb = Embeddings.from_h5(source)
    else:
        raise FeatureError(f"export_anndata takes a feature file path or Embeddings, not "
                           f"{type(features).__name__}")
    where = str(source) if source is not None else "features"
    feats = np.asarray(emb.features)
    coords = np.asarray(emb.coords)
    _check_shapes(feats, coords, where)
    cattrs = dict(emb.attrs.get("coords", {}))
    name = slide or cattrs.get("name") or (source.stem if source else "slide")
    name = str(name)
    if out is not None:
        check_output_file(out, inputs=[source] if source is not None else [],
                          suffixes=(".h5ad",), what="AnnData file", force=force,
                          owner=_h5ad_owner(name), error=FeatureError)
    feats, coords = _finite_rows(feats, coords, where, drop=drop_nonfinite)
    uns = _provenance(emb, source, cattrs)
    coords = coords.astype(np.int64, copy=False)
    import pandas as pd

    obs = pd.DataFrame({"x": coords[:, 0], "y": coords[:, 1]},
                       index=[f"{name}:{x}_{y}" for x, y in coords.tolist()])
    var = pd.DataFrame(index=[f"f{j}" for j in range(feats.shape[1])])
    adata = ad.AnnData(X=feats.astype(np.float32, copy=False), obs=obs, var=var)
    adata.obsm["spatial"] = coords
    adata.uns["wsikit"] = uns
    spot = uns.get("patch_size_level0")
    adata.uns["spatial"] = {name: {"scalefactors": (
        {"spot_diameter_fullres": float(spot)} if spot is not None else {})}}
    if out is not None:
        out = Path(out)
        with atomic_path(out) as tmp:
            adata.write_h5ad(tmp)
    return adata


def _finite_rows(feats: np.ndarray, coords: np.ndarray, where: str, *, drop: bool
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The patches whose features are all finite; ``drop=False``: any other is refused
    (naming the first and the way out), ``True``: left out with a warning counting them."""
    bad = ~np.isfinite(feats).all(axis=1)
    if not bad.any():
        return feats, coords
    first = int(np.flatnonzero(bad)[0])
    if not drop:
        raise FeatureError(f"{where}: {int(bad.sum())} of {len(feats)} patches have NaN "
                           f"or Inf features (first: row {first}, at {coords[first].tolist()}"
                           "); extract the features again, or pass "
                           f"{option('drop_nonfinite')} to export the others")
    warnings.warn(f"{where}: left out {int(bad.sum())} of {len(feats)} patches whose "
                  "features hold NaN or Inf", UserWarning, stacklevel=3)
    return feats[~bad], coords[~bad]


def _provenance(emb: Any, source: Path | None, cattrs: dict[str, Any]) -> dict[str, Any]:
    """``uns["wsikit"]``: the encoder, where the features came from and how they were made."""
    uns: dict[str, Any] = {"encoder": emb.encoder, "label": emb.label,
                           "exported_by": f"wsikit {__version__}",
                           "coordinates": "level-0 px, top-left corner of each patch"}
    if source is not None:
        uns["source"] = str(source)
    for key in _PROVENANCE:
        if emb.attrs.get(key) is not None:
            uns[key] = _plain(emb.attrs[key])
    for key in _COORD_PROVENANCE:
        if cattrs.get(key) is not None:
            uns[key] = _plain(cattrs[key])
    return uns
