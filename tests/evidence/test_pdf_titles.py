"""A paper's title from its first pages' print, where the largest print or the first paragraph
is something else: the journal's banner (printed again in the running heads), an article-type
label over the title, line numbers beside a manuscript's title, a cover page without title."""

from __future__ import annotations

from pathlib import Path

import pytest
from _fpdf_paper import BODY, column, paper

from wsikit.evidence import read_pdf_figures

fpdf = pytest.importorskip("fpdf")

TITLE = "SYNTHETIC lymph node counts in generated pancreatic resections"


def _read(pdf, path: Path):
    pdf.output(str(path))
    info, _ = read_pdf_figures(path)
    return info


def test_banner_and_article_type_are_not_the_title(tmp_path: Path):
    """The journal's name in the largest print, again in every page's running head, and
    'Original Article' over the title in the title's size."""
    pdf, page = paper(logo=False, stamp=False)
    for n in range(3):
        page()
        pdf.set_font("Helvetica", "", 8)
        pdf.text(20, 10, f"SYNTHETIC Surgical Journal {2025} {n + 1}")
        if n == 0:
            pdf.set_font("Helvetica", "B", 22)
            pdf.text(20, 24, "SYNTHETIC Surgical Journal")
            pdf.set_font("Helvetica", "B", 15)
            pdf.text(20, 40, "Original Article")
            pdf.set_xy(20, 44)
            pdf.multi_cell(150, 7, TITLE)
            pdf.set_font("Helvetica", "", 10)
            pdf.text(20, 64, "A. Author, B. Author")
            column(pdf, 20, 70, 170, BODY * 2)
        else:
            column(pdf, 20, 20, 170, BODY * 4)
    info = _read(pdf, tmp_path / "banner.pdf")
    assert info.title == TITLE and info.title_source == "text"


def test_line_numbers_beside_a_manuscript_title(tmp_path: Path):
    """A manuscript in one size: the title is its first paragraph, without the line numbers
    printed in the margin beside it."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    pdf.set_font("Times", "B", 12)
    lines = ["SYNTHETIC lymph node counts in generated", "pancreatic resections"]
    for i, text in enumerate(lines):
        pdf.text(30, 30 + 10 * i, text)
    pdf.set_font("Times", "", 12)
    pdf.text(30, 55, "A. Author, B. Author and C. Author")
    pdf.set_font("Helvetica", "", 8)
    for i in range(3):
        pdf.text(14, 30 + 10 * i if i < 2 else 55, str(i + 1))
    pdf.set_font("Times", "", 12)
    pdf.set_xy(30, 65)
    pdf.multi_cell(150, 10, BODY * 2)
    info = _read(pdf, tmp_path / "numbered.pdf")
    assert info.title == TITLE


def test_title_on_the_page_after_a_cover_page(tmp_path: Path):
    """An accepted manuscript's cover page (the journal's name in huge print, a note on how
    to cite it) before the article: the title is the big print of page 2."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    pdf.set_font("Helvetica", "", 60)
    pdf.text(20, 50, "SYNTHETIC")
    pdf.text(20, 75, "Chemistry")
    pdf.set_font("Helvetica", "", 9)
    pdf.set_xy(20, 100)
    pdf.multi_cell(170, 4.5, "This article can be cited before page numbers have been "
                             "issued; it is an accepted manuscript of a generated journal.")
    page()
    pdf.set_font("Times", "B", 15)
    pdf.set_xy(20, 30)
    pdf.multi_cell(170, 7, TITLE)
    column(pdf, 20, 50, 170, BODY * 3)
    info = _read(pdf, tmp_path / "cover.pdf")
    assert info.title == TITLE
