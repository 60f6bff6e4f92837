"""Per-patch attention (importance) of a slide, from TITAN or the weight-free scorer.

Two sources, always recorded next to the numbers:

``titan``
    TITAN's ``attn_pool_contrastive`` attention over CONCH v1.5 patch features (mean of the
    8 heads, CLS dropped, renormalised), mapped back to the input patches. Needs real TITAN
    weights and CONCH v1.5 features.
``heuristic``
    Nuclear density, crowding, area and hyperchromasia on the haematoxylin channel with a
    per-slide threshold, ranked per slide (:func:`wsikit.models.importance.nuclear_importance`).

The result is stored as ``<out>/attention/<slide>.h5`` with datasets ``coords`` (N, 2) int64
and ``attention`` (N,) float32 aligned row by row, attributes ``source``, ``label`` and
``precision`` (the autocast precision of the run: ``fp32``, ``fp16`` or ``bf16``), so
selection can be rerun with other options without recomputing it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np

from .._atomic import atomic_path
from .._hints import on_command_line, option
from .._version import __version__
from ..errors import FeatureError, WeightsError
from ..models.importance import IMPORTANCE_LABEL as HEURISTIC_LABEL
from ..patches.h5 import h5_create

if TYPE_CHECKING:  # pragma: no cover
    from ..features.extract import Embeddings
    from ..patches.grid import TileGrid

__all__ = [
    "ATTENTION_SOURCES",
    "Attention",
    "cached_attention",
    "compute_attention",
    "heuristic_attention",
    "resolve_source",
    "titan_attention",
]

log = logging.getLogger(__name__)

#: Where slide attention comes from: ``auto`` (TITAN when its weights are found, else the
#: heuristic), ``titan`` or ``heuristic``.
ATTENTION_SOURCES = ("auto", "titan", "heuristic")



@dataclass(frozen=True)
class Attention:
    """Per-patch attention of one slide.

    Attributes
    ----------
    scores : ndarray, shape (N,), float32
        Attention per patch, aligned with ``coords``.
    coords : ndarray, shape (N, 2), int64
        Level-0 top-left of each patch.
    source : str
        ``"titan"`` or ``"heuristic"``.
    label : str
        Human-readable provenance (model and weights, or the heuristic's formula).
    precision : {"fp32", "fp16", "bf16"}
        Autocast precision the scores were computed at (TITAN; the heuristic is float32).
    """

    scores: np.ndarray
    coords: np.ndarray
    source: str
    label: str
    precision: str = "fp32"

    @property
    def heuristic(self) -> bool:
        """True when no learned model produced these numbers."""
        return self.source != "titan"

    def to_h5(self, path: str | os.PathLike[str]) -> Path:
        """Write atomically to ``path`` (datasets ``coords``, ``attention``)."""
        with atomic_path(path) as tmp, h5_create(tmp, reserve=12 * len(self.coords),
                                                 final=path) as f:
            f.create_dataset("coords", data=np.asarray(self.coords, np.int64))
            ds = f.create_dataset("attention", data=np.asarray(self.scores, np.float32))
            ds.attrs["source"] = self.source
            ds.attrs["label"] = self.label
            ds.attrs["precision"] = self.precision
            ds.attrs["wsikit_version"] = __version__
        return Path(path)

    @classmethod
    def from_h5(cls, path: str | os.PathLike[str]) -> Attention:
        """Read a file written by :meth:`to_h5`."""
        try:
            with h5py.File(path, "r") as f:
                ds = f["attention"]
                return cls(scores=ds[()].astype(np.float32),
                           coords=f["coords"][()].astype(np.int64),
                           source=str(ds.attrs["source"]), label=str(ds.attrs["label"]),
                           precision=str(ds.attrs.get("precision", "fp32")))
        except (OSError, KeyError) as exc:
            raise FeatureError(f"{path}: not a wsikit attention file ({exc}); delete it or "
                               f"rerun with {option('force')}") from exc


def heuristic_attention(slide_path: str | os.PathLike[str], grid: TileGrid, *,
                        batch_size: int = 64, mpp: float | None = None,
                        progress: bool | None = None,
                        embeddings: Embeddings | None = None,
                        on_bad_tile: str = "fail") -> Attention:
    """Weight-free attention: per-slide ranks of nuclear morphology
    (:func:`wsikit.models.importance.nuclear_importance`); ``grid`` gives the patches, and
    ``embeddings`` of the same grid that carry the measures (``nuclear``) spare the read;
    ``on_bad_tile`` is what a damaged tile does (:func:`wsikit.slide.open_slide`)."""
    from ..models.importance import nuclear_importance

    measures = (embeddings.nuclear if embeddings is not None and np.array_equal(
        embeddings.coords, np.asarray(grid.coords, np.int64)) else None)
    imp = nuclear_importance(slide_path, grid, batch_size=batch_size, mpp=mpp,
                             progress=progress, measures=measures, on_bad_tile=on_bad_tile)
    return Attention(scores=imp.scores, coords=np.asarray(grid.coords, np.int64),
                     source="heuristic", label=HEURISTIC_LABEL)


def titan_attention(embeddings: Embeddings, grid: TileGrid, *, device: str = "cpu",
                    weights: str | None = None, precision: str | None = None,
                    threads: int | None = None) -> Attention:
    """TITAN per-patch attention over CONCH v1.5 ``embeddings`` of ``grid``.

    The TITAN cell size is the grid's level-0 patch size (``patch_size_level0``), as in the
    reference, whatever the stride of the coords (TRIDENT files: stride 1013, size 1024).
    ``precision`` is the autocast precision (default float16 on CUDA, float32 on CPU);
    ``threads`` the cores of the kernel on a CPU (default: the process's CPUs).
    """
    from ..models.titan import create_titan, titan

    if embeddings.encoder != "conch_v1_5":
        raise FeatureError(f"TITAN attention needs CONCH v1.5 features, got {embeddings.encoder!r}"
                           f"; run with {option('models', 'auto')} (or conch_v1_5) and CONCH "
                           "v1.5 weights")
    model = create_titan(weights=weights, device=device, precision=precision)
    out = titan(embeddings.features, embeddings.coords, int(grid.patch_size_l0), model=model,
                threads=threads)
    return Attention(scores=np.asarray(out.attention, np.float32),
                     coords=np.asarray(embeddings.coords, np.int64), source="titan",
                     label=getattr(model, "label", out.label), precision=out.precision)


def titan_available(weights: str | None = None) -> bool:
    """Whether real TITAN weights can be found (explicit, env, config file or HF cache)."""
    if weights:
        return True
    from ..models.hub import find_weights

    return find_weights("titan") is not None


def resolve_source(source: str, embeddings: Embeddings | None, weights: str | None = None
                   ) -> str:
    """``"titan"`` or ``"heuristic"`` for ``source`` (``auto``: TITAN when possible)."""
    if source not in ATTENTION_SOURCES:
        raise FeatureError(f"attention source {source!r} is not one of {ATTENTION_SOURCES}")
    if source == "auto":
        use_titan = (embeddings is not None and embeddings.encoder == "conch_v1_5"
                     and titan_available(weights))
        source = "titan" if use_titan else "heuristic"
        if use_titan or embeddings is None or embeddings.encoder == "conch_v1_5":
            log.info("attention: using %s", source)
        else:  # TITAN reads CONCH v1.5 features only: say why it is not used
            log.info("attention: using the weight-free heuristic importance (TITAN reads "
                     "CONCH v1.5 features; these are %s)", embeddings.encoder)
    return source


def compute_attention(slide_path: Any, grid: TileGrid | str | os.PathLike[str], *,
                      source: str = "auto", embeddings: Embeddings | None = None,
                      device: str = "cpu", weights: str | None = None,
                      mpp: float | None = None, progress: bool | None = None,
                      threads: int | None = None) -> Attention:
    """Attention per patch from ``source`` (``auto``: TITAN when possible, else heuristic).

    ``slide_path`` is a slide file or an open :class:`~wsikit.slide.Slide` (its path, mpp and
    damaged-tile policy, :attr:`~wsikit.slide.Slide.on_bad_tile`, are used); ``grid`` a
    :class:`~wsikit.patches.grid.TileGrid` or its coordinate file;
    ``embeddings`` the :class:`~wsikit.features.extract.Embeddings` of that grid (needed by TITAN).
    ``auto`` uses TITAN only when the features are CONCH v1.5 and TITAN weights are found.
    ``threads``: the cores of TITAN's kernel on a CPU (default: the process's CPUs).
    """
    from .._hints import expect
    from ..patches.grid import grid_of
    from ..slide import Slide

    on_bad_tile = "fail"
    if isinstance(slide_path, Slide):
        if mpp is None and slide_path.mpp == slide_path.mpp:  # not nan
            mpp = slide_path.mpp
        on_bad_tile = slide_path.on_bad_tile
        slide_path = slide_path.path
    expect(slide_path, (str, os.PathLike), name="compute_attention(slide)",
           error=FeatureError, want="a Slide (wsikit.open_slide) or the path of a slide file")
    tiles = grid_of(grid, name="compute_attention(grid)", error=FeatureError)
    if embeddings is not None:
        from ..features.extract import Embeddings as _Embeddings

        expect(embeddings, _Embeddings, name="compute_attention(embeddings=)",
               error=FeatureError, want="the Embeddings of wsikit.extract_features")
    source = resolve_source(source, embeddings, weights)
    if source == "titan":
        if embeddings is None:
            raise FeatureError("TITAN attention needs CONCH v1.5 features; extract them first")
        if not titan_available(weights):
            raise WeightsError("TITAN weights not found (MahmoodLab/TITAN, gated): request "
                               "access on Hugging Face, `hf auth login`, or pass " + (
                                   "--weights titan=PATH; or use --attention heuristic"
                                   if on_command_line() else "the file (weights=PATH); or use "
                                   "the heuristic (select: attention='heuristic')"))
        return titan_attention(embeddings, tiles, device=device, weights=weights,
                               threads=threads)
    return heuristic_attention(slide_path, tiles, mpp=mpp, progress=progress,
                               embeddings=embeddings, on_bad_tile=on_bad_tile)


def cached_attention(path: Path, grid: TileGrid, source: str) -> Attention | None:
    """The attention stored at ``path`` if it matches ``grid`` and ``source``."""
    if not path.exists():
        return None
    try:
        att = Attention.from_h5(path)
    except FeatureError as exc:
        log.warning("ignoring %s", exc)
        return None
    same = att.coords.shape == grid.coords.shape and np.array_equal(att.coords, grid.coords)
    if not same or att.source != source:
        return None
    if source == "heuristic" and att.label != HEURISTIC_LABEL:   # an older definition
        return None
    return att


def describe(att: Attention) -> dict[str, Any]:
    """The ``models.attention`` entry of evidence.json."""
    return {"name": "titan" if att.source == "titan" else "heuristic_importance",
            "label": att.label, "heuristic": att.heuristic, "precision": att.precision}
