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
from pathlib import Path
from typing import Any

import numpy as np

from ._atomic import atomic_path
from ._version import __version__
from .errors import FeatureError

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


def export_anndata(features: Any, out: str | os.PathLike[str] | None = None, *,
                   slide: str | None = None) -> Any:
    """Patch features as an :class:`anndata.AnnData` (and, with ``out``, an ``.h5ad`` file).

    Parameters
    ----------
    features : path-like or Embeddings
        A feature file (``features_<encoder>/<slide>.h5``, wsikit or TRIDENT) or the
        :class:`~wsikit.features.Embeddings` that :func:`wsikit.extract_features` returned.
    out : path-like, optional
        Where to write the ``.h5ad`` (atomically: a crash never leaves a partial file).
    slide : str, optional
        Slide name for ``obs_names`` and ``uns["spatial"]``; default: the coordinate file's
        ``name`` attribute, else the feature file's stem.

    Returns
    -------
    anndata.AnnData

    Raises
    ------
    FeatureError
        anndata is not installed (names the extra), or the feature file cannot be read.
    """
    from .features import Embeddings

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
    cattrs = dict(emb.attrs.get("coords", {}))
    name = slide or cattrs.get("name") or (source.stem if source else "slide")
    name = str(name)
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
    coords = np.asarray(emb.coords, np.int64)
    import pandas as pd

    obs = pd.DataFrame({"x": coords[:, 0], "y": coords[:, 1]},
                       index=[f"{name}:{x}_{y}" for x, y in coords.tolist()])
    var = pd.DataFrame(index=[f"f{j}" for j in range(emb.features.shape[1])])
    adata = ad.AnnData(X=np.asarray(emb.features, np.float32), obs=obs, var=var)
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
