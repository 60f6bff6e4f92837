"""Figures and their captions from PDF papers, with pypdfium2 (Apache-2.0/BSD, not PyMuPDF).

Caption first, as PDFFigures 2.0 (Clark & Divvala, JCDL 2016) does it: the page's text is laid
out by column and line with rotated text apart (:mod:`._pdf_layout`); caption blocks ("Figure
N", "Fig. N", "FIGURE N", "Figure S1", "Plate I", "Picture (2)", tables and schemes too) are
found and each takes the graphics beside it, above, below, left or right, on its page, or on the
facing page when its own page has none (:mod:`._pdf_regions`). A figure is the region of its
graphics (raster images, vector paths and the text inside them), rendered with PDFium at ``dpi``
so a vector or multi-image figure is one image; a figure that is exactly one embedded bitmap
keeps that bitmap at its native resolution (checked against the rendered page, so masks, Decode
arrays, CMYK and rotated placements come out as printed). Images repeated across pages (logos),
table contents, small badges and page decorations are not figures; graphics without a caption
are kept only when asked (``uncaptioned=True``), labelled ``None`` with caption ``""``.

Document facts come from the printed text first (:mod:`._pdf_source`): title (largest print on
page 1; metadata as fallback), DOI (across line breaks, checked against its pattern), year and
journal.
"""

from __future__ import annotations

import logging
import os
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .._hints import keyword
from ..errors import EvidenceError
from ._pdf_captions import (
    Caption,
    TextStyle,
    caption_continuation,
    continued,
    find_captions,
    marked_continuation,
    rotated_captions,
    text_style,
)
from ._pdf_layout import (
    Line,
    PageText,
    area,
    inter,
    mark_level_prose,
    read_page_text,
    union,
)
from ._pdf_regions import (
    IMAGE,
    PATH,
    Cluster,
    Element,
    assign_regions,
    cluster_graphics,
    figure_labels,
    page_graphics,
    paragraph_lines,
    transform_box,
    unmark_legend_keys,
)
from ._pdf_source import (
    find_doi,
    journal_from,
    title_from_metadata,
    title_from_text,
    year_from_text,
)
from .licence import figure_licence_statement, find_licence_statement
from .nodes import FigureNode, parse_evidence_level

__all__ = [
    "PdfFigure",
    "PdfInfo",
    "extract_pdf_figures",
    "find_doi",
    "pdf_figure_nodes",
    "read_pdf_figures",
]

log = logging.getLogger(__name__)

#: Resolution (dots per inch) at which figure regions are rendered.
DEFAULT_DPI = 150.0
Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class PdfFigure:
    """One figure found in a PDF.

    Attributes
    ----------
    image : ndarray
        ``(H, W, 3) uint8`` RGB pixels.
    caption : str
        The whole caption in reading order, ``""`` for an uncaptioned figure.
    figure_label : str or None
        "Figure 2B", "Fig. 3" …; ``None`` for an uncaptioned figure.
    page : int
        1-based page of the graphic.
    bbox : tuple of float
        ``(left, bottom, right, top)`` of the graphic on its page in PDF points (origin
        bottom-left).
    caption_page : int
        1-based page of the caption (another page for a caption on the facing page).
    source : {"embedded", "rendered"}
        ``embedded``: the figure is exactly one embedded bitmap, kept at its native pixels;
        ``rendered``: the region rendered with PDFium at ``dpi``.
    dpi : float
        Pixels per inch of ``image`` on the page (the bitmap's own for ``embedded``).
    words : tuple of (str, box)
        The words of the page's text layer inside the figure (tick numbers, axis titles,
        labels of a vector figure), each with its box ``(x0, y0, x1, y1)`` in pixels of
        ``image`` (origin top-left); empty for a bitmap figure, whose words are pixels, and
        for a figure turned upright.
    """

    image: np.ndarray
    caption: str
    figure_label: str | None
    page: int
    bbox: tuple[float, float, float, float]
    caption_page: int = 0
    source: str = "rendered"
    dpi: float = DEFAULT_DPI
    words: tuple[tuple[str, tuple[int, int, int, int]], ...] = ()

    @property
    def captioned(self) -> bool:
        return self.figure_label is not None

    def review_fields(self) -> dict[str, object]:
        """What a reviewer needs beside the node: box, caption page and how it was made."""
        return {"bbox": [round(v, 2) for v in self.bbox], "caption_page": self.caption_page,
                "render": self.source, "dpi": round(self.dpi, 1),
                "uncaptioned": not self.captioned}


@dataclass(frozen=True)
class PdfInfo:
    """Document facts: ``path``, ``title``, ``doi`` (or None), ``pages``, ``year``,
    ``journal``, where the title came from (``title_source``: text | metadata | None) and the
    licence the first or the last two pages state (``license``, normalised, and the sentence that
    says it, ``license_source``; :func:`wsikit.evidence.licence.find_licence_statement`)."""

    path: Path
    title: str | None
    doi: str | None
    pages: int
    year: int | None = None
    journal: str | None = None
    title_source: str | None = None
    license: str | None = None
    license_source: str | None = None


@dataclass
class _Page:
    index: int
    text: PageText
    elements: list[Element]
    page_box: Box
    captions: list[Caption]
    clusters: list[Cluster]
    regions: dict[int, Box]
    sides: dict[int, str] = field(default_factory=dict)
    repeated: frozenset[int] = frozenset()  # ids of lines repeated on many pages


@dataclass
class _Found:
    page: int
    box: Box
    clusters: list[Cluster]
    caption: Caption | None
    caption_page: int
    text_beside: bool = False  # lines of text (not its caption's) in its box, off its graphics


