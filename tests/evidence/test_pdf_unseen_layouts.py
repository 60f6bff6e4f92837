"""Layouts of articles the extractor was never tuned on (held-out sets 3 and 4, truth D
and E, and others), generated: a legend set in two balanced columns under a page-wide figure
with white backgrounds drawn under the text columns, a side caption set level with its
figure's top far to its left, row labels drawn as outlines beside a bitmap grid, a supplement
numbering its figures like the main text's, body text running over a bitmap's white margin, a
plate right under the first lines of a paragraph, panel rows apart by a row of labels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _fpdf_paper import BODY, MM, caption_columns, column, paper, pt, vector_plot

from wsikit.evidence import read_pdf_figures

fpdf = pytest.importorskip("fpdf")


def _read(pdf, path: Path):
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    return figs


def _legend(pdf, x: float, y: float, w: float, text: str, *, size: float = 10.0,
            pitch: float = 4.6, font: str = "Times") -> None:
    pdf.set_font(font, "", size)
    pdf.set_xy(x, y)
    pdf.multi_cell(w, pitch, text)


def _holds(box, left_mm: float, top_mm: float, right_mm: float, bottom_mm: float) -> bool:
    """``box`` (points) holds the rectangle given in millimetres from the page's top left,
    within 2 points."""
    left, top = pt(left_mm, top_mm)
    right, bottom = pt(right_mm, bottom_mm)
    return box[0] <= left + 2 and box[2] >= right - 2 and box[1] <= bottom + 2 and \
        box[3] >= top - 2


def _bitmap(pdf, rng, x: float, y: float, w: float, h: float) -> None:
    from PIL import Image

    pdf.image(Image.fromarray(rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)),
              x=x, y=y, w=w, h=h)


def test_legend_in_balanced_columns_over_white_column_backgrounds(tmp_path: Path):
    """A page-wide figure over a legend set in two columns, the left one ending a sentence,
    each text column laid on a white rectangle that reaches up behind the figure (as a
    typesetter draws column backgrounds): the figure is found without its legend, and the
    caption is both columns."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    pdf.set_fill_color(255, 255, 255)
    pdf.rect(15, 25, 88, 255, style="F")
    pdf.rect(107, 25, 88, 255, style="F")
    vector_plot(pdf, 35, 30, 60, 60)
    vector_plot(pdf, 120, 30, 60, 60)
    left = ["Fig. 2. SYNTHETIC removal of generated cells by other cells. (A) Counts",
            "before and after the treatment. (B) Counts of the survivors in each of",
            "the cultures, one dot for each donor of the generated cells."]
    right = ["**P < 0.01; a test followed by multiple comparisons. (C) The same counts",
             "a day later, when the cultures had been split in two halves of the same",
             "size and grown on for another day."]
    caption_columns(pdf, ((15, left), (107, right)), 102, 3.2)
    column(pdf, 15, 125, 180, BODY * 3)
    figs = _read(pdf, tmp_path / "balanced.pdf")
    assert [f.figure_label for f in figs] == ["Fig. 2"]
    assert figs[0].caption.startswith("Fig. 2. SYNTHETIC removal of generated cells")
    assert figs[0].caption.endswith("halves of the same size and grown on for another day.")
    top_of_legend = pt(0, 99)[1]
    assert figs[0].bbox[1] > top_of_legend  # the legend is not in the figure


def test_side_caption_level_with_the_figure_top_far_to_its_left(tmp_path: Path):
    """A side caption in the narrow outer column whose first line is level with the top of
    its figure, 35 mm (99 pt) to its right, the space between them empty."""
    rng = np.random.default_rng(21)
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170, BODY * 2)
    _bitmap(pdf, rng, 95, 90, 95, 70)
    _legend(pdf, 20, 89.4, 40, "Fig. 1 SYNTHETIC currents of generated channels, printed in "
            "the narrow outer column, level with the top of its figure", size=8, pitch=3.6)
    column(pdf, 20, 170, 170)
    figs = _read(pdf, tmp_path / "side_level.pdf")
    assert [f.figure_label for f in figs] == ["Fig. 1"]
    assert _holds(figs[0].bbox, 95, 90, 190, 160)


