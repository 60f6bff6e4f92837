"""RAG adapters of an :class:`~wsikit.evidence.EvidenceResult`, as plain dicts.

One document per (region, matched figure), shaped like the three frameworks' own classes so
``Document(**d)`` / ``ImageNode(**d)`` works, without importing them (the real retrievers are
in :mod:`wsikit.integrations`):

* id ``<slide id>:<region>:<box>:<node id>``: unique across slides, stable across reruns;
* the caption as content, as plain text (markup and control characters removed, see
  :mod:`wsikit.evidence.sanitise`; evidence.json keeps it verbatim); the metadata a framework
  shows an LLM or an embedder (:data:`LLM_METADATA_KEYS`, :data:`EMBED_METADATA_KEYS`: label,
  title, licence, slide name, ...) cleaned the same way, one line each, so a title cannot
  start a ``System:`` line in LlamaIndex's ``{key}: {value}`` text; the figure
  image as an absolute, existing path (``image_path``, Haystack ``file_path``) with its mime
  type;
* DOI, source title, journal, PubMed ids, figure label, page, year, licence (normalised, as
  ``license``, and where it was read, as ``license_source``), evidence level and name;
* ``score`` = the cosine ``similarity``, its ``similarity_percentile`` against the index's
  background of unrelated figures, and ``score_type`` saying what the number is;
* provenance: which encoder embedded crop and figure, which attention chose the region, and
  whether either is a weight-free heuristic.

Metadata values are flat scalars (vector stores reject nested values).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .ids import document_id
from .matching import similarity_provenance
from .sanitise import CAPTION_CHARS, clean_text, quoted, valid_doi

if TYPE_CHECKING:  # pragma: no cover
    from .result import EvidenceRegion, EvidenceResult

__all__ = [
    "EMBED_METADATA_KEYS",
    "LLM_METADATA_KEYS",
    "clean_shown",
    "excluded_keys",
    "haystack_documents",
    "langchain_documents",
    "llamaindex_nodes",
    "prompt_context",
    "provenance",
]

#: Metadata LlamaIndex may embed: what the figure shows and where it is from (no layout).
EMBED_METADATA_KEYS = ("figure_label", "source_title", "evidence_level_name", "year")
#: Metadata an LLM sees with each node: citation, evidence, score and provenance.
LLM_METADATA_KEYS = ("figure_label", "source_title", "doi", "page", "year", "license",
                     "evidence_level", "evidence_level_name", "similarity",
                     "similarity_percentile", "score_type", "encoder", "encoder_heuristic",
                     "attention", "attention_heuristic", "slide_name", "region_id", "synthetic")

#: Further text metadata cleaned like the shown keys (an app may display them).
CLEANED_METADATA_KEYS = ("license_source", "journal", "pmid", "pmcid")

#: Longest shown metadata value (characters).
SHOWN_CHARS = 300


def clean_shown(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with each string value an LLM or embedder is shown made one plain line
    (:func:`~wsikit.evidence.sanitise.clean_text`, at most :data:`SHOWN_CHARS`); in place."""
    for key in {*LLM_METADATA_KEYS, *EMBED_METADATA_KEYS, *CLEANED_METADATA_KEYS}:
        if isinstance(meta.get(key), str):
            meta[key] = clean_text(meta[key], limit=SHOWN_CHARS) or None
    return meta


def _model(models: Mapping[str, Any], role: str) -> Mapping[str, Any]:
    m = models.get(role)
    return m if isinstance(m, Mapping) else {}


def provenance(result: EvidenceResult) -> dict[str, Any]:
    """Flat provenance of a result: encoder (crop/figure), attention, patch encoder, their
    labels, whether each is a weight-free heuristic, and what the two scores are."""
    models = result.models
    crop, att, patch = (_model(models, r) for r in ("crop_encoder", "attention", "patch_encoder"))
    if not crop and result.index:  # older documents: the index's encoder
        crop = {"name": result.index.get("encoder"), "label": result.index.get("encoder_label"),
                "heuristic": result.index.get("encoder_heuristic")}
    att_kind = "weight-free heuristic" if att.get("heuristic") else "learned model"
    return {
        "encoder": crop.get("name"), "encoder_label": crop.get("label"),
        "encoder_heuristic": bool(crop.get("heuristic")) if crop else None,
        "attention": att.get("name"), "attention_label": att.get("label"),
        "attention_heuristic": bool(att.get("heuristic")) if att else None,
        "patch_encoder": patch.get("name"), "patch_encoder_label": patch.get("label"),
        "patch_encoder_heuristic": bool(patch.get("heuristic")) if patch else None,
        "heuristic": any(bool(m.get("heuristic")) for m in (crop, att, patch)),
        "score_type": similarity_provenance(crop or None),
        "region_score_type": (f"attention from {att.get('name')} ({att_kind}), mean over the "
                              "window" if att else "region score (source not recorded)"),
    }