# ---------------------------------------------------------------------- opening
def _open(path: Path):
    import pypdfium2 as pdfium

    if not path.is_file():
        raise EvidenceError(f"PDF {path} does not exist")
    try:
        return pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        text = str(exc).lower()
        if "password" in text:
            reason = "it is encrypted (a password is needed); save an unprotected copy"
        elif "format" in text or "file" in text:
            reason = "it is damaged or not a PDF; download it again"
        else:
            reason = f"PDFium cannot read it ({exc}); check that it is a valid PDF"
        raise EvidenceError(f"PDF {path}: {reason}") from exc


def _repeated(keys_by_page: list[set], n_pages: int) -> set:
    """Keys found on several pages: on 3+ pages (and a quarter of them), or a small bitmap
    (under 8 % of the page) on 2+ pages: logos, badges, rules and running heads."""
    count: Counter = Counter()
    for keys in keys_by_page:
        count.update(keys)
    out = set()
    for key, n in count.items():
        if (n >= 3 and n >= 0.25 * n_pages) or (n >= 2 and key[0] == IMAGE and key[-1]):
            out.add(key)
    return out


def _repeated_rules(keys_by_page: list[set], n_pages: int, page_width: float) -> set:
    """Keys of the rules and bars of a page's head or foot that a typesetter placed a point
    or two apart from page to page (a grey bar under the running head at 762, 763 and 764
    pt): paths a third of the page wide and under 12 pt tall that lie within one key unit
    (3 pt) of one another on 3+ pages (and a quarter of them), which exact keys miss."""
    wide = 0.3 * page_width / 3  # (keys are boxes in units of 3 pt)
    rules = [[k for k in keys if k[0] == PATH and len(k) == 2 and
              k[1][2] - k[1][0] >= wide and k[1][3] - k[1][1] <= 4]
             for keys in keys_by_page]
    out = set()
    for i, mine in enumerate(rules):
        for key in mine:
            pages = sum(1 for j, other in enumerate(rules) if j == i or any(
                max(abs(a - b) for a, b in zip(key[1], k[1], strict=True)) <= 1
                for k in other))
            if pages >= 3 and pages >= 0.25 * n_pages:
                out.add(key)
    return out


def _tiles(graphics: list[Element], min_size: int) -> set[int]:
    """Ids of the bitmaps under ``min_size`` pixels that are a figure's tiles, not icons:
    four or more on the page with the same pixels and printed size (to 3 pt), each printed
    24 pt or more on its shorter side (a grid of 32-pixel thumbnails, each drawn large)."""
    small = [el for el in graphics if el.kind == IMAGE and max(el.px) < min_size and
             min(el.box[2] - el.box[0], el.box[3] - el.box[1]) >= 24.0]

    def look(el: Element) -> tuple:
        return el.px, round((el.box[2] - el.box[0]) / 3), round((el.box[3] - el.box[1]) / 3)

    count = Counter(look(el) for el in small)
    return {id(el) for el in small if count[look(el)] >= 4}


def _line_key(text: str, box: Box) -> tuple:
    return ("text", re.sub(r"\d+", "#", text.strip().lower()), round(box[0] / 4),
            round(box[3] / 4))


# ---------------------------------------------------------------------- reading
def read_pdf_figures(pdf: str | os.PathLike[str], *, min_size: int = 100,
                     dpi: float = DEFAULT_DPI, uncaptioned: bool = False
                     ) -> tuple[PdfInfo, list[PdfFigure]]:
    """Find the figures of a PDF with their captions (no files written).

    Parameters
    ----------
    pdf
        Path of the PDF.
    min_size
        An embedded image smaller than this many pixels on both sides, and small on the page
        too (under 50 points on both sides), is an icon or badge, not a graphic of its own
        (it still appears inside a rendered figure region); a low-resolution bitmap printed
        large (a figure's tiles at 72 dpi) is a graphic.
    dpi
        Resolution at which figure regions are rendered.
    uncaptioned
        Also return graphics without any caption (labelled ``None``, caption ``""``).

    Returns
    -------
    info : PdfInfo
    figures : list of PdfFigure
        In page order, top to bottom.

    Raises
    ------
    EvidenceError
        If the file is missing, encrypted, damaged or image-only (no text layer).
    """
    path = Path(pdf)
    if not dpi > 0:
        raise EvidenceError(f"{keyword('dpi')} must be positive, got {dpi}")
    import pypdfium2 as pdfium

    doc = _open(path)
    try:
        try:
            return _read(doc, path, min_size=min_size, dpi=float(dpi),
                         uncaptioned=uncaptioned)
        except (pdfium.PdfiumError, OSError) as exc:  # a broken page: name the file
            raise EvidenceError(f"PDF {path}: cannot read its content ({type(exc).__name__}: "
                                f"{exc}); it is probably damaged; download it again") from exc
    finally:
        doc.close()


def _icon(el: Element, min_size: int) -> bool:
    """An image too small to be a graphic of its own: under ``min_size`` pixels on both sides
    and under 50 points on both sides on the page (a badge, a logo, a letter set as a
    bitmap)."""
    return el.kind == IMAGE and max(el.px) < min_size and \
        max(el.box[2] - el.box[0], el.box[3] - el.box[1]) < 50.0


