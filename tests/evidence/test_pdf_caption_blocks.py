"""Caption blocks read to their true end, on generated papers with the layouts where they were
cut or overran in real articles: double-spaced line-numbered preprints, a label alone on its
line, sub- and subscripts, two-column captions, legends running over a page end, body text
right under a caption, placeholders ("Figure 1 (continued)"), supplements whose legend pages
follow their figure pages, a figure's own DOI after its caption."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from _fpdf_paper import BODY, column, paper, vector_plot

from wsikit.evidence import read_pdf_figures

fpdf = pytest.importorskip("fpdf")

LEGEND = ("Figure 1. SYNTHETIC survival of two groups of generated patients; the curves are "
          "drawn as vector paths and the legend is printed like the body text, double spaced "
          "and numbered, so only its paragraph end tells where it stops.")


def _numbered(pdf, x: float, y: float, pitch: float, text: str, first: int, *,
              width: int = 80, centred: bool = False) -> tuple[float, int]:
    """Print ``text`` in lines of ``width`` characters from baseline ``y`` (mm), each with a
    line number in the left margin, as a line-numbered manuscript does."""
    for i, line in enumerate(textwrap.wrap(text, width)):
        pdf.set_font("Times", "", 11)
        lx = x + (150 - pdf.get_string_width(line)) / 2 if centred else x
        pdf.text(lx, y, line)
        pdf.set_font("Helvetica", "", 7)
        pdf.text(12, y, str(first + i))
        y += pitch
    return y, first + len(textwrap.wrap(text, width))


@pytest.fixture(scope="module")
def preprint_pdf(tmp_path_factory) -> Path:
    """A double-spaced, line-numbered preprint: page 1 has a figure with its legend below
    (printed like the body text) and body text after it; page 2 a figure whose label stands
    alone on a centred line, its legend centred after a blank line."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    y, n = _numbered(pdf, 30, 20, 9.5, BODY, 1)
    vector_plot(pdf, 50, y + 2, 110, 55)
    y, n = _numbered(pdf, 30, y + 78, 9.5, LEGEND, n)
    _numbered(pdf, 30, y + 9.5, 9.5, BODY, n)
    page()
    vector_plot(pdf, 50, 25, 110, 55)
    pdf.set_font("Times", "", 11)
    pdf.text(105 - pdf.get_string_width("Fig. 2") / 2, 100, "Fig. 2")
    _numbered(pdf, 30, 119, 9.5, "SYNTHETIC histogram of generated values, the label above "
                                 "on a line of its own and this legend centred under it.",
              40, centred=True)
    _numbered(pdf, 30, 160, 9.5, BODY, 45)
    path = tmp_path_factory.mktemp("captions") / "preprint.pdf"
    pdf.output(str(path))
    return path


def test_double_spaced_numbered_legend_read_to_its_paragraph_end(preprint_pdf: Path):
    _, figs = read_pdf_figures(preprint_pdf)
    fig = next(f for f in figs if f.figure_label == "Figure 1")
    assert fig.caption == LEGEND  # not its first line only, not the body text after it
    assert not any(ch.isdigit() for ch in fig.caption.replace("Figure 1", ""))


def test_label_alone_on_its_line_takes_the_legend_under_it(preprint_pdf: Path):
    _, figs = read_pdf_figures(preprint_pdf)
    fig = next(f for f in figs if f.figure_label == "Fig. 2")
    assert fig.page == 2
    assert fig.caption == ("Fig. 2 SYNTHETIC histogram of generated values, the label above "
                           "on a line of its own and this legend centred under it.")


def _sub(pdf, x: float, y: float, parts: list[tuple[str, bool]]) -> None:
    """Print ``parts`` on one baseline, the flagged ones as subscripts."""
    for text, low in parts:
        pdf.set_font("Helvetica", "", 5 if low else 8)
        pdf.text(x, y + (0.9 if low else 0), text)
        x += pdf.get_string_width(text) + (0.3 if low else 0)


