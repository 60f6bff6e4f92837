"""The figure-index commands as Python functions: what ``wsikit figures extract`` and
``wsikit index build|add|calibrate|info|query|tower`` run, with the same names and options.

>>> from wsikit.evidence import index_build, index_query
>>> index = index_build(["papers/a.pdf", "figs.jsonl"], "idx",      # doctest: +SKIP
...                     encoder="heuristic")
>>> index_query("idx", "crop.png", k=5)                               # doctest: +SKIP

Each takes paths and encoder names (the objects behind them are :class:`FigureIndex`,
:func:`~wsikit.evidence.fusion.search` and :func:`~wsikit.models.create_encoder`).
"""

from __future__ import annotations

import logging
import os
import tempfile
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import EvidenceError, WeightsError
from ..models.hub import WeightsArg, explicit_weights
from .figure_manifest import merge_figure_manifest, read_figure_manifest
from .index import FigureIndex, Match
from .jats import extract_jats, extract_jats_figures, is_jats_source
from .kinds import parse_kinds
from .nodes import FigureNode, load_image
from .pdf import extract_pdf_figures, pdf_figure_nodes, read_pdf_figures

if TYPE_CHECKING:
    from ._index_rows import AddReport
    from .calibration import Background
    from .fusion import FusedMatch

__all__ = [
    "figures_extract",
    "index_add",
    "index_build",
    "index_calibrate",
    "index_info",
    "index_query",
    "index_search",
    "index_tower",
    "query_encoder",
    "update_towers",
]

log = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]


def load_sources(sources: Sequence[PathLike], work_dir: PathLike, *,
                 evidence_level: int | str | None = None, min_size: int = 100
                 ) -> list[FigureNode]:
    """Figure nodes from manifests (``.jsonl``/``.csv``), PDFs and JATS articles, package
    folders and archives (extracted to ``work_dir``; figures whose graphic is missing are
    warned about, the others kept).

    A PDF or article without any figure is named in a warning, or, when no source has one,
    in the error.

    Raises
    ------
    EvidenceError
        Unknown source type or missing file (ManifestError for bad manifests), or no figure
        in any source (each named with why).
    """
    nodes: list[FigureNode] = []
    empty: list[str] = []
    for i, src in enumerate(sources):
        path = Path(src)
        if not path.exists():
            raise EvidenceError(f"source {path} does not exist")
        suffix = path.suffix.lower()
        if suffix == ".pdf":
            found = extract_pdf_figures(path, Path(work_dir) / f"pdf{i}", min_size=min_size,
                                        evidence_level=evidence_level)
        elif suffix in (".jsonl", ".ndjson", ".csv", ".tsv"):
            found = read_figure_manifest(path, evidence_level=evidence_level)
        elif is_jats_source(path):
            found = extract_jats_figures(path, Path(work_dir) / f"jats{i}",
                                         evidence_level=evidence_level)
        else:
            raise EvidenceError(f"source {path}: unknown type {suffix!r}; {_SOURCE_TYPES}")
        if not found:
            empty.append(no_figures_found(path, min_size=min_size))
        nodes += found
    if not nodes:
        raise EvidenceError("no figures to index: " + "; ".join(empty))
    for why in empty:
        warnings.warn(f"{why}; the other sources' figures are used", stacklevel=2)
    repeats = sum(1 for n in nodes if n.duplicate_of)
    if repeats:  # a bank's duplicates.jsonl: the same figures as its manifest's, linked
        log.info("%d figure(s) repeat another one (duplicate_of): linked, not indexed", repeats)
    return [n for n in nodes if not n.duplicate_of]


def no_figures_found(path: PathLike, *, min_size: int = 100) -> str:
    """Why the source ``path`` gave no figure, and what to try (for messages)."""
    why, fix = _no_figures(path, min_size=min_size)
    return f"{path}: {why} ({fix})"


def _no_figures(path: PathLike, *, min_size: int) -> tuple[str, str]:
    """``(why the source gave no figure, what to try)``."""
    path = Path(path)
    if path.suffix.lower() == ".pdf":
        return (f"no captioned figure of at least {min_size} px found",
                "a figure is found by its caption, 'Figure 1'/'Fig. 1'; 'wsikit figures "
                f"extract {path} --out DIR --uncaptioned' also keeps graphics without one, "
                "then index DIR/manifest.jsonl")
    return ("the article lists no figure with a graphic (<fig> with <graphic>)",
            "check that it is the full text, not an abstract")