def _read(doc, path: Path, *, min_size: int, dpi: float, uncaptioned: bool
          ) -> tuple[PdfInfo, list[PdfFigure]]:
    pages: list[_Page] = []
    n_pages = len(doc)
    if n_pages == 0:
        raise EvidenceError(f"PDF {path}: it has no pages")
    elem_keys: list[set] = []
    line_keys: list[set] = []
    ocr_pages = 0  # pages whose only text is an invisible layer (a scan's OCR)
    for i in range(n_pages):
        page = doc[i]
        l_, b_, r_, t_ = page.get_bbox()
        page_box = (float(l_), float(b_), float(r_), float(t_))
        graphics, text_objects = page_graphics(page, page_box)
        ocr_pages += bool(text_objects) and all(t.invisible for t in text_objects.values())
        tiles = _tiles(graphics, min_size)
        elements = [el for el in graphics if not (_icon(el, min_size) and id(el) not in tiles)]
        textpage = page.get_textpage()
        try:
            text = read_page_text(page, textpage, text_objects, page_box)
        finally:
            textpage.close()
        page.close()
        pages.append(_Page(i, text, elements, page_box, [], [], {}))
        elem_keys.append({el.key for el in elements})
        line_keys.append({_line_key(ln.text, ln.box) for ln in text.lines})
    if not any(p.text.lines for p in pages):
        raise EvidenceError(_no_text(path, pages, ocr_pages))
    repeated = _repeated(elem_keys, n_pages) | _repeated_rules(
        elem_keys, n_pages, pages[0].page_box[2] - pages[0].page_box[0])
    repeated_lines = _repeated(line_keys, n_pages)
    style = text_style([pg.text for pg in pages])
    for pg in pages:  # print far smaller or larger than the body's is a figure's labels (or
        for ln in pg.text.lines:  # a heading), not prose
            if ln.prose and not 0.7 * style.size <= ln.size <= 1.5 * style.size:
                ln.prose = False
        mark_level_prose(pg.text.lines, style.size, style.font)

    for pg in pages:
        _layout_page(pg, repeated, repeated_lines, style)
    _continue_over_pages(pages, repeated_lines, style)
    # where this document puts figures from their captions (above them, or below): pair again
    # with that side preferred when it is not the usual one
    sides = Counter(side for pg in pages for k, side in pg.sides.items()
                    if pg.captions[k].kind == "figure" and side in ("above", "below"))
    if sides["below"] > sides["above"]:
        for pg in pages:
            pg.regions, pg.sides = assign_regions(pg.captions, pg.clusters, pg.text,
                                                  prefer="below", max_gap=_max_gap(style),
                                                  exclude=pg.repeated,
                                                  body=(style.size, style.font))
    found = _pair_across_pages(pages)
    if uncaptioned:
        found += _uncaptioned(pages)
    found.sort(key=lambda f: (f.page, -f.box[3], f.box[0]))
    figures = _render_all(doc, found, dpi=dpi, pages=pages)
    return _info(doc, path, pages, repeated_lines), figures


def _no_text(path: Path, pages: list[_Page], ocr_pages: int) -> str:
    """Why a PDF with no printed text gives no figures, and what to do instead."""
    if not any(p.elements for p in pages):
        return f"PDF {path}: it is empty (no text and no graphics), so it holds no figures"
    what = (f"scanned: {ocr_pages} of its {len(pages)} pages are page images under an "
            "invisible OCR text layer" if ocr_pages else
            "image-only (scanned pages with no text layer, or text drawn as outlines)")
    return (f"PDF {path}: it is {what}, so its figures and captions cannot be cut apart "
            "(wsikit reads figures from born-digital PDFs, where text is printed as text; "
            "running OCR on it does not change that); extract from the article's "
            "born-digital PDF or its JATS XML / PMC OA package instead "
            "(wsikit figures extract article.nxml)")


def _layout_page(pg: _Page, repeated: set, repeated_lines: set, style: TextStyle) -> None:
    page_area = area(pg.page_box)
    elements = []
    for el in pg.elements:
        if el.key in repeated:
            continue
        if el.kind != IMAGE and area(el.box) > 0.5 * page_area:
            continue  # page background or frame
        elements.append(el)
    unmark_legend_keys(pg.text.lines, elements)
    image_boxes = [el.box for el in elements if el.kind == IMAGE]
    pg.captions = find_captions(pg.text, image_boxes=image_boxes, style=style) + \
        rotated_captions(pg.text, style)
    # a frame or background drawn around a caption is not a graphic
    heads = [c.lines[0].box for c in pg.captions]
    elements = [el for el in elements if el.kind == IMAGE or not any(
        el.box[0] <= h[0] + 1 and el.box[1] <= h[1] + 1 and el.box[2] >= h[2] - 1 and
        el.box[3] >= h[3] - 1 for h in heads)]
    # nor is an unseen white background under a caption's lines (a text column's, which
    # would join the figure above to the caption set in columns below it)
    cap_boxes = [ln.box for c in pg.captions for ln in c.lines]
    elements = [el for el in elements if not (el.white and any(
        inter(el.box, b) > 0.5 * area(b) for b in cap_boxes))]
    elements = _unseen_white(elements, pg.text)
    skip = {i for i, ln in enumerate(pg.text.lines)
            if _line_key(ln.text, ln.box) in repeated_lines}
    skip_repeated = set(skip)
    cap_ids = {id(ln) for c in pg.captions for ln in c.lines}
    skip |= {i for i, ln in enumerate(pg.text.lines) if id(ln) in cap_ids}
    turned = frozenset(id(w) for c in pg.captions for ln in c.lines for w in ln.words)
    # a paragraph's last lines in the body's look never join a graphic as its labels
    skip |= paragraph_lines(pg.text, skip, (style.size, style.font),
                            [el.box for el in elements])
    # lines that a figure's paths run into (a tree's taxa) or box in (a flow chart's steps)
    # are its labels
    figure_labels(pg.text, elements, (style.size, style.font))
    clusters = cluster_graphics(elements, pg.text, skip_lines=skip, skip_words=turned,
                                keep_out=tuple(cap_boxes))
    prose = [ln.box for ln in pg.text.lines if ln.prose]

    def framed_text(cl: Cluster) -> bool:
        # the graphics' own box: text that joined them as labels does not make a frame
        own = cl.graphic or cl.box
        return sum(1 for b in prose if inter(own, b) > 0.5 * area(b)) >= 2 or \
            any(inter(own, h) > 0.8 * area(h) for h in heads)

    kept = []
    for cl in clusters:
        if not framed_text(cl):
            kept.append(cl)
            continue
        # a frame around text (boxed abstract, table border) is not a graphic, but a figure
        # may sit inside the frame, or on a background, with its caption: peel the frame off
        # and look again
        inner = _inside_frame(elements, cl.box)
        if inner:
            kept += [c for c in cluster_graphics(inner, pg.text, skip_lines=skip,
                                                 skip_words=turned, keep_out=tuple(cap_boxes))
                     if not framed_text(c)]
        elif not cl.images and _chart_of_steps(pg.text.lines, cl.box, heads):
            # a flow chart set as text in a frame: its steps are its labels, not prose
            for ln in pg.text.lines:
                if inter(ln.box, cl.box) > 0.5 * area(ln.box):
                    ln.prose = False
            kept.append(cl)
    # a caption's own background or frame is not a graphic
    # (it lies under the caption's lines: a caption wrapping under its figure holds the
    # figure in its box, not under its lines)
    kept = [cl for cl in kept if not any(
        sum(inter(cl.box, ln.box) for ln in c.lines) > 0.5 * area(c.lines[0].box) and
        (cl.box[3] - cl.box[1]) < 3 * (c.box[3] - c.box[1]) + 6 for c in pg.captions)]
    pg.clusters = kept
    pg.repeated = frozenset(id(pg.text.lines[i]) for i in skip_repeated)
    pg.regions, pg.sides = assign_regions(pg.captions, kept, pg.text, max_gap=_max_gap(style),
                                          exclude=pg.repeated, body=(style.size, style.font))


