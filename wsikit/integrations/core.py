"""What every framework adapter needs: turn a query into an :class:`EvidenceResult`.

A query is one of

* an ``(H, W, 3) uint8`` array or an image file (``.png``, ``.jpg``, ...): a crop to match;
* a whole-slide image path: ``wsikit select`` runs on it against the index (cached under
  ``out``, so a second query of the same slide is fast);
* an ``evidence.json`` path or an :class:`~wsikit.evidence.EvidenceResult`: used as it is.

For an image query the result has one region ``q1`` covering the image; its "slide" is the
image (``slide.id`` = ``image-<12 hex of the pixels>``), so document ids stay unique and stable.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import EvidenceError

if TYPE_CHECKING:  # pragma: no cover
    from ..evidence import EvidenceResult

__all__ = ["EvidenceSource", "as_result", "query_kind"]

#: Where slide queries write when no ``out`` is given (said once, as a warning).
DEFAULT_OUT = "wsikit_out"
_TOLD: set[str] = set()

#: File suffixes treated as crop images (anything else that exists is opened as a slide).
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp", ".gif")


def as_result(result: EvidenceResult | str | os.PathLike[str]) -> EvidenceResult:
    """An :class:`~wsikit.evidence.EvidenceResult` as it is, or read from an evidence.json
    path."""
    from ..evidence import EvidenceResult

    return result if isinstance(result, EvidenceResult) else EvidenceResult.read(result)


def query_kind(query: Any) -> str:
    """``"array"``, ``"result"``, ``"evidence"`` (evidence.json), ``"image"`` or ``"slide"``.

    Raises
    ------
    EvidenceError
        A path that does not exist, or a type that is none of these.
    """
    from ..evidence import EvidenceResult

    if isinstance(query, EvidenceResult):
        return "result"
    if isinstance(query, np.ndarray):
        return "array"
    if isinstance(query, (str, os.PathLike)):
        p = Path(query)
        if not p.exists():
            raise EvidenceError(f"query {str(query)!r} is not an existing image, slide or "
                                "evidence.json; give a file path (or an RGB array)")
        if p.suffix.lower() == ".json":
            return "evidence"
        return "image" if p.suffix.lower() in IMAGE_SUFFIXES else "slide"
    raise EvidenceError(f"query of type {type(query).__name__} is not supported; give an "
                        "image/slide/evidence.json path, an (H, W, 3) uint8 array or an "
                        "EvidenceResult")


@dataclass
class EvidenceSource:
    """A figure index plus the options used to query it.

    Parameters
    ----------
    index : path-like
        Figure index folder (``wsikit index build``).
    k : int
        Figures looked up per crop/region before the floor.
    min_similarity : str or float
        Floor: ``"p95"``-style background percentile (default), cosine similarity, ``"none"``.
    out : path-like
        Output root for slide queries (``<out>/select/<slide>/``).
    select_options : dict
        Extra keyword arguments of :func:`wsikit.run.pipeline.select` (``models``, ``scales``...).
    device : str
        Where the encoder and slide queries run (``"auto"``: the GPU when CUDA is available,
        else the CPU).
    licences : str or None
        Return only figures under these licences (``"open"``, ``"commercial"``,
        ``"adaptable"`` or names such as ``"CC BY,CC0"``; :mod:`wsikit.evidence.licence`);
        ``None``: any. Image, caption and slide queries all honour it.
    """

    index: str | os.PathLike[str]
    k: int = 5
    min_similarity: str | float = "p95"
    out: str | os.PathLike[str] = DEFAULT_OUT
    select_options: Mapping[str, Any] = field(default_factory=dict)
    device: str = "auto"
    licences: str | None = None
    _opened: Any = field(default=None, init=False, repr=False)
    _encoder: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        from ..evidence.calibration import parse_floor

        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise EvidenceError(f"k={self.k!r} must be an integer >= 1")
        from ..evidence.licence import parse_licence_filter

        parse_floor(self.min_similarity)  # refuse a bad floor now, not at the first query
        try:
            parse_licence_filter(self.licences)
        except ValueError as exc:
            raise EvidenceError(f"licences={self.licences!r}: {exc}") from exc
        clash = sorted({"index", "out", "k", "min_similarity", "device", "licences"}
                       & set(self.select_options))
        if clash:
            raise EvidenceError(f"select_options {clash} are options of the retriever itself; "
                                "give them as its own arguments")

    # ------------------------------------------------------------------ the index
    @property
    def figure_index(self) -> Any:
        """The opened :class:`~wsikit.evidence.FigureIndex` (opened once), restricted to
        :attr:`licences`."""
        if self._opened is None:
            from ..evidence import FigureIndex

            self._opened = FigureIndex.open(self.index).with_licences(self.licences)
        return self._opened

    @property
    def encoder(self) -> Any:
        """The index's encoder (created once)."""
        if self._encoder is None:
            from ..models import create_encoder

            self._encoder = create_encoder(self.figure_index.encoder_name, device=self.device)
        return self._encoder

    # ------------------------------------------------------------------ queries
    def retrieve(self, query: Any, *, k: int | None = None) -> EvidenceResult:
        """The :class:`~wsikit.evidence.EvidenceResult` for ``query`` (see module doc)."""
        from ..evidence import EvidenceResult

        kind = query_kind(query)
        if kind == "result":
            return query
        if kind == "evidence":
            return EvidenceResult.read(query)
        if kind == "slide":
            from ..run.pipeline import select

            opts = {"encoder": "heuristic", **dict(self.select_options)}
            if os.fspath(self.out) == DEFAULT_OUT and DEFAULT_OUT not in _TOLD:
                _TOLD.add(DEFAULT_OUT)  # once per process: where the files go, unasked
                warnings.warn(f"slide queries write their outputs (crops, report, "
                              f"evidence.json) under {Path(DEFAULT_OUT).resolve()}/select/; "
                              "pass out=FOLDER to the retriever to choose another place",
                              UserWarning, stacklevel=2)
            return select(query, out=self.out, index=self.index, k=k or self.k,
                          min_similarity=self.min_similarity, device=self.device,
                          licences=self.licences, progress=False, **opts)
        if kind == "image":
            from ..evidence import load_image

            return self._image_result(load_image(query), Path(query), k=k or self.k)
        return self._image_result(np.asarray(query), None, k=k or self.k)

    def _image_result(self, image: np.ndarray, path: Path | None, *, k: int
                      ) -> EvidenceResult:
        from ..evidence import EvidenceRegion, EvidenceResult
        from ..evidence.ids import region_uid
        from ..evidence.nodes import image_content_hash
        from ..outputs.paths import portable_path

        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise EvidenceError(f"query image must be (H, W, 3) uint8 RGB, got {image.shape} "
                                f"{image.dtype}")
        found = _match_one(self, image, k)
        h, w = image.shape[:2]
        sid = f"image-{image_content_hash(image)[:12]}"
        box = {"x": 0, "y": 0, "width": int(w), "height": int(h)}
        crop = None
        if path is not None:
            _, absolute = portable_path(path, None)
            crop = {"path": absolute, "abspath": absolute, "width": int(w), "height": int(h),
                    "mpp": 1.0}
        region = {"id": "q1", "uid": region_uid(sid, "q1", box), "scale": 1, "score": 1.0,
                  "box": box, "grid_box": None, "crop": crop, "matches": found.matches[0],
                  "below_floor": found.below_floor[0]}
        enc = found.encoder
        name = path.name if path is not None else f"{sid}.png"
        return EvidenceResult(
            slide={"id": sid, "path": str(path) if path else name, "name": name,
                   "width": int(w), "height": int(h), "mpp": 1.0,
                   "mpp_source": "not applicable (image query)"},
            models={"crop_encoder": {"name": enc.config.name, "label": enc.label,
                                     "heuristic": bool(enc.config.heuristic)}},
            selection={"query": "image", "figures_per_region": k, "min_similarity": found.floor,
                       **({"licences": sorted(found.index.licences)}
                          if found.index.licences is not None else {})},
            regions=(EvidenceRegion.from_dict(region),), index=found.index.to_evidence_dict(),
            synthetic=False, base_dir=None)

    def caption_search(self, text: str, *, k: int | None = None) -> list[tuple[Any, float]]:
        """``(FigureNode, BM25 score)`` of the figures whose captions best match ``text``.

        BM25 over captions, figure labels and source titles (:mod:`wsikit.evidence.captions`).
        """
        from ..evidence.captions import caption_search

        index = self.figure_index
        hits = caption_search(index, text, k or self.k)
        nodes = index.nodes([h.row for h in hits])
        return [(n, float(h.score)) for n, h in zip(nodes, hits, strict=True)]


def _match_one(source: EvidenceSource, image: np.ndarray, k: int) -> Any:
    """Match one image with the source's (cached) index and encoder."""
    from ..evidence.matching import match_crops

    return match_crops([image], source.figure_index, k=k, min_similarity=source.min_similarity,
                       encoder=source.encoder)