_SOURCE_TYPES = ("give PDFs, JATS articles (.nxml/.xml, PMC package folders or .tar.gz) or "
                 "figure manifests (.jsonl/.csv, e.g. from 'wsikit figures extract')")


def _check_sources(sources: Sequence[PathLike]) -> None:
    """Refuse a missing source or one of an unknown type, all checked before anything is
    written (no half-extracted output for a typo in the last)."""
    if not sources:
        raise EvidenceError("no PDFs or JATS articles given")
    for src in sources:
        path = Path(src)
        if not path.exists():
            raise EvidenceError(f"source {src} does not exist; check the path")
        if not is_jats_source(path) and (not path.is_file() or path.suffix.lower() != ".pdf"):
            raise EvidenceError(f"source {src}: unknown type {path.suffix.lower()!r}; "
                                "give PDFs or JATS articles (.nxml/.xml, PMC package folders "
                                "or .tar.gz)")


def figures_extract(sources: Sequence[PathLike], out: PathLike, *,
                    evidence_level: int | str | None = None, min_size: int = 100,
                    uncaptioned: bool = False,
                    on_source: Callable[[str, int, str | None], None] | None = None) -> Path:
    """Extract figures + captions from PDFs and JATS articles (``.nxml``/``.xml``, PubMed
    Central package folders and ``.tar.gz`` packages) into ``out/images`` and write
    ``out/manifest.jsonl`` (for review/editing, then ``wsikit index build``); returns it.

    An existing ``out/manifest.jsonl`` is never replaced: its rows are kept as reviewed and
    only figures it does not list yet are appended (:func:`wsikit.evidence.merge_figure_manifest`).
    Each row also carries what a reviewer needs: for a PDF figure its box, caption page and
    how its pixels were made; for a JATS figure its XML id, graphic file and where the
    evidence level was read. ``uncaptioned`` keeps PDF graphics without a caption (caption
    ``""``). ``evidence_level`` is the level of sources that do not give one (a JATS
    article's type may: :func:`wsikit.evidence.jats.evidence_level_of`). ``on_source(source,
    figures, note)`` is called after each source with its number of figures and, when it has
    none or could not be read, why (``wsikit figures extract`` prints one line per document).

    Raises
    ------
    EvidenceError
        A source is missing or of an unknown type (checked before anything is written), or
        some could not be read (encrypted or damaged PDFs, unsafe XML, figures whose graphic
        is not in their package): the others are extracted and listed in the manifest, and
        the error names each skipped source or figure with its reason.
    """
    _check_sources(sources)
    nodes: list[FigureNode] = []
    review: dict[str, dict[str, object]] = {}
    failed: list[str] = []
    problems: list[str] = []
    def report(src: PathLike, found: list[FigureNode], note: str | None = None) -> None:
        if note is None and not found:
            why, _ = _no_figures(src, min_size=min_size)
            pdf = Path(src).suffix.lower() == ".pdf"
            note = (why.replace(" captioned", "") if uncaptioned else
                    why + ("; --uncaptioned also keeps graphics without a caption" if pdf
                           else ""))
        if on_source is not None:
            on_source(str(src), len(found), note)

    for src in sources:
        try:
            if is_jats_source(src):
                found = extract_jats(src, out, evidence_level=evidence_level)
                nodes += found.nodes
                review.update(found.review)
                problems += found.problems
                for note in found.notes:
                    log.warning("%s", note)
                report(src, found.nodes)
                continue
            info, figures = read_pdf_figures(src, min_size=min_size, uncaptioned=uncaptioned)
        except EvidenceError as exc:
            log.warning("skipped: %s", exc)
            failed.append(str(exc))
            report(src, [], "skipped (see the error below)")
            continue
        pdf_nodes = pdf_figure_nodes(info, figures, out, evidence_level=evidence_level)
        nodes += pdf_nodes
        review.update({n.node_id: f.review_fields() for n, f in zip(pdf_nodes, figures,
                                                                     strict=True)})
        report(src, pdf_nodes)
    if len(failed) == len(sources):  # nothing readable: no manifest that looks like a result
        raise EvidenceError("; ".join(failed) if len(failed) == 1 else
                            f"none of the {len(sources)} sources could be read: "
                            + "; ".join(failed))
    merged = merge_figure_manifest(nodes, Path(out) / "manifest.jsonl", review=review)
    if merged.kept:
        log.warning("%s: kept its %d reviewed row(s), appended %d new figure(s)", merged.path,
                    merged.kept, merged.added)
    if failed or problems:
        noun = "source(s)" if any(is_jats_source(src) for src in sources) else "PDF(s)"
        told = ([f"{len(failed)} of {len(sources)} {noun} skipped: " + "; ".join(failed)]
                if failed else []) + \
            ([f"{len(problems)} figure(s) or file(s) not extracted: " + "; ".join(problems)]
             if problems else [])
        raise EvidenceError(f"the other figures are in {merged.path}; " + ". ".join(told))
    return merged.path