def _outlined_label(pdf, x: float, y: float, width: float) -> None:
    """A row label drawn as paths (glyph outlines): a run of small strokes one line high."""
    pdf.set_line_width(0.25)
    pdf.set_draw_color(0, 0, 0)
    for i in range(int(width / 1.6)):
        gx = x + i * 1.6
        pdf.line(gx, y, gx + 0.8, y - 2.0)
        pdf.line(gx + 0.8, y - 2.0, gx + 1.2, y)


def test_row_labels_drawn_as_outlines_join_their_grid(tmp_path: Path):
    """A grid of micrographs with each row's label drawn as outlined glyphs just left of it
    (2 mm off): the labels are part of the figure."""
    rng = np.random.default_rng(22)
    pdf, page = paper(logo=False, stamp=False)
    page()
    for row in range(3):
        for col in range(3):
            _bitmap(pdf, rng, 80 + col * 36, 30 + row * 36, 34, 34)
        _outlined_label(pdf, 40, 48 + row * 36, 36)
    _legend(pdf, 20, 145, 170, "Figure 6. SYNTHETIC grid of generated micrographs, one row "
            "for each generated strain named at its left.")
    column(pdf, 20, 160, 170)
    figs = _read(pdf, tmp_path / "outlined.pdf")
    assert [f.figure_label for f in figs] == ["Figure 6"]
    assert figs[0].bbox[0] <= pt(40, 0)[0] + 2  # from the labels' left edge


def test_supplement_numbered_like_the_main_figures(tmp_path: Path):
    """'Figure 2' printed at the top of the page after its figure and a 'Supplemental Figure
    2' with its own figure later: the main figure keeps its legend (the supplement's number
    is another series, not a mention of Figure 2)."""
    rng = np.random.default_rng(23)
    pdf, page = paper(logo=False, stamp=False)
    legends = {1: "Figure 1 | SYNTHETIC first figure of the generated study.",
               3: "Figure 3 | SYNTHETIC third figure of the generated study.",
               4: "Supplemental Figure 2 | SYNTHETIC second figure of the supplement."}
    for n in range(1, 5):
        page()
        if n == 2:
            column(pdf, 20, 15, 170, BODY)
            _bitmap(pdf, rng, 30, 70, 150, 110)
            continue
        if n == 3:
            pdf.set_font("Times", "B", 10)
            pdf.set_xy(20, 15)
            pdf.multi_cell(170, 4.6, "Figure 2 | SYNTHETIC second figure, whose legend is "
                                     "printed at the top of the page after it.")
            column(pdf, 20, 30, 170, BODY)
            _bitmap(pdf, rng, 30, 90, 150, 110)
            pdf.set_xy(20, 205)
        else:
            _bitmap(pdf, rng, 30, 30, 150, 110)
            pdf.set_xy(20, 145)
        pdf.set_font("Times", "B", 10)
        pdf.multi_cell(170, 4.6, legends[n])
        column(pdf, 20, pdf.get_y() + 6, 170)
    figs = _read(pdf, tmp_path / "supplement_series.pdf")
    assert [(f.figure_label, f.page, f.caption_page) for f in figs] == [
        ("Figure 1", 1, 1), ("Figure 2", 2, 3), ("Figure 3", 3, 3),
        ("Supplemental Figure 2", 4, 4)]


