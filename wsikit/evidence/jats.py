"""Figures from JATS XML: PubMed Central Open Access articles, package folders and archives.

Most of the open literature a pathology evidence bank is built from is distributed by PubMed
Central (PMC) as JATS XML (``.nxml``) with the figure files beside it: a package folder, or a
``.tar.gz`` of one. The XML says exactly what a PDF only shows: each figure's label and caption,
its graphic file, and the article's title, DOI, PubMed ids, journal, dates and licence.

Each ``<fig>`` is one :class:`~wsikit.evidence.FigureNode`:

* label and caption from the XML (caption = ``<title>`` and paragraphs, inline markup such as
  italics, links and MathML flattened to its text, blocks separated by one space, whitespace
  collapsed, control characters removed);
* the graphic found by its ``xlink:href`` in the package, with whatever extension the package
  has (``fig1`` or ``fig1.tif`` finds ``fig1.jpg``; the exact name first, then PNG, JPEG,
  TIFF, GIF), written as PNG under ``out_dir/images``;
* title, DOI, PMID, PMCID, journal, year (the electronic publication date, else print, else the
  issue's collection date) and licence (``<license xlink:href>``, ``<ali:license_ref>``, else
  the licence sentence) of the article; a ``<fig>`` with its own ``<permissions>``, or whose
  caption or credit line says it is third-party material ("Reprinted with permission ...",
  "All rights reserved"), carries that licence instead;
* the evidence level from the article type and its article-type subject headings
  (:func:`evidence_level_of`).

Where figures are: ``<fig>`` anywhere in the article (body, ``<floats-group>``, ``<app>``
appendices, ``<boxed-text>``, ``<sub-article>`` such as author responses); each ``<fig>``
of a ``<fig-group>`` is its own node (a figure supplement), taking the group's label when it
has none and the group's caption before its own; a ``<supplementary-material>`` whose file is
an image ("Figure S1" as a TIFF) is a node too, other supplementary files (tables, data,
video) are not figures. A ``<fig>`` without a graphic, or whose graphic is not in the package,
is reported by its label and file name; the other figures go on.

The XML is parsed without entities, DTD loading or network (:mod:`._safe_xml`); archives
are unpacked safely and graphics never looked up outside the package (:mod:`._jats_package`).

>>> from wsikit.evidence import extract_jats_figures                  # doctest: +SKIP
>>> nodes = extract_jats_figures("PMC3460867.tar.gz", "bank")        # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
import unicodedata
import warnings
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .._hints import keyword
from ..errors import EvidenceError
from ._jats_package import ARCHIVE_SUFFIXES, IMAGE_SUFFIXES, XML_SUFFIXES, Package, jats_documents
from ._safe_xml import Element, read_xml
from .licence import (
    UNKNOWN,
    figure_licence_statement,
    find_licence_statement,
    normalise_licence,
)
from .nodes import FigureNode, load_image, parse_evidence_level
from .sanitise import valid_doi

__all__ = [
    "JatsArticle",
    "JatsExtraction",
    "JatsFigure",
    "extract_jats",
    "extract_jats_figures",
    "read_jats",
]


XLINK = "{http://www.w3.org/1999/xlink}href"


# ---------------------------------------------------------------------- evidence levels
#: ``article-type`` values with a level (JATS and PMC vocabulary, hyphenated, lower case).
ARTICLE_TYPE_LEVELS: dict[str, int] = {
    "practice-guideline": 1, "guideline": 1,
    "systematic-review": 2, "meta-analysis": 2,
    "randomized-controlled-trial": 3,
    "case-report": 5,
    "consensus-statement": 6,
    "editorial": 8, "article-commentary": 8, "commentary": 8, "opinion": 8,
}
#: Article-type subject headings with a level (lower case, hyphens as spaces).
SUBJECT_LEVELS: dict[str, int] = {
    "practice guideline": 1, "practice guidelines": 1, "clinical practice guideline": 1,
    "clinical practice guidelines": 1, "guideline": 1, "guidelines": 1,
    "systematic review": 2, "systematic reviews": 2, "meta analysis": 2,
    "systematic review and meta analysis": 2, "systematic review with meta analysis": 2,
    "randomized controlled trial": 3, "randomised controlled trial": 3,
    "cohort study": 4, "observational study": 4, "case control study": 4,
    "cross sectional study": 4,
    "case report": 5, "case reports": 5, "case series": 5, "clinical case report": 5,
    "consensus statement": 6, "consensus": 6, "consensus report": 6,
    "editorial": 8, "commentary": 8, "opinion": 8, "viewpoint": 8, "perspective": 8,
}
# subj-group types that name the kind of article (not its topic); an untyped group counts
_HEADING_GROUPS = {"heading", "display-channel", "article-type", "article type",
                   "publication-type", "type", ""}


def evidence_level_of(article_type: str | None, subjects: tuple[str, ...] = ()
                      ) -> tuple[int | None, str]:
    """Evidence level (1–8 or ``None``) of an article and what it was read from.

    The article's subject headings that name its kind (``subj-group-type`` heading,
    display-channel or article-type) are looked up in :data:`SUBJECT_LEVELS` first (more
    specific: a "research-article" headed "Randomized Controlled Trial"), then the
    ``article-type`` in :data:`ARTICLE_TYPE_LEVELS`. Anything else is unknown: a
    research-article may be a trial, a cohort or bench work, a review-article is narrative
    unless headed "Systematic Review"; headings naming two levels are unknown too.

    >>> evidence_level_of("case-report")
    (5, 'article-type case-report')
    >>> evidence_level_of("research-article", ("Randomized Controlled Trial",))
    (3, 'subject Randomized Controlled Trial')
    >>> evidence_level_of("research-article", ("Research Article",))
    (None, 'article-type research-article: no level')
    """
    found: dict[int, str] = {}
    for subject in subjects:
        key = re.sub(r"[\s_-]+", " ", subject).strip().lower()
        if key in SUBJECT_LEVELS:
            found.setdefault(SUBJECT_LEVELS[key], subject)
    if len(found) == 1:
        level, subject = next(iter(found.items()))
        return level, f"subject {subject}"
    if len(found) > 1:
        return None, "subjects name several levels: " + ", ".join(found.values())
    kind = (article_type or "").strip().lower().replace("_", "-")
    if kind in ARTICLE_TYPE_LEVELS:
        return ARTICLE_TYPE_LEVELS[kind], f"article-type {kind}"
    return None, f"article-type {kind or '(none)'}: no level"


# ---------------------------------------------------------------------- text
_BLOCKS = {"title", "p", "list", "list-item", "def-list", "def-item", "term", "def",
           "disp-formula", "disp-quote", "statement", "sec", "label", "caption", "attrib",
           "table-wrap", "break"}
_SKIP = {"object-id", "supplementary-material", "graphic", "media", "inline-graphic",
         "permissions", "fn"}
_SPACE = re.compile(r"\s+")


def _local(tag: object) -> str:
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


def _clean(text: str) -> str:
    """Whitespace collapsed, control and format characters removed."""
    text = "".join(" " if ch.isspace() else ch for ch in text
                   if ch.isspace() or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co"))
    return _SPACE.sub(" ", text).strip()


def _flatten(el: Element, out: list[str]) -> None:
    """Text of ``el`` in document order: inline markup dropped, a space around blocks, one
    alternative of an ``<alternatives>``, no object ids, files or footnotes."""
    # iterative (a caption may nest deeply): ("open" | "close", element) or ("text", str)
    stack: list[tuple[str, Element | str]] = [("open", el)]
    while stack:
        action, item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        block = _local(item.tag) in _BLOCKS
        if block:
            out.append(" ")
        if action == "close":
            continue
        if item.text:
            out.append(item.text)
        stack.append(("close", item))
        children = [c for c in item if _local(c.tag) not in _SKIP]
        if _local(item.tag) == "alternatives":
            children = children[:1]
        keep = {id(c) for c in children}
        for child in reversed(list(item)):
            if child.tail:
                stack.append(("text", child.tail))
            if id(child) in keep:
                stack.append(("open", child))


def text_of(el: Element | None) -> str:
    """Flattened, cleaned text of an element ("" for ``None``)."""
    if el is None:
        return ""
    out: list[str] = []
    _flatten(el, out)
    return _clean("".join(out))


def _child(el: Element | None, *names: str) -> Element | None:
    """First child of ``el`` along the path of local ``names``."""
    for name in names:
        if el is None:
            return None
        el = next((c for c in el if _local(c.tag) == name), None)
    return el


def _children(el: Element | None, name: str) -> list[Element]:
    return [] if el is None else [c for c in el if _local(c.tag) == name]


# ---------------------------------------------------------------------- the article
@dataclass(frozen=True)
class JatsArticle:
    """Facts of one JATS article.

    Attributes
    ----------
    path : Path
        The XML file (inside a temporary folder for an archive: see ``source``).
    source : Path
        What the user gave: the XML file, or the archive it came from.
    title, doi, pmid, pmcid, journal : str or None
        ``pmcid`` with its ``PMC`` prefix.
    year : int or None
        Year of the electronic publication, else print, else the issue (collection).
    license, license_source : str, str or None
        Normalised licence (:mod:`wsikit.evidence.licence`) and its URL or sentence.
    article_type : str or None
        The root's ``article-type``.
    subjects : tuple of str
        Subject headings that name the kind of article.
    evidence_level : int or None
        From :func:`evidence_level_of`; ``evidence_basis`` says from what.
    """

    path: Path
    source: Path
    title: str | None = None
    doi: str | None = None
    pmid: str | None = None
    pmcid: str | None = None
    journal: str | None = None
    year: int | None = None
    license: str = UNKNOWN
    license_source: str | None = None
    article_type: str | None = None
    subjects: tuple[str, ...] = ()
    evidence_level: int | None = None
    evidence_basis: str = ""


@dataclass(frozen=True)
class JatsFigure:
    """One ``<fig>`` (or image supplementary file) of an article.

    Attributes
    ----------
    fig_id : str
        The element's ``id`` (``fig<n>`` by position when it has none).
    label : str or None
        "Figure 1", "Figure 1—figure supplement 1.", as in the XML.
    caption : str
        Caption title and paragraphs as plain text.
    href : str or None
        The graphic's ``xlink:href``.
    graphic : Path or None
        The graphic file found in the package (``None``: see ``problem``).
    context : str
        Where it sits: body, fig-group, app, boxed-text, supplementary-material, sub-article,
        floats-group, back.
    license, license_source : str or None
        The figure's own licence (its ``<permissions>``); ``None``: the article's.
    problem : str or None
        Why it cannot be a node (no graphic, graphic not in the package).
    """

    fig_id: str
    label: str | None
    caption: str
    href: str | None
    graphic: Path | None
    context: str
    license: str | None = None
    license_source: str | None = None
    problem: str | None = None

    @property
    def missing(self) -> bool:
        """Its graphic is named but cannot be used (not in the package, outside it): a
        damaged package. A ``<fig>`` without any graphic is not missing one."""
        return self.problem is not None and self.href is not None

    def review_fields(self) -> dict[str, object]:
        """What a reviewer needs beside the node: XML id, graphic file and where it sits."""
        return {"fig_id": self.fig_id, "graphic": self.href, "context": self.context}


def _meta(root: Element) -> Element | None:
    return _child(root, "front", "article-meta")


def _article_ids(meta: Element | None) -> dict[str, str]:
    ids: dict[str, str] = {}
    for el in _children(meta, "article-id"):
        kind = (el.get("pub-id-type") or "").strip().lower()
        value = text_of(el)
        if kind and value:
            ids.setdefault(kind, value)
    return ids


def _pmcid(ids: dict[str, str]) -> str | None:
    raw = ids.get("pmcid") or ids.get("pmc")
    if not raw:
        return None
    digits = raw.upper().removeprefix("PMC")
    return f"PMC{digits}" if digits.isdigit() else raw


_DATE_RANK = {"epub": 0, "electronic": 0, "ppub": 1, "print": 1, "epub-ppub": 2,
              "collection": 3, "pmc-release": 5}


def _year(meta: Element | None) -> int | None:
    """Year of the first publication: electronic, print, then the collection (issue)."""
    best: tuple[float, int] | None = None
    for el in _children(meta, "pub-date"):
        kind = (el.get("pub-type") or el.get("date-type") or "").lower()
        fmt = (el.get("publication-format") or "").lower()
        rank = float(_DATE_RANK.get(fmt if kind == "pub" and fmt else kind, 4))
        if kind == "pub" and not fmt:
            rank = 0.5
        text = text_of(_child(el, "year")) or (el.get("iso-8601-date") or "")[:4]
        if text.isdigit() and 1000 <= int(text) <= 2999 and (best is None or rank < best[0]):
            best = (rank, int(text))
    return None if best is None else best[1]


def _journal(root: Element) -> str | None:
    jmeta = _child(root, "front", "journal-meta")
    title = text_of(_child(jmeta, "journal-title-group", "journal-title")) or \
        text_of(_child(jmeta, "journal-title"))
    if title:
        return title
    ids = {(el.get("journal-id-type") or ""): text_of(el) for el in _children(jmeta, "journal-id")}
    return ids.get("nlm-ta") or ids.get("iso-abbrev") or None


def _licence_of(permissions: Element | None) -> tuple[str, str | None]:
    """``(normalised licence, URL or sentence)`` of a ``<permissions>`` element.

    Each ``<license>`` is read by its ``ali:license_ref``, its ``xlink:href``, a link in its
    sentence, then its licence sentence(s); the first that names a licence wins.
    ``("unknown", text)`` when none does (the text kept for a person to read).
    """
    fallback: str | None = None
    for lic in _children(permissions, "license"):
        urls = [text_of(ref) for ref in lic.iter() if _local(ref.tag) == "license_ref"]
        urls += [lic.get(XLINK) or "",
                 lic.get("{http://www.w3.org/1999/02/22-rdf-syntax-ns#}resource") or ""]
        # a link in the licence sentence ("the <ext-link xlink:href=...>Creative Commons
        # Attribution License</ext-link>")
        urls += [el.get(XLINK) or "" for el in lic.iter() if _local(el.tag) == "ext-link"]
        for url in filter(None, (u.strip() for u in urls)):
            if (name := normalise_licence(url)) != UNKNOWN:
                return name, url
        sentence = " ".join(filter(None, (text_of(p) for p in _children(lic, "license-p"))))
        if sentence and (stated := find_licence_statement(sentence)):
            return stated[0], sentence
        if (lic.get("license-type") or "").lower() == "public-domain":
            return "public domain", sentence or "license-type public-domain"
        fallback = fallback or sentence or None
    statement = text_of(_child(permissions, "copyright-statement"))
    if statement and (stated := find_licence_statement(statement)):
        return stated[0], statement
    return UNKNOWN, fallback or statement or None


def _subjects(meta: Element | None) -> tuple[str, ...]:
    found: list[str] = []

    def walk(group: Element) -> None:
        if (group.get("subj-group-type") or "").strip().lower() in _HEADING_GROUPS:
            found.extend(text_of(s) for s in _children(group, "subject"))
        for sub in _children(group, "subj-group"):
            walk(sub)

    for group in _children(_child(meta, "article-categories"), "subj-group"):
        walk(group)
    return tuple(s for s in dict.fromkeys(found) if s)


def _article(root: Element, path: Path, source: Path) -> JatsArticle:
    meta = _meta(root)
    ids = _article_ids(meta)
    subjects = _subjects(meta)
    article_type = root.get("article-type")
    level, basis = evidence_level_of(article_type, subjects)
    license, license_source = _licence_of(_child(meta, "permissions"))
    return JatsArticle(
        path=path, source=source,
        title=text_of(_child(meta, "title-group", "article-title")) or None,
        doi=valid_doi(ids.get("doi")), pmid=ids.get("pmid"), pmcid=_pmcid(ids),
        journal=_journal(root), year=_year(meta), license=license,
        license_source=license_source, article_type=article_type, subjects=subjects,
        evidence_level=level, evidence_basis=basis)


# ---------------------------------------------------------------------- figures
def _graphic_href(fig: Element) -> str | None:
    """``xlink:href`` of the figure's own graphic (direct, or in ``<alternatives>``)."""
    for el in list(fig) + [c for alt in _children(fig, "alternatives") for c in alt]:
        if _local(el.tag) == "graphic" and (href := (el.get(XLINK) or "").strip()):
            return href
    return None


