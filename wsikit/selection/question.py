"""A question steers the regions: each patch's similarity to it, blended with importance.

An image-text tower (:func:`wsikit.evidence.towers.tower_encoders`: QuiltNet, PLIP, CLIP) embeds
text and images into one space. :func:`question_similarity` embeds every patch of a grid with
the tower's image tower (the patch pixels, read as the tower's preprocessing asks) and the
question with its text tower, and gives each patch the cosine of the two.
:func:`blend_question` then mixes that similarity with the slide's importance (or attention)
by one rule, :data:`QUESTION_RULE`:

1. each score is replaced by its rank within the slide, ``(rank - 0.5) / N`` in (0, 1), ties
   sharing their mean rank (:func:`rank_normalise`); with several towers, the similarity is
   the rank of the mean of their ranks;
2. ``blended = (1 - w) · rank(importance) + w · rank(similarity)``, ``w`` the
   ``question_weight`` (default 0.5).

Why ranks: the importance is already a per-slide rank in (0, 1), TITAN attention a
distribution that sums to 1 with a heavy tail, and a tower's cosines sit in a narrow band
whose offset and spread depend on the tower and the prompt (0.18 to 0.30 is common). Mixing
raw numbers would hand the choice to whichever has the larger spread; ranks are unit-free,
unchanged by any monotone rescaling, and uniform, so ``w`` is the share of say the question
gets. ``w = 0.5`` gives the two equal say, so a patch tops the blend only when it is both
salient and relevant; ``w = 1`` chooses by the question alone, ``w = 0`` ignores it (the
question then ranks figures only, as without a tower).

The selector runs on the blend; :class:`QuestionSteering` records the question, towers,
weight and rule (``evidence.json``: ``selection.question_steering``) and gives each region the
mean importance and similarity ranks of its patches (why it was chosen).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import SelectionError

if TYPE_CHECKING:  # pragma: no cover
    from ..patches.grid import TileGrid

__all__ = [
    "QUESTION_RULE",
    "QuestionSteering",
    "blend_question",
    "question_similarity",
    "rank_normalise",
]

#: The name of the blending rule, recorded with every steered result (see the module
#: docstring; a new rule gets a new name).
QUESTION_RULE = "rank-blend-v1"

#: The rule in one sentence (evidence.json, the report and the summary show it).
RULE_TEXT = ("per-slide ranks: blended = (1 - w) * rank(importance) + w * rank(similarity "
             "of the patch to the question), each rank (r - 0.5) / N in (0, 1)")


def rank_normalise(values: np.ndarray) -> np.ndarray:
    """Per-slide ranks of ``values``: ``(rank - 0.5) / N`` in (0, 1), ties sharing their mean
    rank, NaN kept NaN (ranked among the finite values only).

    Examples
    --------
    >>> rank_normalise(np.array([10.0, 30.0, 20.0, 20.0])).tolist()
    [0.125, 0.875, 0.5, 0.5]
    """
    v = np.asarray(values, np.float64).reshape(-1)
    out = np.full(v.shape, np.nan)
    ok = np.isfinite(v)
    n = int(ok.sum())
    if n == 0:
        return out
    x = v[ok]
    order = np.argsort(x, kind="stable")
    sx = x[order]
    # mean rank (1-based) of each run of equal values
    starts = np.flatnonzero(np.r_[True, sx[1:] != sx[:-1]])
    ends = np.r_[starts[1:], n]
    mean_rank = (starts + ends + 1) / 2.0
    ranks = np.empty(n)
    ranks[order] = np.repeat(mean_rank, ends - starts)
    out[ok] = (ranks - 0.5) / n
    return out


def _weight(weight: float) -> float:
    if isinstance(weight, bool) or not isinstance(weight, int | float | np.floating) \
            or not 0.0 <= float(weight) <= 1.0:
        raise SelectionError(f"question_weight {weight!r} must be a number in [0, 1] (the "
                             "question's share of the blend; 0.5 gives it equal say)")
    return float(weight)


def blend_question(importance: np.ndarray, similarity: np.ndarray, *, weight: float = 0.5
                   ) -> np.ndarray:
    """The :data:`QUESTION_RULE` blend of per-patch ``importance`` and ``similarity`` (both
    ``(N,)``, any units): ``(1 - weight) · rank(importance) + weight · rank(similarity)``,
    float32 in (0, 1).

    Raises
    ------
    SelectionError
        Arrays of different lengths, a non-finite score, or a weight outside [0, 1].

    Examples
    --------
    >>> imp = np.array([0.9, 0.8, 0.1, 0.2])
    >>> sim = np.array([0.20, 0.21, 0.30, 0.29])   # the question points elsewhere
    >>> blend_question(imp, sim, weight=0.0).argmax(), blend_question(imp, sim, weight=1.0
    ...                                                                ).argmax()
    (np.int64(0), np.int64(2))
    """
    w = _weight(weight)
    a = np.asarray(importance, np.float64).reshape(-1)
    b = np.asarray(similarity, np.float64).reshape(-1)
    if a.shape != b.shape:
        raise SelectionError(f"importance ({a.size} patches) and similarity ({b.size}) must "
                             "score the same patches")
    for name, arr in (("importance", a), ("similarity", b)):
        if not np.isfinite(arr).all():
            raise SelectionError(f"{name} has {int((~np.isfinite(arr)).sum())} non-finite "
                                 "scores; every patch needs one to be blended")
    return ((1.0 - w) * rank_normalise(a) + w * rank_normalise(b)).astype(np.float32)


@dataclass(frozen=True, eq=False)
class QuestionSteering:
    """How a question chose the regions: what was blended, and each patch's parts.

    Attributes
    ----------
    question : str
    towers : tuple of str
        The image-text towers whose similarity was used.
    weight : float
        The question's share ``w`` of the blend.
    labels : tuple of str
        Each tower's provenance (model, weights), as the encoders label themselves.
    importance_rank, similarity_rank, blended : ndarray, shape (N,)
        Per patch, aligned with ``coords``.
    coords : ndarray, shape (N, 2)
    patch_size_l0 : int
    similarity : ndarray, shape (N,)
        The raw cosine (the mean over the towers), for the heatmap layer.
    random_weights : bool
        A tower was built with random weights (tests only: its similarity means nothing).
    """

    question: str
    towers: tuple[str, ...]
    weight: float
    labels: tuple[str, ...]
    importance_rank: np.ndarray = field(repr=False)
    similarity_rank: np.ndarray = field(repr=False)
    blended: np.ndarray = field(repr=False)
    coords: np.ndarray = field(repr=False)
    patch_size_l0: int = 0
    similarity: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    random_weights: bool = False

    def to_dict(self) -> dict[str, Any]:
        """``selection.question_steering`` of evidence.json."""
        out: dict[str, Any] = {
            "applied": True, "question": self.question, "towers": list(self.towers),
            "tower_labels": list(self.labels), "weight": self.weight, "rule": QUESTION_RULE,
            "rule_text": RULE_TEXT, "scores": "blended"}
        if self.random_weights:
            out["random_weights"] = True
        return out

    def region_fields(self, box: Mapping[str, Any]) -> dict[str, Any]:
        """``question`` of a region of level-0 ``box``: the mean importance and similarity
        ranks of its patches (a region chosen for the question has a high similarity rank)."""
        x, y, w, h = (int(box[k]) for k in ("x", "y", "width", "height"))
        c = self.coords
        sel = (c[:, 0] >= x) & (c[:, 0] < x + w) & (c[:, 1] >= y) & (c[:, 1] < y + h)
        if not sel.any():
            return {}
        return {"question": {"importance_rank": round(float(self.importance_rank[sel].mean()),
                                                       4),
                             "similarity_rank": round(float(self.similarity_rank[sel].mean()),
                                                      4),
                             "blended": round(float(self.blended[sel].mean()), 4)}}


def not_steered(question: str) -> dict[str, Any]:
    """``selection.question_steering`` of a question given without a tower: it ranks the
    figures only, and says so."""
    return {"applied": False, "question": question,
            "why": "no image-text tower given (--tower NAME): the question ranks the matched "
                   "figures only; the regions are chosen by importance alone"}


def text_patch_cosine(patch_vectors: np.ndarray, text_vector: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row of ``patch_vectors`` ``(N, D)`` to ``text_vector``
    ``(D,)``: ``(N,)`` float32 (0 for an all-zero row)."""
    p = np.asarray(patch_vectors, np.float64)
    t = np.asarray(text_vector, np.float64).reshape(-1)
    if p.ndim != 2 or p.shape[1] != t.size:
        raise SelectionError(f"patch vectors {p.shape} and the text vector ({t.size},) are "
                             "not of one space")
    pn = np.linalg.norm(p, axis=1)
    tn = float(np.linalg.norm(t))
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = (p @ t) / (pn * tn)
    return np.nan_to_num(cos, nan=0.0).astype(np.float32)