def test_bitmap_margin_under_the_body_text_above_is_left_out(tmp_path: Path):
    """A bitmap whose white top margin reaches under the last line of the body text above it
    (the line's descenders lie on the bitmap): the figure ends below that line, so its
    picture shows no cut line of text."""
    from PIL import Image

    rng = np.random.default_rng(24)
    pixels = np.full((200, 300, 3), 255, dtype=np.uint8)
    pixels[30:, :] = rng.integers(0, 200, (170, 300, 3), dtype=np.uint8)
    pdf, page = paper(logo=False, stamp=False)
    page()
    pdf.set_font("Times", "", 10)
    words = BODY.split()
    for i in range(4):
        pdf.text(20, 20 + 4.6 * i, " ".join(words[i * 14:(i + 1) * 14]))
    pdf.image(Image.fromarray(pixels), x=20, y=34.0, w=170, h=113)
    _legend(pdf, 20, 150, 170, "Figure 1. SYNTHETIC generated micrograph printed under the "
            "body text, its white top margin reaching under the last line.")
    column(pdf, 20, 165, 170)
    figs = _read(pdf, tmp_path / "margin.pdf")
    assert [f.figure_label for f in figs] == ["Figure 1"]
    last_line_bottom = pt(0, 20 + 4.6 * 3 + 1.0)[1]  # baseline plus descenders
    top_of_picture = pt(0, 34.0 + 113 * 30 / 200)[1]
    assert figs[0].bbox[3] < last_line_bottom - 2  # clear of the line and its margin
    assert figs[0].bbox[3] >= top_of_picture - 2
    ink = np.asarray(figs[0].image)[:6].min()
    assert ink > 200  # the picture's top rows are blank: no cut line of text


def test_side_caption_wrapping_under_its_figure(tmp_path: Path):
    """A side caption in the narrow column left of its figure whose last lines run on under
    the figure across both columns (so the caption's box holds the figure): the figure is
    found, with the whole caption."""
    rng = np.random.default_rng(25)
    pdf, page = paper(logo=False, stamp=False)
    page()
    _bitmap(pdf, rng, 62, 20, 55, 120)
    pdf.set_font("Times", "", 10)
    import textwrap

    side = textwrap.wrap("Fig. 2. SYNTHETIC gels of generated proteins. (A) The amounts in "
                         "each fraction of the generated cells, one lane for each fraction "
                         "and the last lane a control. (B) The topology of the generated "
                         "membranes was determined by digestion of the membranes with a "
                         "generated enzyme, in the presence or the absence of a generated "
                         "detergent, for one hour at room temperature. (C) Exclusion of the "
                         "protein from generated vesicles. Equal amounts of the membranes and "
                         "of the coated vesicles were loaded in each of the lanes of the gels "
                         "and were analysed", 22)
    assert len(side) >= 26
    for i, line in enumerate(side[:26]):
        pdf.text(20, 24 + 4.6 * i, line)
    rest = " ".join(side[26:]) + (" with or without an inhibitor of the enzyme, and the "
                                  "proteins were shown by western blotting.")
    for i, line in enumerate(textwrap.wrap(rest, 80)):
        pdf.text(20, 24 + 4.6 * (26 + i), line)
    column(pdf, 20, 175, 170, BODY * 2)
    figs = _read(pdf, tmp_path / "wrapped_side.pdf")
    assert [f.figure_label for f in figs] == ["Fig. 2"]
    assert figs[0].caption.startswith("Fig. 2. SYNTHETIC gels of generated proteins.")
    assert figs[0].caption.endswith("the proteins were shown by western blotting.")
    assert _holds(figs[0].bbox, 62, 20, 117, 140)
    assert figs[0].bbox[0] > pt(50, 0)[0]  # not the caption's column


UNICODE_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")


@pytest.mark.skipif(not UNICODE_FONT.exists(), reason="needs the DejaVu Sans font")
def test_label_followed_by_unicode_spaces(tmp_path: Path):
    """A Springer-style label followed by an en space and a thin space ("Fig. 1\\u2002\\u2009
    Inhibition"), and one with a no-break space inside it: each is read as its label, with
    plain spaces in the label and the caption."""
    rng = np.random.default_rng(26)
    pdf, page = paper(logo=False, stamp=False)
    pdf.add_font("DejaVu", "", str(UNICODE_FONT))
    for n, label in ((1, "Fig. 1\u2002\u2009"), (2, "Fig.\u00a02\u2002\u2009")):
        page()
        column(pdf, 20, 15, 170, BODY)
        _bitmap(pdf, rng, 30, 60, 150, 100)
        _legend(pdf, 20, 165, 170, f"{label}SYNTHETIC inhibition of generated channel {n} "
                "by a generated nucleotide.", size=8, pitch=3.6, font="DejaVu")
        column(pdf, 20, 180, 170)
    figs = _read(pdf, tmp_path / "unicode_spaces.pdf")
    assert [f.figure_label for f in figs] == ["Fig. 1", "Fig. 2"]
    assert figs[0].caption == ("Fig. 1 SYNTHETIC inhibition of generated channel 1 by a "
                               "generated nucleotide.")
    assert figs[1].caption.startswith("Fig. 2 SYNTHETIC")