def _unseen_white(elements: list[Element], text: PageText) -> list[Element]:
    """``elements`` with each white fill on the white page that holds pictures alone cut to
    them and the lines on it: a white box behind a figure's bitmap, drawn as wide as its
    caption, does not widen the figure. A white fill under paths (a plot's background, which
    reaches its axis titles) or with nothing on it, and one on a picture or a coloured fill
    (seen), are kept as they are."""
    seen = [el for el in elements if not el.white]
    out = []
    for el in elements:
        on = [s for s in seen if inter(s.box, el.box) > 0.5 * area(s.box)] if el.white else []
        if not on or any(s.kind != IMAGE for s in on) or any(
                inter(el.box, s.box) >= 0.9 * area(el.box) for s in seen):
            out.append(el)
            continue
        box = on[0].box
        for s in on[1:]:
            box = union(box, s.box)
        for ln in text.lines:  # the pictures' labels on the white
            if inter(ln.box, el.box) > 0.5 * area(ln.box):
                box = union(box, ln.box)
        out.append(replace(el, box=(max(box[0], el.box[0]), max(box[1], el.box[1]),
                                    min(box[2], el.box[2]), min(box[3], el.box[3]))))
    return out


def _chart_of_steps(lines: list[Line], box: Box, heads: list[Box]) -> bool:
    """Whether the text in a frame is a flow chart's steps, not a boxed passage: four lines
    or more, most centred in the frame and short of its width (a boxed abstract or note is
    set flush left, its lines the frame's width), no caption among them."""
    if any(inter(h, box) > 0.5 * area(h) for h in heads):
        return False
    inside = [ln for ln in lines if inter(ln.box, box) > 0.5 * area(ln.box)]
    if len(inside) < 4:
        return False
    width = box[2] - box[0]
    mid = (box[0] + box[2]) / 2
    centred = [ln for ln in inside if abs((ln.left + ln.right) / 2 - mid) <= 0.05 * width
               and ln.width <= 0.9 * width]
    return len(centred) >= 0.7 * len(inside) and \
        sum(1 for ln in inside if ln.width <= 0.75 * width) >= 0.5 * len(inside)


def _inside_frame(elements: list[Element], box: Box) -> list[Element]:
    """The elements inside ``box`` less its frame: the rules and corner pieces along its
    edges (empty when nothing else is inside)."""
    inside = [el for el in elements if el.box[0] >= box[0] - 1 and el.box[1] >= box[1] - 1
              and el.box[2] <= box[2] + 1 and el.box[3] <= box[3] + 1]

    def frame_part(el: Element) -> bool:
        b = el.box
        w, h = b[2] - b[0], b[3] - b[1]
        edge = min(b[0] - box[0], b[1] - box[1], box[2] - b[2], box[3] - b[3]) <= 3
        background = area(b) >= 0.9 * area(box)
        return el.kind != IMAGE and (background or (edge and (min(w, h) < 3 or
                                                                max(w, h) <= 12)))

    inner = [el for el in inside if not frame_part(el)]
    return inner if len(inner) < len(inside) else []


def _max_gap(style: TextStyle) -> float:
    """How far a caption may sit from its graphic: 60 points, or three lines of a
    double-spaced manuscript."""
    return max(60.0, 3.0 * style.pitch * style.size)


def _continue_over_pages(pages: list[_Page], repeated_lines: set, style: TextStyle) -> None:
    """A caption that runs over the foot of its page takes the lines that continue it at the
    top of the next page."""
    for pg, nxt in zip(pages, pages[1:], strict=False):
        skip = frozenset(id(ln) for p in (pg, nxt) for ln in p.text.lines
                         if _line_key(ln.text, ln.box) in repeated_lines)
        for k, cap in enumerate(pg.captions):
            if cap.kind != "figure" or cap.turn or cap.placeholder:
                continue
            more = caption_continuation(cap, pg.text, nxt.text, style, skip,
                                        [el.box for el in pg.elements]) or \
                marked_continuation(cap, pg.text, nxt.text, skip)
            if more:
                pg.captions[k] = continued(cap, more)


