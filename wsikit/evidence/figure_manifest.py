"""Figure manifests: JSONL or CSV files listing figure images with caption and source fields.

One figure per line (JSONL) or row (CSV, header required). Columns / keys:

``image`` (required; path relative to the manifest file), ``caption``, ``figure_label``,
``source_title``, ``doi``, ``source_path``, ``page``, ``year``, ``license`` (a licence name,
URL or statement: normalised to one of :data:`wsikit.evidence.licence.LICENCES`, the text given
kept as ``license_source``), ``license_source``, ``journal``, ``pmid``, ``pmcid``,
``evidence_level`` (1–8, a level name such as ``textbook``, or ``unknown``/empty), ``kind``
(micrograph, photograph, chart, diagram or mixed: a reviewer's word that indexing keeps instead
of measuring it; empty = measure). A node's own ``kind_source``, ``parent_id``, ``panel`` and
``panel_box`` are read back as written, ``duplicate_of``
(the node id of the figure this row repeats: a figure bank's ``duplicates.jsonl``; such rows are
linked, not indexed).

``wsikit figures extract`` writes such a JSONL file next to the extracted images so a person can
review and edit it, then feed it to ``wsikit index build``. Every error names the file and the
line number.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._atomic import atomic_path
from .._hints import keyword
from ..errors import EvidenceError, ManifestError
from .kinds import FIGURE_KINDS
from .nodes import FigureNode, load_image, parse_evidence_level

__all__ = [
    "FigureManifestMerge",
    "merge_figure_manifest",
    "read_figure_manifest",
    "write_figure_manifest",
]

#: Keys a manifest row may have (``image`` is required).
FIGURE_MANIFEST_FIELDS = ("image", "caption", "figure_label", "source_title", "doi", "source_path",
                   "page", "year", "license", "evidence_level", "license_source", "journal",
                   "pmid", "pmcid", "kind", "duplicate_of")
#: Node fields a row may carry as a node wrote them (left out of a row when empty).
_NODE_FIELDS = ("kind_source", "parent_id", "panel", "panel_box")
#: Keys ``wsikit figures extract`` adds for the reviewer (read back, not part of a node).
REVIEW_FIELDS = ("bbox", "caption_page", "render", "dpi", "uncaptioned", "fig_id", "graphic",
                 "context", "evidence_basis")
_TEXT = ("caption", "figure_label", "source_title", "doi", "source_path", "license",
         "license_source", "journal", "pmid", "pmcid", "duplicate_of")
_IDS = ("pmid", "pmcid")  # may be written as JSON numbers
_INT = ("page", "year")
#: Plausible values of the integer fields (a year of 10**30 is a typo, not a date).
_INT_RANGE = {"page": (1, 1_000_000), "year": (1000, 2999)}


def _read_text(path: Path) -> str:
    """The manifest's text: UTF-8, with or without a byte-order mark; anything else refused."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ManifestError(f"manifest {path}: cannot read it ({exc.strerror or exc})") from exc
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ManifestError(f"{path}: the file is UTF-16; save it as UTF-8 (with or without "
                            "BOM) and try again")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ManifestError(f"{path}:{line}: byte {data[exc.start]:#04x} is not UTF-8 (the "
                            "file looks like Latin-1/Windows-1252); save it as UTF-8 and try "
                            "again") from exc


def _rows(path: Path) -> Iterable[tuple[int, Mapping[str, Any]]]:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        text = _read_text(path)
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ManifestError(f"{path}:{lineno}: invalid JSON ({exc.msg} at column "
                                    f"{exc.colno}); each line must be one JSON object"
                                    ) from exc
            if not isinstance(row, dict):
                raise ManifestError(f"{path}:{lineno}: expected a JSON object, got "
                                    f"{type(row).__name__}; each line must be one JSON object "
                                    "(not an array)")
            yield lineno, row
    elif suffix in (".csv", ".tsv"):
        import io

        delimiter = "\t" if suffix == ".tsv" else ","
        reader = csv.DictReader(io.StringIO(_read_text(path), newline=""),
                                delimiter=delimiter)
        header = list(reader.fieldnames or [])
        if "image" not in header:
            raise ManifestError(f"{path}:1: the CSV header must contain an 'image' column "
                                f"(got {header})")
        dupes = sorted({c for c in header if c and header.count(c) > 1})
        if dupes:  # DictReader would keep the last column of a name, silently
            raise ManifestError(f"{path}:1: duplicate column(s) {dupes} in the header; give "
                                "each column once")
        for row in reader:
            surplus = row.pop(None, None)
            if surplus is not None and any(str(c).strip() for c in surplus):
                raise ManifestError(
                    f"{path}:{reader.line_num}: {len(header) + len(surplus)} cells but the "
                    f"header has {len(header)} columns (extra: "
                    f"{', '.join(repr(str(c)[:40]) for c in surplus[:3])}); quote values "
                    f"that contain '{delimiter}', or add the column to the header")
            unnamed = [i + 1 for i, c in enumerate(header)
                       if not c.strip() and str(row.get(c) or "").strip()]
            if unnamed:
                raise ManifestError(f"{path}:{reader.line_num}: column {unnamed[0]} has a "
                                    "value but no name in the header; name it or empty it")
            for c in header:  # a trailing delimiter: an unnamed, empty column, ignored
                if not c.strip():
                    row.pop(c, None)
            yield reader.line_num, row
    else:
        raise ManifestError(f"{path}: unknown manifest type {suffix!r}; use .jsonl or .csv")