def _justified(pdf, words: list[str], x: float, y: float, right: float) -> list[str]:
    """One line of body text from ``x`` to ``right`` (mm), as many of ``words`` as fit,
    spaced out as justified text is; returns the words left."""
    pdf.set_char_spacing(0)
    n = 1
    while n < len(words) and pdf.get_string_width(" ".join(words[:n + 1])) <= right - x:
        n += 1
    text = " ".join(words[:n])
    spare = right - x - pdf.get_string_width(text)
    pdf.set_char_spacing(spare * MM / max(len(text) - 1, 1))  # in points
    pdf.text(x, y, text)
    pdf.set_char_spacing(0)
    return words[n:]


def test_plate_under_a_paragraph_starting_at_the_column_foot(tmp_path: Path):
    """A page-wide plate (one bitmap of six micrographs) right under two columns of body
    text, the right column a heading over the first three lines of a paragraph (its first
    line indented, all justified) that goes on on the next page: those lines are body text,
    not labels of the plate, so the plate is not taken for a frame around text and is found
    whole."""
    from PIL import Image

    rng = np.random.default_rng(26)
    pdf, page = paper(logo=False, stamp=False)
    page()
    words = BODY.split()
    pdf.set_font("Times", "", 10)
    for i in range(4):
        words = _justified(pdf, words, 20, 24 + 4.2 * i, 101)
    pdf.set_font("Helvetica", "B", 10)
    pdf.text(109, 24, "SYNTHETIC methods heading")
    pdf.set_font("Times", "", 10)
    for i in range(3):
        words = _justified(pdf, words, 113 if i == 0 else 109, 28.2 + 4.2 * i, 190)
    plate = np.full((372, 334, 3), 255, dtype=np.uint8)  # one bitmap: 2 x 3 with white gutters
    for row in range(3):
        for col in range(2):
            plate[row * 126:row * 126 + 120, col * 170:col * 170 + 164] = rng.integers(
                0, 200, (120, 164, 3), dtype=np.uint8)
    pdf.image(Image.fromarray(plate), x=22, y=38, w=167, h=185)
    _legend(pdf, 20, 226, 170, "Figure 5. SYNTHETIC generated micrographs of leaves. A-C, "
            "upper surfaces; D-F, lower surfaces; A, D, hairs on the upper side; B, E, cross "
            "sections; C, F, hairs on the lower side.")
    figs = _read(pdf, tmp_path / "plate.pdf")
    assert [f.figure_label for f in figs] == ["Figure 5"]
    assert _holds(figs[0].bbox, 22, 38, 189, 223)
    assert figs[0].bbox[3] < pt(0, 28.2 + 4.2 * 2)[1]  # the body text is not in the figure
    assert figs[0].caption.endswith("C, F, hairs on the lower side.")


def test_panel_rows_apart_by_a_row_of_labels(tmp_path: Path):
    """A figure of small pieces whose top row stands 16 mm over the next, the gap bridged by
    a row of labels (Cell Reports, held-out set 4): one figure, whole."""
    rng = np.random.default_rng(44)
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 20, 170)
    for k in range(3):
        _bitmap(pdf, rng, 25 + 55 * k, 70, 45, 40)
    pdf.set_font("Helvetica", "", 7)
    for k in range(3):
        pdf.text(28 + 55 * k, 116, "Day 5, generated")
        pdf.text(28 + 55 * k, 121, "pre-treatment")
    for k in range(3):
        vector_plot(pdf, 25 + 55 * k, 126, 45, 40)
    pdf.set_font("Times", "", 9)
    pdf.set_xy(20, 174)
    pdf.multi_cell(170, 4.2, "Figure 2. SYNTHETIC commitment of generated cells. " + BODY)
    figs = _read(pdf, tmp_path / "label_row.pdf")
    assert [f.figure_label for f in figs] == ["Figure 2"]
    assert _holds(figs[0].bbox, 25, 70, 180, 166)