def _big(cl: Cluster, page_box: Box) -> bool:
    w, h = cl.box[2] - cl.box[0], cl.box[3] - cl.box[1]
    return min(w, h) >= 60 and w * h >= 0.04 * area(page_box) and \
        (bool(cl.images) or cl.n_paths > 3)


def _pair_across_pages(pages: list[_Page]) -> list[_Found]:
    """Figure captions with their regions; a caption without graphics on its page (a legend
    printed apart: a manuscript's legend pages, a supplement's legend page beside its figure
    page) takes its figure elsewhere, in this order:

    1. the graphic that carries its label on its own page ("Figure 1" printed over a figure
       page, a placeholder such as "Figure 3 (continued)": a part of a figure captioned
       elsewhere takes that caption);
    2. legends printed before all the unlabelled figure pages: those pages in number order,
       or the one page left between the figures numbered just before and after it;
    3. the big uncaptioned graphics on the facing page, the side (next or previous page)
       the document's other legends take their figures from.
    """
    found: list[_Found] = []
    orphans: list[tuple[int, Caption]] = []

    def free_big(pg: _Page) -> list[Cluster]:
        return [cl for cl in pg.clusters if cl.owner is None and _big(cl, pg.page_box)]

    def take(pg: _Page, cap: Caption, cap_page: int) -> None:
        big = free_big(pg)
        if not any(ln.prose for ln in pg.text.lines):  # a page of figure: all its graphics
            big += [cl for cl in pg.clusters if cl.owner is None and cl not in big]
        box = big[0].box
        for cl in big:
            cl.owner = -1
            box = union(box, cl.box)
        found.append(_Found(pg.index + 1, box, big, cap, cap_page + 1))

    labelled: list[tuple[_Page, Caption]] = []
    for pg in pages:
        for k, cap in enumerate(pg.captions):
            if cap.kind != "figure":
                continue
            if k in pg.regions:
                clusters = [cl for cl in pg.clusters if cl.owner == k]
                found.append(_Found(pg.index + 1, pg.regions[k], clusters, cap, pg.index + 1,
                                    _text_beside(pg, pg.regions[k], clusters, cap)))
            elif cap.label_only:
                labelled.append((pg, cap))
            else:
                orphans.append((pg.index, cap))
    for pg, cap in labelled:  # 1. a label over (or inside) a graphic no caption took
        if free_big(pg) and not any(c.kind == "figure" and not c.label_only
                                    for c in pg.captions):
            take(pg, cap, pg.index)
    remaining: list[tuple[int, Caption]] = []
    for page_index, cap in orphans:
        key = _label_key(cap)
        twins = [f for f in found if f.caption and _label_key(f.caption) == key and
                 f.caption.label_only]
        if twins:
            twin = min(twins, key=lambda f: abs(f.page - 1 - page_index))
            twin.caption = cap
            twin.caption_page = page_index + 1
            continue
        if any(f.caption and _label_key(f.caption) == key for f in found):
            continue  # the label is a figure found elsewhere: this was a mention in the text
        remaining.append((page_index, cap))
    # the rest of a figure named by a placeholder ("Figure 3. Cont.") is a part of the figure
    # whose caption is printed with its first part: it carries that caption
    captioned = {_label_key(f.caption): f for f in found
                 if f.caption and not f.caption.label_only}
    for f in found:
        first = captioned.get(_label_key(f.caption)) if f.caption else None
        if first is not None and f.caption is not None and f.caption.placeholder:
            f.caption, f.caption_page = first.caption, first.caption_page
    if remaining:
        _legends_apart(pages, remaining, found, free_big, take)
    return found


def _text_beside(pg: _Page, box: Box, clusters: list[Cluster], cap: Caption) -> bool:
    """Whether lines of text other than the caption's lie in ``box`` off the graphics of the
    ``clusters`` (labels or a panel of text joined beside a bitmap)."""
    own = {id(ln) for ln in cap.lines}
    return any(id(ln) not in own and inter(ln.box, box) > 0.5 * area(ln.box) and
               not any(inter(ln.box, cl.graphic or cl.box) > 0.5 * area(ln.box)
                       for cl in clusters) for ln in pg.text.lines)


def _legends_apart(pages: list[_Page], remaining: list[tuple[int, Caption]],
                   found: list[_Found], free_big, take) -> None:
    """Steps 2 and 3 of :func:`_pair_across_pages` for the legends still without figure."""
    figure_pages = [pg for pg in pages if free_big(pg) and
                    not any(c.kind == "figure" and not c.label_only for c in pg.captions)]
    after = [pg for pg in figure_pages if pg.index > max(i for i, _ in remaining)]
    if len(remaining) >= 2 and len(after) == len(remaining):
        in_order = sorted(remaining, key=lambda r: _number(r[1]))
        for pg, (page_index, cap) in zip(after, in_order, strict=True):
            take(pg, cap, page_index)
        return
    at = {_number(f.caption): f.page - 1 for f in found if f.caption}
    left: list[tuple[int, Caption]] = []
    for page_index, cap in remaining:  # between the figures numbered just before and after
        kind, n = _number(cap)
        lo, hi = at.get((kind, n - 1)), at.get((kind, n + 1))
        between = [pg for pg in figure_pages if lo is not None and hi is not None and
                   lo < pg.index < hi and pg.index > page_index and free_big(pg)]
        if len(between) == 1:
            take(between[0], cap, page_index)
            at[(kind, n)] = between[0].index
        else:
            left.append((page_index, cap))
    # the facing page (not another legend's page): the side most legends have one on
    legend_pages = {i for i, _ in remaining}

    def facing(page_index: int, step: int) -> _Page | None:
        other = page_index + step
        if 0 <= other < len(pages) and other not in legend_pages and free_big(pages[other]):
            return pages[other]
        return None

    sides: Counter = Counter(step for page_index, _ in left for step in (1, -1)
                             if facing(page_index, step) is not None)
    order = (-1, 1) if sides[-1] > sides[1] else (1, -1)
    for page_index, cap in left:
        for step in order:
            other = facing(page_index, step)
            if other is not None:
                take(other, cap, page_index)
                break