def patch_embeddings(slide: Any, grid: TileGrid, encoders: Mapping[str, Any], *,
                     device: str = "cpu", batch_size: int = 64, workers: int = 0,
                     progress: bool | None = None, mpp: float | None = None,
                     threads: int | None = None) -> dict[str, np.ndarray]:
    """``{tower: (N, D) vectors}``: every patch of ``grid`` (its pixels, read and
    preprocessed as each tower's image tower asks) embedded by each encoder of ``encoders``
    (``threads``: the run's cores, :attr:`wsikit.run.options.RunSettings.threads`).

    Raises
    ------
    SelectionError
        An encoder without a text tower (its vectors could not be compared with text).
    """
    from ..features.extract import extract_features

    out: dict[str, np.ndarray] = {}
    for name, enc in encoders.items():
        if not hasattr(enc, "encode_text"):
            raise SelectionError(f"{name} has no text tower, so it cannot compare a question "
                                 "with patches; use an image-text tower (quiltnet_b32, plip, "
                                 "clip_vit_b32: 'wsikit models' lists them)")
        emb = extract_features(slide, grid, enc, device=device, batch_size=batch_size,
                               workers=workers, progress=progress, mpp=mpp, importance=False,
                               threads=threads)
        out[name] = np.asarray(emb.features, np.float32)
    return out