def _text_lines(pdf, lines: list[str], x: float, y: float, pitch: float) -> float:
    for i, line in enumerate(lines):
        pdf.text(x, y + pitch * i, line)
    return y + pitch * len(lines)


def test_l_shaped_side_caption_going_on_in_the_next_column(tmp_path: Path):
    """A side caption in a narrow left column, in the body's look, that widens under its
    figure and goes on, mid-sentence, at the top of the next column under the figure
    (Science, held-out set 4): the figure is found with the whole caption."""
    import textwrap

    rng = np.random.default_rng(41)
    pdf, page = paper(logo=False, stamp=False)
    page()
    _bitmap(pdf, rng, 55, 20, 135, 104)
    pdf.set_font("Times", "", 7)
    legend = ("(A) The amounts of the generated protein in each fraction of the generated "
              "cells, one lane for each fraction and the last lane a control. (B) The "
              "topology of the generated membranes, found by digestion with a generated "
              "enzyme in the presence or the absence of a generated detergent. ") * 4
    y = _text_lines(pdf, ["Fig. 2. SYNTHETIC", "generated cells and", "their membranes."],
                    20, 24, 3.7)
    narrow = textwrap.wrap(legend, 24)[:26]
    y = _text_lines(pdf, narrow, 20, y, 3.7)
    wide = textwrap.wrap(" ".join(legend[len(" ".join(narrow)):].split()[:90]), 60)
    right = wide[7:] + ["which ends the legend here."]
    right[0] = right[0][0].lower() + right[0][1:]
    end = max(_text_lines(pdf, wide[:7], 20, y, 3.7), _text_lines(pdf, right, 86, y, 3.7))
    column(pdf, 20, end + 10, 170)
    figs = _read(pdf, tmp_path / "l_shaped.pdf")
    assert [f.figure_label for f in figs] == ["Fig. 2"]
    assert figs[0].caption.startswith("Fig. 2. SYNTHETIC generated cells and their")
    assert figs[0].caption.endswith("which ends the legend here.")
    assert _holds(figs[0].bbox, 55, 20, 190, 124)


def _blot(pdf, rng, x: float, y: float) -> float:
    """Rows of '+'/'-' lane labels set like body text, then two blot strips under them."""
    pdf.set_font("Times", "", 10)
    for i, name in enumerate(["FLAG-GENE1-WT", "FLAG-GENE1-K5R", "HA-GENE2-dC2",
                              "MYC-GENE3"]):
        pdf.text(x, y + 4.6 * i, f"{name}   + - + - - + - + - -   + - - + - + - - + -")
    y += 4.6 * 4
    for k in range(2):
        _bitmap(pdf, rng, x + 32, y + 10 * k, 60, 9)
    return y + 20


def test_blots_with_lane_tables_in_the_body_size(tmp_path: Path):
    """Blots under rows of '+'/'-' lane labels in the body's font, size and pitch (PNAS,
    held-out set 4; a run of aligned lines, but no words): the figure is found whole, not
    as its last blot strips."""
    rng = np.random.default_rng(42)
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 20, 170)
    y = _blot(pdf, rng, 30, 70)
    y = _blot(pdf, rng, 30, y + 6)
    vector_plot(pdf, 130, 70, 55, 45)
    pdf.set_font("Times", "", 9)
    pdf.set_xy(20, y + 1)
    pdf.multi_cell(170, 4.2, "Fig. 3. SYNTHETIC blots of generated proteins. " + BODY)
    figs = _read(pdf, tmp_path / "lane_tables.pdf")
    assert [f.figure_label for f in figs] == ["Fig. 3"]
    assert _holds(figs[0].bbox, 32, 72, 185, y - 2)
