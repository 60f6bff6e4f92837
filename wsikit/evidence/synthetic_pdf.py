"""A small synthetic "paper" PDF of captioned H&E-like figures, for tests and the demo.

Everything it writes is labelled SYNTHETIC (title, metadata and every caption), so its figures
can never be mistaken for real literature. Requires ``fpdf2`` (``pip install wsikit[pdf]``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._atomic import atomic_path
from ..errors import EvidenceError
from ..slide.synthetic import synthetic_tissue_crop

__all__ = ["SYNTHETIC_DOI", "SyntheticFigure", "synthetic_figures", "write_synthetic_pdf"]

#: DOI-shaped identifier of the synthetic demo paper (10.5555 is a test prefix).
SYNTHETIC_DOI = "10.5555/wsikit.synthetic.0001"


@dataclass(frozen=True)
class SyntheticFigure:
    """One figure of a synthetic PDF.

    Attributes
    ----------
    image : ndarray
        ``(H, W, 3) uint8`` pixels.
    caption : str or None
        Caption text (should start with "Figure N"); ``None`` for a figure without caption.
    page : int
        1-based page number.
    caption_position : {"below", "above"}
        Where the caption is printed relative to the image.
    width_mm : float
        Printed width of the image.
    """

    image: np.ndarray
    caption: str | None
    page: int = 1
    caption_position: str = "below"
    width_mm: float = 70.0


def synthetic_figures(seed: int = 0) -> list[SyntheticFigure]:
    """The demo figure set: 5 figures on 3 pages (page 2 has none), captions above and below,
    one multi-line caption and one figure without caption. Captions say SYNTHETIC.

    The tissue figures are 512 px at 0.5 µm/px (Figure 1, Figure 2B) and at 1 µm/px (Fig. 3,
    FIGURE 4), like the demo's crops (0.5–2 µm/px), so the weight-free encoder compares like
    with like."""
    return [
        SyntheticFigure(synthetic_tissue_crop(seed + 1, True),
                        "Figure 1. SYNTHETIC densely packed nuclei "
                        "(hypercellular region), H&E-like rendering.", page=1),
        SyntheticFigure(synthetic_tissue_crop(seed + 2, False),
                        "Figure 2B. SYNTHETIC loose stroma with "
                        "scattered nuclei; this caption is deliberately long so that it wraps "
                        "over several printed lines and must be merged back into one caption "
                        "by the extractor.", page=1, caption_position="above"),
        SyntheticFigure(synthetic_tissue_crop(seed + 3, True, downsample=2),
                        "Fig. 3. SYNTHETIC dense nuclei, second example.", page=3),
        SyntheticFigure(np.full((200, 200, 3), (240, 200, 220), np.uint8), None, page=3),
        SyntheticFigure(synthetic_tissue_crop(seed + 4, False, downsample=2),
                        "FIGURE 4. SYNTHETIC stroma, second example.", page=3,
                        caption_position="above"),
    ]


def write_synthetic_pdf(path: str | os.PathLike[str],
                        figures: Sequence[SyntheticFigure] | None = None, *,
                        title: str = "SYNTHETIC atlas of H&E-like tissue (wsikit demo)",
                        doi: str | None = SYNTHETIC_DOI, title_in_metadata: bool = True,
                        doi_in_metadata: bool = False, doi_in_text: bool = True,
                        n_pages: int | None = None,
                        seed: int = 0) -> Path:
    """Write a synthetic paper PDF with captioned figures; return its path.

    Page 1 starts with the title and (unless ``doi`` is None) a line "doi: …" in the text.
    ``title_in_metadata`` / ``doi_in_metadata`` (``doi_in_text``) put them into the PDF metadata.
    Pages without figures get body text only. ``n_pages`` defaults to the last figure's page.
    """
    try:
        from fpdf import FPDF
    except ImportError as exc:  # pragma: no cover - fpdf2 is a dev/pdf extra
        raise EvidenceError("writing synthetic PDFs needs fpdf2; pip install 'wsikit[pdf]'"
                            ) from exc
    from PIL import Image

    figures = list(synthetic_figures(seed) if figures is None else figures)
    last = max([f.page for f in figures] + [1])
    n_pages = max(n_pages or last, last)
    pdf = FPDF(unit="mm", format="A4")
    pdf.set_auto_page_break(False)
    if title_in_metadata:
        pdf.set_title(title)
    if doi_in_metadata and doi:
        pdf.set_subject(f"doi:{doi}")
    pdf.set_author("wsikit synthetic generator")
    pdf.set_creator("wsikit")
    for page in range(1, n_pages + 1):
        pdf.add_page()
        pdf.set_xy(20, 15)
        if page == 1:
            pdf.set_font("Helvetica", "B", 15)
            pdf.multi_cell(170, 7, title)
            pdf.set_font("Helvetica", "", 9)
            if doi and doi_in_text:
                pdf.set_x(20)
                pdf.cell(170, 5, f"doi: {doi}")
                pdf.ln(6)
        pdf.set_font("Helvetica", "", 9)
        pdf.set_x(20)
        pdf.multi_cell(170, 4.5, f"SYNTHETIC body text on page {page}. This document was "
                                 "generated by wsikit for testing and demonstration; it is not "
                                 "real literature and carries no medical meaning.")
        y = pdf.get_y() + 8
        for fig in (f for f in figures if f.page == page):
            h, w = fig.image.shape[:2]
            height = fig.width_mm * h / w
            pil = Image.fromarray(np.ascontiguousarray(fig.image, dtype=np.uint8), "RGB")
            if fig.caption and fig.caption_position == "above":
                pdf.set_xy(20, y)
                pdf.multi_cell(170, 4.5, fig.caption)
                y = pdf.get_y() + 2
            pdf.image(pil, x=20, y=y, w=fig.width_mm, h=height)
            y += height + 2
            if fig.caption and fig.caption_position != "above":
                pdf.set_xy(20, y)
                pdf.multi_cell(170, 4.5, fig.caption)
                y = pdf.get_y()
            y += 12
    path = Path(path)
    with atomic_path(path) as tmp:
        pdf.output(str(tmp))
    return path
