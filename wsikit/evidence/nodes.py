"""Literature figure nodes: one captioned figure with its source and evidence level.

A :class:`FigureNode` is what an evidence index stores and returns: the figure image, its
caption and label ("Figure 2B"), the document it comes from (title, DOI, page, year, journal,
PubMed ids), its licence (normalised, see :mod:`wsikit.evidence.licence`) and the evidence
level of that document (1 guideline … 8 expert opinion; ``None`` = unknown).

``node_id`` is a stable hash of the image *content* (decoded RGB pixels, not file bytes) and the
source identity (DOI or title or file name, page, figure label), so re-ingesting the same PDF or
manifest gives the same ids and duplicates are recognised.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EvidenceError
from .kinds import FIGURE_KINDS
from .licence import resolve_licence

__all__ = [
    "EVIDENCE_LEVELS",
    "FigureNode",
    "evidence_level_name",
    "image_content_hash",
    "load_image",
    "parse_evidence_level",
]

#: Evidence levels of the source document, best (1) to weakest (8).
EVIDENCE_LEVELS: dict[int, str] = {
    1: "guideline",
    2: "systematic review/meta-analysis",
    3: "RCT",
    4: "observational/cohort",
    5: "case report",
    6: "consensus statement",
    7: "textbook",
    8: "expert opinion",
}

_NAME_TO_LEVEL = {name.lower(): level for level, name in EVIDENCE_LEVELS.items()}
_NAME_TO_LEVEL.update({"systematic review": 2, "meta-analysis": 2, "cohort": 4,
                       "observational": 4, "consensus": 6, "opinion": 8})
_UNKNOWN = {"", "unknown", "none", "null", "na", "n/a"}


def evidence_level_name(level: int | None) -> str:
    """Name of an evidence level (``None`` → ``"unknown"``)."""
    if level is None:
        return "unknown"
    return EVIDENCE_LEVELS[level]


def parse_evidence_level(value: Any) -> int | None:
    """Parse an evidence level given as 1–8, a digit string, a level name, or unknown.

    Raises
    ------
    ValueError
        If ``value`` is none of those (callers add the file/line or option to the message).
    """
    if value is None:
        return None
    if isinstance(value, bool):  # callers catch ValueError and add the file/line or option
        raise ValueError(f"evidence level {value!r} is not 1–8, a name or 'unknown'")
    if isinstance(value, (int, np.integer)) or (isinstance(value, float) and value.is_integer()):
        level = int(value)
    elif isinstance(value, str):
        text = value.strip()
        if text.lower() in _UNKNOWN:
            return None
        if text.isdigit():
            level = int(text)
        elif text.lower() in _NAME_TO_LEVEL:
            return _NAME_TO_LEVEL[text.lower()]
        else:
            raise ValueError(f"evidence level {value!r} is not 1–8, a level name "
                             f"({', '.join(EVIDENCE_LEVELS.values())}) or 'unknown'")
    else:
        raise ValueError(f"evidence level {value!r} is not 1–8, a level name or 'unknown'")
    if level not in EVIDENCE_LEVELS:
        raise ValueError(f"evidence level {level} is out of range; use 1 (guideline) … "
                         "8 (expert opinion) or 'unknown'")
    return level


def load_image(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an image file as ``(H, W, 3) uint8`` RGB (alpha composited on white).

    Raises
    ------
    EvidenceError
        If the file is missing or not a readable image.
    """
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    try:
        with Image.open(path) as opened:
            opened.load()
            im: Image.Image = opened
            if im.mode in ("RGBA", "LA", "P"):
                im = im.convert("RGBA")
                bg = Image.new("RGBA", im.size, (255, 255, 255, 255))
                im = Image.alpha_composite(bg, im)
            return np.asarray(im.convert("RGB"), dtype=np.uint8).copy()
    except FileNotFoundError as exc:
        raise EvidenceError(f"figure image {path} does not exist; fix the path") from exc
    except Image.DecompressionBombError as exc:
        raise EvidenceError(f"figure image {path}: {exc}; a literature figure is never that "
                            "large, replace it with a normal-sized PNG/JPEG") from exc
    except (UnidentifiedImageError, OSError) as exc:
        raise EvidenceError(f"figure image {path} is not a readable image ({exc}); "
                            "use PNG, JPEG or TIFF") from exc


def image_content_hash(image: np.ndarray) -> str:
    """SHA-256 hex digest of decoded ``(H, W, 3) uint8`` pixels (with their shape)."""
    arr = np.ascontiguousarray(image, dtype=np.uint8)
    digest = hashlib.sha256(f"{arr.shape}".encode())
    digest.update(arr.tobytes())
    return digest.hexdigest()


def make_node_id(content_hash: str, *, doi: str | None = None, source_title: str | None = None,
                 source_path: str | None = None, page: int | None = None,
                 figure_label: str | None = None) -> str:
    """Stable 20-hex-digit node id from image content and source identity.

    The source identity is the DOI, else the title, else the source file *name* (not the full
    path, so the id does not change when a library of PDFs moves), plus page and figure label.
    """
    source = doi or source_title or (Path(source_path).name if source_path else "")
    key = "\x1f".join([content_hash, source.strip().lower(), str(page or ""),
                       (figure_label or "").strip()])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]