def _number(cap: Caption) -> tuple[int, int]:
    digits = re.sub(r"\D", "", cap.number)
    return ("SE".find(cap.number[:1]) + 1, int(digits) if digits else 0)


def _label_key(cap: Caption) -> tuple[str, str]:
    return (cap.kind, cap.number)


def _uncaptioned(pages: list[_Page]) -> list[_Found]:
    out = []
    for pg in pages:
        for cl in pg.clusters:
            if cl.owner is None and _big(cl, pg.page_box):
                cl.owner = -2
                out.append(_Found(pg.index + 1, cl.box, [cl], None, 0))
    return out


# ---------------------------------------------------------------------- pixels
def _render_region(page, box: Box, scale: float) -> np.ndarray:
    """Render ``box`` (PDF points, page space) of ``page`` at ``scale`` pixels per point, in
    the page's displayed orientation (its /Rotate applied)."""
    import ctypes

    from pypdfium2 import raw

    width, height = page.get_size()  # displayed size
    res = 64  # device units per point for the mapping (sub-point precision)
    dev_w, dev_h = int(round(width * res)), int(round(height * res))
    xs, ys = [], []
    dx, dy = ctypes.c_int(), ctypes.c_int()
    for x, y in ((box[0], box[1]), (box[0], box[3]), (box[2], box[1]), (box[2], box[3])):
        raw.FPDF_PageToDevice(page.raw, 0, 0, dev_w, dev_h, 0, x, y, dx, dy)
        xs.append(dx.value / res)
        ys.append(dy.value / res)
    left, right = max(0.0, min(xs)), min(width, max(xs))
    top, bottom = max(0.0, min(ys)), min(height, max(ys))
    crop = (left, height - bottom, width - right, top)
    bitmap = page.render(scale=scale, crop=crop, fill_color=(255, 255, 255, 255))
    return np.asarray(bitmap.to_pil().convert("RGB"), dtype=np.uint8).copy()


def _embedded(page, element: Element) -> np.ndarray | None:
    """The one image of a figure at its native pixels, or None when its raw bitmap does not
    look like the page (masks, Decode arrays, colour spaces PDFium leaves undecoded,
    rotated or flipped placement)."""
    from pypdfium2 import raw

    target = None
    others: list[Box] = []  # the page's other images (small ones too: letters as bitmaps)
    for obj in page.get_objects(filter=[raw.FPDF_PAGEOBJ_IMAGE]):
        box = tuple(float(v) for v in obj.get_bounds())
        m = obj.get_matrix()
        upright = m.b == 0 and m.c == 0 and m.a > 0 and m.d > 0
        form = obj.container
        while form is not None:  # an image inside Form XObjects: into page space
            fm = form.get_matrix()
            box = transform_box((fm.a, fm.b, fm.c, fm.d, fm.e, fm.f), box)  # type: ignore[arg-type]
            upright = upright and fm.b == 0 and fm.c == 0 and fm.a > 0 and fm.d > 0
            form = form.container
        if target is None and tuple(int(v) for v in obj.get_px_size()) == element.px and \
                all(abs(a - b) < 1.0 for a, b in zip(box, element.box, strict=True)):
            if not upright:
                return None
            target = obj
        else:
            others.append(box)  # type: ignore[arg-type]
    # a small bitmap drawn over the figure (a panel letter set as an image) is on the page,
    # not in the figure's own pixels: render the region instead
    if target is None or any(inter(b, element.box) > 0.5 * area(b) for b in others):
        return None
    try:
        pil = target.get_bitmap(render=False).to_pil()
    except Exception:  # PDFium declines some encodings: render instead
        return None
    if pil.mode not in ("RGB", "L", "RGBA", "RGBX", "BGRA"):
        return None
    if pil.mode in ("RGBA", "BGRA"):
        return None  # transparency: the page shows it composited; render
    image = np.asarray(pil.convert("RGB"), dtype=np.uint8)
    # check against what the page shows
    small_scale = min(1.0, 96.0 / max(element.box[2] - element.box[0],
                                      element.box[3] - element.box[1]))
    shown = _render_region(page, element.box, small_scale * 1.0)
    from PIL import Image

    small = Image.fromarray(image).resize((shown.shape[1], shown.shape[0]),
                                          Image.Resampling.BILINEAR)
    raw_small = np.asarray(small, dtype=np.float32)
    if np.abs(raw_small - shown.astype(np.float32)).mean() > 24:
        return None
    return image


def _trim_white(image: np.ndarray, box: Box, shown: Box) -> tuple[np.ndarray, Box]:
    """A figure without the blank margins of its pixels (a bitmap exported with a wide white
    border): ``image`` shows ``shown`` (page points); the figure's ``box`` shrinks with it.
    Blank on one or two sides only is the figure's own white (a panel left empty), kept."""
    ink: np.ndarray = np.any(np.asarray(image) < 245, axis=2)
    rows, cols = np.nonzero(ink.any(axis=1))[0], np.nonzero(ink.any(axis=0))[0]
    h, w = ink.shape
    if not len(rows) or not len(cols):
        return image, box
    top, bottom, left, right = int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1
    if top + (h - bottom) < 0.03 * h and left + (w - right) < 0.03 * w:
        return image, box
    margins = (top > 0.01 * h, h - bottom > 0.01 * h, left > 0.01 * w, w - right > 0.01 * w)
    if sum(margins) < 3:
        return image, box
    pad = 2
    top, left = max(0, top - pad), max(0, left - pad)
    bottom, right = min(h, bottom + pad), min(w, right + pad)
    sx, sy = (shown[2] - shown[0]) / w, (shown[3] - shown[1]) / h
    content = (shown[0] + left * sx, shown[3] - bottom * sy, shown[0] + right * sx,
               shown[3] - top * sy)
    trimmed = (max(box[0], content[0]), max(box[1], content[1]), min(box[2], content[2]),
               min(box[3], content[3]))
    if trimmed[2] <= trimmed[0] or trimmed[3] <= trimmed[1]:
        return image, box
    return np.ascontiguousarray(image[top:bottom, left:right]), trimmed