def test_caption_with_subscripts_and_two_columns(tmp_path: Path):
    """A wide figure with its caption below in two columns (Helvetica 8 against Times 10
    body text): lines full of subscripts keep their pitch, and the caption goes on at the top
    of the right column after its left column ends in mid-word."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170)
    vector_plot(pdf, 40, 45, 130, 70)
    y = 135
    rows = [[("Figure 1 SYNTHETIC membrane potential V", False), ("m", True),
             (" and field V", False), ("e", True), (" of a", False)],
            [("generated neuron; V", False), ("i", True), (" is the inside potential and", False)],
            [("I", False), ("0", True), (" the amplitude of the stimulus, so that V", False),
             ("m", True), (" =", False)],
            [("V", False), ("i", True), (" - V", False), ("e", True),
             (" holds at every time point of the recor-", False)]]
    for i, parts in enumerate(rows):
        _sub(pdf, 20, y + 3.6 * i, parts)
    pdf.set_font("Helvetica", "", 8)
    for i, text in enumerate(["ding; the traces are means over twenty trials",
                              "and the shaded areas their standard errors."]):
        pdf.text(108, y + 3.6 * i, text)
    column(pdf, 20, y + 18, 82)
    column(pdf, 108, y + 18, 82)
    path = tmp_path / "columns.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    assert [f.figure_label for f in figs] == ["Figure 1"]
    assert figs[0].caption == (
        "Figure 1 SYNTHETIC membrane potential Vm and field Ve of a generated neuron; Vi is "
        "the inside potential and I0 the amplitude of the stimulus, so that Vm = Vi - Ve holds "
        "at every time point of the recording; the traces are means over twenty trials and "
        "the shaded areas their standard errors.")


def test_body_text_right_under_a_caption_is_not_caption(tmp_path: Path):
    """A caption in a look of its own (Helvetica 9.5) followed at the usual line pitch by the
    body text (Times 10): the caption ends where the body's font and size take over."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170, BODY)
    vector_plot(pdf, 40, 45, 130, 60)
    pdf.set_font("Helvetica", "", 9.5)
    pdf.set_xy(20, 120)
    pdf.multi_cell(170, 4.4, "Figure 1. SYNTHETIC curves of a generated experiment. The "
                             "curves are drawn as paths.")
    column(pdf, 20, pdf.get_y() + 0.2, 170, BODY * 2)
    path = tmp_path / "tight.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    assert figs[0].caption == ("Figure 1. SYNTHETIC curves of a generated experiment. The "
                               "curves are drawn as paths.")


def test_legend_running_over_the_page_end(tmp_path: Path):
    """A figure and its legend at the foot of a page, the legend's sentence going on at the
    top of the next page (then the body text); a figure DOI printed after a caption is
    dropped. The page's last line is full, as where a page break cuts a paragraph."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170, BODY * 3)
    vector_plot(pdf, 40, 150, 130, 80)
    pdf.set_font("Helvetica", "", 8)
    pdf.set_xy(20, 252)
    pdf.multi_cell(170, 3.6, "Figure 1. SYNTHETIC response of generated cells to a stimulus "
                             "given at time zero; each curve is one cell and the dashed line "
                             "marks the time at which the stimulus given to the generated cells "
                             "in the dish of the experiment with a small and a large dose of the "
                             "drug")
    page()
    pdf.set_font("Helvetica", "", 8)
    pdf.set_xy(20, 15)
    pdf.multi_cell(170, 3.6, "was switched off again. doi:10.5555/wsikit.g001")
    column(pdf, 20, 25, 170, BODY)
    path = tmp_path / "overleaf.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    assert [(f.figure_label, f.page) for f in figs] == [("Figure 1", 1)]
    assert figs[0].caption.endswith("a large dose of the drug was switched off again.")


def test_legend_marked_as_going_on_under_a_figure_continued_heading(tmp_path: Path):
    """An eLife-style legend that ends its page with a line of its own, "Figure 1 continued on
    next page", and goes on at the top of the next page under "Figure 1 continued", closed by
    the figure's DOI on a line of its own: the caption is the whole legend, without the two
    marker lines and without the DOI."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    vector_plot(pdf, 40, 30, 120, 80)
    pdf.set_font("Helvetica", "", 8)
    pdf.set_xy(20, 125)
    pdf.multi_cell(170, 3.6, "Figure 1. SYNTHETIC responses of generated cells to paired "
                             "stimuli. (A) Each curve is one cell; the dashed line marks the "
                             "time at which the stimulus was given. (B) The mean of all cells "
                             "of each group, the shaded band the spread between")
    pdf.set_font("Helvetica", "I", 8)
    pdf.text(20, 150, "Figure 1 continued on next page")
    column(pdf, 20, 165, 170, BODY * 2)
    page()
    pdf.set_font("Helvetica", "I", 8)
    pdf.text(20, 18, "Figure 1 continued")
    pdf.set_font("Helvetica", "", 8)
    pdf.set_xy(20, 21)
    pdf.multi_cell(170, 3.6, "their quartiles. (C) The same cells a day later, when the "
                             "responses had faded to half their size.")
    pdf.text(20, 34, "DOI: 10.5555/wsikit.synthetic.004")
    column(pdf, 20, 45, 170, BODY * 2)
    path = tmp_path / "figure_continued.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    assert [(f.figure_label, f.page) for f in figs] == [("Figure 1", 1)]
    assert figs[0].caption.startswith("Figure 1. SYNTHETIC responses of generated cells")
    assert figs[0].caption.endswith("the shaded band the spread between their quartiles. (C) "
                                    "The same cells a day later, when the responses had faded "
                                    "to half their size.")
    assert "continued" not in figs[0].caption and "DOI" not in figs[0].caption