def _supplement_href(supp: Element) -> str | None:
    """The file of an image supplementary material (``None`` for tables, data, video)."""
    for el in supp.iter():
        if _local(el.tag) not in ("media", "graphic"):
            continue
        href = (el.get(XLINK) or "").strip()
        mimetype = (el.get("mimetype") or "").lower()
        suffix = PurePosixPath(href).suffix.lower()
        if href and (suffix in IMAGE_SUFFIXES or (mimetype == "image" and not suffix)):
            return href
    return None


def _context(ancestors: list[str]) -> str:
    for name in reversed(ancestors):
        if name in ("fig-group", "app", "boxed-text", "supplementary-material", "sub-article",
                    "floats-group"):
            return name
    return "back" if "back" in ancestors else "body"


def _figures(root: Element, package: Package) -> list[JatsFigure]:
    figures: list[JatsFigure] = []
    stack: list[tuple[Element, list[str], Element | None]] = [(root, [], None)]
    while stack:  # document order, with each element's ancestors and its fig-group
        el, ancestors, group = stack.pop()
        name = _local(el.tag)
        if name == "fig":
            figures.append(_figure(el, ancestors, group, package, len(figures) + 1))
        elif name == "supplementary-material" and not any(
                _local(d.tag) == "fig" for d in el.iter()):
            href = _supplement_href(el)
            if href is not None:
                figures.append(_figure(el, ancestors + [name], None, package,
                                       len(figures) + 1, href=href))
        if name in ("fig", "caption"):
            continue
        inner = ancestors + [name]
        for child in reversed(list(el)):
            stack.append((child, inner, el if name == "fig-group" else group))
    return figures