def _blank(image: np.ndarray, shown: Box, boxes: list[Box]) -> np.ndarray:
    """``image`` (showing ``shown``, page points) with the ``boxes`` painted white, one
    point round each."""
    out = image.copy()
    h, w = out.shape[:2]
    sx, sy = w / (shown[2] - shown[0]), h / (shown[3] - shown[1])
    for b in boxes:
        x0 = int(max(0.0, (b[0] - 1 - shown[0]) * sx))
        x1 = int(min(w, (b[2] + 1 - shown[0]) * sx + 1))
        y0 = int(max(0.0, (shown[3] - b[3] - 1) * sy))
        y1 = int(min(h, (shown[3] - b[1] + 1) * sy + 1))
        out[y0:y1, x0:x1] = 255
    return out


def _caption_inside(f: _Found) -> list[Box]:
    """The lines of a figure's own caption inside its box (a side caption set in a notch of
    an L-shaped figure): left out of its picture, which the caption's text goes with."""
    if f.caption is None or f.caption_page != f.page:
        return []
    return [ln.box for ln in f.caption.lines if inter(ln.box, f.box) > 0.5 * area(ln.box)]


def _figure_words(text: PageText, box: Box, shown: Box, size: tuple[int, int]
                  ) -> tuple[tuple[str, tuple[int, int, int, int]], ...]:
    """The words of ``text`` whose centre lies in ``box`` (page points), in pixels of an
    image of ``size`` (height, width) showing ``shown``."""
    h, w = size
    sx, sy = w / max(shown[2] - shown[0], 1e-6), h / max(shown[3] - shown[1], 1e-6)
    out = []
    for word in [wd for ln in text.lines for wd in ln.words] + list(text.rotated):
        cx, cy = (word.left + word.right) / 2, (word.bottom + word.top) / 2
        if not (box[0] <= cx <= box[2] and box[1] <= cy <= box[3]) or not word.text.strip():
            continue
        x0, x1 = (word.left - shown[0]) * sx, (word.right - shown[0]) * sx
        y0, y1 = (shown[3] - word.top) * sy, (shown[3] - word.bottom) * sy
        out.append((word.text, (max(0, int(x0)), max(0, int(y0)), min(w, int(round(x1))),
                                min(h, int(round(y1))))))
    return tuple(out)


def _render_all(doc, found: list[_Found], *, dpi: float,
                pages: list[_Page] | None = None) -> list[PdfFigure]:
    figures: list[PdfFigure] = []
    for f in found:
        page = doc[f.page - 1]
        try:
            images = [el for cl in f.clusters for el in cl.images]
            paths = sum(cl.n_paths for cl in f.clusters)
            texts = sum(cl.n_text for cl in f.clusters)
            image = None
            source, used_dpi = "rendered", dpi
            if len(images) == 1 and paths == 0 and texts == 0:
                el = images[0]
                # the bitmap's own pixels when the figure is that bitmap alone (no labels
                # or panel of text joined beside it), else rendered at their resolution
                image = None if f.text_beside else _embedded(page, el)
                if image is not None:
                    source = "embedded"
                    used_dpi = 72.0 * el.px[0] / max(el.box[2] - el.box[0], 1e-6)
                else:
                    used_dpi = min(400.0, max(dpi, 72.0 * el.px[0] /
                                              max(el.box[2] - el.box[0], 1e-6)))
            box, shown = f.box, images[0].box if image is not None else f.box
            turn = f.caption.turn if f.caption is not None else 0
            turned = bool(turn)
            if image is None:
                pad = 2.0
                shown = (box[0] - pad, box[1] - pad, box[2] + pad, box[3] + pad)
                image = _render_region(page, shown, used_dpi / 72.0)
                if turned and page.get_rotation() == 0:
                    # a landscape figure printed sideways: upright, as its caption reads
                    image = np.ascontiguousarray(np.rot90(image, k=-1 if turn == 3 else 1))
            words: tuple[tuple[str, tuple[int, int, int, int]], ...] = ()
            if not turned and page.get_rotation() == 0:
                if source == "rendered" and _caption_inside(f):
                    image = _blank(image, shown, _caption_inside(f))
                size = image.shape[:2]
                image, box = _trim_white(image, box, shown)
                if source == "rendered" and pages is not None:
                    # the trimmed image shows (about) the trimmed box
                    words = _figure_words(pages[f.page - 1].text, box,
                                          shown if image.shape[:2] == size else box,
                                          image.shape[:2])
        finally:
            page.close()
        cap = f.caption
        label = " ".join(cap.label.split()) if cap else None
        figures.append(PdfFigure(image, cap.text if cap else "", label, f.page,
                                 tuple(float(v) for v in box),  # type: ignore[arg-type]
                                 f.caption_page, source, float(used_dpi), words))
    return figures