def _image_page(pdf, page, rng, *, label: str | None = None) -> None:
    from PIL import Image

    page()
    pdf.image(Image.fromarray(rng.integers(0, 255, (300, 400, 3), dtype=np.uint8)),
              x=30, y=40, w=150)
    if label:
        pdf.set_font("Times", "", 10)
        pdf.text(30, 160, label)


def test_placeholders_are_never_captions(tmp_path: Path):
    """'Figure 1 (continued)' under the second part of a figure and 'Figure 2 (see legend on
    previous page)' under a figure whose legend has a page of its own: every part is a node
    with the figure's true caption."""
    rng = np.random.default_rng(11)
    pdf, page = paper(logo=False, stamp=False)
    _image_page(pdf, page, rng, label="Figure 1. SYNTHETIC first part of a two-page figure.")
    _image_page(pdf, page, rng, label="Figure 1 (continued)")
    page()
    pdf.set_font("Times", "", 10)
    pdf.set_xy(20, 30)
    pdf.multi_cell(170, 5, "Figure 2. SYNTHETIC legend printed on the page before its figure.")
    column(pdf, 20, 60, 170, BODY)
    _image_page(pdf, page, rng, label="Figure 2 (see legend on previous page)")
    path = tmp_path / "placeholders.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    assert [(f.figure_label, f.page, f.caption_page) for f in figs] == \
        [("Figure 1", 1, 1), ("Figure 1", 2, 1), ("Figure 2", 4, 3)]
    assert figs[0].caption == figs[1].caption == ("Figure 1. SYNTHETIC first part of a "
                                                  "two-page figure.")
    assert figs[2].caption == ("Figure 2. SYNTHETIC legend printed on the page before its "
                               "figure.")


def test_supplement_legend_pages_after_their_figures(tmp_path: Path):
    """A supplement: each figure on a page of its own, its legend on the next page; the
    legend of S1 must not take the figure of S2 on the page after it."""
    rng = np.random.default_rng(12)
    pdf, page = paper(logo=False, stamp=False)
    for n in (1, 2, 3):
        _image_page(pdf, page, rng)
        page()
        pdf.set_font("Times", "", 10)
        pdf.set_xy(20, 30)
        pdf.multi_cell(170, 5, f"Figure S{n}. SYNTHETIC legend of supplementary figure {n}, "
                               "printed on the page after it.")
    path = tmp_path / "supplement.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    assert [(f.figure_label, f.page, f.caption_page) for f in figs] == \
        [("Figure S1", 1, 2), ("Figure S2", 3, 4), ("Figure S3", 5, 6)]