@dataclass(frozen=True)
class FigureNode:
    """One literature figure with caption, source and evidence level.

    Attributes
    ----------
    node_id : str
        Stable hash of image content + source identity (see :func:`make_node_id`).
    image : Path
        The figure image file (inside an index folder once indexed).
    caption : str
        Full caption text ("" when none was found).
    figure_label : str or None
        "Figure 2B", "Fig. 3" …
    source_title, doi, source_path : str or None
        Source document title, DOI (``10.xxxx/...``) and the file it was read from.
    page : int or None
        1-based page number in the source.
    year : int or None
        Publication year.
    license : str
        Normalised licence of the figure: one of :data:`~wsikit.evidence.licence.LICENCES`
        ("CC BY", "CC BY-NC", "CC0", "public domain", "all rights reserved", "unknown" ...).
        Any other text given (a URL, "CC-BY-4.0", a licence sentence) is normalised, and kept
        in ``license_source``.
    evidence_level : int or None
        1–8 (see :data:`EVIDENCE_LEVELS`), ``None`` for unknown.
    content_hash : str
        SHA-256 of the decoded pixels (identical images share it and are stored once).
    license_source : str or None
        Where the licence was read: the licence URL, or the source's licence sentence.
    journal : str or None
        Journal title.
    pmid, pmcid : str or None
        PubMed id ("23029536") and PubMed Central id ("PMC3460867").
    kind : str or None
        What the image shows: micrograph, photograph, chart, diagram or mixed
        (:mod:`wsikit.evidence.kinds`); ``None`` until measured (indexes made before kinds).
    kind_source : str or None
        Where ``kind`` comes from (``"pixels+caption heuristic"``, or ``"manifest"``).
    parent_id : str or None
        For a panel of a compound figure: the figure's node id (``None`` for a figure).
    panel : str or None
        The panel's letter ("B"), or its position when the figure prints none ("2").
    panel_box : tuple of int or None
        ``(x0, y0, x1, y1)`` of the panel in the figure image's pixels.
    duplicate_of : str or None
        The node id of the same figure in another document, when this one repeats it (a
        reprint, a preprint and its version of record; found by perceptual hash in a figure
        bank, :mod:`wsikit.evidence.corpus`): a repeat is linked to it, not indexed again.
    """

    node_id: str
    image: Path
    caption: str = ""
    figure_label: str | None = None
    source_title: str | None = None
    doi: str | None = None
    source_path: str | None = None
    page: int | None = None
    year: int | None = None
    license: str | None = None
    evidence_level: int | None = None
    content_hash: str = ""
    license_source: str | None = None
    journal: str | None = None
    pmid: str | None = None
    pmcid: str | None = None
    kind: str | None = None
    kind_source: str | None = None
    parent_id: str | None = None
    panel: str | None = None
    panel_box: tuple[int, int, int, int] | None = None
    duplicate_of: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "image", Path(self.image))
        name, source = resolve_licence(self.license, self.license_source)
        object.__setattr__(self, "license", name)
        object.__setattr__(self, "license_source", source)
        if self.panel_box is not None:
            box = tuple(int(v) for v in self.panel_box)
            if len(box) != 4:
                raise EvidenceError(f"FigureNode {self.node_id}: panel_box "
                                    f"{self.panel_box!r} is not (x0, y0, x1, y1)")
            object.__setattr__(self, "panel_box", box)
        if self.kind is not None and self.kind not in FIGURE_KINDS:
            raise EvidenceError(f"FigureNode {self.node_id}: kind {self.kind!r} is not one of "
                                f"{', '.join(FIGURE_KINDS)}")
        if self.evidence_level is not None and self.evidence_level not in EVIDENCE_LEVELS:
            raise EvidenceError(f"FigureNode {self.node_id}: evidence_level "
                                f"{self.evidence_level!r} is not 1–8 or None")

    @property
    def evidence_level_name(self) -> str:
        """Name of the evidence level ("unknown" when ``None``)."""
        return evidence_level_name(self.evidence_level)

    @classmethod
    def from_image(cls, image_path: str | os.PathLike[str], *, image: np.ndarray | None = None,
                   **fields_: Any) -> FigureNode:
        """Make a node for an image file, computing ``content_hash`` and ``node_id``.

        ``image`` (the decoded pixels) may be given to avoid reading the file again.
        """
        pixels = load_image(image_path) if image is None else image
        content = image_content_hash(pixels)
        node_id = make_node_id(content, doi=fields_.get("doi"),
                               source_title=fields_.get("source_title"),
                               source_path=fields_.get("source_path"),
                               page=fields_.get("page"), figure_label=fields_.get("figure_label"))
        return cls(node_id=node_id, image=Path(image_path), content_hash=content, **fields_)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (image as a string, plus ``evidence_level_name``)."""
        out = asdict(self)
        out["image"] = str(self.image)
        out["panel_box"] = None if self.panel_box is None else list(self.panel_box)
        out["evidence_level_name"] = self.evidence_level_name
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FigureNode:
        """Inverse of :meth:`to_dict` (unknown keys such as ``evidence_level_name`` ignored)."""
        names = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        missing = {"node_id", "image"} - kwargs.keys()
        if missing:
            raise EvidenceError(f"FigureNode dict lacks {sorted(missing)}; got keys "
                                f"{sorted(data)}")
        return cls(**kwargs)
