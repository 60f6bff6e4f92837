"""The ``evidence.json`` document (``wsikit.evidence/v1``) and its RAG adapters.

:class:`EvidenceResult` holds what ``wsikit select`` found: slide, models, selection
parameters, index, and per region its box, crop and literature matches. Adapters turn it into
plain dicts shaped like LangChain ``Document``, LlamaIndex ``ImageNode`` and Haystack
``Document`` objects (none of those libraries is imported; :mod:`wsikit.integrations` has the
real retrievers), and a text block for an LLM prompt.
The JSON Schema is ``wsikit/schemas/evidence_v1.json``.

Paths in the document are relative to its folder (crops, ``image_path``, ``slide.relpath``,
``index.relpath``); files outside the result (slide, index, figure images) are also recorded
absolute (``slide.path``, ``index.path``, ``image_abspath``). :meth:`EvidenceResult.slide_file`,
:meth:`~EvidenceResult.index_dir` and :meth:`~EvidenceResult.resolve` try the relative path
first, so a job folder moved with its slides keeps working (:mod:`wsikit.outputs.paths`).
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._atomic import write_json_atomic
from .._version import __version__
from ..errors import EvidenceError
from .nodes import evidence_level_name

__all__ = ["SCHEMA_PATH", "EvidenceRegion", "EvidenceResult", "load_schema"]

EVIDENCE_SCHEMA_ID = "wsikit.evidence/v1"
#: The JSON Schema of ``evidence.json`` shipped with wsikit (:func:`load_schema` reads it).
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "evidence_v1.json"

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
    uid: str | None = None
    below_floor: int | None = None
    #: 1 = most salient region; ``inside``: id of the region this one zooms into (or None)
    rank: int | None = None
    inside: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (keys this class does not know are kept in ``extra``)."""
        out: dict[str, Any] = {"id": self.id}
        if self.uid is not None:
            out["uid"] = self.uid
        out.update({"scale": int(self.scale), "score": float(self.score),
                    "box": dict(self.box), "grid_box": None if self.grid_box is None else
                    dict(self.grid_box), "crop": None if self.crop is None else dict(self.crop),
                    "matches": [dict(m) for m in self.matches]})
        if self.rank is not None:
            out["rank"] = int(self.rank)
            out["inside"] = self.inside
        if self.below_floor is not None:
            out["below_floor"] = int(self.below_floor)
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvidenceRegion:
        """Inverse of :meth:`to_dict`."""
        known = {"id", "uid", "scale", "score", "box", "grid_box", "crop", "matches",
                 "below_floor", "rank", "inside"}
        return cls(id=data["id"], scale=int(data["scale"]), score=float(data["score"]),
                   box=dict(data["box"]), crop=None if data.get("crop") is None else
                   dict(data["crop"]), matches=tuple(dict(m) for m in data.get("matches", ())),
                   grid_box=None if data.get("grid_box") is None else dict(data["grid_box"]),
                   uid=data.get("uid"), below_floor=data.get("below_floor"),
                   rank=None if data.get("rank") is None else int(data["rank"]),
                   inside=data.get("inside"),
                   extra={k: v for k, v in data.items() if k not in known})


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
    #: Folder of evidence.json (not serialised): relative image paths resolve against it.
    base_dir: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.created:
            now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            object.__setattr__(self, "created", now)
        object.__setattr__(self, "regions", tuple(
            r if isinstance(r, EvidenceRegion) else EvidenceRegion.from_dict(r)
            for r in self.regions))
        object.__setattr__(self, "empty_scales",
                           {str(k): str(v) for k, v in dict(self.empty_scales).items()})
        if self.base_dir is not None:
            object.__setattr__(self, "base_dir", Path(self.base_dir).resolve())

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
    def from_dict(cls, data: Mapping[str, Any], *, validate: bool = True,
                  base_dir: str | os.PathLike[str] | None = None) -> EvidenceResult:
        """Build from a dict (validated against the JSON Schema unless ``validate=False``);
        ``base_dir`` is the folder of the evidence.json it came from."""
        if validate:
            cls.validate_dict(data)
        return cls(slide=dict(data["slide"]), models=dict(data["models"]),
                   selection=dict(data["selection"]),
                   regions=tuple(EvidenceRegion.from_dict(r) for r in data["regions"]),
                   index=data.get("index"), empty_scales=dict(data.get("empty_scales", {})),
                   synthetic=bool(data.get("synthetic", False)), created=data["created"],
                   wsikit_version=data["wsikit_version"], schema=data["schema"],
                   base_dir=None if base_dir is None else Path(base_dir))

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
        errors = sorted(validator.iter_errors(data),
                        key=lambda e: [str(p) for p in e.absolute_path])
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
            return cls.from_dict(data, base_dir=path.parent)
        except EvidenceError as exc:
            raise EvidenceError(f"{path}: {exc}") from exc

    # ------------------------------------------------------------------ paths and ids
    @property
    def slide_id(self) -> str:
        """Stable id of the slide (``slide.id``, or derived for older documents)."""
        from .ids import slide_id

        return slide_id(self.slide)

    def region_uid(self, region: EvidenceRegion) -> str:
        """The region's id unique across slides (``region.uid`` or derived)."""
        from .ids import region_uid

        return region.uid or region_uid(self.slide_id, region.id, region.box)

    @property
    def output_name(self) -> str:
        """The name the output layout files this slide under (``select/<name>/``,
        ``contours_geojson/<name>.geojson``, ...): ``slide.output_name`` (a cohort's
        ``slide_id`` when it renamed the slide), else the result folder's name, else the
        slide's name."""
        name = self.slide.get("output_name")
        if isinstance(name, str) and name:
            return name
        return self.base_dir.name if self.base_dir is not None else str(self.slide.get("name"))

    def slide_file(self) -> Path | None:
        """The slide as an existing path: ``slide.relpath`` against the folder of
        evidence.json (a job moved with its slides), else ``slide.path``; ``None`` if neither
        exists. A relative ``slide.path`` (documents of earlier versions: relative to the
        working folder of that run) is also tried against the folders above the result."""
        from ..outputs.paths import resolve_path

        rel, path = self.slide.get("relpath"), self.slide.get("path")
        found = resolve_path(rel, path, self.base_dir)
        if found is None and isinstance(path, str) and path and not Path(path).is_absolute() \
                and self.base_dir is not None:
            for parent in self.base_dir.parents[:4]:
                if (parent / path).exists():
                    return parent / path
        return found

    def index_dir(self) -> Path | None:
        """The figure index folder as an existing path (``index.relpath``, then
        ``index.path``); ``None`` without an index or when neither exists."""
        from ..outputs.paths import resolve_path

        if self.index is None:
            return None
        found = resolve_path(self.index.get("relpath"), self.index.get("path"), self.base_dir)
        return found if found is not None and found.is_dir() else None

    def resolve(self, rel: str | None, absolute: str | None = None) -> Path | None:
        """An image of this document as an existing file: ``rel`` against the folder of
        evidence.json (:attr:`base_dir`, when known), else ``absolute``; ``None`` if neither
        exists."""
        from ..outputs.paths import resolve_image

        return resolve_image(rel, absolute, self.base_dir)

    def provenance(self) -> dict[str, Any]:
        """Which models produced regions and similarities (flat, for document metadata)."""
        from .adapters import provenance

        return provenance(self)

    # ------------------------------------------------------------------ adapters
    def to_langchain_documents(self) -> list[dict[str, Any]]:
        """One dict per (region, match) shaped like ``langchain_core.documents.Document``
        (``Document(**d)`` minus ``type``); see :mod:`wsikit.evidence.adapters`."""
        from .adapters import langchain_documents

        return langchain_documents(self)

    def to_llamaindex_nodes(self) -> list[dict[str, Any]]:
        """One dict per (region, match) shaped like ``llama_index.core.schema.ImageNode``
        (``ImageNode(**d)`` minus ``class_name``)."""
        from .adapters import llamaindex_nodes

        return llamaindex_nodes(self)

    def to_haystack_documents(self) -> list[dict[str, Any]]:
        """One dict per (region, match) shaped like ``haystack.Document``
        (``Document(**d)``); ``meta["file_path"]`` is the figure image."""
        from .adapters import haystack_documents

        return haystack_documents(self)

    def to_prompt_context(self, *, max_items: int | None = None) -> str:
        """A text block for an LLM prompt (see :func:`wsikit.evidence.adapters.prompt_context`)."""
        from .adapters import prompt_context

        return prompt_context(self, max_items=max_items)
