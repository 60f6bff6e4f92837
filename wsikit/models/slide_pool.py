"""Slide embeddings for any patch encoder: a (weighted) mean of the slide's patch features.

TITAN embeds a slide from CONCH v1.5 features only, with gated weights. Every other encoder —
the open zoo models and the weight-free ``heuristic`` included — gets a slide embedding here by
mean pooling its tissue patches' features: :func:`mean_pool` is the computation (array in,
``(D,)`` float32 out), :func:`mean_max_pool` its attention-free variant that also keeps the
per-dimension maximum (``(2 D,)``). :func:`embed_slide` applies one (or TITAN) to a feature
file's :class:`~wsikit.features.extract.Embeddings`, and :class:`SlideEmbedding` is the result,
written with its method in its label (``"mean-pool of <encoder> patch features"``) so a pooled
vector is never mistaken for a learned slide encoder's::

    OUT/slide_features_<slide encoder>/<slide>.h5     dataset ``features`` (D,) float32

where ``<slide encoder>`` is ``mean-<patch encoder>`` (TRIDENT's spelling of its mean-pooling
slide encoders), ``meanmax-<patch encoder>`` or ``titan``; the dataset's attributes hold
``format``, ``method``, ``slide_encoder``, ``patch_encoder``, ``label``, ``n_patches``,
``weighting`` and the source feature file.

>>> import numpy as np
>>> from wsikit.models.slide_pool import mean_pool
>>> mean_pool(np.array([[1.0, 2.0], [3.0, 4.0]]))
array([2., 3.], dtype=float32)
>>> mean_pool(np.array([[1.0, 2.0], [3.0, 4.0]]), weights=np.array([3.0, 1.0]))
array([1.5, 2.5], dtype=float32)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import FeatureError

if TYPE_CHECKING:
    from ..features.extract import Embeddings

__all__ = [
    "SLIDE_EMBEDDING_FORMAT",
    "SlideEmbedding",
    "embed_slide",
    "mean_max_pool",
    "mean_pool",
    "slide_embedding_path",
    "slide_encoder_name",
]

#: ``format`` attribute of a slide-embedding file (bumped when its meaning changes).
SLIDE_EMBEDDING_FORMAT = "wsikit.slide_embedding/v1"
#: How a slide embedding is made: mean pooling or the mean ⊕ max concatenation (any encoder),
#: or TITAN (CONCH v1.5 only).
SLIDE_METHODS = ("mean", "meanmax", "titan")
#: Patch weights of the mean: equal, or each patch's usable-tissue fraction.
WEIGHTINGS = ("uniform", "tissue")
#: Column of the usable-tissue fraction in the feature file's ``nuclear_measures``
#: (:data:`wsikit.models.nuclear.PATCH_MEASURES`).
_TISSUE_COLUMN = 4


def mean_pool(features: np.ndarray, *, weights: np.ndarray | None = None) -> np.ndarray:
    """The (weighted) mean of a slide's patch features.

    Parameters
    ----------
    features : ndarray, shape (N, D)
        Patch features (the tissue patches of one slide), any real dtype.
    weights : ndarray, shape (N,), optional
        Non-negative weight of each patch (e.g. its tissue fraction); patches of weight 0 do
        not count. Default: every patch counts equally.

    Returns
    -------
    ndarray, shape (D,), float32
        ``sum_i w_i f_i / sum_i w_i``, accumulated in float64.

    Raises
    ------
    FeatureError
        No patches, features that are not a finite 2-D array, or weights of the wrong length,
        negative, not finite or summing to zero (with what to do).
    """
    f = np.asarray(features)
    if f.ndim != 2:
        raise FeatureError(f"mean_pool: features must be (N, D), got shape {f.shape}")
    if f.shape[0] == 0:
        raise FeatureError("mean_pool: no patch features (0 patches): the slide has no tissue "
                           "patches; check its tissue mask and patch grid before pooling")
    if f.shape[1] == 0:
        raise FeatureError("mean_pool: features have 0 dimensions")
    if not np.issubdtype(f.dtype, np.number) or np.iscomplexobj(f):
        raise FeatureError(f"mean_pool: features must be real numbers, not {f.dtype}")
    f64 = f.astype(np.float64, copy=False)
    if not np.isfinite(f64).all():
        bad = int((~np.isfinite(f64).all(axis=1)).sum())
        raise FeatureError(f"mean_pool: {bad} of {f.shape[0]} patches have NaN or inf "
                           "features; re-extract them")
    if weights is None:
        return f64.mean(axis=0).astype(np.float32)
    w = np.asarray(weights)
    if w.ndim != 1 or w.shape[0] != f.shape[0]:
        raise FeatureError(f"mean_pool: weights must be ({f.shape[0]},), one per patch, got "
                           f"shape {w.shape}")
    if not np.issubdtype(w.dtype, np.number) or np.iscomplexobj(w):
        raise FeatureError(f"mean_pool: weights must be real numbers, not {w.dtype}")
    w64 = w.astype(np.float64, copy=False)
    if not np.isfinite(w64).all() or (w64 < 0).any():
        raise FeatureError("mean_pool: weights must be finite and non-negative")
    total = float(w64.sum())
    if total <= 0:
        raise FeatureError(f"mean_pool: the weights of all {f.shape[0]} patches are 0 (no "
                           "tissue to pool); pool without weights or check the tissue mask")
    return ((w64 @ f64) / total).astype(np.float32)


def mean_max_pool(features: np.ndarray, *, weights: np.ndarray | None = None) -> np.ndarray:
    """The (weighted) mean of a slide's patch features concatenated with their element-wise
    maximum over the patches that count (weight > 0): ``(N, D)`` → ``(2 D,)`` float32.

    A parameter-free slide embedding that keeps a strong local signal (a small focus) that
    the mean dilutes. Refusals as :func:`mean_pool`.
    """
    mean = mean_pool(features, weights=weights)  # validates features and weights
    f = np.asarray(features)
    keep = np.ones(f.shape[0], bool) if weights is None else np.asarray(weights) > 0
    peak = f[keep].astype(np.float64).max(axis=0).astype(np.float32)
    return np.concatenate([mean, peak])


def slide_encoder_name(method: str, patch_encoder: str) -> str:
    """The slide encoder's name, as output folders spell it: ``mean-<patch encoder>``,
    ``meanmax-<patch encoder>`` or ``titan``."""
    if method not in SLIDE_METHODS:
        raise FeatureError(f"unknown slide-embedding method {method!r}; choose one of "
                           f"{', '.join(SLIDE_METHODS)}")
    return "titan" if method == "titan" else f"{method}-{patch_encoder}"


def slide_embedding_path(features_path: str | os.PathLike[str], slide_encoder: str) -> Path:
    """Where the slide embedding of a feature file goes:
    ``OUT/features_<enc>/<slide>.h5`` → ``OUT/slide_features_<slide_encoder>/<slide>.h5``
    (any other feature file: ``slide_features_<slide_encoder>/`` beside its folder)."""
    p = Path(features_path)
    return p.parent.parent / f"slide_features_{slide_encoder}" / f"{p.stem}.h5"


@dataclass(frozen=True, eq=False)
class SlideEmbedding:
    """One slide's embedding and how it was made.

    Attributes
    ----------
    embedding : ndarray, shape (D,), float32
        The slide vector.
    method : {"mean", "meanmax", "titan"}
        Mean pooling of the patch features, their mean ⊕ max (``2 D``), or TITAN's slide
        encoder.
    patch_encoder : str
        The encoder of the patch features it was made from.
    label : str
        What it is, in words, recorded in the file: for mean pooling
        ``"mean-pool of <encoder> patch features (...)"``.
    n_patches : int
        Patches that contributed (weight > 0).
    weighting : {"uniform", "tissue", "custom"}
        Patch weights of the mean (``"custom"``: weights given by the caller; TITAN:
        ``"uniform"``, its own attention weighs the patches).
    source : str
        The feature file it was made from (``""`` when made from arrays).
    """

    embedding: np.ndarray
    method: str
    patch_encoder: str
    label: str
    n_patches: int
    weighting: str = "uniform"
    source: str = ""

    @property
    def slide_encoder(self) -> str:
        """``mean-<patch encoder>`` or ``titan``."""
        return slide_encoder_name(self.method, self.patch_encoder)

    def to_h5(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write to ``path`` (atomically: a failed write leaves no file).

        Raises
        ------
        FeatureError
            ``path`` exists and ``overwrite`` is False.
        """
        import h5py

        from .._atomic import atomic_path

        path = Path(path)
        if path.exists() and not overwrite:
            raise FeatureError(f"{path} exists; pass overwrite=True (--overwrite) to replace it")
        with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
            ds = f.create_dataset("features", data=np.asarray(self.embedding, np.float32))
            attrs: dict[str, Any] = {
                "format": SLIDE_EMBEDDING_FORMAT, "method": self.method,
                "slide_encoder": self.slide_encoder, "patch_encoder": self.patch_encoder,
                "label": self.label, "n_patches": int(self.n_patches),
                "weighting": self.weighting, "source_features": self.source,
                "dim": int(np.asarray(self.embedding).shape[0])}
            for key, value in attrs.items():
                ds.attrs[key] = value
        return path

    @classmethod
    def from_h5(cls, path: str | os.PathLike[str]) -> SlideEmbedding:
        """Read a file written by :meth:`to_h5`.

        Raises
        ------
        FeatureError
            Missing or unreadable file, or not a wsikit slide embedding (no label and method).
        """
        import h5py

        from ..patches.h5 import h5_value

        path = Path(path)
        try:
            with h5py.File(path, "r") as f:
                ds = f["features"]
                vec = np.asarray(ds[()], np.float32)
                attrs = {k: h5_value(v) for k, v in ds.attrs.items()}
        except (OSError, KeyError, ValueError) as exc:
            raise FeatureError(f"{path}: cannot read a slide embedding ({exc}); make it with "
                               "'wsikit slide-embedding FEATURES.h5'") from exc
        if attrs.get("format") != SLIDE_EMBEDDING_FORMAT or vec.ndim != 1:
            raise FeatureError(f"{path}: not a wsikit slide embedding (format "
                               f"{attrs.get('format')!r}, shape {vec.shape}); make it with "
                               "'wsikit slide-embedding FEATURES.h5'")
        return cls(vec, str(attrs["method"]), str(attrs["patch_encoder"]), str(attrs["label"]),
                   int(attrs["n_patches"]), str(attrs.get("weighting", "uniform")),
                   str(attrs.get("source_features", "")))