def check_image_encoder(name: str) -> None:
    """Refuse a slide-level model (e.g. TITAN) as figure encoder before loading any weights."""
    from ..models import get_config, list_encoders

    if name in list_encoders() and get_config(name).role == "slide":
        images = [n for n in list_encoders() if get_config(n).role != "slide"]
        raise EvidenceError(f"--encoder {name} embeds whole slides from patch features, not "
                            f"figure images; use an image encoder: {', '.join(images)}")


def index_build(sources: Sequence[PathLike], out: PathLike, *, encoder: str = "heuristic",
                kind: str = "flat", evidence_level: int | str | None = None,
                min_size: int = 100, overwrite: bool = False, towers: Sequence[str] = (),
                weights: WeightsArg = None, progress: bool | None = None) -> FigureIndex:
    """Build an index folder from PDFs and/or manifests with ``encoder``; returns it.

    ``towers`` (e.g. ``["plip"]``): image-text models whose vectors of every figure are stored
    with the index (:func:`index_tower`), so questions also rank the figures themselves; each
    is checked, and its weights loaded, before anything is written. ``weights``
    (``{name: file}``, or one file: the encoder's) overrides weight discovery for the encoder
    and the towers; every file given is checked first
    (:func:`wsikit.models.hub.explicit_weights`). ``progress``: a progress bar (default: when
    stderr is a terminal).
    """
    from ..models import create_encoder
    from .towers import check_tower_encoder, tower_encoders, update_tower

    check_image_encoder(encoder)
    files = explicit_weights(weights, encoder=encoder)
    names = list(dict.fromkeys(towers))
    for name in names:
        check_tower_encoder(name)
    enc = create_encoder(encoder, weights=files.get(encoder))
    tower_encs = [create_encoder(n, weights=files.get(n)) for n in names]
    for name, tower in zip(names, tower_encs, strict=True):
        if not hasattr(tower, "encode_text"):  # an encoder registered at run time
            raise EvidenceError(f"tower {name} has no text tower; use a vision-language model: "
                                f"{', '.join(tower_encoders())}")
    with tempfile.TemporaryDirectory(prefix="wsikit-figures-") as work:
        nodes = load_sources(sources, work, evidence_level=evidence_level, min_size=min_size)
        index = FigureIndex.build(nodes, enc, out, kind=kind, overwrite=overwrite,
                                  progress_bar=progress)
    for tower in tower_encs:
        update_tower(index, tower, rebuild=True)
    return index


def index_add(index_dir: PathLike, sources: Sequence[PathLike], *, encoder: str | None = None,
              evidence_level: int | str | None = None, min_size: int = 100,
              on_existing: str = "refuse", weights: WeightsArg = None,
              progress: bool | None = None) -> AddReport:
    """Add figures to an index (its own encoder unless ``encoder`` is given), then bring its
    vision-language towers up to date (:func:`update_towers`); returns the
    :class:`~wsikit.evidence.AddReport`. Already indexed figures with other metadata are
    refused unless ``on_existing`` is ``"update"`` or ``"skip"``. ``weights`` as in
    :func:`index_build` (for the encoder and the towers); ``progress``: a progress bar
    (default: when stderr is a terminal)."""
    from ..models import create_encoder

    index = FigureIndex.open(index_dir)
    name = encoder or index.encoder_name
    check_image_encoder(name)
    files = explicit_weights(weights, encoder=name)
    enc = create_encoder(name, weights=files.get(name))
    with tempfile.TemporaryDirectory(prefix="wsikit-figures-") as work:
        nodes = load_sources(sources, work, evidence_level=evidence_level, min_size=min_size)
        added = index.add(nodes, enc, on_existing=on_existing, progress_bar=progress)
    update_towers(index, weights=files)
    return added


def index_calibrate(index_dir: PathLike) -> Background | None:
    """Measure and store an index's similarity background (indexes from older versions);
    ``None`` for an index of fewer than 2 figures."""
    return FigureIndex.open(index_dir).calibrate()


def index_info(index_dir: PathLike) -> dict[str, Any]:
    """Manifest facts of an index folder (verifies its checksums)."""
    return FigureIndex.open(index_dir).info()


