"""Letters outside the BMP in a caption, on a generated paper: PDFium gives a mathematical
italic letter of a subset font as two text-page characters (a surrogate pair); the caption
reads it as one plain letter and stays valid UTF-8 (a lone surrogate broke every file the
caption was written to)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _fpdf_paper import column, paper, vector_plot

from wsikit.evidence import read_pdf_figures
from wsikit.evidence._pdf_layout import plain_letter, text_page_letter

fpdf = pytest.importorskip("fpdf")

MATH_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuMathTeXGyre.ttf")


def test_surrogate_halves_make_one_letter_and_a_lone_half_is_shown_lost() -> None:
    assert text_page_letter(0xD835, 0xDC5D) == "\ud835\udc5d"
    assert plain_letter(text_page_letter(0xD835, 0xDC5D)) == "p"  # MATHEMATICAL ITALIC SMALL P
    assert plain_letter(text_page_letter(0xD835, 0xDF07)) == "μ"  # MATHEMATICAL ITALIC SMALL MU
    assert text_page_letter(0xD835, 0x41) == "\ufffd"
    assert text_page_letter(0xDC5D, 0) == "\ufffd"
    assert plain_letter("\U0001F600") == "\U0001F600"  # not a letter style: kept as it is


@pytest.mark.skipif(not MATH_FONT.exists(), reason="needs the DejaVu Math TeX Gyre font")
def test_math_italic_letters_in_a_caption_read_as_plain_letters(tmp_path: Path) -> None:
    pdf, page = paper(logo=False, stamp=False)
    pdf.add_font("Math", "", str(MATH_FONT))
    page()
    column(pdf, 20, 20, 170)
    vector_plot(pdf, 40, 70, 120, 60)
    pdf.set_font("Math", "", 9)
    pdf.text(20, 150, "Figure 1. SYNTHETIC retina 1,500 \U0001D707m from the disc "
                      "(\U0001D45D > 0.05, \U0001D45F\U0001D460 = 0.81).")
    column(pdf, 20, 170, 170)
    path = tmp_path / "math.pdf"
    pdf.output(str(path))

    _, figures = read_pdf_figures(path)
    assert len(figures) == 1
    caption = figures[0].caption
    caption.encode("utf-8")  # no lone surrogate left
    assert "1,500 μm from the disc" in caption
    assert "(p > 0.05, rs = 0.81)" in caption
