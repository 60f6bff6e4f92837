"""A caption's lines joined across a line-end hyphen, on a generated paper: a word broken at a
syllable loses its hyphen, a compound broken at its own hyphen keeps it without a space, a
suspended hyphen keeps its space."""

from __future__ import annotations

from pathlib import Path

import pytest
from _fpdf_paper import column, paper, vector_plot

from wsikit.evidence import read_pdf_figures

fpdf = pytest.importorskip("fpdf")

LINES = ["Figure 1. SYNTHETIC nuclei stained with 4',6-diamidino-",
         "2-phenylindole (DAPI) and by immuno-",
         "histochemistry for a marker before pre-",
         "and post-treatment; lysates analysed by SDS-",
         "PAGE after treatment with 4-nitro-",
         "quinoline oxide."]


@pytest.fixture(scope="module")
def hyphen_pdf(tmp_path_factory) -> Path:
    """A vector plot over a six-line caption whose lines end in hyphens of each kind, body
    text under it."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 20, 170)
    vector_plot(pdf, 40, 70, 120, 60)
    pdf.set_font("Times", "", 9)
    for i, text in enumerate(LINES):
        pdf.text(20, 150 + 4.2 * i, text)
    column(pdf, 20, 180, 170)
    path = tmp_path_factory.mktemp("hyphens") / "hyphens.pdf"
    pdf.output(str(path))
    return path


def test_caption_lines_join_across_each_kind_of_hyphen(hyphen_pdf: Path) -> None:
    _, figs = read_pdf_figures(hyphen_pdf)
    (fig,) = figs
    assert fig.caption == (
        "Figure 1. SYNTHETIC nuclei stained with 4',6-diamidino-2-phenylindole (DAPI) and by "
        "immunohistochemistry for a marker before pre- and post-treatment; lysates analysed by "
        "SDS-PAGE after treatment with 4-nitroquinoline oxide.")