# ---------------------------------------------------------------------- document facts
def _info(doc, path: Path, pages: list[_Page], repeated_lines: set) -> PdfInfo:
    meta = {k: str(v) for k, v in doc.get_metadata_dict(skip_empty=True).items()}
    first = pages[0].text.plain()
    sizes = sorted(ln.size for pg in pages for ln in pg.text.lines if ln.prose)
    body = sizes[len(sizes) // 2] if sizes else 10.0
    heads = " ".join(_squash_text(ln.text) for pg in pages[:8] for ln in pg.text.lines
                     if _line_key(ln.text, ln.box) in repeated_lines)
    title = None
    # the big print of page 1, else of page 2 (an accepted manuscript's cover page has none),
    # else page 1's first paragraph that reads as a title
    for pg, one_size in ((pages[0], False), (pages[min(1, len(pages) - 1)], False),
                         (pages[0], True)):
        skip = frozenset(id(ln) for ln in pg.text.lines
                         if _line_key(ln.text, ln.box) in repeated_lines)
        title = title_from_text(pg.text, body_size=body, skip=skip, heads=heads,
                                one_size=one_size)
        if title:
            break
    source = "text" if title else None
    if title is None:
        title = title_from_metadata(meta)
        source = "metadata" if title else None
    doi = find_doi(first)
    for key in ("Subject", "Keywords", "Title", "doi", "DOI"):
        doi = doi or find_doi(meta.get(key, ""))
    if doi is None and len(pages) > 1:
        doi = find_doi(pages[1].text.plain())
    # the licence is printed on the first page or at the end of the text (before or after
    # the references): first page and the last two
    stated = find_licence_statement("\n".join([first] + [pg.text.plain()
                                                          for pg in pages[1:][-2:]]))
    return PdfInfo(path, title, doi, len(pages), year_from_text(first, meta),
                   journal_from(first, meta), source, *(stated or (None, None)))


def _squash_text(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower())


# ---------------------------------------------------------------------- files
def _free_image_path(path: Path, image: np.ndarray) -> Path:
    """``path`` if it is free or already holds these pixels; else a content-named sibling.

    A re-extraction into the same folder must never replace an image a reviewer edited or
    swapped: a file of other content keeps its name and the new figure gets
    ``<name>-<content hash>.png``.
    """
    from .nodes import image_content_hash, load_image

    if not path.exists():
        return path
    try:
        same = image_content_hash(load_image(path)) == image_content_hash(image)
    except EvidenceError:
        same = False
    if same:
        return path
    return path.with_name(f"{path.stem}-{image_content_hash(image)[:12]}{path.suffix}")


def pdf_figure_nodes(info: PdfInfo, figures: list[PdfFigure], out_dir: str | os.PathLike[str],
                     *, evidence_level: int | str | None = None, year: int | None = None,
                     license: str | None = None) -> list[FigureNode]:
    """Write figures found by :func:`read_pdf_figures` as PNG files under ``out_dir/images``
    (``<pdf stem>_p<page>_<n>.png``, each written atomically) and return their nodes; ``year``
    and ``license`` default to the year and licence printed in the paper (a caption's own, such
    as "Reprinted with permission", first). A figure that carries text-layer words
    (:attr:`PdfFigure.words`: a vector chart's tick numbers) gets its kind measured here, with
    them (:func:`wsikit.evidence.panels.analyse_figure`); the others when indexed."""
    from PIL import Image

    from .._atomic import atomic_path

    try:
        level = parse_evidence_level(evidence_level)
    except ValueError as exc:
        raise EvidenceError(f"{keyword('evidence_level')} for {info.path}: {exc}") from exc
    images_dir = Path(out_dir) / "images"
    images_dir.mkdir(parents=True, exist_ok=True)
    nodes = []
    counts: dict[int, int] = {}
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", info.path.stem)
    for fig in figures:
        counts[fig.page] = counts.get(fig.page, 0) + 1
        image_path = _free_image_path(images_dir / f"{stem}_p{fig.page}_{counts[fig.page]}.png",
                                      fig.image)
        if not image_path.exists():
            with atomic_path(image_path) as tmp:
                Image.fromarray(fig.image).save(tmp, format="PNG")
        # a caption's own licence ("Reprinted with permission") wins over the paper's
        lic = (license, None) if license is not None else \
            figure_licence_statement(fig.caption) or (info.license, info.license_source)
        node = FigureNode.from_image(
            image_path, image=fig.image, caption=fig.caption, figure_label=fig.figure_label,
            source_title=info.title, doi=info.doi, source_path=str(info.path.resolve()),
            page=fig.page, year=year if year is not None else info.year, license=lic[0],
            license_source=lic[1], evidence_level=level)
        nodes.append(_kind_from_words(node, fig))
    return nodes


def _kind_from_words(node: FigureNode, fig: PdfFigure) -> FigureNode:
    """``node`` with its kind measured now when the figure carries text-layer words (tick
    numbers, axis titles: :attr:`PdfFigure.words`), which only the PDF holds; a bitmap
    figure's kind is measured when it is indexed, from its pixels and caption."""
    if not fig.words:
        return node
    from dataclasses import replace

    from .panels import analyse_figure

    kind = analyse_figure(fig.image, caption=fig.caption, text_boxes=fig.words).kind
    return replace(node, kind=kind.kind, kind_source=kind.source)


def extract_pdf_figures(pdf: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                        min_size: int = 100, evidence_level: int | str | None = None,
                        year: int | None = None, license: str | None = None,
                        uncaptioned: bool = False, dpi: float = DEFAULT_DPI
                        ) -> list[FigureNode]:
    """Extract a PDF's figures as PNG files under ``out_dir/images`` and return their nodes
    (:func:`read_pdf_figures`, then :func:`pdf_figure_nodes`).

    Use :func:`wsikit.evidence.write_figure_manifest` to save the nodes as a reviewable
    manifest.
    """
    try:
        parse_evidence_level(evidence_level)
    except ValueError as exc:
        raise EvidenceError(f"{keyword('evidence_level')} for {pdf}: {exc}") from exc
    info, figures = read_pdf_figures(pdf, min_size=min_size, dpi=dpi, uncaptioned=uncaptioned)
    return pdf_figure_nodes(info, figures, out_dir, evidence_level=evidence_level, year=year,
                            license=license)