def query_encoder(index: FigureIndex, encoder: str | None = None, *,
                  weights: WeightsArg = None) -> Any:
    """The encoder that embeds queries of ``index``: ``encoder`` (default the index's own),
    refused before any weights load when it is not the one the index was built with;
    ``weights`` as in :func:`index_build`."""
    from ..models import create_encoder, get_config

    name = encoder or index.encoder_name
    files = explicit_weights(weights, encoder=name)
    if name != index.encoder_name:  # refuse before loading a possibly large model
        index._check_encoder(name, int(get_config(name).dim))
    return create_encoder(name, weights=files.get(name))


def index_query(index_dir: PathLike, image: PathLike, *, k: int = 5,
                encoder: str | None = None,
                licences: str | Sequence[str] | None = None,
                kinds: str | Sequence[str] | None = None,
                weights: WeightsArg = None) -> list[Match]:
    """Top-``k`` figures similar to an image file; with ``licences`` (``"open"``, ``"CC BY,
    CC0"``, see :meth:`FigureIndex.with_licences`) only figures under those licences; with
    ``kinds`` (e.g. ``"micrograph"``) only panels and single-panel figures of those kinds
    (default every node); ``weights`` as in :func:`index_build`."""
    index = FigureIndex.open(index_dir).with_licences(licences)
    enc = query_encoder(index, encoder, weights=weights)
    wanted = None if kinds is None else parse_kinds(kinds)
    return index.query_images([load_image(image)], enc, k=k, kinds=wanted)[0]


def index_search(index_dir: PathLike, image: PathLike | None = None, *, text: str | None = None,
                 k: int = 5, encoder: str | None = None, rrf_k: float = 50,
                 towers: Sequence[str] = (),
                 licences: str | Sequence[str] | None = None,
                 kinds: str | Sequence[str] | None = None,
                 weights: WeightsArg = None) -> list[FusedMatch]:
    """Top-``k`` figures for an image, a text or both, fused by reciprocal rank, with the
    named vision-language towers as further channels; ``licences``, ``kinds`` and
    ``weights`` as
    :func:`index_query`."""
    from .fusion import search
    from .towers import create_tower_encoders

    index = FigureIndex.open(index_dir).with_licences(licences)
    files = explicit_weights(weights, encoder=encoder or index.encoder_name)
    enc = query_encoder(index, encoder, weights=files) if image is not None else None
    images = [load_image(image)] if image is not None else None
    return search(index, images=images, text=text, encoder=enc, k=k, rrf_k=rrf_k,
                  towers=create_tower_encoders(index, towers, weights=files),
                  kinds=None if kinds is None else parse_kinds(kinds))[0]


def index_tower(index_dir: PathLike, *, encoder: str = "quiltnet_b32",
                weights: WeightsArg = None, rebuild: bool = False) -> int:
    """Store (or bring up to date) a vision-language tower's vectors for every figure of an
    index; returns the number of figures embedded. ``weights``: the tower's file (or
    ``{name: file}``)."""
    from ..models import create_encoder
    from .towers import check_tower_encoder, tower_encoders, update_tower

    index = FigureIndex.open(index_dir)
    check_tower_encoder(encoder)  # before any weights load
    enc = create_encoder(encoder, weights=explicit_weights(weights, encoder=encoder).get(encoder))
    if not hasattr(enc, "encode_text"):  # e.g. an encoder registered at run time
        raise EvidenceError(f"--encoder {encoder} has no text tower; use a vision-language "
                            f"model: {', '.join(tower_encoders())}")
    return update_tower(index, enc, rebuild=rebuild)


def update_towers(index: FigureIndex, *, weights: Mapping[str, str] | None = None
                  ) -> dict[str, int | None]:
    """After ``index add``: embed the new figures into every tower whose weights are found
    (others are reported, and keep covering the figures they had); ``{tower: figures
    embedded, or None when its weights were not found}``. ``weights``: ``{tower: file}``."""
    from ..models import create_encoder
    from .towers import list_towers, update_tower

    done: dict[str, int | None] = {}
    for name in list_towers(index):
        try:
            enc = create_encoder(name, weights=(weights or {}).get(name))
        except WeightsError as exc:
            warnings.warn(f"tower {name} not updated ({exc}); it covers the figures it had. "
                          f"Update it later: wsikit index tower {index.path} --encoder {name}",
                          stacklevel=2)
            done[name] = None
            continue
        done[name] = update_tower(index, enc)
    return done
