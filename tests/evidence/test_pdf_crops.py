"""What a figure's box may take in, on generated papers: text beside a graphic joins it as its
labels, never so far that the graphic's box takes in body text (nor is the graphic then taken
for a frame around text)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _fpdf_paper import BODY, MM, column, paper, pt, vector_plot

from wsikit.evidence import read_pdf_figures

fpdf = pytest.importorskip("fpdf")


def _figures(pdf, path: Path):
    pdf.output(str(path))
    return read_pdf_figures(path)[1]


def test_heading_beside_a_graphic_does_not_stretch_it_over_the_next_column(tmp_path: Path):
    """A plot in the left column, a bold heading of the right column level with the plot's
    foot, 2 mm right of the plot's edge: the heading touches the plot but is no label of it;
    joined, it would stretch the plot's box over the right column's body text, and the plot
    would be dropped as a frame around text."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    vector_plot(pdf, 32, 30, 70, 55)  # ink from about 20 mm (axis title) to 102 mm
    pdf.set_font("Helvetica", "B", 12)
    pdf.text(104.5, 80, "Results of the generated trial")
    column(pdf, 104, 25, 86, BODY[:400])
    column(pdf, 104, 83, 86, BODY)
    pdf.set_font("Times", "", 9)
    pdf.text(20, 100, "Figure 1. SYNTHETIC survival of two generated groups.")
    column(pdf, 20, 104, 80, BODY)
    figs = _figures(pdf, tmp_path / "heading.pdf")
    (fig,) = figs
    right, _ = pt(104, 0)
    assert fig.figure_label == "Figure 1" and fig.bbox[2] < right


def test_note_under_a_figure_does_not_stretch_it_over_its_side_caption(tmp_path: Path):
    """A figure on the right with its caption in a narrow column on its left, set level with
    its top; a note printed under the figure's foot, touching it, starts under the caption's
    column: joined, it would stretch the figure's box over the caption, whose first line would
    then lie inside the graphic (a frame around text), and the caption would find no figure
    beside it."""
    import numpy as np
    from PIL import Image

    pdf, page = paper(logo=False, stamp=False)
    page()
    rng = np.random.default_rng(5)
    pdf.image(Image.fromarray(rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)),
              x=80, y=30, w=110, h=70)
    pdf.set_font("Times", "", 8)
    pdf.set_xy(20, 30)
    pdf.multi_cell(52, 3.6, "Fig. 2 SYNTHETIC side caption printed in a narrow column beside "
                            "a micrograph; the note under the figure is not its caption.")
    pdf.set_font("Helvetica", "", 7)
    pdf.text(20, 102.5, "n = 12 generated samples per group; SYNTHETIC data only")
    column(pdf, 20, 110, 170)
    figs = _figures(pdf, tmp_path / "side.pdf")
    (fig,) = figs
    left, _ = pt(72, 0)
    assert fig.figure_label == "Fig. 2" and fig.bbox[0] > left


def test_last_line_of_a_reference_over_a_bitmap_stays_out_of_it(tmp_path: Path):
    """A reference list (hanging indent: no prose run) ends 5 pt over a bitmap figure: its
    last lines touch the bitmap and joined it as labels; they are body text (the body's font
    and size, at its pitch under another such line) and the figure's box stops under them."""
    import numpy as np
    from PIL import Image

    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 20, 170, BODY)
    pdf.set_font("Times", "", 10)
    y = 60.0
    for i, n in enumerate((1, 3, 1, 2)):  # entries of one to three lines, hanging indent
        for k in range(n):
            text = (f"Author{i}, A. B. & C. D. Writer. 2014. SYNTHETIC title of a generated "
                    "reference" if k == 0 else "in a list of references. Journal of "
                    "Generated Tests 39:452-477.")
            pdf.text(20 if k == 0 else 25, y, text)
            y += 4.6
    rng = np.random.default_rng(2)
    top = y - 4.6 + 2.5  # 2.5 mm under the last line's baseline
    pdf.image(Image.fromarray(rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)),
              x=50, y=top, w=110, h=70)
    pdf.set_font("Times", "", 9)
    pdf.text(20, top + 76, "Figure 1. SYNTHETIC leaflet, abaxial view; B. Leaf and stem.")
    figs = _figures(pdf, tmp_path / "refs.pdf")
    (fig,) = figs
    left, upper = pt(50, top)
    right, lower = pt(160, top + 70)
    assert fig.figure_label == "Figure 1"
    assert all(abs(a - b) < 2 for a, b in zip(fig.bbox, (left, lower, right, upper), strict=True))


def test_bar_under_the_running_head_placed_a_point_apart_on_each_page(tmp_path: Path):
    """A grey bar under the running head on every page, placed a point lower or higher and a
    point taller on some (its box at 762-768, 763-770, 764-771 and 763-770 pt), and a bitmap
    figure right under it on page 3: the bar is page decoration, so neither it nor the
    running head over it joins the figure."""
    import numpy as np
    from PIL import Image

    pdf, page = paper(logo=False, stamp=False)
    rng = np.random.default_rng(4)
    height = 841.89  # A4, points
    for i, (low, high) in enumerate(((762, 768), (763, 770), (764, 771), (763, 770))):
        page()
        pdf.set_font("Times", "", 9)
        pdf.text(20, (height - high - 6) / MM, "March 2015    SYNTHETIC: a generated running "
                                               "head of the journal")
        pdf.set_fill_color(200, 200, 200)
        pdf.rect(20, (height - high) / MM, 170, (high - low) / MM, style="F")
        if i == 2:
            top = (height - 762) / MM
            pdf.image(Image.fromarray(rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)),
                      x=30, y=top, w=150, h=100)
            pdf.set_font("Times", "", 8)
            pdf.text(20, top + 106, "Fig. 2. SYNTHETIC photographs of a generated plant.")
            column(pdf, 20, top + 112, 170, BODY)
        else:
            column(pdf, 20, 40, 170, BODY * 2)
    figs = _figures(pdf, tmp_path / "bar.pdf")
    (fig,) = figs
    assert fig.figure_label == "Fig. 2" and fig.page == 3 and fig.bbox[3] <= 763
