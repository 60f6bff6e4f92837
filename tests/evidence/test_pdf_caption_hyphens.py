"""A caption's lines joined across a line-end hyphen, on a generated paper: a word broken at a
syllable loses its hyphen, a compound broken at its own hyphen keeps it without a space, a
suspended hyphen keeps its space."""

from __future__ import annotations

from pathlib import Path

import pytest
from _fpdf_paper import column, noise, paper, vector_plot

from wsikit.evidence import read_pdf_figures

fpdf = pytest.importorskip("fpdf")

LINES = ["Figure 1. SYNTHETIC nuclei stained with 4',6-diamidino-",
         "2-phenylindole (DAPI) and by immuno-",
         "histochemistry for a marker before pre-",
         "and post-treatment; lysates analysed by SDS-",
         "PAGE after treatment with 4-nitro-",
         "quinoline oxide."]


def _saved(pdf, tmp_path_factory, name: str) -> Path:
    path = tmp_path_factory.mktemp(name) / f"{name}.pdf"
    pdf.output(str(path))
    return path


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
    return _saved(pdf, tmp_path_factory, "hyphens")


def test_caption_lines_join_across_each_kind_of_hyphen(hyphen_pdf: Path) -> None:
    _, figs = read_pdf_figures(hyphen_pdf)
    (fig,) = figs
    assert fig.caption == (
        "Figure 1. SYNTHETIC nuclei stained with 4',6-diamidino-2-phenylindole (DAPI) and by "
        "immunohistochemistry for a marker before pre- and post-treatment; lysates analysed by "
        "SDS-PAGE after treatment with 4-nitroquinoline oxide.")


SIDE = [[("Figure 1. SYNTHETIC spectra", "")], [("with the fit and the", "")],
        [("residual under each;", "")], [("tCR", "I"), ("total creatine,", ""), ("Ins", "I"),
                                        ("myo-", "")],
        [("Inositol,", ""), ("Cho", "I"), ("choline,", ""), ("Glu", "I")],
        [("glutamate.", "")]]


@pytest.fixture(scope="module")
def side_pdf(tmp_path_factory) -> Path:
    """A side caption in a narrow column left of a bitmap, one of its lines ending in a
    hyphen before a line whose abbreviations are set in a smaller italic (half its words),
    body text under both."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 20, 170)
    noise(pdf, 70, 60, 120, 90, seed=5, px=(300, 400))
    for i, words in enumerate(SIDE):
        x = 20.0
        for word, style in words:
            pdf.set_font("Helvetica" if style else "Times", style, 6.5 if style else 9)
            pdf.text(x, 63 + 4.2 * i, word)
            x += pdf.get_string_width(word) + 1.2
    column(pdf, 20, 165, 170)
    return _saved(pdf, tmp_path_factory, "side")


def test_side_caption_goes_on_over_a_line_of_smaller_italic_words(side_pdf: Path) -> None:
    _, figs = read_pdf_figures(side_pdf)
    (fig,) = figs
    assert fig.caption == (
        "Figure 1. SYNTHETIC spectra with the fit and the residual under each; tCR total "
        "creatine, Ins myo-Inositol, Cho choline, Glu glutamate.")
