"""Layouts of truth set H (articles the extractor was not built on), generated: a legend set
in two columns under a page-wide figure whose axis title, in the figure's own font and about
the legend's size, sits right above the legend's second column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _fpdf_paper import BODY, caption_columns, column, paper, pt, vector_plot

from wsikit.evidence import read_pdf_figures

fpdf = pytest.importorskip("fpdf")


def _holds(box, left_mm: float, top_mm: float, right_mm: float, bottom_mm: float) -> bool:
    """``box`` (points) holds the rectangle given in millimetres from the page's top left,
    within 2 points."""
    left, top = pt(left_mm, top_mm)
    right, bottom = pt(right_mm, bottom_mm)
    return box[0] <= left + 2 and box[2] >= right - 2 and box[1] <= bottom + 2 and \
        box[3] >= top - 2


def _read(pdf, path: Path):
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    return figs


def test_legend_column_under_an_axis_title_in_another_font(tmp_path: Path) -> None:
    """A page-wide figure (two vector plots) over a legend in two columns; the left column
    ends in mid-sentence and the right one goes on level with the legend's first line. The
    right plot's axis title, in Courier at the legend's size, sits a line and a half above
    the right column: it is the figure's label, not text of the column's own above it, so
    the legend goes on in the right column."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    vector_plot(pdf, 30, 30, 60, 55)
    vector_plot(pdf, 120, 30, 60, 55)
    pdf.set_font("Courier", "", 7.8)
    pdf.text(140, 97.5, "Parameters")
    left = ["Fig. 1 | SYNTHETIC characterization of the generated samples. a, Counts",
            "of the generated markers in each sample. b, Concentration measured by one",
            "assay against the other (n = 5). c, Charge of the samples in water (n = 4,",
            "independent samples). Data are presented"]
    right = ["as mean and s.d. d, Size of the samples measured by a third assay (n = 22,",
             "independent samples). The groups were compared with a two-tailed test:",
             "NS, not significant."]
    caption_columns(pdf, ((15, left), (107, right)), 101, 3.4)
    column(pdf, 15, 125, 85, BODY * 2)
    column(pdf, 107, 125, 85, BODY * 2)
    figs = _read(pdf, tmp_path / "axis_title.pdf")
    assert [f.figure_label for f in figs] == ["Fig. 1"]
    assert figs[0].caption.startswith("Fig. 1 | SYNTHETIC characterization")
    assert figs[0].caption.endswith("compared with a two-tailed test: NS, not significant.")


def _two_column_legend(pdf, left: list[str], right: list[str], *, y: float, pitch: float,
                       fonts: list[tuple[str, str, float]]) -> None:
    """The legend's left column line by line (line ``i`` in ``fonts[i]``, the last font for
    the rest) and its right column (in the last font), starting level."""
    for i, line in enumerate(left):
        pdf.set_font(*fonts[min(i, len(fonts) - 1)])
        pdf.text(15, y + pitch * i, line)
    pdf.set_font(*fonts[-1])
    for i, line in enumerate(right):
        pdf.text(107, y + pitch * i, line)


def test_legend_in_the_body_look_going_on_in_lower_case_level_with_it(tmp_path: Path) -> None:
    """A page-wide figure over a legend printed like the body text (Times 10), in two
    columns: the left column stops in mid-sentence and the right one, level with the
    legend's first line and nothing above it, goes on in lower case: one legend."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    vector_plot(pdf, 30, 25, 60, 50)
    vector_plot(pdf, 120, 25, 60, 50)
    left = ["Fig. 4 | SYNTHETIC comparison of the generated data",
            "across the sites. a Clustering of the generated values",
            "of each site. b Components of the generated values.",
            "Boxplot: center line, median; box limits, quartiles;",
            "maximum, greatest value"]
    right = ["excluding outliers; minimum, least value excluding",
             "outliers. c The number of generated values shared by",
             "the groups of sites. All analyses were based on three",
             "generated replicates."]
    _two_column_legend(pdf, left, right, y=95, pitch=4.6, fonts=[("Times", "", 10)])
    column(pdf, 15, 125, 85, BODY * 2)
    column(pdf, 107, 125, 85, BODY * 2)
    figs = _read(pdf, tmp_path / "body_look.pdf")
    assert [f.figure_label for f in figs] == ["Fig. 4"]
    assert figs[0].caption.endswith("were based on three generated replicates.")


def test_legend_whose_title_wraps_in_another_face(tmp_path: Path) -> None:
    """A legend (Helvetica 7) whose title, in another face (Times bold), wraps onto its second
    line; the left column stops in mid-sentence and goes on in the right column: the legend's
    face is the one most of its letters are in, not its second line's."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    vector_plot(pdf, 30, 25, 60, 50)
    vector_plot(pdf, 120, 25, 60, 50)
    left = ["Fig. 2 | SYNTHETIC overview of the generated data of all the sites and",
            "of their generated samples in one study.",
            "a The number of generated values found by each of the sites in the",
            "study. b The share of the values shared by two sites or more, for each",
            "of the samples. c The values of each site against those of the"]
    right = ["others, one dot for each generated value found by both of them. All",
             "analyses were based on averaging three generated replicates."]
    _two_column_legend(pdf, left, right, y=95, pitch=3.4,
                       fonts=[("Times", "B", 7.6), ("Times", "B", 7.6), ("Helvetica", "", 7)])
    column(pdf, 15, 125, 85, BODY * 2)
    column(pdf, 107, 125, 85, BODY * 2)
    figs = _read(pdf, tmp_path / "title_face.pdf")
    assert [f.figure_label for f in figs] == ["Fig. 2"]
    assert figs[0].caption.endswith("were based on averaging three generated replicates.")


