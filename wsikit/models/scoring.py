"""Patch importance scorers for region selection: TITAN attention or the weight-free heuristic.

>>> scorer = create_scorer("auto")          # TITAN if its weights are found, else heuristic
>>> scorer.requires                          # what to compute first: "conch_v1_5" or "haematoxylin"
>>> scores = scorer.score(coords=grid.coords, patch_size_lv0=grid.stride_l0,
...                       features=conch_feats)            # titan
>>> scores = scorer.score(nuclear=f[:, :4], tissue_fraction=f[:, 4])  # heuristic, where
...                       # f = nuclear_features(patches, threshold=..., mpp=...)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ModelError
from .nuclear import importance_scores

__all__ = ["Scorer", "create_scorer", "list_scorers"]

log = logging.getLogger(__name__)

_HEURISTIC = ("heuristic: nuclear density, crowding, area and hyperchromasia (per-slide "
              "haematoxylin threshold), robust z-scores ranked per slide")


@dataclass
class Scorer:
    """A per-patch importance scorer.

    Attributes
    ----------
    name : {"titan", "heuristic"}
    label : str
        Provenance to record in outputs.
    requires : {"conch_v1_5", "haematoxylin"}
        ``conch_v1_5``: pass ``features`` (N, 768) CONCH v1.5 features and coords;
        ``haematoxylin``: pass ``nuclear`` (N, 4), the nuclear features of each patch
        (:func:`wsikit.models.nuclear.nuclear_features`; any per-patch measurements where
        larger is more salient, or a single ``h_density`` column, also work) and
        ``tissue_fraction``.
    """

    name: str
    label: str
    requires: str
    model: Any = None

    def score(self, *, coords: np.ndarray | None = None, patch_size_lv0: int | None = None,
              features: np.ndarray | None = None, nuclear: np.ndarray | None = None,
              h_density: np.ndarray | None = None,
              tissue_fraction: np.ndarray | None = None) -> np.ndarray:
        """``(N,)`` float32 scores in input order (TITAN: attention summing to 1;
        heuristic: per-slide ranks of the robust z-scores, in (0, 1))."""
        if self.name == "titan":
            if features is None or coords is None or patch_size_lv0 is None:
                raise ModelError("titan scorer needs features (CONCH v1.5), coords and "
                                 "patch_size_lv0")
            return self.model.encode_slide(features, coords, patch_size_lv0).attention
        measured = nuclear if nuclear is not None else h_density
        if measured is None or tissue_fraction is None:
            raise ModelError("heuristic scorer needs nuclear (nuclear_features of each patch; "
                             "or h_density) and tissue_fraction")
        return importance_scores(measured, tissue_fraction)


def list_scorers() -> list[str]:
    """Scorer names accepted by :func:`create_scorer`."""
    return ["auto", "heuristic", "titan"]


def create_scorer(name: str = "auto", *, weights: str | None = None,
                  device: str = "cpu") -> Scorer:
    """``"titan"`` (needs TITAN weights), ``"heuristic"`` or ``"auto"`` (TITAN when its
    weights are found locally, otherwise the heuristic; logged and recorded in ``label``)."""
    from .hub import find_weights
    from .titan import create_titan

    if name not in list_scorers():
        raise ModelError(f"unknown scorer {name!r}; choose one of {list_scorers()}")
    if name == "auto":
        if weights is None and find_weights("titan") is None:
            log.info("auto scorer: no TITAN weights found, using the nuclear heuristic")
            return Scorer("heuristic", f"{_HEURISTIC} [auto: no TITAN weights found]",
                          "haematoxylin")
        name = "titan"
    if name == "heuristic":
        return Scorer("heuristic", _HEURISTIC, "haematoxylin")
    model = create_titan(weights=weights, device=device)
    return Scorer("titan", f"TITAN attn_pool_contrastive attention; {model.label}",
                  "conch_v1_5", model)
