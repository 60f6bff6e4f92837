"""A caption beside its figure's foot that ends its column in mid-sentence and goes on under
the figure, in the next column, on a generated paper."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _fpdf_paper import BODY, column, paper, pt, vector_plot

from wsikit.evidence import read_pdf_figures

fpdf = pytest.importorskip("fpdf")

LEGEND = ("Fig. 4. SYNTHETIC cell states in health and disease. (A) Graph of the generated cell "
          "states found in healthy skin, each point one generated cell. (B) Dot plot of the "
          "genes that characterise each state, the size of a dot the share of cells that "
          "express the gene and its colour the mean expression. (C) Feature plots of the "
          "states shown in (A), with images of the markers in generated tissue. (D) Top: the "
          "graph in (A) annotated by clustering into eight groups; bottom: the relative "
          "connectivity between the clusters, arrows showing the two paths of "
          "differentiation. (E) Dot plot of the genes related to the barrier of the skin "
          "expressed by the states shown in (D). (F) Staining of generated healthy skin for "
          "four markers, arrows showing the cells of two states in the upper layers. (G) Bar "
          "charts of the proportions of the states in healthy and diseased skin, compared "
          "with a likelihood ratio test for each of the generated groups of samples in the "
          "study. (H) Percentage of cells with each signature in the bulk data, and the "
          "differentiated states expanded in nonlesional skin. Scale bars are drawn in each "
          "panel of the figure.")


def _wrap(pdf, text: str, width: float) -> list[str]:
    lines, cur = [], ""
    for word in text.split():
        if cur and pdf.get_string_width(f"{cur} {word}") > width:
            lines.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}".strip()
    return lines + [cur]


def test_caption_going_on_under_its_figure_in_the_next_column(tmp_path: Path) -> None:
    """Page 1: body text over a side caption in the left column; the figure (one bitmap) in
    the right column beside them; the caption ends the left column in mid-sentence and goes
    on in the right column under the figure, lower than its first line and higher than its
    last.
    Page 2: body text (the body's font is not the caption's)."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 25, 80, BODY[:300])
    from PIL import Image

    rng = np.random.default_rng(11)
    pdf.image(Image.fromarray(rng.integers(0, 255, (200, 160, 3), dtype=np.uint8)),
              x=108, y=25, w=82, h=150)
    pdf.set_font("Helvetica", "", 7.5)
    lines = _wrap(pdf, LEGEND, 80)
    # the left column takes all but the last three lines, ending in mid-sentence
    cut = max(i for i in range(1, len(lines) - 2) if not lines[i - 1].endswith("."))
    for i, text in enumerate(lines[:cut]):
        pdf.text(20, 135 + 3.6 * i, text)
    for i, text in enumerate(lines[cut:]):
        pdf.text(108, 182 + 3.6 * i, text)
    page()
    column(pdf, 20, 25, 80, BODY * 3)
    column(pdf, 108, 25, 82, BODY * 3)
    path = tmp_path / "under.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    (fig,) = figs
    assert fig.figure_label == "Fig. 4" and fig.caption == LEGEND
    left, top = pt(108, 25)
    right, bottom = pt(190, 175)
    assert all(abs(a - b) < 2 for a, b in zip(fig.bbox, (left, bottom, right, top), strict=True))


def test_caption_without_full_stop_beside_a_reference_list(tmp_path: Path) -> None:
    """A two-line caption that ends without a full stop, beside a reference list in the
    next column in the caption's print, one of its items' second line level with the
    caption's first: the caption ends where it ends (the item's line has its own text right
    above it, so it does not start a column the caption goes on in)."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170)
    vector_plot(pdf, 30, 50, 60, 40)
    pdf.set_font("Helvetica", "", 8)
    pdf.text(20, 104, "Figure 1: SYNTHETIC funnel plot of the generated studies under a")
    pdf.text(20, 108, "recessive model (GG vs AG+AA)")
    refs = ["[1] Author A, Author B. SYNTHETIC generated reference of the list",
            "      of a test paper. J Gen Test. 2009. 120(6): 424-429",
            "[2] Author C. SYNTHETIC second generated reference of the list in",
            "      the same print as the caption. J Gen Test. 2011. 44-49"]
    for i, ref in enumerate(refs):
        pdf.text(108, 100 + 4 * i, ref)
    column(pdf, 20, 130, 170)
    path = tmp_path / "refs.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    assert [f.caption for f in figs] == [
        "Figure 1: SYNTHETIC funnel plot of the generated studies under a recessive model "
        "(GG vs AG+AA)"]