def test_chart_legend_key_is_no_prose(tmp_path: Path) -> None:
    """A page-wide figure: a plot on the left, a bar chart on the right with its legend key
    under it, entries led by coloured squares, left-aligned at a regular pitch and worded
    like running text. The key is the chart's label, not prose inside a frame: the figure is
    found, whole."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    vector_plot(pdf, 30, 25, 60, 65)
    colours = [(190, 190, 190), (170, 210, 230), (90, 130, 100), (40, 40, 110)]
    for i, rgb in enumerate(colours):
        pdf.set_fill_color(*rgb)
        pdf.rect(125 + 12 * i, 55 - 6 * (4 - i), 8, 6 * (4 - i), style="F")
    entries = ["Number of generated proteins in all", "Number of generated proteins left over",
               "Number of generated proteins counted", "Generated proteins common to all sites"]
    pdf.set_font("Helvetica", "", 8)
    for i, (rgb, text) in enumerate(zip(colours, entries, strict=True)):
        pdf.set_fill_color(*rgb)
        pdf.rect(122, 64 + 4.2 * i, 3.2, 3.2, style="F")
        pdf.text(126.5, 66.8 + 4.2 * i, text)
    pdf.set_font("Helvetica", "", 7)
    pdf.text(15, 103, "Fig. 2 | SYNTHETIC overview of the generated data. a The plot of the "
                      "generated values. b The counts of the generated proteins.")
    column(pdf, 15, 115, 85, BODY * 2)
    column(pdf, 107, 115, 85, BODY * 2)
    figs = _read(pdf, tmp_path / "key.pdf")
    assert [f.figure_label for f in figs] == ["Fig. 2"]
    assert _holds(figs[0].bbox, 30, 25, 170, 80)


def test_grid_of_small_bitmaps_drawn_large(tmp_path: Path) -> None:
    """A figure that is a grid of 32-pixel thumbnails (5 rows of 9), each drawn 14 mm wide,
    under its caption's page: the thumbnails are the figure's tiles, not icons too small to
    be graphics: one figure, the whole grid."""
    from PIL import Image

    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 20, 170, BODY)
    rng = np.random.default_rng(5)
    for row in range(5):
        for col in range(9):
            tile = rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)
            pdf.image(Image.fromarray(tile), x=30 + 16.5 * col, y=60 + 16.5 * row, w=15, h=15)
    pdf.set_font("Times", "", 9)
    pdf.text(30, 150, "Figure 3. SYNTHETIC maps of one generated image, a row for each layer.")
    column(pdf, 20, 160, 170, BODY)
    figs = _read(pdf, tmp_path / "tiles.pdf")
    assert [f.figure_label for f in figs] == ["Figure 3"]
    assert _holds(figs[0].bbox, 30, 60, 30 + 16.5 * 8 + 15, 60 + 16.5 * 4 + 15)


def _lines(pdf, x: float, y: float, lines: list[str], *, size: float = 10.0,
           pitch: float = 4.6) -> None:
    pdf.set_font("Times", "", size)
    for i, line in enumerate(lines):
        pdf.text(x, y + pitch * i, line)


def test_caption_at_the_foot_in_the_body_look_when_the_body_goes_on(tmp_path: Path) -> None:
    """Two columns of body text over a page-wide figure whose one-line caption, in the body's
    face and size, ends the page without a full stop ("AI = artificial intelligence"); the
    right column stops in mid-sentence too, and the next page goes on in lower case: that is
    the body text's sentence, not the caption's."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    words = (BODY * 3).split()
    rows = [" ".join(words[i:i + 6]) for i in range(0, 6 * 24, 6)]
    _lines(pdf, 15, 25, rows[:21])
    _lines(pdf, 107, 25, rows[:20] + ["patients may have it, and others not. In this"])
    vector_plot(pdf, 40, 150, 130, 100)
    _lines(pdf, 30, 272, ["Fig. 5. SYNTHETIC data sets used for the development and testing of "
                          "a generated method. AI = artificial intelligence"], size=9.5)
    page()
    _lines(pdf, 15, 25, ["way, data with the generated spectrum can be",
                         "collected, and the method can be applied."] +
           rows[:20])
    _lines(pdf, 107, 25, rows[:22])
    figs = _read(pdf, tmp_path / "foot.pdf")
    assert [f.figure_label for f in figs] == ["Fig. 5"]
    assert figs[0].caption.endswith("AI = artificial intelligence")