def _figure_licence(el: Element, caption: str) -> tuple[str | None, str | None]:
    """The figure's own licence: its ``<permissions>``, else what its caption or ``<attrib>``
    credit line states ("Reprinted with permission ...": all rights reserved); ``(None,
    None)``: the article's licence applies."""
    if (perms := _child(el, "permissions")) is not None:
        name, source = _licence_of(perms)
        if name != UNKNOWN:
            return name, source
    credit = " ".join(filter(None, [caption] + [text_of(a) for a in _children(el, "attrib")]))
    if credit and (stated := figure_licence_statement(credit)):
        return stated
    return None, None


def _figure(el: Element, ancestors: list[str], group: Element | None,
            package: Package, position: int, *, href: str | None = None) -> JatsFigure:
    fig_id = el.get("id") or f"fig{position}"
    label = text_of(_child(el, "label")) or None
    caption = text_of(_child(el, "caption"))
    if group is not None:
        label = label or text_of(_child(group, "label")) or None
        shared = text_of(_child(group, "caption"))
        caption = " ".join(filter(None, (shared, caption)))
    license, license_source = _figure_licence(el, caption)
    href = href if href is not None else _graphic_href(el)
    context = _context(ancestors)
    what = label or f"<{_local(el.tag)} id={fig_id!r}>"
    if href is None:
        return JatsFigure(fig_id, label, caption, None, None, context, license,
                          license_source, problem=f"{what} has no graphic")
    graphic, why = package.find(href)
    return JatsFigure(fig_id, label, caption, href, graphic, context, license, license_source,
                      problem=None if why is None else f"{what}: {why}")


