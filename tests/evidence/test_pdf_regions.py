"""Figure regions grown from graphics to the whole figure, on generated papers with the layouts
where figures were lost or cropped in real articles: a line plot whose curve is one path and
whose ticks stand apart, panel letters above a figure, a dot plot of small marks with tiny row
labels, a side caption in a narrow outer column, a figure and its caption inside a frame of
rules and corner pieces, a legend of keys between a figure and its caption."""

from __future__ import annotations

from pathlib import Path

import pytest
from _fpdf_paper import BODY, column, noise, paper, pt, vector_plot

from wsikit.evidence import read_pdf_figures

fpdf = pytest.importorskip("fpdf")


def _read(pdf, path: Path):
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    return figs


def _one_figure(pdf, path: Path, caption: str, y_mm: float, size: float = 10.0):
    """Print ``caption`` at ``y_mm`` with body text under it, read the PDF and return its one
    figure (the test fails unless exactly ``Figure 1`` is found)."""
    pdf.set_font("Times", "", size)
    pdf.text(20, y_mm, caption)
    column(pdf, 20, y_mm + 8, 170)
    figs = _read(pdf, path)
    assert [f.figure_label for f in figs] == ["Figure 1"]
    return figs[0]


def _covers(box, left_mm, top_mm, right_mm, bottom_mm, tol=2.0) -> bool:
    left, top = pt(left_mm, top_mm)
    right, bottom = pt(right_mm, bottom_mm)
    return box[0] <= left + tol and box[1] <= bottom + tol and box[2] >= right - tol and \
        box[3] >= top - tol


def test_one_path_curve_with_its_ticks_and_panel_letter(tmp_path: Path):
    """A curve drawn as one path, no axes box, its tick labels 4 mm under it, a panel letter
    9 mm above it: one figure with all of them."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170)
    pdf.set_draw_color(200, 0, 0)
    pdf.set_line_width(0.4)
    pdf.polyline([(60 + i * 2, 120 - 50 * (1 - ((i - 25) / 25) ** 2)) for i in range(51)])
    pdf.set_draw_color(0, 0, 0)
    pdf.line(55, 124, 165, 124)
    pdf.set_font("Helvetica", "", 6)
    for i in range(6):
        pdf.text(58 + 20 * i, 128, f"{2 + 0.4 * i:.1f}")
    pdf.text(100, 132, "log M")
    pdf.set_font("Helvetica", "B", 11)
    pdf.text(50, 61, "A")
    fig = _one_figure(pdf, tmp_path / "curve.pdf",
                      "Figure 1. SYNTHETIC size distribution drawn as a single curve.", 145, 9)
    # the panel letter (top left), the curve and the tick labels and axis title under it
    assert _covers(fig.bbox, 50, 57, 160, 132)
    assert fig.bbox[1] > pt(0, 141)[1]  # not the caption


def test_dot_plot_of_small_marks_with_tiny_labels(tmp_path: Path):
    """A heat map of 2 mm dots 3 mm apart with tiny row labels, under its caption's column:
    one figure, not lost as specks nor blocked by its labels taken for body text."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170)
    pdf.set_fill_color(220, 120, 30)
    for row in range(14):
        pdf.set_font("Helvetica", "", 4)
        label = f"SYNTHETIC sample site number {row + 1} of the survey"
        pdf.text(94 - pdf.get_string_width(label), 63 + row * 4, label)
        for col in range(22):
            if (row * 7 + col * 3) % 5:
                pdf.ellipse(95 + col * 4, 61 + row * 4, 2, 2, style="F")
    pdf.set_font("Times", "", 9)
    pdf.text(20, 125, "Figure 1. SYNTHETIC heat map of generated sites drawn as dots.")
    column(pdf, 20, 135, 170)
    figs = _read(pdf, tmp_path / "dots.pdf")
    assert [f.figure_label for f in figs] == ["Figure 1"]
    assert _covers(figs[0].bbox, 66, 62, 181, 114)  # the dots and their row labels