def _patch_weights(emb: Embeddings, weighting: str, source: str) -> np.ndarray | None:
    if weighting not in WEIGHTINGS:
        raise FeatureError(f"unknown weighting {weighting!r}; choose one of "
                           f"{', '.join(WEIGHTINGS)}")
    if weighting == "uniform":
        return None
    if emb.nuclear is None:
        raise FeatureError(f"{source or 'these features'}: weighting by tissue needs the "
                           "per-patch tissue fractions (dataset nuclear_measures), which this "
                           "feature file lacks; extract the features with wsikit (which "
                           "records them), or pool with uniform weights")
    return np.asarray(emb.nuclear.features[:, _TISSUE_COLUMN], np.float64)


def embed_slide(embeddings: Embeddings, *,
                method: Literal["mean", "meanmax", "titan"] = "mean",
                weighting: Literal["uniform", "tissue"] = "uniform",
                weights: np.ndarray | None = None, source: str = "",
                titan_weights: str | None = None, device: str = "cpu",
                precision: str | None = None) -> SlideEmbedding:
    """A slide embedding from one slide's patch features.

    Parameters
    ----------
    embeddings : Embeddings
        The slide's patch features (:meth:`wsikit.features.extract.Embeddings.from_h5`).
    method : {"mean", "meanmax", "titan"}
        ``"mean"`` (any encoder): the (weighted) mean of the patch features
        (:func:`mean_pool`); ``"meanmax"`` (any encoder): that mean concatenated with the
        element-wise maximum over the patches (:func:`mean_max_pool`, ``2 D``).
        ``"titan"``: TITAN's slide encoder, which needs CONCH v1.5 features, their
        coordinates and TITAN's gated weights.
    weighting : {"uniform", "tissue"}
        Pooling only: weigh each patch equally or by its usable-tissue fraction (the
        feature file's ``nuclear_measures``).
    weights : ndarray, shape (N,), optional
        Pooling only: explicit patch weights (override ``weighting``; for ``meanmax``
        patches of weight 0 are also left out of the maximum).
    source : str
        The feature file's path, recorded in the result.
    titan_weights, device, precision
        TITAN only: its weight file, device and autocast precision.

    Raises
    ------
    FeatureError
        No patches; weights that cannot be used; TITAN asked of features it cannot read.
    WeightsError
        TITAN's weights are not found (with how to get them).
    """
    name = embeddings.encoder
    n = int(embeddings.features.shape[0]) if embeddings.features.ndim == 2 else 0
    where = source or f"{name} features"
    if method == "titan":
        if name != "conch_v1_5":
            raise FeatureError(f"{where}: TITAN embeds slides from CONCH v1.5 features, not "
                               f"{name}; use method 'mean' (any encoder) or extract "
                               "conch_v1_5 features")
        if n == 0:
            raise FeatureError(f"{where}: no patch features (0 patches); nothing to embed")
        patch = (embeddings.attrs.get("coords") or {}).get("patch_size_level0")
        if patch is None:
            raise FeatureError(f"{where}: TITAN needs the coordinates' patch_size_level0, "
                               "which this feature file lacks; extract with wsikit or TRIDENT")
        from .titan import titan

        out = titan(embeddings.features, embeddings.coords, int(patch),
                    weights=titan_weights, device=device, precision=precision)
        return SlideEmbedding(np.asarray(out.slide_embedding, np.float32), "titan", name,
                              f"TITAN slide embedding of {name} patch features ({out.label})",
                              n, "uniform", source)
    if method not in ("mean", "meanmax"):
        raise FeatureError(f"unknown slide-embedding method {method!r}; choose one of "
                           f"{', '.join(SLIDE_METHODS)}")
    if n == 0:
        raise FeatureError(f"{where}: no patch features (0 patches): the slide has no tissue "
                           "patches; check its tissue mask and patch grid before pooling")
    w = np.asarray(weights, np.float64) if weights is not None else \
        _patch_weights(embeddings, weighting, source)
    pool = mean_max_pool if method == "meanmax" else mean_pool
    try:
        vec = pool(embeddings.features, weights=w)
    except FeatureError as exc:
        raise FeatureError(f"{where}: {exc}") from exc
    how = ("custom" if weights is not None else weighting)
    used = n if w is None else int((w > 0).sum())
    weighed = {"uniform": "equal weights", "tissue": "weighted by usable-tissue fraction",
               "custom": "weighted by the given patch weights"}[how]
    what = "mean-pool" if method == "mean" else "mean-pool ⊕ max-pool"
    label = (f"{what} of {name} patch features ({used} patches, {weighed}; not a learned "
             f"slide encoder) [{embeddings.label}]")
    return SlideEmbedding(vec, method, name, label, used, how, source)