def _parse_row(row: Mapping[str, Any], *, where: str, base: Path,
               default_level: int | None, load: bool, allow_outside: bool = False
               ) -> FigureNode:
    unknown = (set(row) - set(FIGURE_MANIFEST_FIELDS) - set(_NODE_FIELDS)
               - {"node_id", "content_hash", "evidence_level_name"} - set(REVIEW_FIELDS))
    if unknown:
        raise ManifestError(f"{where}: unknown field(s) {sorted(unknown)}; allowed: "
                            f"{', '.join(FIGURE_MANIFEST_FIELDS)}")
    image = row.get("image")
    if not isinstance(image, str) or not image.strip():
        raise ManifestError(f"{where}: missing 'image' (path of the figure image relative to "
                            "the manifest)")
    image_path = (base / image).resolve()
    if not allow_outside and not image_path.is_relative_to(base):
        raise ManifestError(f"{where}: image {image!r} lies outside the manifest's folder "
                            f"{base}; copy the image into that folder (or a sub-folder) and "
                            "give its path relative to the manifest (or pass allow_outside=True)")
    if not image_path.is_file():
        raise ManifestError(f"{where}: image file {image_path} does not exist; fix the "
                            "'image' path (relative to the manifest file)")
    kwargs: dict[str, Any] = {}
    for key in _TEXT:
        value = row.get(key)
        if key in _IDS and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if value is None or (isinstance(value, str) and not value.strip()):
            kwargs[key] = "" if key == "caption" else None
        elif not isinstance(value, str):
            raise ManifestError(f"{where}: {key} {value!r} is a {type(value).__name__}, not "
                                f"text; write it as a JSON string (e.g. \"{key}\": \"...\")")
        else:
            kwargs[key] = value.strip()
    for key in _INT:
        value = row.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            kwargs[key] = None
            continue
        try:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            kwargs[key] = int(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ManifestError(f"{where}: {key} {value!r} is not an integer") from exc
        low, high = _INT_RANGE[key]
        if not low <= kwargs[key] <= high:
            raise ManifestError(f"{where}: {key} {value!r} is outside {low}–{high}; fix the "
                                "value or leave it empty")
    raw_level = row.get("evidence_level", "")
    if raw_level == "" or (raw_level is None and "evidence_level" not in row):
        level = default_level
    else:
        try:
            level = parse_evidence_level(raw_level)
        except ValueError as exc:
            raise ManifestError(f"{where}: {exc}") from exc
    kwargs["evidence_level"] = level
    kwargs.update(_node_fields(row, where))
    if not load:
        return FigureNode(node_id=str(row.get("node_id", "")), image=image_path,
                          content_hash=str(row.get("content_hash", "")), **kwargs)
    try:
        return FigureNode.from_image(image_path, image=load_image(image_path), **kwargs)
    except EvidenceError as exc:
        raise ManifestError(f"{where}: {exc}") from exc


def _node_fields(row: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``kind`` (checked), and the node fields a written node carries (empty = absent)."""
    out: dict[str, Any] = {}
    kind = row.get("kind")
    if kind not in (None, ""):
        if not isinstance(kind, str) or kind.strip().lower() not in FIGURE_KINDS:
            raise ManifestError(f"{where}: kind {kind!r} is not one of "
                                f"{', '.join(FIGURE_KINDS)}; fix it or leave it empty (then "
                                "the kind is measured)")
        out["kind"] = kind.strip().lower()
    for key in ("kind_source", "parent_id", "panel"):
        value = row.get(key)
        if value not in (None, ""):
            if not isinstance(value, str):
                raise ManifestError(f"{where}: {key} {value!r} is a {type(value).__name__}, "
                                    "not text")
            out[key] = value.strip()
    box = row.get("panel_box")
    if box not in (None, ""):
        if isinstance(box, str):
            try:
                box = json.loads(box)
            except json.JSONDecodeError:
                box = None
        if not (isinstance(box, list) and len(box) == 4
                and all(isinstance(v, int) and not isinstance(v, bool) for v in box)):
            raise ManifestError(f"{where}: panel_box {row.get('panel_box')!r} is not four "
                                "integers [x0, y0, x1, y1]")
        out["panel_box"] = tuple(box)
    return out


def read_figure_manifest(path: str | os.PathLike[str], *, evidence_level: int | str | None = None,
                  load_images: bool = True, allow_outside: bool = False) -> list[FigureNode]:
    """Read a JSONL/CSV figure manifest into :class:`FigureNode` objects.

    Parameters
    ----------
    path
        ``.jsonl`` (one JSON object per line) or ``.csv`` (header row) file.
    evidence_level
        Level for rows that do not give one (1–8, a name, or ``None`` for unknown).
    load_images
        Decode each image to compute ``content_hash`` and ``node_id`` (default). ``False``
        only checks that the files exist.
    allow_outside
        Accept images outside the manifest's folder (``../`` or absolute paths). Off by
        default: a manifest from elsewhere must not pull arbitrary files into an index.

    Raises
    ------
    ManifestError
        Naming the file and line: bad JSON, missing or unreadable image, bad evidence level,
        non-integer page/year, unknown field.
    """
    path = Path(path)
    if not path.is_file():
        raise ManifestError(f"manifest {path} does not exist")
    try:
        default = parse_evidence_level(evidence_level)
    except ValueError as exc:
        raise ManifestError(f"{keyword('evidence_level')} for {path}: {exc}") from exc
    base = path.resolve().parent
    nodes = [_parse_row(row, where=f"{path}:{lineno}", base=base, default_level=default,
                        load=load_images, allow_outside=allow_outside)
             for lineno, row in _rows(path)]
    if not nodes:
        raise ManifestError(f"{path}: no figures listed (need one JSON object per line or "
                            "one CSV row per figure)")
    return nodes


def write_figure_manifest(nodes: Iterable[FigureNode], path: str | os.PathLike[str], *,
                          review: Mapping[str, Mapping[str, Any]] | None = None) -> Path:
    """Write nodes as a JSONL manifest (atomically); image and source paths relative to its
    folder. ``review`` adds :data:`REVIEW_FIELDS` to the rows of the node ids it names."""
    path = Path(path)
    base = path.resolve().parent
    lines = []
    for node in nodes:
        lines.append(json.dumps(_node_row(node, base, review), ensure_ascii=False))
    with atomic_path(path) as tmp:
        tmp.write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8")
    return path


@dataclass(frozen=True)
class FigureManifestMerge:
    """What :func:`merge_figure_manifest` did: the file, rows kept from it, rows appended."""

    path: Path
    kept: int
    added: int


def _relative(path: str | os.PathLike[str], base: Path) -> str:
    try:
        return os.path.relpath(Path(path).resolve(), base)
    except ValueError:  # other drive on Windows
        return str(Path(path).resolve())


def _node_row(node: FigureNode, base: Path,
              review: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    row = node.to_dict()
    for key in ("kind",) + _NODE_FIELDS:  # measured at indexing: absent until then
        if row.get(key) is None:
            row.pop(key, None)
    row["image"] = _relative(node.image, base)
    if row.get("source_path") and Path(row["source_path"]).is_absolute():
        row["source_path"] = _relative(row["source_path"], base)  # the folder moves as one
    if review and node.node_id in review:
        row.update({k: v for k, v in review[node.node_id].items() if k in REVIEW_FIELDS})
    return row


def merge_figure_manifest(nodes: Iterable[FigureNode], path: str | os.PathLike[str], *,
                          review: Mapping[str, Mapping[str, Any]] | None = None
                          ) -> FigureManifestMerge:
    """Add ``nodes`` to the JSONL manifest ``path`` without touching the rows already there.

    ``wsikit figures extract`` writes a manifest for a person to review and edit; extracting
    again into the same folder must never replace that work. Rows already in the file are
    kept byte for byte (edited captions, levels, deleted rows stay as the reviewer left them);
    a node whose ``node_id`` the file already lists is not added again; new figures are
    appended (with ``review`` fields as in :func:`write_figure_manifest`). A file that cannot
    be read as a manifest is refused, never overwritten.

    Raises
    ------
    ManifestError
        The existing file is not a readable JSONL manifest (names the file and line).
    """
    path = Path(path)
    base = path.resolve().parent
    old_lines: list[str] = []
    known: set[str] = set()
    if path.exists():
        if not path.is_file():
            raise ManifestError(f"{path} exists and is not a file; choose another folder "
                                f"({keyword('out')})")
        text = _read_text(path)
        for lineno, line in enumerate(text.splitlines(), start=1):
            old_lines.append(line)
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ManifestError(
                    f"{path}:{lineno}: invalid JSON ({exc.msg}); this manifest is kept as it "
                    "is: fix the line, or extract into another folder "
                    f"({keyword('out')})") from exc
            if isinstance(row, dict) and row.get("node_id"):
                known.add(str(row["node_id"]))
    new_lines = []
    for node in nodes:
        if node.node_id in known:
            continue
        known.add(node.node_id)
        new_lines.append(json.dumps(_node_row(node, base, review), ensure_ascii=False))
    lines = old_lines + new_lines
    if new_lines or not path.exists():
        with atomic_path(path) as tmp:
            tmp.write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8")
    kept = sum(1 for line in old_lines if line.strip() and not line.lstrip().startswith("#"))
    return FigureManifestMerge(path=path, kept=kept, added=len(new_lines))