def _image(result: EvidenceResult, rel: str | None, absolute: str | None) -> str | None:
    found = result.resolve(rel, absolute)
    return str(found) if found is not None else (absolute or rel)


def _slide_path(result: EvidenceResult) -> str | None:
    """The slide as an existing absolute path (``slide.relpath`` first), else as recorded."""
    found = result.slide_file()
    return str(found) if found is not None else result.slide.get("path")


def document_metadata(result: EvidenceResult, region: EvidenceRegion, match: Mapping[str, Any],
                      prov: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The flat metadata shared by every adapter for one (region, match)."""
    prov = provenance(result) if prov is None else prov
    box, crop = region.box, region.crop or {}
    uid = result.region_uid(region)
    doi = match.get("doi")
    link = valid_doi(doi)  # only a real DOI becomes a link (never "javascript:...")
    return clean_shown({
        "id": document_id(uid, match["node_id"]), "producer": "wsikit",
        "wsikit_version": result.wsikit_version, "schema": result.schema,
        "synthetic": bool(result.synthetic),
        "slide_id": result.slide_id, "slide_name": result.slide.get("name"),
        "slide_path": _slide_path(result),
        "region_id": region.id, "region_uid": uid, "region_scale": int(region.scale),
        "region_score": float(region.score), "region_score_type": prov["region_score_type"],
        "region_x": int(box["x"]), "region_y": int(box["y"]),
        "region_width": int(box["width"]), "region_height": int(box["height"]),
        "crop_path": _image(result, crop.get("path"), crop.get("abspath")) if crop else None,
        "crop_mpp": crop.get("mpp"),
        "node_id": match["node_id"], "figure_label": match.get("figure_label"),
        "panel": match.get("panel"), "parent_id": match.get("parent_id"),
        "kind": match.get("kind"),
        "source_title": match.get("source_title"), "doi": doi,
        "doi_url": f"https://doi.org/{quote(link, safe='/:;()._-')}" if link else None,
        "page": match.get("page"), "year": match.get("year"), "license": match.get("license"),
        "license_source": match.get("license_source"), "journal": match.get("journal"),
        "pmid": match.get("pmid"), "pmcid": match.get("pmcid"),
        "evidence_level": match.get("evidence_level"),
        "evidence_level_name": match.get("evidence_level_name"),
        "image_path": _image(result, match.get("image_path"), match.get("image_abspath")),
        "mime_type": "image/png", "source_path": match.get("source_path"),
        "similarity": float(match["similarity"]),
        "similarity_percentile": match.get("percentile"),
        "score": float(match["similarity"]),
        **{k: v for k, v in prov.items() if k != "region_score_type"},
    })


def _content(match: Mapping[str, Any]) -> str:
    caption = clean_text(match.get("caption"))  # an LLM reads it: no markup (sanitise.py)
    if caption:
        return caption
    label = clean_text(match.get("figure_label")) or "Figure"
    source = clean_text(match.get("source_title")) or "unknown source"
    return f"{label} (no caption) from {source}"


def _items(result: EvidenceResult) -> list[tuple[Any, Mapping[str, Any], dict[str, Any]]]:
    prov = provenance(result)
    return [(r, m, document_metadata(result, r, m, prov))
            for r in result.regions for m in r.matches]


def langchain_documents(result: EvidenceResult) -> list[dict[str, Any]]:
    """Dicts for ``langchain_core.documents.Document(**d)`` (drop ``type`` first or not: it
    is the class's own field). ``metadata["source"]`` is the DOI URL, else the source file."""
    out = []
    for _, m, meta in _items(result):
        meta["source"] = meta["doi_url"] or meta["source_path"] or meta["source_title"]
        out.append({"id": meta["id"], "page_content": _content(m), "metadata": meta,
                    "type": "Document"})
    return out


def excluded_keys(meta: Mapping[str, Any], shown: tuple[str, ...]) -> list[str]:
    """Metadata keys hidden from a text: all but ``shown``, and those without a value."""
    return [k for k, v in meta.items() if k not in shown or v is None]


def llamaindex_nodes(result: EvidenceResult) -> list[dict[str, Any]]:
    """Dicts for ``llama_index.core.schema.ImageNode(**d)`` (minus ``class_name``):
    ``image_path`` set, layout/id/path fields excluded from the embedded and the LLM text."""
    out = []
    for _, m, meta in _items(result):
        meta["file_path"] = meta["image_path"]
        out.append({"id_": meta["id"], "text": _content(m), "metadata": meta, "embedding": None,
                    "image": None, "image_path": meta["image_path"], "image_url": None,
                    "image_mimetype": meta["mime_type"], "text_embedding": None,
                    "excluded_embed_metadata_keys": excluded_keys(meta, EMBED_METADATA_KEYS),
                    "excluded_llm_metadata_keys": excluded_keys(meta, LLM_METADATA_KEYS),
                    "relationships": {}, "mimetype": "text/plain",
                    "start_char_idx": None, "end_char_idx": None,
                    "metadata_template": "{key}: {value}", "metadata_separator": "\n",
                    "text_template": "{metadata_str}\n\n{content}", "class_name": "ImageNode"})
    return out


def haystack_documents(result: EvidenceResult) -> list[dict[str, Any]]:
    """Dicts for ``haystack.Document(**d)`` (2.x/3.x): ``meta["file_path"]`` is the figure
    image; the similarity is also kept in ``meta["wsikit_similarity"]`` because Haystack
    rankers and BM25 retrievers overwrite ``score``."""
    out = []
    for _, m, meta in _items(result):
        meta["file_path"] = meta["image_path"]
        meta["wsikit_similarity"] = meta["similarity"]
        out.append({"id": meta["id"], "content": _content(m), "meta": meta,
                    "score": meta["similarity"], "embedding": None, "blob": None,
                    "sparse_embedding": None})
    return out


# ---------------------------------------------------------------------- prompt context
def _floor_text(result: EvidenceResult) -> str | None:
    floor = (result.selection or {}).get("min_similarity")
    if not isinstance(floor, Mapping):
        return None
    if floor.get("kind") == "percentile":
        sim = floor.get("similarity")
        at = "" if sim is None else f", cosine {float(sim):.3f}"
        return (f"the {float(floor['percentile']):g}th percentile of similarities between "
                f"unrelated figures of the index ({at.removeprefix(', ')})" if at else
                f"the {float(floor['percentile']):g}th percentile of similarities between "
                "unrelated figures of the index")
    if floor.get("kind") == "similarity":
        return f"cosine similarity {float(floor['similarity']):.3f}"
    return None


def _who(prov: Mapping[str, Any], role: str) -> str:
    if not prov.get(role):
        return f"unknown {role}"
    kind = "weight-free heuristic" if prov.get(f"{role}_heuristic") else "learned model"
    return f"{prov[role]} ({kind})"


def _pct(p: Any) -> str:
    if p is None:
        return "percentile unknown (uncalibrated index)"
    return f"higher than {float(p):.1f}% of unrelated-figure pairs"


def prompt_context(result: EvidenceResult, *, max_items: int | None = None) -> str:
    """A text block for an LLM prompt.

    Unique figures that passed the similarity floor, ordered by evidence level (1 guideline
    first, unknown last), then similarity; each numbered ``[n]`` with similarity, background
    percentile, caption, citation, the regions it matched, and the provenance of the numbers.
    Captions, labels and titles are shown cleaned (no markup or control characters, one line);
    each caption as a quoted line ``> ...`` of at most
    :data:`~wsikit.evidence.sanitise.CAPTION_CHARS` characters, so text in it cannot pose as
    a prompt's structure (``System:``, ``###``, ``</caption>``).
    Says plainly when no index was given and when no figure passed the floor.
    """
    ordered = _best_matches(result, max_items)
    prov = provenance(result)
    name = result.slide.get("name", "slide")
    lines = [f"Visual evidence retrieved by wsikit for slide \"{name}\""
             + (" (SYNTHETIC demo data, not real patient or literature data)"
                if result.synthetic else "") + "."]
    question = clean_text(result.selection.get("question"), limit=CAPTION_CHARS)
    if question:  # wsikit select --question (fusion.py)
        lines.append(f"Question: {question}")
        lines.append("Figures are ranked by reciprocal rank fusion of image similarity and "
                     "caption relevance (BM25) to the question; the similarity floor still "
                     "applies to the image similarity.")
    region_src = prov["region_score_type"]
    lines.append(f"Regions were chosen by {region_src}.")
    if prov["encoder"]:
        lines.append(f"Figures were found by image similarity to those regions: "
                     f"{prov['score_type']}. Similarity is not a diagnosis."
                     + (" These numbers come from weight-free heuristics, not a trained "
                        "model's judgement." if prov["heuristic"] else ""))
    if result.regions:  # regions by rank, with their scale and zoom chain
        lines.append("")
        lines.append("Regions of the slide by rank (1 = most salient; scale = window side in "
                     "patches):")
        for r in sorted(result.regions, key=lambda r: (r.rank is None, r.rank or 0)):
            zoom = f", inside {r.inside}" if r.inside else ""
            lines.append(f"  {r.id}: {r.scale}x{r.scale} patches, score "
                         f"{float(r.score):.3f}{zoom}")
    floor = _floor_text(result)
    if result.index is None:
        lines += ["", "No figure index was given, so no literature figures were searched "
                  "(run wsikit select with --index INDEX_DIR)."]
        return "\n".join(lines) + "\n"
    dropped = sum(r.below_floor or 0 for r in result.regions)
    if floor:
        lines.append(f"Only matches at least as similar as {floor} are listed"
                     + (f" ({dropped} weaker candidate match(es) were dropped)." if dropped
                        else "."))
    if not ordered:
        lines.append("")
        lines.append("No figure passed the similarity floor: the index was searched, but no "
                     f"figure was at least as similar to a region as {floor or 'the floor'}.")
        return "\n".join(lines) + "\n"
    lines.append("Ordered by evidence level (1 guideline ... 8 expert opinion, unknown last), "
                 "because stronger evidence should weigh more; within a level by similarity. "
                 "Cite sources by their number.")
    for n, (m, regions) in enumerate(ordered, start=1):
        lines += _figure_lines(n, m, regions, prov)
    return "\n".join(lines) + "\n"


def _best_matches(result: EvidenceResult, max_items: int | None
                  ) -> list[tuple[Mapping[str, Any], list[str]]]:
    """Each figure matched once, at its best similarity, with the regions it matched; by
    evidence level (unknown last), then similarity; at most ``max_items``."""
    best: dict[str, tuple[Mapping[str, Any], list[str]]] = {}
    for region in result.regions:
        for match in region.matches:
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
    return ordered if max_items is None else ordered[:max_items]


def _figure_lines(n: int, m: Mapping[str, Any], regions: list[str],
                  prov: Mapping[str, Any]) -> list[str]:
    """The lines of figure ``[n]`` of :func:`prompt_context`: label, caption, source,
    provenance."""
    lines: list[str] = []
    level = m.get("evidence_level")
    level_text = "unknown evidence level" if level is None else \
        f"evidence level {clean_text(level)}, {clean_text(m.get('evidence_level_name'))}"
    label = clean_text(m.get("figure_label"), limit=200) or "Unlabelled figure"
    if clean_text(m.get("panel")):
        label += f", panel {clean_text(m.get('panel'), limit=20)}"
    lines.append("")
    lines.append(f"[{n}] {label} ({level_text}; similarity {float(m['similarity']):.3f}, "
                 f"{_pct(m.get('percentile'))}; regions {', '.join(regions)})")
    # the caption is quoted data, never instructions: cleaned, one line, capped
    caption = quoted(m.get("caption")) if clean_text(m.get("caption")) else "(no caption)"
    lines.append(f"    Caption: {caption}")
    # every field is shown as plain text: no markup, links or images (sanitise.py)
    cite = [clean_text(m.get("source_title"), limit=300) or "Unknown source"]
    doi = clean_text(m.get("doi"), limit=200)
    cite.append(f"DOI: {doi}" if doi else "DOI: none")
    if clean_text(m.get("year")):
        cite.append(clean_text(m["year"], limit=20))
    if clean_text(m.get("page")):
        cite.append(f"page {clean_text(m['page'], limit=20)}")
    cite.append(label)
    if clean_text(m.get("license")):
        cite.append(f"licence {clean_text(m['license'], limit=200)}")
    lines.append(f"    Source: {'. '.join(cite)}.")
    lines.append(f"    Provenance: similarity by {_who(prov, 'encoder')}; region by "
                 f"{_who(prov, 'attention')}.")
    return lines
