"""The ``evidence.json`` document (``wsikit.evidence/v1``) and its RAG adapters.

:class:`EvidenceResult` holds what ``wsikit select`` found: slide, models, selection
parameters, index, and per region its box, crop and literature matches. Adapters turn it into
plain dicts shaped like LangChain ``Document``, LlamaIndex ``TextNode`` and Haystack
``Document`` objects (none of those libraries is imported), and a text block for an LLM prompt.
The JSON Schema is ``wsikit/schemas/evidence_v1.json``.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._atomic import write_json_atomic
from .._version import __version__
from ..errors import EvidenceError
from .nodes import evidence_level_name

__all__ = ["EVIDENCE_SCHEMA_ID", "SCHEMA_PATH", "EvidenceRegion", "EvidenceResult", "load_schema"]

EVIDENCE_SCHEMA_ID = "wsikit.evidence/v1"
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "evidence_v1.json"

#: Metadata keys LlamaIndex should not embed (paths and ids carry no meaning for embeddings).
_NO_EMBED = ("node_id", "image_path", "source_path", "region_id", "slide_path", "doi")


@functools.lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The JSON Schema of ``evidence.json`` (draft 2020-12)."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class EvidenceRegion:
    """One selected region: ``box`` (level-0 px ``x, y, width, height``), ``grid_box``
    (``gx, gy, size`` in grid cells), ``crop`` (``path`` relative to evidence.json, ``width``,
    ``height``, ``mpp``) and ``matches`` (dicts as :meth:`wsikit.evidence.Match.to_dict`)."""

    id: str
    scale: int
    score: float
    box: Mapping[str, int]
    crop: Mapping[str, Any] | None
    matches: tuple[Mapping[str, Any], ...] = ()
    grid_box: Mapping[str, int] | None = None
    #: 1 = most salient region; ``inside``: id of the region this one zooms into (or None)
    rank: int | None = None
    inside: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        out = {"id": self.id, "scale": int(self.scale), "score": float(self.score),
               "box": dict(self.box), "grid_box": None if self.grid_box is None else
               dict(self.grid_box), "crop": None if self.crop is None else dict(self.crop),
               "matches": [dict(m) for m in self.matches]}
        if self.rank is not None:
            out["rank"] = int(self.rank)
            out["inside"] = self.inside
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvidenceRegion:
        """Inverse of :meth:`to_dict`."""
        return cls(id=data["id"], scale=int(data["scale"]), score=float(data["score"]),
                   box=dict(data["box"]), crop=None if data.get("crop") is None else
                   dict(data["crop"]), matches=tuple(dict(m) for m in data.get("matches", ())),
                   grid_box=None if data.get("grid_box") is None else dict(data["grid_box"]),
                   rank=None if data.get("rank") is None else int(data["rank"]),
                   inside=data.get("inside"))


@dataclass(frozen=True)
class EvidenceResult:
    """The evidence document for one slide (schema ``wsikit.evidence/v1``)."""

    slide: Mapping[str, Any]
    models: Mapping[str, Mapping[str, Any]]
    selection: Mapping[str, Any]
    regions: tuple[EvidenceRegion, ...] = ()
    index: Mapping[str, Any] | None = None
    empty_scales: Mapping[str, str] = field(default_factory=dict)
    synthetic: bool = False
    created: str = ""
    wsikit_version: str = __version__
    schema: str = EVIDENCE_SCHEMA_ID

    def __post_init__(self) -> None:
        if not self.created:
            now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            object.__setattr__(self, "created", now)
        object.__setattr__(self, "regions", tuple(
            r if isinstance(r, EvidenceRegion) else EvidenceRegion.from_dict(r)
            for r in self.regions))
        object.__setattr__(self, "empty_scales",
                           {str(k): str(v) for k, v in dict(self.empty_scales).items()})

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        """The ``evidence.json`` document as a dict."""
        return {"schema": self.schema, "wsikit_version": self.wsikit_version,
                "created": self.created, "synthetic": bool(self.synthetic),
                "slide": dict(self.slide), "models": {k: dict(v) for k, v in self.models.items()},
                "selection": dict(self.selection),
                "index": None if self.index is None else dict(self.index),
                "empty_scales": dict(self.empty_scales),
                "regions": [r.to_dict() for r in self.regions]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, validate: bool = True) -> EvidenceResult:
        """Build from a dict (validated against the JSON Schema unless ``validate=False``)."""
        if validate:
            cls.validate_dict(data)
        return cls(slide=dict(data["slide"]), models=dict(data["models"]),
                   selection=dict(data["selection"]),
                   regions=tuple(EvidenceRegion.from_dict(r) for r in data["regions"]),
                   index=data.get("index"), empty_scales=dict(data.get("empty_scales", {})),
                   synthetic=bool(data.get("synthetic", False)), created=data["created"],
                   wsikit_version=data["wsikit_version"], schema=data["schema"])

    @staticmethod
    def validate_dict(data: Mapping[str, Any]) -> None:
        """Check a document against the schema (and that level names match levels).

        Raises
        ------
        EvidenceError
            Naming the JSON path of the first problem.
        """
        import jsonschema

        validator = jsonschema.Draft202012Validator(load_schema())
        errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
        if errors:
            err = errors[0]
            where = "/".join(str(p) for p in err.absolute_path) or "(document)"
            raise EvidenceError(f"evidence document is invalid at {where}: {err.message} "
                                f"({len(errors)} problem(s) in all)")
        for r, region in enumerate(data["regions"]):
            for m, match in enumerate(region["matches"]):
                if match["evidence_level_name"] != evidence_level_name(match["evidence_level"]):
                    raise EvidenceError(
                        f"evidence document is invalid at regions/{r}/matches/{m}: "
                        f"evidence_level_name {match['evidence_level_name']!r} does not match "
                        f"evidence_level {match['evidence_level']!r}")

    def validate(self) -> EvidenceResult:
        """Validate :meth:`to_dict` against the schema; returns ``self``."""
        self.validate_dict(self.to_dict())
        return self

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Validate and write ``evidence.json`` atomically."""
        self.validate()
        return write_json_atomic(path, self.to_dict())

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> EvidenceResult:
        """Read and validate an ``evidence.json`` file."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise EvidenceError(f"cannot read evidence file {path} ({exc})") from exc
        try:
            return cls.from_dict(data)
        except EvidenceError as exc:
            raise EvidenceError(f"{path}: {exc}") from exc

    # ------------------------------------------------------------------ adapters
    def _items(self) -> list[tuple[EvidenceRegion, Mapping[str, Any]]]:
        return [(region, match) for region in self.regions for match in region.matches]

    def _metadata(self, region: EvidenceRegion, match: Mapping[str, Any]) -> dict[str, Any]:
        box = region.box
        return {"source": "wsikit", "schema": self.schema, "synthetic": bool(self.synthetic),
                "slide_name": self.slide.get("name"), "slide_path": self.slide.get("path"),
                "region_id": region.id, "region_scale": int(region.scale),
                "region_score": float(region.score), "region_x": int(box["x"]),
                "region_y": int(box["y"]), "region_width": int(box["width"]),
                "region_height": int(box["height"]),
                "node_id": match["node_id"], "similarity": float(match["similarity"]),
                "figure_label": match.get("figure_label"),
                "source_title": match.get("source_title"), "doi": match.get("doi"),
                "page": match.get("page"), "year": match.get("year"),
                "license": match.get("license"), "evidence_level": match.get("evidence_level"),
                "evidence_level_name": match.get("evidence_level_name"),
                "image_path": match.get("image_path"), "source_path": match.get("source_path")}

    @staticmethod
    def _content(match: Mapping[str, Any]) -> str:
        caption = (match.get("caption") or "").strip()
        if caption:
            return caption
        label = match.get("figure_label") or "Figure"
        return f"{label} (no caption) from {match.get('source_title') or 'unknown source'}"

    def to_langchain_documents(self) -> list[dict[str, Any]]:
        """One dict per (region, match) shaped like ``langchain_core.documents.Document``:
        ``{"id", "page_content", "metadata", "type": "Document"}``."""
        return [{"id": f"{r.id}-{m['node_id']}", "page_content": self._content(m),
                 "metadata": self._metadata(r, m), "type": "Document"}
                for r, m in self._items()]

    def to_llamaindex_nodes(self) -> list[dict[str, Any]]:
        """One dict per (region, match) shaped like ``llama_index.core.schema.TextNode``
        (``TextNode(**d)`` minus ``class_name``)."""
        out = []
        for r, m in self._items():
            meta = self._metadata(r, m)
            out.append({"id_": f"{r.id}-{m['node_id']}", "text": self._content(m),
                        "metadata": meta, "embedding": None,
                        "excluded_embed_metadata_keys": [k for k in _NO_EMBED if k in meta],
                        "excluded_llm_metadata_keys": ["node_id", "image_path", "source_path",
                                                       "slide_path"],
                        "relationships": {}, "mimetype": "text/plain",
                        "start_char_idx": None, "end_char_idx": None,
                        "metadata_template": "{key}: {value}", "metadata_separator": "\n",
                        "text_template": "{metadata_str}\n\n{content}",
                        "class_name": "TextNode"})
        return out

    def to_haystack_documents(self) -> list[dict[str, Any]]:
        """One dict per (region, match) shaped like ``haystack.Document`` (2.x):
        ``{"id", "content", "meta", "score", "embedding", "blob", "sparse_embedding"}``."""
        return [{"id": f"{r.id}-{m['node_id']}", "content": self._content(m),
                 "meta": self._metadata(r, m), "score": float(m["similarity"]),
                 "embedding": None, "blob": None, "sparse_embedding": None}
                for r, m in self._items()]

    def to_prompt_context(self, *, max_items: int | None = None) -> str:
        """A text block for an LLM prompt: unique figures ordered by evidence level (1 first,
        unknown last), then similarity, numbered ``[n]`` with caption and citation (title, DOI,
        page, figure label) and the regions they matched."""
        best: dict[str, tuple[Mapping[str, Any], list[str]]] = {}
        for region, match in self._items():
            entry = best.get(match["node_id"])
            if entry is None:
                best[match["node_id"]] = (match, [region.id])
            else:
                entry[1].append(region.id)
                if match["similarity"] > entry[0]["similarity"]:
                    best[match["node_id"]] = (match, entry[1])
        ordered = sorted(best.values(), key=lambda e: (
            9 if e[0].get("evidence_level") is None else int(e[0]["evidence_level"]),
            -float(e[0]["similarity"]), e[0]["node_id"]))
        if max_items is not None:
            ordered = ordered[:max_items]
        name = self.slide.get("name", "slide")
        lines = [f"Visual evidence retrieved by wsikit for slide \"{name}\""
                 + (" (SYNTHETIC demo data, not real patient or literature data)"
                    if self.synthetic else "") + "."]
        lines.append("Figures were found by image similarity to regions of the slide; "
                     "similarity is not a diagnosis. Cite sources by their number.")
        lines.append("Ordered by evidence level (1 guideline ... 8 expert opinion, unknown "
                     "last), then similarity.")
        if self.regions:   # regions by rank, with their scale and zoom chain
            lines.append("")
            lines.append("Regions of the slide by rank (1 = most salient; scale = window side "
                         "in patches):")
            for r in sorted(self.regions, key=lambda r: (r.rank is None, r.rank or 0)):
                zoom = f", inside {r.inside}" if r.inside else ""
                lines.append(f"  {r.id}: {r.scale}x{r.scale} patches, score "
                             f"{float(r.score):.3f}{zoom}")
        if not ordered:
            lines.append("")
            lines.append("No matching literature figures were found.")
            return "\n".join(lines) + "\n"
        for n, (m, regions) in enumerate(ordered, start=1):
            level = m.get("evidence_level")
            level_text = "unknown evidence level" if level is None else \
                f"evidence level {level}, {m.get('evidence_level_name')}"
            label = m.get("figure_label") or "Unlabelled figure"
            lines.append("")
            lines.append(f"[{n}] {label} ({level_text}; similarity "
                         f"{float(m['similarity']):.3f}; regions {', '.join(regions)})")
            caption = (m.get("caption") or "").strip() or "(no caption)"
            lines.append(f"    Caption: {caption}")
            cite = [m.get("source_title") or "Unknown source"]
            cite.append(f"DOI: {m['doi']}" if m.get("doi") else "DOI: none")
            if m.get("year"):
                cite.append(str(m["year"]))
            if m.get("page"):
                cite.append(f"page {m['page']}")
            cite.append(label)
            lines.append(f"    Source: {'. '.join(cite)}.")
        return "\n".join(lines) + "\n"


def regions_from_matches(regions: Sequence[Mapping[str, Any]]) -> tuple[EvidenceRegion, ...]:
    """Helper: region dicts (as in evidence.json) → :class:`EvidenceRegion` tuple."""
    return tuple(EvidenceRegion.from_dict(r) for r in regions)