def read_jats(path: str | os.PathLike[str], *, source: str | os.PathLike[str] | None = None
              ) -> tuple[JatsArticle, list[JatsFigure]]:
    """Read one JATS article and find its figures' graphics beside it (no files written).

    Parameters
    ----------
    path
        The ``.nxml``/``.xml`` file; graphics are looked up in its folder (and below).
    source
        What to name as the article's source (default ``path``; an archive it came from).

    Returns
    -------
    article : JatsArticle
    figures : list of JatsFigure
        In document order, with ``problem`` set for those that cannot be nodes.

    Raises
    ------
    EvidenceError
        Unsafe or malformed XML, or not a JATS article (names the file).
    """
    return _read(Path(path), Path(source) if source is not None else Path(path), {})


def _read(path: Path, source: Path, packages: dict[Path, Package]
          ) -> tuple[JatsArticle, list[JatsFigure]]:
    """:func:`read_jats`, with the graphics of each folder listed once (``packages``)."""
    parsed = read_xml(path)
    root = parsed.root
    if _local(root.tag) != "article":
        raise EvidenceError(f"{path}: not a JATS article (its root element is "
                            f"<{_local(root.tag)}>, not <article>); give PubMed Central .nxml "
                            "files or publishers' JATS XML")
    if parsed.skipped:
        warnings.warn(f"{path}: entities declared nowhere were dropped from the text: "
                      f"{', '.join('&' + s + ';' for s in parsed.skipped)}", stacklevel=2)
    package = packages.setdefault(path.parent, Package(path.parent))
    return _article(root, path, source), _figures(root, package)