def test_side_caption_far_from_its_figure(tmp_path: Path):
    """A side caption in a narrow outer column, its figure 25 mm to its right."""
    import numpy as np
    from PIL import Image

    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170, BODY * 2)
    rng = np.random.default_rng(4)
    pdf.image(Image.fromarray(rng.integers(0, 255, (200, 260, 3), dtype=np.uint8)),
              x=95, y=90, w=95, h=70)
    pdf.set_font("Times", "", 8)
    pdf.set_xy(20, 90)
    pdf.multi_cell(50, 3.6, "Fig. 1 SYNTHETIC pen trial design of a generated experiment, "
                            "printed in the narrow outer column beside its figure")
    column(pdf, 20, 170, 170)
    figs = _read(pdf, tmp_path / "side.pdf")
    assert [f.figure_label for f in figs] == ["Fig. 1"]
    assert _covers(figs[0].bbox, 95, 90, 190, 160)


def test_figure_and_caption_in_a_frame_of_rules(tmp_path: Path):
    """A frame of four rules and four corner arcs around a figure, its caption and a legend
    of keys between them (BMC style): the figure with its keys, not the frame."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170)
    pdf.set_line_width(0.3)
    for x0, y0, x1, y1 in ((27, 55, 183, 55), (27, 175, 183, 175), (25, 57, 25, 173),
                           (185, 57, 185, 173)):
        pdf.line(x0, y0, x1, y1)
    for cx, cy in ((25, 55), (183, 55), (25, 173), (183, 173)):
        pdf.ellipse(cx, cy, 2, 2)
    pdf.set_draw_color(30, 30, 200)
    pdf.polyline([(50 + i * 5, 130 - 3 * i) for i in range(21)])
    pdf.polyline([(50 + i * 5, 100 + (i % 4) * 5) for i in range(21)])
    pdf.set_draw_color(0, 0, 0)
    pdf.rect(50, 60, 100, 80)
    pdf.set_fill_color(120, 120, 120)
    pdf.rect(60, 145, 3, 3, style="F")
    pdf.set_font("Helvetica", "", 7)
    pdf.text(65, 147.5, "Past distribution")
    pdf.rect(100, 145, 3, 3, style="F")
    pdf.text(105, 147.5, "Present distribution")
    pdf.set_font("Helvetica", "", 7)
    pdf.set_xy(30, 155)
    pdf.multi_cell(150, 3.2, "Figure 1 SYNTHETIC map of generated sources. The caption is "
                             "printed inside the frame with the figure and runs over two "
                             "lines of the frame's width.")
    column(pdf, 20, 180, 170)
    figs = _read(pdf, tmp_path / "frame.pdf")
    assert [f.figure_label for f in figs] == ["Figure 1"]
    assert _covers(figs[0].bbox, 50, 60, 150, 148)       # the plot and its keys
    assert figs[0].bbox[0] > pt(26, 0)[0] and figs[0].bbox[1] > pt(0, 154)[1]


def test_white_margins_of_a_bitmap_are_not_the_figure(tmp_path: Path):
    """A chart exported as a bitmap with a wide white border: the node is the chart, its box
    the printed part; a bitmap blank on one side only (its own white) is kept whole."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(9)
    bordered = np.full((300, 400, 3), 255, np.uint8)
    bordered[60:240, 50:350] = rng.integers(0, 200, (180, 300, 3), dtype=np.uint8)
    half = np.full((200, 200, 3), 255, np.uint8)
    half[:, :100] = rng.integers(0, 200, (200, 100, 3), dtype=np.uint8)
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170)
    pdf.image(Image.fromarray(bordered), x=45, y=45, w=120, h=90)  # 0.3 mm per pixel
    pdf.set_font("Times", "", 9)
    pdf.text(20, 142, "Figure 1. SYNTHETIC chart exported with a wide white border.")
    pdf.image(Image.fromarray(half), x=70, y=150, w=60, h=60)
    pdf.text(20, 217, "Figure 2. SYNTHETIC bitmap whose right half is left white.")
    column(pdf, 20, 225, 170)
    figs = _read(pdf, tmp_path / "margins.pdf")
    assert [f.figure_label for f in figs] == ["Figure 1", "Figure 2"]
    # the printed part: 50-350 px across (60-150 mm), 60-240 px down (63-117 mm)
    left, top = pt(60, 63)
    right, bottom = pt(150, 117)
    box = figs[0].bbox
    assert abs(box[0] - left) < 3 and abs(box[2] - right) < 3
    assert abs(box[1] - bottom) < 3 and abs(box[3] - top) < 3
    assert figs[0].image.shape[0] < 200 and figs[0].image.shape[1] < 320
    assert figs[1].image.shape[:2] == (200, 200)  # the embedded bitmap, whole


