"""Figures and their captions from PDF papers, with pypdfium2 (Apache-2.0/BSD, not PyMuPDF).

For each page, embedded image objects at least ``min_size`` pixels on their short side are
taken as figures (their bitmap is extracted at its native resolution). Text lines come from
PDFium's text rectangles; lines are merged into blocks (paragraphs) by vertical gaps, and a
block whose first line starts with "Figure N", "Fig. N" or "FIGURE N" (panel letters such as
"2B" kept) is a caption. Each caption goes to the nearest figure above or below it that
overlaps it horizontally, closest pairs first, each used once; a figure left without one keeps
caption ``""`` and is logged for review.

Document title: PDF metadata (unless it looks like a file name), else the largest-font line at
the top of page 1. DOI: metadata, else the first two pages' text (``10.NNNN/...``).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._hints import keyword
from ..errors import EvidenceError
from .nodes import FigureNode, parse_evidence_level

__all__ = [
    "CAPTION_RE",
    "PdfFigure",
    "PdfInfo",
    "extract_pdf_figures",
    "find_doi",
    "read_pdf_figures",
]

log = logging.getLogger(__name__)

#: A caption's start: label word, number, optional panel letter(s), optional separator.
CAPTION_RE = re.compile(
    r"^\s*(?P<label>(?:Figure|FIGURE|Fig\.?|FIG\.?|Supplementary Figure|Extended Data Fig\.?)"
    r"\s*(?P<num>S?\d+)(?P<panel>[A-Za-z](?:\s*[-–,&]\s*[A-Za-z])*)?)(?P<sep>\s*[.:|—–-])?")
_DOI_RE = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>]+)", re.IGNORECASE)
_BAD_TITLE = re.compile(r"(\.(docx?|pdf|tex|indd)$)|^(microsoft word|untitled)", re.IGNORECASE)


@dataclass(frozen=True)
class PdfFigure:
    """One figure found in a PDF.

    Attributes
    ----------
    image : ndarray
        ``(H, W, 3) uint8`` RGB bitmap at the embedded resolution.
    caption : str
        Merged caption text, ``""`` when none was found.
    figure_label : str or None
        "Figure 2B", "Fig. 3" …
    page : int
        1-based page number.
    bbox : tuple of float
        ``(left, bottom, right, top)`` on the page in PDF points (origin bottom-left).
    """

    image: np.ndarray
    caption: str
    figure_label: str | None
    page: int
    bbox: tuple[float, float, float, float]


@dataclass(frozen=True)
class PdfInfo:
    """Document-level facts: ``path``, ``title``, ``doi`` (or None), ``pages``."""

    path: Path
    title: str | None
    doi: str | None
    pages: int


@dataclass
class _Line:
    text: str
    left: float
    bottom: float
    right: float
    top: float

    @property
    def height(self) -> float:
        return self.top - self.bottom


def find_doi(text: str) -> str | None:
    """First DOI (``10.NNNN/suffix``) in ``text``, trailing punctuation removed."""
    match = _DOI_RE.search(text or "")
    if not match:
        return None
    return match.group(1).rstrip(".,;:)]}'")


def _page_lines(textpage) -> list[_Line]:
    """Text rectangles merged into lines (top to bottom, left to right)."""
    rects = []
    for i in range(textpage.count_rects()):
        left, bottom, right, top = textpage.get_rect(i)
        text = textpage.get_text_bounded(left, bottom, right, top).replace("\r", " ")
        text = " ".join(text.split())
        if text:
            rects.append(_Line(text, left, bottom, right, top))
    rects.sort(key=lambda r: (-r.top, r.left))
    lines: list[_Line] = []
    for rect in rects:
        if lines:
            last = lines[-1]
            overlap = min(last.top, rect.top) - max(last.bottom, rect.bottom)
            if overlap > 0.5 * min(last.height, rect.height):
                last.text = f"{last.text} {rect.text}" if rect.left >= last.left else \
                    f"{rect.text} {last.text}"
                last.left, last.right = min(last.left, rect.left), max(last.right, rect.right)
                last.bottom, last.top = min(last.bottom, rect.bottom), max(last.top, rect.top)
                continue
        lines.append(_Line(rect.text, rect.left, rect.bottom, rect.right, rect.top))
    return lines


def _blocks(lines: list[_Line], images: list[tuple[float, float, float, float]]
            ) -> list[list[_Line]]:
    """Group lines into paragraphs: split at gaps > 0.8 line height, at an image lying between
    two lines, and before a line that starts a caption with a separator ("Figure 3.")."""
    blocks: list[list[_Line]] = []
    for line in lines:
        if blocks:
            prev = blocks[-1][-1]
            gap = prev.bottom - line.top
            between = any(bot < prev.bottom and top > line.top and left < line.right
                          and right > line.left for (left, bot, right, top) in images)
            match = CAPTION_RE.match(line.text)
            starts_caption = bool(match and match.group("sep"))
            if gap <= 0.8 * max(prev.height, line.height) and not between and not starts_caption:
                blocks[-1].append(line)
                continue
        blocks.append([line])
    return blocks


def _to_rgb(image_obj) -> np.ndarray:
    try:
        bitmap = image_obj.get_bitmap(render=False)
        pil = bitmap.to_pil()
    except Exception:
        bitmap = image_obj.get_bitmap(render=True)
        pil = bitmap.to_pil()
    if pil.mode in ("RGBA", "LA", "P"):
        from PIL import Image

        pil = pil.convert("RGBA")
        pil = Image.alpha_composite(Image.new("RGBA", pil.size, (255, 255, 255, 255)), pil)
    return np.asarray(pil.convert("RGB"), dtype=np.uint8).copy()


def _title(doc, first_page_lines: list[_Line], textpage) -> str | None:
    meta = doc.get_metadata_dict(skip_empty=True)
    title = (meta.get("Title") or "").strip()
    if title and not _BAD_TITLE.search(title):
        return title
    if not first_page_lines:
        return None
    from pypdfium2 import raw

    def font_size(line: _Line) -> float:
        index = textpage.get_index(line.left + 1.0, (line.bottom + line.top) / 2, 2.0, 2.0)
        if index is None or index < 0:
            return line.height
        return float(raw.FPDFText_GetFontSize(textpage.raw, index))

    top = [ln for ln in first_page_lines[:8] if len(ln.text) > 3 and not find_doi(ln.text)]
    if not top:
        return None
    return max(top, key=font_size).text


def read_pdf_figures(pdf: str | os.PathLike[str], *, min_size: int = 100
                     ) -> tuple[PdfInfo, list[PdfFigure]]:
    """Find the figures of a PDF with their captions (no files written).

    Parameters
    ----------
    pdf
        Path of the PDF.
    min_size
        Minimum short side in pixels of an embedded image to count as a figure (logos and
        icons are smaller).

    Returns
    -------
    info : PdfInfo
    figures : list of PdfFigure
        In page order, top to bottom.

    Raises
    ------
    EvidenceError
        If the file is missing or not a readable PDF.
    """
    import pypdfium2 as pdfium
    from pypdfium2 import raw

    path = Path(pdf)
    if not path.is_file():
        raise EvidenceError(f"PDF {path} does not exist")
    try:
        doc = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        raise EvidenceError(f"cannot read PDF {path} ({exc}); is it a valid, unencrypted PDF?"
                            ) from exc
    try:
        figures: list[PdfFigure] = []
        title = doi = None
        meta = doc.get_metadata_dict(skip_empty=True)
        for key in ("Subject", "Keywords", "Title"):
            doi = doi or find_doi(meta.get(key, ""))
        for page_no in range(len(doc)):
            page = doc[page_no]
            textpage = page.get_textpage()
            lines = _page_lines(textpage)
            if page_no == 0:
                title = _title(doc, lines, textpage)
            if page_no < 2 and doi is None:
                doi = find_doi(textpage.get_text_range())
            found = []
            for obj in page.get_objects(filter=[raw.FPDF_PAGEOBJ_IMAGE]):
                px_w, px_h = obj.get_px_size()
                if min(px_w, px_h) < min_size:
                    continue
                x0, y0, x1, y1 = obj.get_bounds()
                found.append(((float(x0), float(y0), float(x1), float(y1)), _to_rgb(obj)))
            found.sort(key=lambda f: (-f[0][3], f[0][0]))
            boxes = [f[0] for f in found]
            captions = []
            for block in _blocks(lines, boxes):
                match = CAPTION_RE.match(block[0].text)
                if match:
                    captions.append(block)
            assignment = _assign(boxes, captions, page_height=page.get_height())
            for i, (bbox, image) in enumerate(found):
                assigned = assignment.get(i)
                if assigned is None:
                    caption, label = "", None
                    log.warning("%s page %d: figure %d has no caption; kept with caption '' "
                                "(review the manifest)", path.name, page_no + 1, i + 1)
                else:
                    caption = " ".join(ln.text for ln in assigned)
                    caption = re.sub(r"(\w)- (\w)", r"\1\2", caption)  # de-hyphenate wraps
                    head = CAPTION_RE.match(assigned[0].text)
                    assert head is not None  # blocks became captions only where it matched
                    label = " ".join(head.group("label").split())
                figures.append(PdfFigure(image, caption, label, page_no + 1, bbox))
            textpage.close()
            page.close()
        return PdfInfo(path, title, doi, len(doc)), figures
    finally:
        doc.close()


def _assign(boxes: list[tuple[float, float, float, float]], captions: list[list[_Line]], *,
            page_height: float) -> dict[int, list[_Line]]:
    """Pair figures with caption blocks: nearest above/below first, each used at most once."""
    max_gap = 0.15 * page_height
    pairs = []
    for i, (left, bottom, right, top) in enumerate(boxes):
        for j, block in enumerate(captions):
            b_top, b_bottom = block[0].top, block[-1].bottom
            b_left = min(ln.left for ln in block)
            b_right = max(ln.right for ln in block)
            if min(right, b_right) - max(left, b_left) <= 0:
                continue  # no horizontal overlap
            if b_top <= bottom + 2:        # caption below the figure
                gap = bottom - b_top
            elif b_bottom >= top - 2:      # caption above the figure
                gap = b_bottom - top
            else:
                continue                   # text beside/over the image
            gap = max(gap, 0.0)
            if gap <= max_gap:
                pairs.append((gap, i, j))
    pairs.sort()
    out: dict[int, list[_Line]] = {}
    used: set[int] = set()
    for _, i, j in pairs:
        if i in out or j in used:
            continue
        out[i] = captions[j]
        used.add(j)
    return out


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


def extract_pdf_figures(pdf: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                        min_size: int = 100, evidence_level: int | str | None = None,
                        year: int | None = None, license: str | None = None
                        ) -> list[FigureNode]:
    """Extract a PDF's figures as PNG files under ``out_dir/images`` and return their nodes.

    Image files are named ``<pdf stem>_p<page>_<n>.png``. Use
    :func:`wsikit.evidence.write_figure_manifest` to save the nodes as a reviewable manifest.
    """
    from PIL import Image

    try:
        level = parse_evidence_level(evidence_level)
    except ValueError as exc:
        raise EvidenceError(f"{keyword('evidence_level')} for {pdf}: {exc}") from exc
    info, figures = read_pdf_figures(pdf, min_size=min_size)
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
            from .._atomic import atomic_path

            with atomic_path(image_path) as tmp:
                Image.fromarray(fig.image).save(tmp, format="PNG")
        nodes.append(FigureNode.from_image(
            image_path, image=fig.image, caption=fig.caption, figure_label=fig.figure_label,
            source_title=info.title, doi=info.doi, source_path=str(info.path.resolve()),
            page=fig.page, year=year, license=license, evidence_level=level))
    return nodes