def text_similarity(vectors: Mapping[str, np.ndarray], text: str,
                    encoders: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """``{tower: (N,) cosine}`` of each tower's patch ``vectors`` to ``text`` embedded by that
    tower's text tower.

    Raises
    ------
    SelectionError
        An empty text.
    """
    if not isinstance(text, str) or not text.strip():
        raise SelectionError("the question is empty; give a few words (e.g. 'dense tumour "
                             "nuclei')")
    return {name: text_patch_cosine(v, np.asarray(encoders[name].encode_text([text]),
                                                  np.float32)[0])
            for name, v in vectors.items()}


def question_similarity(slide: Any, grid: TileGrid, question: str,
                        encoders: Mapping[str, Any], *, device: str = "cpu",
                        batch_size: int = 64, workers: int = 0, progress: bool | None = None,
                        mpp: float | None = None, threads: int | None = None
                        ) -> dict[str, np.ndarray]:
    """``{tower: (N,) cosine}``: each patch of ``grid`` (its pixels, through the tower's image
    tower, :func:`patch_embeddings`) against ``question`` (its text tower,
    :func:`text_similarity`), for each tower encoder of ``encoders``.

    Raises
    ------
    SelectionError
        An empty question, or an encoder without a text tower.
    """
    if not isinstance(question, str) or not question.strip():
        raise SelectionError("the question is empty; give a few words (e.g. 'dense tumour "
                             "nuclei')")
    vectors = patch_embeddings(slide, grid, encoders, device=device, batch_size=batch_size,
                               workers=workers, progress=progress, mpp=mpp, threads=threads)
    return text_similarity(vectors, question, encoders)


def steer(importance: np.ndarray, similarities: Mapping[str, np.ndarray], *, question: str,
          weight: float, coords: np.ndarray, patch_size_l0: int,
          labels: Sequence[str] = (), random_weights: bool = False) -> QuestionSteering:
    """The :class:`QuestionSteering` of ``importance`` and each tower's ``similarities``
    (several towers: the rank of the mean of their ranks)."""
    if not similarities:
        raise SelectionError("steering by a question needs at least one tower's similarity")
    w = _weight(weight)
    ranks = [rank_normalise(s) for s in similarities.values()]
    sim_rank = rank_normalise(np.mean(ranks, axis=0)) if len(ranks) > 1 else ranks[0]
    blended = blend_question(importance, sim_rank, weight=w)
    return QuestionSteering(
        question=question, towers=tuple(similarities), weight=w, labels=tuple(labels),
        importance_rank=rank_normalise(importance), similarity_rank=sim_rank,
        blended=blended, coords=np.asarray(coords, np.int64), patch_size_l0=int(patch_size_l0),
        similarity=np.mean([np.asarray(s, np.float64) for s in similarities.values()],
                           axis=0).astype(np.float32),
        random_weights=bool(random_weights))


def is_random(encoder: Any) -> bool:
    """Whether ``encoder`` was built with random weights (``weights="random"``: tests only,
    its similarity means nothing)."""
    return getattr(encoder, "weights_source", None) == "random"
