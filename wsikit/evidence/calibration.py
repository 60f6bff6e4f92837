"""Calibrated similarity: an index's background distribution and the match floor.

A cosine similarity means little on its own: 0.9 from the weight-free colour/texture heuristic
and 0.9 from a trained model are not comparable, and even for one encoder the typical
similarity between *unrelated* figures can be 0.1 or 0.7. So every index measures the
similarities between figures that are unrelated (pairs from different sources), stores that
background in its manifest, and every match reports its percentile against it. The default
floor keeps only matches at or above the 95th percentile of the background.

>>> bg = background_from_vectors(vectors, groups)            # doctest: +SKIP
>>> bg.percentile(0.83)                                      # doctest: +SKIP
97.4
>>> parse_floor("p95").similarity(bg)                        # doctest: +SKIP
0.71
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from .._hints import option
from ..errors import EvidenceError

__all__ = ["Background", "Floor", "background_from_vectors", "sample_pairs", "parse_floor"]

#: The default match floor: the 95th percentile of the index's background.
DEFAULT_FLOOR = "p95"
#: Percentile levels stored in the manifest (0, 0.1, ..., 100).
_LEVELS = np.linspace(0.0, 100.0, 1001)
#: Most pairs compared when measuring a background (sampled beyond that).
MAX_PAIRS = 200_000
#: Below this many pairs the percentiles are coarse; the manifest says so.
FEW_PAIRS = 50

METHOD_CROSS = "pairs of figures from different sources"
METHOD_ANY = "pairs of distinct figures (the index has a single source, so related figures " \
             "of one paper count as background: the floor is conservative)"


@dataclass(frozen=True)
class Background:
    """Distribution of cosine similarities between unrelated figures of one index.

    Attributes
    ----------
    quantiles : tuple of float, length 1001
        Similarity at percentile 0, 0.1, ..., 100 of the background pairs.
    pairs : int
        Number of pairs measured.
    method : str
        Which pairs count as unrelated (:data:`METHOD_CROSS` or :data:`METHOD_ANY`).
    sampled : bool
        True when ``pairs`` is a random sample of all such pairs (seeded, reproducible).
    """

    quantiles: tuple[float, ...]
    pairs: int
    method: str
    sampled: bool = False

    def __post_init__(self) -> None:
        q = tuple(float(v) for v in self.quantiles)
        if len(q) != len(_LEVELS) or any(b < a for a, b in pairwise(q)):
            raise EvidenceError(f"similarity background needs {len(_LEVELS)} non-decreasing "
                                f"quantiles, got {len(q)}; rebuild or recalibrate the index")
        object.__setattr__(self, "quantiles", q)

    @property
    def few_pairs(self) -> bool:
        """True when fewer than :data:`FEW_PAIRS` pairs were measured (coarse percentiles)."""
        return self.pairs < FEW_PAIRS

    def similarity_at(self, percentile: float) -> float:
        """The background similarity at ``percentile`` (0–100), interpolated."""
        return float(np.interp(percentile, _LEVELS, self.quantiles))

    def percentile(self, similarity: float | np.ndarray) -> float | np.ndarray:
        """Percentile (0–100) of ``similarity`` against the background.

        The fraction of background pairs less similar, interpolated between stored quantiles
        (ties take the middle of their run); below the minimum 0, above the maximum 100.
        """
        q = np.asarray(self.quantiles)
        s = np.asarray(similarity, dtype=np.float64)
        lo = np.searchsorted(q, s, side="left")
        hi = np.searchsorted(q, s, side="right")
        out = np.empty(s.shape, dtype=np.float64)
        tie = hi > lo
        out[tie] = (_LEVELS[lo[tie]] + _LEVELS[hi[tie] - 1]) / 2
        inside = ~tie & (lo > 0) & (lo < len(q))
        i = lo[inside]
        x0, x1 = q[i - 1], q[i]
        frac = (s[inside] - x0) / np.maximum(x1 - x0, 1e-12)
        out[inside] = _LEVELS[i - 1] + frac * (_LEVELS[i] - _LEVELS[i - 1])
        out[~tie & (lo == 0)] = 0.0
        out[~tie & (lo >= len(q))] = 100.0
        return float(out) if out.ndim == 0 else out

    def to_dict(self) -> dict[str, Any]:
        """The ``background`` entry of an index manifest."""
        return {"method": self.method, "pairs": int(self.pairs), "sampled": bool(self.sampled),
                "p50": round(self.similarity_at(50), 6), "p95": round(self.similarity_at(95), 6),
                "p99": round(self.similarity_at(99), 6),
                "quantile_levels": "0:100:0.1",
                "quantiles": [round(v, 6) for v in self.quantiles]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Background:
        """Inverse of :meth:`to_dict`."""
        try:
            return cls(quantiles=tuple(data["quantiles"]), pairs=int(data["pairs"]),
                       method=str(data["method"]), sampled=bool(data.get("sampled", False)))
        except (KeyError, TypeError, ValueError) as exc:
            raise EvidenceError(f"malformed similarity background in the index manifest "
                                f"({exc}); recalibrate: wsikit index calibrate DIR") from exc


def sample_pairs(groups: np.ndarray, *, cross: bool, max_pairs: int, seed: int
                 ) -> tuple[np.ndarray, np.ndarray, bool]:
    """The pairs of figures whose similarities form the background.

    Parameters
    ----------
    groups : numpy.ndarray
        ``(N,)`` source of each figure.
    cross : bool
        Only pairs from different sources (otherwise any pair).
    max_pairs : int
        More pairs than this are sampled uniformly without replacement.
    seed : int
        Seed of the sample (the same seed gives the same pairs).

    Returns
    -------
    i, j : numpy.ndarray
        int64 indices of each pair, ``i < j``, each pair at most once.
    sampled : bool
        Whether the pairs are a sample rather than all of them.
    """
    n = len(groups)
    total = n * (n - 1) // 2
    if total <= max_pairs:
        i, j = np.triu_indices(n, k=1)
        if cross:
            keep = groups[i] != groups[j]
            i, j = i[keep], j[keep]
        return i, j, False
    rng = np.random.default_rng(seed)
    frac = 1.0
    if cross:  # fraction of pairs across groups, to draw enough before filtering
        _, counts = np.unique(groups, return_counts=True)
        frac = max(1.0 - float((counts * (counts - 1) // 2).sum()) / total, 1e-6)
    draw = min(total, int(max_pairs / frac * 1.2) + 100)
    flat = rng.choice(total, size=draw, replace=False).astype(np.int64)
    # invert the row-major upper-triangle numbering: pair number p -> (i, j)
    b = 2 * n - 1
    i = np.floor((b - np.sqrt(b * b - 8.0 * flat)) / 2).astype(np.int64)
    start = i * (2 * n - i - 1) // 2
    fix = flat < start  # guard against floating-point round-off at row starts
    i[fix] -= 1
    start = i * (2 * n - i - 1) // 2
    j = (flat - start + i + 1).astype(np.int64)
    if cross:
        keep = groups[i] != groups[j]
        i, j = i[keep], j[keep]
    return i[:max_pairs], j[:max_pairs], True


def background_from_vectors(vectors: np.ndarray, groups: Sequence[str], *,
                            max_pairs: int = MAX_PAIRS, seed: int = 0) -> Background | None:
    """Measure the similarity background of L2-normalised ``(N, D)`` vectors.

    Parameters
    ----------
    vectors : ndarray, shape (N, D)
        The index's vectors (one row per distinct figure image).
    groups : sequence of str, length N
        Source identity of each row (DOI, else title, else source file name): pairs within
        one source may be related and are not background unless there is only one source.
    max_pairs : int
        Most pairs compared; beyond that a seeded random sample.
    seed : int
        Seed of the sample (the result is reproducible).

    Returns
    -------
    Background or None
        ``None`` when there are fewer than two vectors (no pair to measure).
    """
    v = np.asarray(vectors, dtype=np.float32)
    g = np.asarray([str(x) for x in groups])
    if v.ndim != 2 or len(g) != v.shape[0]:
        raise EvidenceError(f"background: {v.shape} vectors and {len(g)} groups do not match")
    if v.shape[0] < 2:
        return None
    cross = len(set(g.tolist())) > 1
    i, j, sampled = sample_pairs(g, cross=cross, max_pairs=max_pairs, seed=seed)
    sims = np.einsum("nd,nd->n", v[i], v[j]).astype(np.float64)
    quantiles = np.quantile(sims, _LEVELS / 100.0)
    return Background(quantiles=tuple(np.maximum.accumulate(quantiles)), pairs=len(sims),
                      method=METHOD_CROSS if cross else METHOD_ANY, sampled=sampled)


@dataclass(frozen=True)
class Floor:
    """The lowest match kept: a cosine similarity, or a percentile of the background.

    Attributes
    ----------
    kind : {"similarity", "percentile", "none"}
    value : float
        Similarity in [-1, 1], percentile in [0, 100], or ``nan`` for ``"none"``.
    """

    kind: str
    value: float

    @property
    def text(self) -> str:
        """How the floor was given: ``p95``, ``0.3`` or ``none``."""
        if self.kind == "percentile":
            return f"p{self.value:g}"
        return "none" if self.kind == "none" else f"{self.value:g}"

    def similarity(self, background: Background | None) -> float | None:
        """The floor as a cosine similarity (``None`` when it cannot be computed: no floor,
        or a percentile floor on an index without background)."""
        if self.kind == "similarity":
            return self.value
        if self.kind == "percentile" and background is not None:
            return background.similarity_at(self.value)
        return None

    def passes(self, similarity: float, percentile: float | None) -> bool:
        """Whether a match with this similarity (and background percentile) is kept.

        A percentile floor on an index without background keeps every match (the match
        carries ``percentile: null`` and the prompt says it is uncalibrated).
        """
        if self.kind == "similarity":
            return similarity >= self.value
        if self.kind == "percentile":
            return percentile is None or percentile >= self.value
        return True

    def to_dict(self, background: Background | None) -> dict[str, Any]:
        """The ``selection.min_similarity`` entry of evidence.json."""
        sim = self.similarity(background)
        return {"given": self.text, "kind": self.kind,
                "percentile": self.value if self.kind == "percentile" else None,
                "similarity": None if sim is None else round(float(sim), 6)}


_PCT = re.compile(r"^p(\d+(?:\.\d*)?)$", re.IGNORECASE)


def parse_floor(value: Any) -> Floor:
    """Parse a match floor: ``"p95"`` (percentile 0–100 of the background), a cosine
    similarity in [-1, 1] (number or string), ``"none"``, or ``None`` (the default, p95).

    Raises
    ------
    EvidenceError
        A value out of range or not understood, naming it and the accepted forms.
    """
    if value is None:
        value = DEFAULT_FLOOR
    if isinstance(value, Floor):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("none", "off", "all"):
            return Floor("none", float("nan"))
        m = _PCT.match(text)
        if m:
            pct = float(m.group(1))
            if not 0 <= pct <= 100:
                raise EvidenceError(f"{option('min_similarity', value)}: a percentile must be "
                                    "p0 … p100 (e.g. p95)")
            return Floor("percentile", pct)
        try:
            value = float(text)
        except ValueError:
            raise EvidenceError(f"{option('min_similarity', value)} is neither a cosine "
                                "similarity (-1 … 1), a background percentile (p0 … p100, "
                                "e.g. p95) nor 'none'") from None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise EvidenceError(f"{option('min_similarity', value)} must be a number or 'pNN'")
    sim = float(value)
    if not math.isfinite(sim) or not -1.0 <= sim <= 1.0:
        raise EvidenceError(f"{option('min_similarity', value)} is out of range: a cosine "
                            "similarity is between -1 and 1 (or give a percentile such as p95)")
    return Floor("similarity", sim)