def test_heading_right_under_a_body_like_legend_is_not_caption(tmp_path: Path):
    """A double-spaced manuscript's legend, printed like its body text, followed on the very
    next numbered line by a section heading in the same look ("Methods (1368)"): the legend
    ends at its last sentence, the heading is not caption text."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    y, n = _numbered(pdf, 30, 20, 9.5, BODY, 1)
    vector_plot(pdf, 50, y + 2, 110, 55)
    y, n = _numbered(pdf, 30, y + 78, 9.5, LEGEND, n)
    y, n = _numbered(pdf, 30, y, 9.5, "Methods (1368)", n)
    _numbered(pdf, 30, y + 9.5, 9.5, BODY, n)
    path = tmp_path / "heading.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    assert [f.figure_label for f in figs] == ["Figure 1"]
    assert figs[0].caption == LEGEND


@pytest.mark.parametrize("note", [
    "(A color version of this figure is available in the online journal.)",
    "(For interpretation of the references to colour in this figure legend, the reader is "
    "referred to the web version of this article.)",
])
def test_closing_colour_note_is_not_caption(tmp_path: Path, note: str):
    """A production note closing the legend, about where the figure is seen in colour, is
    not caption text; a last sentence that only mentions colours stays."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170, BODY)
    vector_plot(pdf, 40, 45, 130, 60)
    legend = ("Figure 1. SYNTHETIC curves of a generated experiment. The red curve is the "
              "first group and the blue curve the second (colours as in Figure 2).")
    pdf.set_font("Helvetica", "", 8)
    pdf.set_xy(20, 120)
    pdf.multi_cell(170, 3.6, f"{legend} {note}")
    column(pdf, 20, pdf.get_y() + 6, 170, BODY)
    path = tmp_path / "note.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    assert figs[0].caption == legend


def test_caption_line_with_symbol_glyphs_in_larger_print_stays_in(tmp_path: Path):
    """A legend line where half the words are set larger (Greek letters of a symbol font,
    "TCRαβ+") goes on the sentence: it is the caption's, not the end of it."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    column(pdf, 20, 15, 170, BODY)
    vector_plot(pdf, 40, 45, 130, 60)
    y = 122.0
    pdf.set_font("Helvetica", "", 8)
    pdf.text(20, y, "Figure 1. SYNTHETIC killing of generated target cells by the effector cells")
    x = 20.0
    for word, big in [("ab+", True), ("cells,", False), ("gd+", True), ("cells,", False),
                      ("ab+", True), ("cells", False)]:
        pdf.set_font("Helvetica", "", 10 if big else 8)
        pdf.text(x, y + 3.6, word)
        x += pdf.get_string_width(word + " ")
    pdf.set_font("Helvetica", "", 8)
    pdf.text(20, y + 7.2, "and the control cells, shown by arrowheads.")
    column(pdf, 20, y + 14, 170, BODY)
    path = tmp_path / "symbols.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    assert [f.figure_label for f in figs] == ["Figure 1"]
    assert figs[0].caption.startswith("Figure 1. SYNTHETIC killing")
    assert figs[0].caption.endswith("gd+ cells, ab+ cells and the control cells, shown by "
                                    "arrowheads.")


def test_manuscript_figure_page_keeps_its_small_parts(tmp_path: Path):
    """An author manuscript: the legend in the running text, the figure on a page of its own
    at the end (sized to the figure, a "Figure 1" label at its foot) whose boxed note sits
    apart under the big drawing: the figure is everything the page draws, the note included."""
    pdf, page = paper(logo=False, stamp=False)
    page()
    y = column(pdf, 20, 15, 170, BODY)
    pdf.set_font("Times", "", 10)
    pdf.set_xy(20, y + 6)
    pdf.multi_cell(170, 4.6, "Figure 1. SYNTHETIC set-up of a generated circuit with its tubes "
                             "and pumps.")
    column(pdf, 20, pdf.get_y() + 6, 170, BODY)
    pdf.add_page(format=(240, 160))
    pdf.set_line_width(0.5)
    pdf.line(15, 15, 205, 15)
    for i in range(8):  # the drawing: tubes and boxes on one manifold
        pdf.line(15 + 25 * i, 15, 30 + 25 * i, 100)
        pdf.rect(24 + 25 * i, 100, 12, 8)
    pdf.set_fill_color(255, 250, 200)
    pdf.rect(70, 124, 100, 12, style="DF")  # the boxed note, 16 mm under the drawing
    pdf.set_font("Helvetica", "", 9)
    pdf.text(74, 131, "SYNTHETIC note: 50 cm from the generated tube")
    pdf.set_font("Helvetica", "", 7)
    pdf.text(4, 156, "Figure 1")
    path = tmp_path / "manuscript.pdf"
    pdf.output(str(path))
    _, figs = read_pdf_figures(path)
    assert [(f.figure_label, f.page) for f in figs] == [("Figure 1", 2)]
    assert figs[0].caption.startswith("Figure 1. SYNTHETIC set-up")
    left, bottom, right, top = figs[0].bbox
    note_bottom = (160 - 136) * 72 / 25.4
    assert bottom <= note_bottom + 1.5 and top >= (160 - 15) * 72 / 25.4 - 1.5