def test_author_block_touching_a_figure_corner_stays_out(tmp_path: Path):
    """A first page whose author block ends diagonally at a figure's top-left corner
    (a teaser figure beside the abstract): the figure is the graphic alone, not the author
    lines chained to it through that corner."""
    import numpy as np
    from PIL import Image

    pdf, page = paper(logo=False, stamp=False)
    page()
    pdf.set_font("Times", "", 10)
    for i, line in enumerate(["Given Name", "given@example.org", "SYNTHETIC Institute",
                              "Nowhere City"]):
        pdf.text(100.5 - pdf.get_string_width(line), 40 + 4.2 * i, line)
    rng = np.random.default_rng(5)  # the teaser graphic, its corner at the block's
    pdf.image(Image.fromarray(rng.integers(0, 255, (160, 320, 3), dtype=np.uint8)),
              x=101, y=54, w=80, h=40)
    column(pdf, 20, 58, 75, BODY * 2)
    pdf.set_font("Times", "B", 9)
    pdf.set_xy(101, 98)
    pdf.multi_cell(80, 4, "Figure 1: SYNTHETIC teaser of a generated tool beside the abstract.")
    column(pdf, 101, 112, 80, BODY)
    figs = _read(pdf, tmp_path / "teaser.pdf")
    assert [f.figure_label for f in figs] == ["Figure 1"]
    assert _covers(figs[0].bbox, 101, 54, 181, 94)
    assert figs[0].bbox[3] <= pt(0, 54)[1] + 1.5  # no author line above the graphic
    assert figs[0].bbox[0] >= pt(101, 0)[0] - 1.5


def test_one_letter_axis_title_beyond_the_tick_labels_joins(tmp_path: Path):
    """A y-axis titled by one horizontal letter standing a tick label's width left of the
    tick labels (a symbol such as lambda): the figure reaches it."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170)
    pdf.set_line_width(0.3)
    pdf.rect(60, 60, 100, 30)
    pdf.set_draw_color(230, 120, 40)
    pdf.polyline([(60 + i * 5, 85 - i * 1.1) for i in range(21)])
    pdf.set_font("Helvetica", "", 7)
    for i in range(6):
        pdf.line(58.8, 90 - 6 * i, 60, 90 - 6 * i)
        pdf.line(60 + 20 * i, 90, 60 + 20 * i, 91.2)
        pdf.text(53, 91 - 6 * i, f"{i / 5:.1f}")
        pdf.text(59 + 20 * i, 94, f"{10 * i}")
    pdf.text(44, 76, "k")  # the axis title, 22 points (2.7 letter heights) left of the ticks
    pdf.text(102, 99, "Noise")
    fig = _one_figure(pdf, tmp_path / "axis_title.pdf",
                      "Figure 1. SYNTHETIC optimal values of a generated coefficient.", 110)
    assert _covers(fig.bbox, 44.5, 60, 160, 99)


def test_tree_with_its_names_at_the_branch_tips(tmp_path: Path):
    """A tree drawn as lines, a name at each branch tip in a small sans font, left-aligned at
    a regular pitch (so the names read as a paragraph): one figure, names to their ends."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170)
    pdf.set_line_width(0.3)
    tips = [60 + 3.6 * i for i in range(10)]
    pdf.set_font("Helvetica", "", 7.5)
    width = pdf.get_string_width("SYNTHETIC bacterium number 10 strain DSM 1009T (AB123409)")
    for i, y in enumerate(tips):  # each leaf's branch runs from its pair's node to the tips
        pdf.line(66, y, 90, y)
        pdf.text(91, y + 0.9, f"SYNTHETIC bacterium number {i + 1} strain DSM {1000 + i}T "
                              f"(AB{123400 + i})")
    for i in range(0, 10, 2):  # pairs joined, pairs joined to the root
        pdf.line(66, tips[i], 66, tips[i + 1])
        pdf.line(45, tips[i] + 1.8, 66, tips[i] + 1.8)
    pdf.line(45, tips[0] + 1.8, 45, tips[8] + 1.8)
    pdf.line(35, 76, 45, 76)
    fig = _one_figure(pdf, tmp_path / "tree.pdf",
                      "Figure 1. SYNTHETIC tree of generated strains.", 106, 9)
    assert _covers(fig.bbox, 35, 59, 91 + width, 93)