def is_jats_source(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is read as JATS: an ``.nxml``/``.xml`` file, a ``.tar.gz`` (``.tgz``,
    ``.tar``, ...) package or a folder."""
    p = Path(path)
    name = p.name.lower()
    return p.is_dir() or name.endswith(XML_SUFFIXES) or name.endswith(ARCHIVE_SUFFIXES)


# ---------------------------------------------------------------------- nodes
@dataclass(frozen=True)
class JatsExtraction:
    """What :func:`extract_jats` made of one source.

    Attributes
    ----------
    nodes : list of FigureNode
    review : dict
        ``{node id: review fields}`` (XML id, graphic, context) for the manifest.
    problems : list of str
        What is missing or refused, one sentence each naming the file: figures whose graphic
        is not in the package or cannot be read, archive members not unpacked (links, unsafe
        paths, oversized).
    notes : list of str
        Figures without any graphic (a ``<fig>`` holding only a video or a table): not
        figure images, not errors.
    articles : list of JatsArticle
    """

    nodes: list[FigureNode] = field(default_factory=list)
    review: dict[str, dict[str, object]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    articles: list[JatsArticle] = field(default_factory=list)


def _image_name(xml: Path, fig_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{xml.stem}_{fig_id}").strip("._") or "figure"
    return safe[:150] + ".png"


def _write_nodes(article: JatsArticle, figures: list[JatsFigure], out_dir: Path,
                 level: int | None, result: JatsExtraction) -> None:
    from PIL import Image

    from .._atomic import atomic_path
    from .pdf import _free_image_path

    images_dir = out_dir / "images"
    where = f"{article.source}" + (f" ({article.path.name})" if article.source != article.path
                                   else "")
    for fig in figures:
        if fig.problem is not None or fig.graphic is None:
            (result.problems if fig.missing else result.notes).append(f"{where}: {fig.problem}")
            continue
        try:
            pixels = load_image(fig.graphic)
        except EvidenceError as exc:
            result.problems.append(f"{where}: {fig.label or fig.fig_id}: {exc}")
            continue
        images_dir.mkdir(parents=True, exist_ok=True)
        image_path = _free_image_path(images_dir / _image_name(article.path, fig.fig_id),
                                      pixels)
        if not image_path.exists():
            with atomic_path(image_path) as tmp:
                Image.fromarray(pixels).save(tmp, format="PNG")
        node = FigureNode.from_image(
            image_path, image=pixels, caption=fig.caption, figure_label=fig.label,
            source_title=article.title, doi=article.doi,
            source_path=str(article.source.resolve()), year=article.year,
            license=fig.license or article.license,
            license_source=fig.license_source if fig.license else article.license_source,
            evidence_level=article.evidence_level if article.evidence_level is not None
            else level, journal=article.journal, pmid=article.pmid, pmcid=article.pmcid)
        result.nodes.append(node)
        result.review[node.node_id] = {**fig.review_fields(),
                                       "evidence_basis": article.evidence_basis}


def extract_jats(source: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                 evidence_level: int | str | None = None) -> JatsExtraction:
    """Figures of a JATS source (file, package folder or archive) as nodes, their graphics
    written as PNG under ``out_dir/images``; figures that cannot be nodes are reported in
    ``problems``, the others go on.

    ``evidence_level`` is the level of articles whose type gives none
    (:func:`evidence_level_of`).

    An article of a folder or archive that cannot be read (unsafe or malformed XML, not JATS)
    is a problem and the others go on.

    Raises
    ------
    EvidenceError
        The source is missing or an unreadable archive, or none of its articles could be read
        (unsafe or malformed XML, not JATS).
    """
    try:
        level = parse_evidence_level(evidence_level)
    except ValueError as exc:
        raise EvidenceError(f"{keyword('evidence_level')} for {source}: {exc}") from exc
    result = JatsExtraction()
    src = Path(source)
    packages: dict[Path, Package] = {}
    failed: list[EvidenceError] = []
    with jats_documents(src) as (files, skipped):
        result.problems.extend(f"{src}: {s}" for s in skipped)
        for xml in files:  # one bad article of a folder never stops the others
            try:
                article, figures = _read(xml, src if not src.is_dir() else xml, packages)
            except EvidenceError as exc:
                failed.append(exc)
                result.problems.append(str(exc))
                continue
            result.articles.append(article)
            _write_nodes(article, figures, Path(out_dir), level, result)
    if failed and not result.articles:  # nothing read: the error itself, not a result
        raise failed[0] if len(failed) == 1 else EvidenceError(
            f"{src}: none of its {len(failed)} articles could be read: "
            + "; ".join(str(e) for e in failed))
    return result


def extract_jats_figures(source: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                         evidence_level: int | str | None = None) -> list[FigureNode]:
    """Extract the figures of a JATS article, PMC package folder or ``.tar.gz`` package as
    PNG files under ``out_dir/images`` and return their nodes (:func:`extract_jats`); each
    figure that cannot be a node is reported as a warning naming it and its file.

    Use :func:`wsikit.evidence.write_figure_manifest` to save the nodes as a reviewable
    manifest.
    """
    result = extract_jats(source, out_dir, evidence_level=evidence_level)
    for problem in result.problems + result.notes:
        warnings.warn(problem, stacklevel=2)
    return result.nodes