def _flow_chart(pdf, x: float, y: float) -> None:
    """A framed flow chart of boxed steps joined by arrows, in a small sans font; one box
    holds a list of wide lines at a regular pitch, which reads as a paragraph."""
    pdf.set_line_width(0.3)
    pdf.rect(x, y, 95, 112)  # the frame round the chart
    pdf.set_font("Helvetica", "", 7)
    steps = [(y + 5, ["SYNTHETIC participants screened (n=4526)"]),
             (y + 40, ["SYNTHETIC randomly allocated treatment (n=1499)"]),
             (y + 92, ["SYNTHETIC treated and followed up (n=1472)"])]
    for top, texts in steps:
        pdf.rect(x + 5, top, 60, 12)
        pdf.text(x + 7, top + 7, texts[0])
    for top, bottom in ((y + 17, y + 40), (y + 52, y + 92)):
        pdf.line(x + 20, top, x + 20, bottom)
    pdf.rect(x + 26, y + 58, 67, 28)
    for i, item in enumerate(["174 (10%) acute condition within seven days of treatment",
                              "38 (2%) excluded on the judgment of the investigator",
                              "19 (1%) treated with other drugs in the past months",
                              "11 (1%) unwilling to take part in the follow up visits",
                              "4 (1%) withdrew their consent to take part"]):
        pdf.text(x + 28, y + 63 + 3.4 * i, item)
    pdf.line(x + 20, y + 72, x + 26, y + 72)


def test_framed_flow_chart_whose_box_holds_a_list(tmp_path: Path):
    """A flow chart in a thin frame, one of its boxes holding a list of wide lines at a
    regular pitch (taken for body text, it made the chart a frame round text, dropped): one
    figure, the whole chart."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170)
    _flow_chart(pdf, 20, 45)
    fig = _one_figure(pdf, tmp_path / "flow.pdf", "Figure 1. SYNTHETIC trial profile.", 163, 9)
    assert _covers(fig.bbox, 20, 45, 115, 157)
    assert fig.bbox[1] > pt(0, 160)[1]  # not the caption


def test_framed_figure_beside_a_heading_of_the_next_column(tmp_path: Path):
    """A framed flow chart in the left column, the right column's bold heading level with
    the chart's top 2.5 mm right of its frame, two fifths as wide as the column: the heading
    stays out and the caption under the frame takes the chart."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170)
    _flow_chart(pdf, 20, 45)
    pdf.set_font("Helvetica", "B", 9)
    pdf.text(117.5, 52, "Statistical analysis")
    column(pdf, 117.5, 56, 72, BODY * 3)  # (on past the chart: no short line beside it)
    pdf.set_font("Times", "", 9)
    pdf.text(20, 163, "Figure 1. SYNTHETIC trial profile.")
    column(pdf, 20, 171, 90)
    figs = _read(pdf, tmp_path / "heading.pdf")
    assert [f.figure_label for f in figs] == ["Figure 1"]
    assert _covers(figs[0].bbox, 20, 45, 115, 157)
    assert figs[0].bbox[2] < pt(117, 0)[0]  # not the heading


def test_figure_under_a_ruled_table_is_not_the_tables(tmp_path: Path):
    """A ruled table under its caption, then, 8 mm under the table's last rule, a figure of
    two bitmaps over its caption: the table caption takes no graphic past its table's last
    rule, and the figure is both bitmaps (its upper panel was the table's)."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    pdf.set_font("Times", "", 9)
    pdf.text(20, 20, "Table 1. SYNTHETIC survival of generated cells at each dose.")
    pdf.set_line_width(0.3)
    for i in range(5):
        pdf.line(20, 23 + 6 * i, 190, 23 + 6 * i)
        if i < 4:
            for j, cell in enumerate(["SYNTHETIC cells", f"{100 - 9 * i}", f"{90 - 7 * i}"]):
                pdf.text(22 + 60 * j, 27.5 + 6 * i, cell)
    for top in (55, 100):
        noise(pdf, 50, top, 110, 40, seed=top, px=(120, 300))
    fig = _one_figure(pdf, tmp_path / "table.pdf",
                      "Figure 1. SYNTHETIC two panels under a table.", 150, 9)
    assert _covers(fig.bbox, 50, 55, 160, 140)


def test_bitmap_in_a_ruled_tables_cell_stays_the_tables(tmp_path: Path):
    """A bitmap in a cell of a ruled table, the table's foot rule 2 mm under it, a figure
    under the table: the table's caption takes the cell's bitmap, the figure is its own."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    pdf.set_font("Times", "", 9)
    pdf.text(20, 20, "Table 1. SYNTHETIC generated lesions with a picture of each.")
    pdf.set_line_width(0.3)
    pdf.line(20, 23, 190, 23)
    pdf.line(20, 30, 190, 30)
    pdf.text(110, 27.5, "Lesion")
    pdf.text(40, 27.5, "Picture")
    pdf.text(110, 50, "SYNTHETIC lesion one")
    noise(pdf, 40, 33, 60, 30, seed=7)
    pdf.line(20, 65, 190, 65)
    noise(pdf, 40, 70, 60, 30, seed=8)
    fig = _one_figure(pdf, tmp_path / "cell.pdf", "Figure 1. SYNTHETIC a figure.", 106, 9)
    assert _covers(fig.bbox, 40, 70, 100, 100)
    assert fig.bbox[3] < pt(0, 65)[1]  # not the table's bitmap


def test_l_shaped_figure_round_its_side_caption(tmp_path: Path):
    """A tall bitmap right of a side caption and, over the caption, a panel of sequence lines
    in small type with its letter: one figure of both parts (its picture shows the panel,
    not only the bitmap), the caption's lines left white in its picture."""
    import numpy as np

    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170)
    noise(pdf, 100, 40, 90, 130, seed=8, px=(390, 270))
    pdf.set_font("Courier", "", 7)
    for i in range(8):
        pdf.text(55, 45 + 5 * i, f"{20 * i + 1} RQKHGVPPLKLCKNLNREAQ {20 * i + 20}")
    pdf.set_font("Helvetica", "B", 10)
    pdf.text(48, 45, "A")
    pdf.set_font("Times", "", 9)
    pdf.set_xy(20, 100)
    pdf.multi_cell(75, 4, "Figure 1. SYNTHETIC sequences of a generated protein (A) and a "
                          "field of generated noise beside this caption (B), which reaches "
                          "down to the foot of the caption, where the body text starts again "
                          "under both parts of the figure.")
    column(pdf, 20, 175, 170)
    figs = _read(pdf, tmp_path / "ell.pdf")
    assert [f.figure_label for f in figs] == ["Figure 1"]
    fig = figs[0]
    assert _covers(fig.bbox, 48, 40, 190, 170)
    h, w = fig.image.shape[:2]
    left, bottom, right, top = fig.bbox

    def window(x0_mm: float, y0_mm: float, x1_mm: float, y1_mm: float) -> np.ndarray:
        (x0, y0), (x1, y1) = pt(x0_mm, y0_mm), pt(x1_mm, y1_mm)
        cols = [int((x - left) / (right - left) * w) for x in (x0, x1)]
        rows = [int((top - y) / (top - bottom) * h) for y in (y0, y1)]
        return fig.image[rows[0]:rows[1], cols[0]:cols[1]]

    assert window(58, 44, 90, 80).min() < 100  # the sequence panel is in the picture
    assert window(60, 102, 95, 118).min() >= 250  # the caption's lines are not


def test_paragraphs_last_words_beside_a_plot_stay_out(tmp_path: Path):
    """A plot in the left column, 3.5 mm from the right column, where two short paragraphs
    under a paragraph of even lines, one starting with a bold run-in heading, end in short
    lines level with the plot: the short lines are the paragraphs', not the plot's labels
    (the plot's region took "of interest." and stretched into the column)."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170)
    vector_plot(pdf, 35, 85, 61, 50)
    pdf.set_font("Times", "", 10)
    for i in range(8):  # a paragraph of even lines, its foot level with the plot's top
        pdf.text(100, 58 + 4.6 * i, "SYNTHETIC body text of a generated paper with no meaning")
    pdf.text(100, 101, "Funding from the SYNTHETIC foundation for generated research and")
    pdf.text(100, 105.6, "its innovation committee.")
    pdf.set_font("Times", "B", 10)
    pdf.text(100, 113, "Conflict of interest statement:")
    heading = pdf.get_string_width("Conflict of interest statement: ")
    pdf.set_font("Times", "", 10)
    pdf.text(100 + heading, 113, "Authors state no conflict")
    pdf.text(100, 117.6, "of interest.")
    fig = _one_figure(pdf, tmp_path / "last.pdf",
                      "Figure 1. SYNTHETIC survival of generated patients.", 153, 9)
    assert _covers(fig.bbox, 35, 85, 96, 135)
    assert fig.bbox[2] < pt(99.5, 0)[0]  # not the paragraph's last line
